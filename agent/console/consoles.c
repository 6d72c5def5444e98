/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The console session core (agent/console/consoles.h): the table of sessions and its bounds,
 * the hand-over of a dialled socket from a job's worker to the loop, the bounded
 * outbound queue (oldest frames dropped beyond 1 MiB, said in a system line), the
 * idle timer, and the end of a session with its close frame and console.closed event.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/console/console-internal.h"
#include "agent/base/log.h"
#include "agent/base/services.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/uuid.h"
#include "drivers/app.h"
#include "drivers/vm.h"

int consoles_new(const struct consoles_options *opt, struct consoles **ret, struct na_error *err)
{
        struct consoles *c = calloc(1, sizeof(*c));
        if (!c)
                return na_error_sys(err, ENOMEM, "consoles");
        c->closed_ids = calloc(CONSOLE_CLOSED_REMEMBERED, sizeof(*c->closed_ids));
        if (!c->closed_ids) {
                free(c);
                return na_error_sys(err, ENOMEM, "consoles");
        }
        c->opt = *opt;
        c->files_ino_fd = -1;
        pthread_mutex_init(&c->lock, NULL);
        *ret = c;
        return 0;
}

static void queue_clear(struct console_session *s)
{
        while (s->qhead) {
                struct console_frame *f = s->qhead;
                s->qhead = f->next;
                free(f);
        }
        s->qtail = NULL;
        s->qbytes = 0;
}

static void mode_stop(struct console_session *s)
{
        if (s->mode == PROTO_CONSOLE_APP)
                console_app_stop(s);
        else if (s->mode == PROTO_CONSOLE_FILES)
                console_files_stop(s);
        else
                console_vps_stop(s);
}

static void session_free(struct console_session *s)
{
        if (!s)
                return;
        mode_stop(s);
        ws_free(s->ws);
        ws_dialed_free(s->dialed);
        loop_timer_free(s->idle_timer);
        queue_clear(s);
        free(s->path);
        free(s);
}

static void unlink_locked(struct consoles *c, struct console_session *s)
{
        if (s->prev)
                s->prev->next = s->next;
        else
                c->sessions = s->next;
        if (s->next)
                s->next->prev = s->prev;
        c->count--;
        snprintf(c->closed_ids[c->closed_next], sizeof(c->closed_ids[0]), "%s", s->id);
        c->closed_next = (c->closed_next + 1) % CONSOLE_CLOSED_REMEMBERED;
}

void consoles_free(struct consoles *c)
{
        if (!c)
                return;
        while (c->sessions) {
                struct console_session *s = c->sessions;
                unlink_locked(c, s);
                session_free(s);
        }
        console_files_free(c);
        pthread_mutex_destroy(&c->lock);
        free(c->closed_ids);
        free(c);
}

/* ---- the outbound queue ---- */

static void feed(struct console_session *s)
{
        if (!s->ws || s->state != CONSOLE_OPEN)
                return;
        if (s->dropped_unsaid && s->mode == PROTO_CONSOLE_APP) {
                char msg[160];
                snprintf(msg, sizeof(msg), "console: %llu line(s) of output dropped: the reader is slower than the app",
                         (unsigned long long)s->dropped_unsaid);
                s->dropped_unsaid = 0;
                _cleanup_free_ char *t = proto_console_line_text(s->last_seq, (int64_t)na_now_real_ms(), "system", msg,
                                                                 strlen(msg));
                if (t && ws_send(s->ws, WS_TEXT, t, strlen(t)) == 0)
                        s->frames_out++;
        }
        while (s->qhead && ws_queued(s->ws) < WS_LOW_MARK) {
                struct console_frame *f = s->qhead;
                if (ws_send(s->ws, f->kind, f->data, f->len) < 0)
                        return;
                s->frames_out++;
                s->bytes_out += f->len;
                s->qhead = f->next;
                if (!s->qhead)
                        s->qtail = NULL;
                s->qbytes -= f->len;
                free(f);
        }
}

