/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * App consoles (AGENT-API 4.3, mode "app"): the last 100 lines of the app's output,
 * then live lines as the monitor announces them (an O<seq> on our own connection to
 * it, watched on the loop), each as a text frame {"seq","ts","stream","text"}; text
 * frames in are console lines (written to the monitor on that connection) or power
 * actions (an app.power job submitted to the job layer with a generated id). While
 * the app does not run there is no monitor: a timer reads the ring (system lines such
 * as "stopped") and attaches again once the app runs; the app gone ends the session.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/console/console-internal.h"
#include "agent/jobs/jobs.h"
#include "agent/base/log.h"
#include "agent/base/services.h"
#include "common/fault.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app.h"
#include "ring/monitor-msg.h"

#define APP_BACKLOG 100
#define APP_READ_LIMIT 1000
#define APP_READ_ROUNDS 8 /* per loop turn; more output waits for the next turn */
#define APP_POLL_MS 300
#define APP_PENDING_MAX 64 /* console lines sent to the monitor and not yet answered */
#define APP_BACKLOG_PAUSE (512u * 1024u) /* every session holds this much unsent: stop reading */
#define APP_PAUSE_MS 5

/*
 * One per app with open consoles, shared by its sessions: one connection to the
 * monitor (which serves few connections), one reader of the ring, the lines fanned
 * out to every session from the seq that session has not seen yet.
 */
struct app_follower {
        struct app_follower *next;
        struct consoles *c;
        char app_id[80];
        int mon_fd;
        int64_t next_seq;
        struct loop_timer *timer;
        struct console_session **subs;
        size_t nsubs, cap;
        /* who sent the console lines not answered yet (K or E come in order) */
        char pending[APP_PENDING_MAX][PROTO_CONSOLE_SESSION_MAX + 1];
        unsigned pending_head, pending_n;
};

static void attach(struct app_follower *f);

static const struct agent_services *svc(struct app_follower *f)
{
        return f->c->opt.services;
}

/* Send the lines of one app.output answer to s, from its next_seq on. */
static size_t send_lines(struct console_session *s, json_t *lines)
{
        json_t *line;
        size_t i;
        json_array_foreach(lines, i, line)
        {
                int64_t seq = json_integer_value(json_object_get(line, "seq"));
                if (seq < s->next_seq)
                        continue;
                _cleanup_free_ char *t = json_dumps(line, JSON_COMPACT);
                if (t)
                        console_send(s, WS_TEXT, t, strlen(t));
                s->last_seq = seq;
                s->next_seq = seq + 1;
        }
        return json_array_size(lines);
}

/* Each line once as text, to every session that has not seen it. */
static void fan_out(struct app_follower *f, json_t *lines)
{
        json_t *line;
        size_t i;
        json_array_foreach(lines, i, line)
        {
                int64_t seq = json_integer_value(json_object_get(line, "seq"));
                _cleanup_free_ char *t = NULL;
                for (size_t k = 0; k < f->nsubs; k++) {
                        struct console_session *s = f->subs[k];
                        if (seq < s->next_seq)
                                continue;
                        if (!t && !(t = json_dumps(line, JSON_COMPACT)))
                                return;
                        console_send(s, WS_TEXT, t, strlen(t));
                        s->last_seq = seq;
                        s->next_seq = seq + 1;
                }
        }
}

/* End every session of f: each unsubscribes as it ends, and the last frees f. */
static void end_all(struct app_follower *f, const char *reason)
{
        while (f->nsubs) {
                bool last = f->nsubs == 1;
                console_end(f->subs[0], 1000, reason); /* console_app_stop() takes it out */
                if (last)
                        return;
        }
}

/*
 * Every session of f holds APP_BACKLOG_PAUSE bytes or more not yet on its socket.
 * Reading on would only encode lines to drop them (the oldest go beyond 1 MiB): that
 * cost a fast app's console most of a core for ~1 MB/s delivered. The lines wait in
 * the ring instead, and what the ring overwrites meanwhile is said as before.
 */
static bool all_backlogged(const struct app_follower *f)
{
        for (size_t i = 0; i < f->nsubs; i++) {
                const struct console_session *s = f->subs[i];
                if (s->qbytes + (s->ws ? ws_queued(s->ws) : 0) < APP_BACKLOG_PAUSE)
                        return false;
        }
        return f->nsubs > 0;
}