void console_send(struct console_session *s, enum ws_kind kind, const void *data, size_t len)
{
        if (s->state != CONSOLE_OPEN || !s->ws)
                return;
        if (!s->qhead && ws_queued(s->ws) < WS_LOW_MARK) {
                if (ws_send(s->ws, kind, data, len) == 0) {
                        s->frames_out++;
                        s->bytes_out += len;
                }
                return;
        }
        size_t budget = CONSOLE_QUEUE_MAX > ws_queued(s->ws) ? CONSOLE_QUEUE_MAX - ws_queued(s->ws) : 0;
        while (s->qhead && s->qbytes + len > budget) {
                struct console_frame *f = s->qhead;
                s->qhead = f->next;
                if (!s->qhead)
                        s->qtail = NULL;
                s->qbytes -= f->len;
                free(f);
                s->dropped++;
                s->dropped_unsaid++;
        }
        if (len > budget) {
                s->dropped++;
                s->dropped_unsaid++;
                return;
        }
        struct console_frame *f = malloc(sizeof(*f) + len);
        if (!f) {
                s->dropped++;
                s->dropped_unsaid++;
                return;
        }
        f->next = NULL;
        f->kind = kind;
        f->len = len;
        memcpy(f->data, data, len);
        if (s->qtail)
                s->qtail->next = f;
        else
                s->qhead = f;
        s->qtail = f;
        s->qbytes += len;
}

void console_system(struct console_session *s, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        _cleanup_free_ char *t = proto_console_line_text(s->last_seq, (int64_t)na_now_real_ms(), "system", msg,
                                                         strlen(msg));
        if (t)
                console_send(s, WS_TEXT, t, strlen(t));
}

/* ---- the WebSocket's callbacks ---- */

static void idle_arm(struct console_session *s)
{
        loop_timer_arm_ms(s->idle_timer, (uint64_t)s->idle_sec * 1000);
}

static void on_message(void *userdata, enum ws_kind kind, const uint8_t *data, size_t len)
{
        struct console_session *s = userdata;
        if (s->state != CONSOLE_OPEN)
                return;
        s->frames_in++;
        idle_arm(s);
        if (s->mode == PROTO_CONSOLE_FILES)
                console_files_input(s, kind, data, len);
        else if (s->mode != PROTO_CONSOLE_APP) {
                if (kind == WS_BINARY) /* text frames carry nothing for a server console */
                        console_vps_input(s, data, len);
        } else {
                if (kind != WS_TEXT)
                        console_system(s, "console: binary frames are not understood by an app console; send "
                                          "{\"type\":\"line\",\"line\":…} or {\"type\":\"power\",\"action\":…}");
                else
                        console_app_input(s, data, len);
        }
}

static void on_drain(void *userdata)
{
        struct console_session *s = userdata;
        feed(s);
        if ((s->mode == PROTO_CONSOLE_VPS_SERIAL || s->mode == PROTO_CONSOLE_VPS_VNC) && s->state == CONSOLE_OPEN)
                console_vps_drained(s);
}

static void on_closed(void *userdata, uint16_t code, const char *reason)
{
        struct console_session *s = userdata;
        struct consoles *c = s->c;
        char why[160];
        if (s->reason[0])
                snprintf(why, sizeof(why), "%s", s->reason);
        else if (code == 1009)
                snprintf(why, sizeof(why), "message-too-big");
        else if (code == 1002 || code == 1007)
                snprintf(why, sizeof(why), "protocol-error");
        else
                snprintf(why, sizeof(why), "relay-closed");
        log_info("console %s (%s %s): closed: %s (code %u%s%s)", s->id, proto_console_modes[s->mode], s->target_id, why,
                 code, *reason ? ", " : "", reason);
        const struct agent_services *sv = c->opt.services;
        if (sv && sv->emit_event)
                sv->emit_event(sv, "console.closed", s->target_id,
                               json_pack("{s:s, s:s}", "sessionId", s->id, "reason", why));
        pthread_mutex_lock(&c->lock);
        unlink_locked(c, s);
        pthread_mutex_unlock(&c->lock);
        session_free(s);
}

static const struct ws_callbacks ws_cb = {
        .on_message = on_message,
        .on_drain = on_drain,
        .on_closed = on_closed,
};