/* Read what the ring holds beyond f->next_seq and fan it out. < 0: the app is gone
 * (every session ended; f may be freed). */
static int read_ring(struct app_follower *f)
{
        const struct agent_services *sv = svc(f);
        for (int round = 0; round < APP_READ_ROUNDS; round++) {
                if (all_backlogged(f)) {
                        loop_timer_arm_ms(f->timer, APP_PAUSE_MS); /* follower_tick reads on */
                        return 0;
                }
                struct na_error err = NA_ERROR_INIT;
                _cleanup_json_ json_t *out = NULL;
                int r = sv->app->output(sv->app_conn, f->app_id, f->next_seq, APP_READ_LIMIT, &out, &err);
                if (r < 0) {
                        bool gone = err.code && streq(err.code, NA_E_APP_NOT_FOUND);
                        log_debug("consoles of app %s: %s", f->app_id, err.message);
                        na_error_clear(&err);
                        if (gone) {
                                end_all(f, "target-deleted");
                                return -1;
                        }
                        return 0;
                }
                json_t *lines = json_object_get(out, "lines");
                int64_t first = json_integer_value(json_object_get(json_array_get(lines, 0), "seq"));
                if (json_array_size(lines) && first > f->next_seq)
                        for (size_t i = 0; i < f->nsubs; i++) {
                                struct console_session *s = f->subs[i];
                                if (s->next_seq >= first)
                                        continue;
                                uint64_t lost = (uint64_t)(first - (s->next_seq > f->next_seq ? s->next_seq : f->next_seq));
                                s->dropped += lost;
                                console_system(s, "console: %llu line(s) of output went by before they could be read",
                                               (unsigned long long)lost);
                        }
                fan_out(f, lines);
                json_t *next = json_object_get(out, "nextSeq");
                if (json_is_integer(next))
                        f->next_seq = json_integer_value(next);
                if (json_array_size(lines) < APP_READ_LIMIT)
                        return 0;
        }
        loop_timer_arm_ms(f->timer, 0); /* more waits: let the loop breathe */
        return 0;
}

static void detach(struct app_follower *f)
{
        if (f->mon_fd < 0)
                return;
        loop_unwatch(f->c->opt.loop, f->mon_fd);
        close(f->mon_fd);
        f->mon_fd = -1;
        f->pending_n = 0;
}

static struct console_session *sub_find(struct app_follower *f, const char *id)
{
        for (size_t i = 0; i < f->nsubs; i++)
                if (streq(f->subs[i]->id, id))
                        return f->subs[i];
        return NULL;
}

static void answered(struct app_follower *f, const char *refusal)
{
        if (!f->pending_n)
                return;
        const char *id = f->pending[f->pending_head];
        struct console_session *s = refusal ? sub_find(f, id) : NULL;
        if (s)
                console_system(s, "console: line refused: %s", refusal);
        f->pending_head = (f->pending_head + 1) % APP_PENDING_MAX;
        f->pending_n--;
}

static void on_monitor(void *userdata, int fd, uint32_t revents)
{
        struct app_follower *f = userdata;
        bool output = false, gone = false;
        char buf[512];
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        break;
                if (n <= 0) {
                        gone = true;
                        break;
                }
                struct app_monitor_msg m;
                struct na_error err = NA_ERROR_INIT;
                if (app_monitor_parse_message(buf, (size_t)n, &m, &err) < 0) {
                        na_error_clear(&err);
                        continue;
                }
                if (m.type == APP_MONITOR_MSG_OUTPUT)
                        output = true;
                else if (m.type == APP_MONITOR_MSG_ACK)
                        answered(f, NULL);
                else if (m.type == APP_MONITOR_MSG_REFUSED)
                        answered(f, m.reason);
                else if (m.type == APP_MONITOR_MSG_EXIT)
                        output = gone = true;
        }
        if (!gone && (revents & (EPOLLHUP | EPOLLERR)))
                gone = true;
        if (output || gone)
                if (read_ring(f) < 0)
                        return;
        if (gone) {
                detach(f);
                loop_timer_arm_ms(f->timer, APP_POLL_MS);
        }
}

static void attach(struct app_follower *f)
{
        const struct agent_services *sv = svc(f);
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        int r = sv->app->console_attach(sv->app_conn, f->app_id, &fd, &err);
        if (r < 0) {
                bool gone = err.code && streq(err.code, NA_E_APP_NOT_FOUND);
                na_error_clear(&err);
                if (gone)
                        end_all(f, "target-deleted");
                else
                        loop_timer_arm_ms(f->timer, APP_POLL_MS);
                return;
        }
        if (loop_watch(f->c->opt.loop, fd, EPOLLIN, on_monitor, f, &err) < 0) {
                log_warn("consoles of app %s: %s", f->app_id, err.message);
                na_error_clear(&err);
                close(fd);
                loop_timer_arm_ms(f->timer, APP_POLL_MS);
                return;
        }
        f->mon_fd = fd;
        (void)read_ring(f); /* what came between the last read and the connection */
}

static void follower_tick(void *userdata)
{
        struct app_follower *f = userdata;
        if (f->mon_fd >= 0) {
                (void)read_ring(f);
                return;
        }
        const struct agent_services *sv = svc(f);
        if (!sv->app->exists(sv->app_conn, f->app_id)) {
                end_all(f, "target-deleted");
                return;
        }
        if (read_ring(f) < 0)
                return;
        attach(f);
}

static void follower_free(struct app_follower *f)
{
        struct app_follower **pp = &f->c->followers;
        while (*pp && *pp != f)
                pp = &(*pp)->next;
        if (*pp)
                *pp = f->next;
        detach(f);
        loop_timer_free(f->timer);
        free(f->subs);
        free(f);
}

static struct app_follower *follower_get(struct consoles *c, const char *app_id, int64_t from_seq)
{
        for (struct app_follower *f = c->followers; f; f = f->next)
                if (streq(f->app_id, app_id))
                        return f;
        struct app_follower *f = calloc(1, sizeof(*f));
        if (!f)
                return NULL;
        f->c = c;
        f->mon_fd = -1;
        f->next_seq = from_seq;
        snprintf(f->app_id, sizeof(f->app_id), "%s", app_id);
        f->timer = loop_timer_new(c->opt.loop, follower_tick, f);
        if (!f->timer) {
                free(f);
                return NULL;
        }
        f->next = c->followers;
        c->followers = f;
        return f;
}

int console_app_start(struct console_session *s, struct na_error *err)
{
        struct consoles *c = s->c;
        const struct agent_services *sv = c->opt.services;
        _cleanup_json_ json_t *out = NULL;
        int r = sv->app->output(sv->app_conn, s->target_id, -1, APP_BACKLOG, &out, err);
        if (r < 0)
                return r;
        s->next_seq = 0;
        send_lines(s, json_object_get(out, "lines"));
        json_t *next = json_object_get(out, "nextSeq");
        if (json_is_integer(next))
                s->next_seq = json_integer_value(next);
        struct app_follower *f = follower_get(c, s->target_id, s->next_seq);
        if (f && f->nsubs == f->cap && !NA_FAULT("console.subs-grow")) {
                /* Grown through a temporary: a failed reallocarray leaves the list and its
                 * capacity as they were (they described the other sessions). */
                size_t cap = f->cap ? f->cap * 2 : 4;
                struct console_session **subs = reallocarray(f->subs, cap, sizeof(*f->subs));
                if (subs) {
                        f->subs = subs;
                        f->cap = cap;
                }
        }
        if (!f || f->nsubs == f->cap) {
                if (f && !f->nsubs)
                        follower_free(f);
                return na_error_sys(err, ENOMEM, "console %s", s->id);
        }
        f->subs[f->nsubs++] = s;
        s->follower = f;
        if (f->nsubs == 1)
                attach(f); /* the first session: connect (or start polling) */
        return 0;
}

void console_app_stop(struct console_session *s)
{
        struct app_follower *f = s->follower;
        if (!f)
                return;
        s->follower = NULL;
        for (size_t i = 0; i < f->nsubs; i++)
                if (f->subs[i] == s) {
                        f->subs[i] = f->subs[--f->nsubs];
                        break;
                }
        if (!f->nsubs)
                follower_free(f);
}

/* ---- power actions through the job layer ---- */

struct power_run {
        struct consoles *c;
        char session_id[PROTO_CONSOLE_SESSION_MAX + 1];
        char action[16];
};