void console_end(struct console_session *s, uint16_t code, const char *reason)
{
        if (s->state == CONSOLE_CLOSING)
                return;
        if (!s->reason[0])
                snprintf(s->reason, sizeof(s->reason), "%s", reason);
        s->state = CONSOLE_CLOSING;
        loop_timer_disarm(s->idle_timer);
        mode_stop(s);
        feed(s); /* what is queued still goes out before the close frame */
        queue_clear(s);
        ws_close(s->ws, code, reason); /* on_closed follows */
}

static void idle_fired(void *userdata)
{
        struct console_session *s = userdata;
        console_end(s, 1000, "idle");
}

/* ---- hand-over from the worker, and closes asked for by console.close ---- */

static void close_posted(void *userdata)
{
        struct console_session *s = userdata;
        if (s->state == CONSOLE_OPEN)
                console_end(s, 1000, "closed");
}

static void start_posted(void *userdata)
{
        struct console_session *s = userdata;
        struct consoles *c = s->c;
        struct na_error err = NA_ERROR_INIT;
        pthread_mutex_lock(&c->lock);
        struct ws_dialed *d = TAKE_PTR(s->dialed);
        bool close_now = s->close_requested;
        s->state = CONSOLE_OPEN;
        pthread_mutex_unlock(&c->lock);
        s->idle_timer = loop_timer_new(c->opt.loop, idle_fired, s);
        size_t max_msg = s->mode == PROTO_CONSOLE_FILES ? PROTO_CONSOLE_FILES_FRAME_MAX : PROTO_CONSOLE_FRAME_MAX;
        int r = s->idle_timer ? ws_start(c->opt.loop, d, &ws_cb, s, max_msg, &s->ws, &err)
                              : (ws_dialed_free(d), na_error_sys(&err, ENOMEM, "console %s", s->id));
        if (r >= 0)
                r = s->mode == PROTO_CONSOLE_APP     ? console_app_start(s, &err)
                    : s->mode == PROTO_CONSOLE_FILES ? console_files_start(s, &err)
                                                     : console_vps_start(s, &err);
        if (r < 0) {
                log_warn("console %s: %s", s->id, err.message);
                na_error_clear(&err);
                if (s->ws) {
                        console_end(s, 1011, "internal-error");
                        return;
                }
                const struct agent_services *sv = c->opt.services;
                if (sv && sv->emit_event)
                        sv->emit_event(sv, "console.closed", s->target_id,
                                       json_pack("{s:s, s:s}", "sessionId", s->id, "reason", "internal-error"));
                pthread_mutex_lock(&c->lock);
                unlink_locked(c, s);
                pthread_mutex_unlock(&c->lock);
                session_free(s);
                return;
        }
        log_info("console %s (%s %s): open to %s", s->id, proto_console_modes[s->mode], s->target_id, ws_peer(s->ws));
        idle_arm(s);
        if (close_now)
                console_end(s, 1000, "closed");
}

void console_job_init(struct console_session *s, struct proto_job *pj, const char *kind, int64_t timeout_sec,
                      json_t *params)
{
        memset(pj, 0, sizeof(*pj));
        na_uuid_random(pj->id, sizeof(pj->id));
        snprintf(pj->kind, sizeof(pj->kind), "%s", kind);
        pj->attempt = 1;
        pj->target_type = PROTO_TARGET_APP;
        snprintf(pj->target_id, sizeof(pj->target_id), "%s", s->target_id);
        pj->created_at_ms = (int64_t)na_now_real_ms();
        pj->timeout_sec = timeout_sec;
        pj->params = params;
}

struct console_session *console_find_open(struct consoles *c, const char *id)
{
        pthread_mutex_lock(&c->lock);
        struct console_session *s = c->sessions;
        while (s && !streq(s->id, id))
                s = s->next;
        pthread_mutex_unlock(&c->lock); /* only the loop frees sessions: s stays valid here */
        return s && s->state == CONSOLE_OPEN ? s : NULL;
}

static bool id_used_locked(struct consoles *c, const char *id, const char **state)
{
        for (struct console_session *s = c->sessions; s; s = s->next)
                if (streq(s->id, id)) {
                        *state = "open";
                        return true;
                }
        for (unsigned i = 0; i < CONSOLE_CLOSED_REMEMBERED; i++)
                if (c->closed_ids[i][0] && streq(c->closed_ids[i], id)) {
                        *state = "closed";
                        return true;
                }
        return false;
}