static void power_finished(void *userdata, struct job_ctx *job)
{
        struct power_run *p = userdata;
        struct consoles *c = p->c;
        struct console_session *s;
        pthread_mutex_lock(&c->lock);
        for (s = c->sessions; s; s = s->next)
                if (streq(s->id, p->session_id))
                        break;
        pthread_mutex_unlock(&c->lock); /* only the loop frees sessions: s stays valid here */
        log_job(job->state == JOB_SUCCEEDED ? LOG_LEVEL_INFO : LOG_LEVEL_WARN, job->pj.id, job->target_key,
                "console %s: app.power %s %s%s%s", p->session_id, p->action, job_state_name(job->state),
                job->error.code ? ": " : "", job->error.code ? job->error.message : "");
        if (s && s->state == CONSOLE_OPEN) {
                if (job->state == JOB_SUCCEEDED) {
                        json_t *data = json_object_get(job->result, "data");
                        const char *st = json_string_value(json_object_get(data, "state"));
                        console_system(s, "console: power %s done (job %s): %s", p->action, job->pj.id, st ? st : "ok");
                } else
                        console_system(s, "console: power %s failed (job %s): %s", p->action, job->pj.id,
                                       job->error.code ? job->error.message : job_state_name(job->state));
                if (s->follower && s->follower->mon_fd < 0)
                        loop_timer_arm_ms(s->follower->timer, 0); /* attach to the new run now */
        }
        free(p);
}

static const struct job_sink power_sink = {
        .finished = power_finished,
};

static void power(struct console_session *s, enum proto_app_power_action action)
{
        struct proto_job pj;
        console_job_init(s, &pj, "app.power", 600, json_pack("{s:s}", "action", proto_app_power_actions[action]));
        struct power_run *p = calloc(1, sizeof(*p));
        if (!p || !pj.params) {
                free(p);
                proto_job_clear(&pj);
                console_system(s, "console: power %s: out of memory", proto_app_power_actions[action]);
                return;
        }
        p->c = s->c;
        snprintf(p->session_id, sizeof(p->session_id), "%s", s->id);
        snprintf(p->action, sizeof(p->action), "%s", proto_app_power_actions[action]);
        char id[sizeof(pj.id)];
        memcpy(id, pj.id, sizeof(id));
        log_job(LOG_LEVEL_INFO, id, NULL, "console %s: app.power %s for app %s", s->id, p->action, s->target_id);
        if (!jobs_submit(s->c->opt.jobs, &pj, &power_sink, p)) {
                proto_job_clear(&pj);
                free(p);
                console_system(s, "console: power %s: could not queue the job", proto_app_power_actions[action]);
                return;
        }
        console_system(s, "console: power %s asked (job %s)", proto_app_power_actions[action], id);
}

void console_app_input(struct console_session *s, const uint8_t *data, size_t len)
{
        struct proto_console_input in;
        struct na_error err = NA_ERROR_INIT;
        if (proto_console_input_decode((const char *)data, len, &in, &err) < 0) {
                _cleanup_json_ json_t *d = na_error_to_json(&err);
                _cleanup_free_ char *details = d ? json_dumps(d, JSON_COMPACT) : NULL;
                console_system(s, "console: frame refused: %s%s%s", err.message, details ? " " : "",
                               details ? details : "");
                na_error_clear(&err);
                return;
        }
        if (in.type == PROTO_CONSOLE_INPUT_POWER) {
                power(s, in.action);
                return;
        }
        struct app_follower *f = s->follower;
        if (f && f->mon_fd < 0)
                attach(f); /* it may have started since the last tick */
        if (s->state != CONSOLE_OPEN || !(f = s->follower))
                return;
        if (f->mon_fd < 0) {
                console_system(s, "console: the app is not running; line not sent");
                return;
        }
        if (f->pending_n == APP_PENDING_MAX) {
                console_system(s, "console: the app's input is busy; line not sent");
                return;
        }
        int r = app_monitor_send(f->mon_fd, 'L', in.line, in.len, &err);
        if (r == -EAGAIN)
                console_system(s, "console: the app's input is full; line not sent");
        else if (r < 0)
                console_system(s, "console: line not sent: %s", err.message);
        else {
                snprintf(f->pending[(f->pending_head + f->pending_n) % APP_PENDING_MAX], sizeof(f->pending[0]), "%s",
                         s->id);
                f->pending_n++;
        }
        na_error_clear(&err);
}