static int target_check(struct consoles *c, enum proto_target_type type, const char *id,
                        const struct proto_console_open *p, struct app_fs **ret_fs, struct na_error *err)
{
        const struct agent_services *sv = c->opt.services;
        if (p->mode == PROTO_CONSOLE_FILES) {
                if (type != PROTO_TARGET_APP)
                        return na_error_field(err, "mode", "files is for an app target; a server has vps-serial or "
                                                           "vps-vnc");
                return console_files_check(c, id, p->path, ret_fs, err);
        }
        if (p->mode == PROTO_CONSOLE_APP) {
                if (type != PROTO_TARGET_APP)
                        return na_error_field(err, "mode", "app is for an app target; a server has vps-serial or vps-vnc");
                if (!sv->app || !sv->app->exists(sv->app_conn, id)) {
                        na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: not on this node", id);
                        return -ENOENT;
                }
                if (!sv->app->console_attach)
                        return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: the app driver has no consoles", id);
                return 0;
        }
        if (type != PROTO_TARGET_VPS)
                return na_error_field(err, "mode", "%s is for a server target; an app has app", proto_console_modes[p->mode]);
        if (!sv->vps_exists || !sv->vps_exists(sv, id)) {
                na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: not on this node", id);
                return -ENOENT;
        }
        if (!sv->vm || !sv->vm->console_open)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "vps %s: the VM driver has no consoles", id);
        return 0;
}

int consoles_open(struct consoles *c, ws_checkpoint_fn checkpoint, void *cp, enum proto_target_type target_type,
                  const char *target_id, const struct proto_console_open *p, json_t **ret, struct na_error *err)
{
        struct ws_url u;
        int r = ws_url_parse(p->url, c->opt.allow_insecure_http, &u, "url", err);
        if (r >= 0)
                r = ws_url_allowed(&u, c->opt.controller_url, c->opt.relays, "url", err);
        if (r < 0)
                return r;
        struct app_fs *fs = NULL;
        r = target_check(c, target_type, target_id, p, &fs, err);
        if (r < 0)
                return r;

        struct console_session *s = calloc(1, sizeof(*s));
        if (!s || (p->mode == PROTO_CONSOLE_FILES && !(s->path = strdup(p->path)))) {
                console_files_release(fs);
                free(s);
                return na_error_sys(err, ENOMEM, "console %s", p->session_id);
        }
        s->fs = fs;
        s->files_wd = -1;
        s->c = c;
        s->vps_fd = -1;
        snprintf(s->id, sizeof(s->id), "%s", p->session_id);
        snprintf(s->target_id, sizeof(s->target_id), "%s", target_id);
        s->target_type = target_type;
        s->mode = p->mode;
        s->idle_sec = p->idle_sec;
        s->state = CONSOLE_DIALING;
        loop_post_init(&s->start_post, start_posted, s);
        loop_post_init(&s->close_post, close_posted, s);

        pthread_mutex_lock(&c->lock);
        const char *used = NULL;
        unsigned per_target = 0;
        for (struct console_session *o = c->sessions; o; o = o->next)
                per_target += streq(o->target_id, target_id);
        if (id_used_locked(c, s->id, &used)) {
                na_error_set(err, EEXIST, NA_E_INVALID_STATE, "console %s: the session id is %s already", s->id,
                             streq(used, "open") ? "in use" : "used");
                na_error_detail(err, "state", json_string(used));
                r = -EEXIST;
        } else if (c->count >= c->opt.max_sessions || per_target >= c->opt.max_per_target) {
                na_error_set(err, EBUSY, NA_E_INVALID_STATE, "console %s: %s %s has %u console(s) open, node %u; at most "
                             "%u per target and %u per node ([consoles])", s->id, proto_target_types[target_type],
                             target_id, per_target, c->count, c->opt.max_per_target, c->opt.max_sessions);
                na_error_detail(err, "state", json_string("console-limit"));
                r = -EBUSY;
        } else {
                s->next = c->sessions;
                if (c->sessions)
                        c->sessions->prev = s;
                c->sessions = s;
                c->count++;
        }
        pthread_mutex_unlock(&c->lock);
        if (r < 0) {
                console_files_release(s->fs);
                free(s->path);
                free(s);
                return r;
        }

        struct ws_dialed *d = NULL;
        const struct agent_services *sv = c->opt.services;
        if (p->mode == PROTO_CONSOLE_VPS_SERIAL || p->mode == PROTO_CONSOLE_VPS_VNC) /* blocking IPC: here on the worker, and its failure fails the job */
                r = sv->vm->console_open(sv->vm_conn, target_id,
                                         p->mode == PROTO_CONSOLE_VPS_VNC ? VM_CONSOLE_VNC : VM_CONSOLE_SERIAL, &s->vps_fd,
                                         err);
        if (r >= 0)
                r = ws_dial(&u, &c->opt.tls, p->token, 15000, checkpoint, cp, &d, err);
        pthread_mutex_lock(&c->lock);
        if (r < 0 || s->close_requested) {
                if (r >= 0) {
                        ws_dialed_free(d);
                        na_error_set(err, ECANCELED, NA_E_INVALID_STATE, "console %s: closed while it was being opened",
                                     s->id);
                        na_error_detail(err, "state", json_string("closed"));
                        r = -ECANCELED;
                } else
                        na_error_prefix(err, "console %s", s->id);
                /* Never on the loop yet: the worker may drop it. Its id stays used. */
                unlink_locked(c, s);
                pthread_mutex_unlock(&c->lock);
                if (s->vps_fd >= 0)
                        close(s->vps_fd);
                console_files_release(s->fs);
                free(s->path);
                free(s);
                return r;
        }
        s->dialed = d;
        s->opened_ms = (int64_t)na_now_real_ms();
        json_t *data = proto_console_opened_encode(s->id, s->opened_ms);
        loop_post_queue(c->opt.loop, &s->start_post);
        pthread_mutex_unlock(&c->lock);
        if (!data)
                return na_error_sys(err, ENOMEM, "console %s", p->session_id);
        *ret = data;
        return 0;
}

int consoles_close(struct consoles *c, const char *session_id, struct na_error *err)
{
        (void)err;
        pthread_mutex_lock(&c->lock);
        for (struct console_session *s = c->sessions; s; s = s->next)
                if (streq(s->id, session_id)) {
                        s->close_requested = true;
                        if (s->state != CONSOLE_DIALING)
                                loop_post_queue(c->opt.loop, &s->close_post);
                        break;
                }
        pthread_mutex_unlock(&c->lock);
        return 0;
}

void consoles_close_all(struct consoles *c, const char *reason)
{
        pthread_mutex_lock(&c->lock);
        for (struct console_session *s = c->sessions; s; s = s->next)
                s->close_requested = true;
        pthread_mutex_unlock(&c->lock);
        /* on_closed may unlink s itself, never another session. */
        for (struct console_session *s = c->sessions, *next; s; s = next) {
                next = s->next;
                if (s->state == CONSOLE_OPEN)
                        console_end(s, 1001, reason);
        }
}

unsigned consoles_count(struct consoles *c)
{
        pthread_mutex_lock(&c->lock);
        unsigned n = c->count;
        pthread_mutex_unlock(&c->lock);
        return n;
}

json_t *consoles_status_json(struct consoles *c)
{
        static const char *const states[] = { "dialing", "open", "closing" };
        json_t *a = json_array();
        pthread_mutex_lock(&c->lock);
        for (struct console_session *s = c->sessions; a && s; s = s->next) {
                char at[64];
                na_format_time_ms((uint64_t)s->opened_ms, at, sizeof(at));
                json_array_append_new(
                        a, json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "sessionId",
                                     s->id, "mode", proto_console_modes[s->mode], "target", "type",
                                     proto_target_types[s->target_type], "id", s->target_id, "peer",
                                     s->ws ? ws_peer(s->ws) : "", "state", states[s->state], "openedAt",
                                     s->opened_ms ? at : "", "idleSec", (json_int_t)s->idle_sec, "framesOut",
                                     (json_int_t)s->frames_out, "bytesOut", (json_int_t)s->bytes_out, "framesIn",
                                     (json_int_t)s->frames_in, "dropped", (json_int_t)s->dropped, "queuedBytes",
                                     (json_int_t)(s->qbytes + (s->ws ? ws_queued(s->ws) : 0))));
        }
        pthread_mutex_unlock(&c->lock);
        return a;
}
