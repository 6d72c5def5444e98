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

#include "agent/console-internal.h"
#include "agent/jobs.h"
#include "agent/log.h"
#include "agent/services.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/uuid.h"
#include "drivers/app.h"
#include "drivers/app/app-monitor.h"

#define APP_BACKLOG 100
#define APP_READ_LIMIT 1000
#define APP_READ_ROUNDS 8 /* per loop turn; more output waits for the next turn */
#define APP_POLL_MS 300

static void attach(struct console_session *s);

static const struct agent_services *svc(struct console_session *s)
{
        return s->c->opt.services;
}

/* Send the lines of one app.output answer; false when the app is gone. */
static int send_lines(struct console_session *s, json_t *out)
{
        json_t *lines = json_object_get(out, "lines"), *line;
        size_t i;
        json_array_foreach(lines, i, line)
        {
                _cleanup_free_ char *t = json_dumps(line, JSON_COMPACT);
                if (t)
                        console_send(s, WS_TEXT, t, strlen(t));
                s->last_seq = json_integer_value(json_object_get(line, "seq"));
        }
        json_t *next = json_object_get(out, "nextSeq");
        if (json_is_integer(next))
                s->next_seq = json_integer_value(next);
        return (int)json_array_size(lines);
}

/* Read what the ring holds beyond next_seq. < 0: the session ended. */
static int read_ring(struct console_session *s)
{
        const struct agent_services *sv = svc(s);
        for (int round = 0; round < APP_READ_ROUNDS; round++) {
                struct na_error err = NA_ERROR_INIT;
                _cleanup_json_ json_t *out = NULL;
                int r = sv->app->output(sv->app_conn, s->target_id, s->next_seq, APP_READ_LIMIT, &out, &err);
                if (r < 0) {
                        bool gone = err.code && streq(err.code, NA_E_APP_NOT_FOUND);
                        log_debug("console %s: app %s: %s", s->id, s->target_id, err.message);
                        na_error_clear(&err);
                        if (gone) {
                                console_end(s, 1000, "target-deleted");
                                return -1;
                        }
                        return 0;
                }
                if (send_lines(s, out) < APP_READ_LIMIT)
                        return 0;
        }
        loop_timer_arm_ms(s->app_timer, 0); /* more waits: let the loop breathe */
        return 0;
}

static void detach(struct console_session *s)
{
        if (s->mon_fd < 0)
                return;
        loop_unwatch(s->c->opt.loop, s->mon_fd);
        close(s->mon_fd);
        s->mon_fd = -1;
}

static void on_monitor(void *userdata, int fd, uint32_t revents)
{
        struct console_session *s = userdata;
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
                else if (m.type == APP_MONITOR_MSG_REFUSED)
                        console_system(s, "console: line refused: %s", m.reason);
                else if (m.type == APP_MONITOR_MSG_EXIT)
                        output = gone = true;
        }
        if (!gone && (revents & (EPOLLHUP | EPOLLERR)))
                gone = true;
        if (output || gone)
                if (read_ring(s) < 0)
                        return;
        if (gone) {
                detach(s);
                loop_timer_arm_ms(s->app_timer, APP_POLL_MS);
        }
}

static void attach(struct console_session *s)
{
        const struct agent_services *sv = svc(s);
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        int r = sv->app->console_attach(sv->app_conn, s->target_id, &fd, &err);
        if (r < 0) {
                bool gone = err.code && streq(err.code, NA_E_APP_NOT_FOUND);
                na_error_clear(&err);
                if (gone)
                        console_end(s, 1000, "target-deleted");
                else
                        loop_timer_arm_ms(s->app_timer, APP_POLL_MS);
                return;
        }
        if (loop_watch(s->c->opt.loop, fd, EPOLLIN, on_monitor, s, &err) < 0) {
                log_warn("console %s: %s", s->id, err.message);
                na_error_clear(&err);
                close(fd);
                loop_timer_arm_ms(s->app_timer, APP_POLL_MS);
                return;
        }
        s->mon_fd = fd;
        (void)read_ring(s); /* what came between the last read and the connection */
}

static void app_tick(void *userdata)
{
        struct console_session *s = userdata;
        if (s->state != CONSOLE_OPEN)
                return;
        if (s->mon_fd >= 0) {
                (void)read_ring(s);
                return;
        }
        const struct agent_services *sv = svc(s);
        if (!sv->app->exists(sv->app_conn, s->target_id)) {
                console_end(s, 1000, "target-deleted");
                return;
        }
        if (read_ring(s) < 0)
                return;
        attach(s);
}

int console_app_start(struct console_session *s, struct na_error *err)
{
        const struct agent_services *sv = svc(s);
        s->app_timer = loop_timer_new(s->c->opt.loop, app_tick, s);
        if (!s->app_timer)
                return na_error_sys(err, ENOMEM, "console %s", s->id);
        _cleanup_json_ json_t *out = NULL;
        int r = sv->app->output(sv->app_conn, s->target_id, -1, APP_BACKLOG, &out, err);
        if (r < 0)
                return r;
        send_lines(s, out);
        attach(s);
        return 0;
}

void console_app_stop(struct console_session *s)
{
        detach(s);
        loop_timer_free(s->app_timer);
        s->app_timer = NULL;
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
        }
        free(p);
}

static const struct job_sink power_sink = {
        .finished = power_finished,
};

static void power(struct console_session *s, enum proto_app_power_action action)
{
        struct proto_job pj = { 0 };
        na_uuid_random(pj.id, sizeof(pj.id));
        snprintf(pj.kind, sizeof(pj.kind), "app.power");
        pj.attempt = 1;
        pj.target_type = PROTO_TARGET_APP;
        snprintf(pj.target_id, sizeof(pj.target_id), "%s", s->target_id);
        pj.created_at_ms = (int64_t)na_now_real_ms();
        pj.timeout_sec = 600;
        pj.params = json_pack("{s:s}", "action", proto_app_power_actions[action]);
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
        if (s->mon_fd < 0) {
                console_system(s, "console: the app is not running; line not sent");
                return;
        }
        int r = app_monitor_send(s->mon_fd, 'L', in.line, in.len, &err);
        if (r == -EAGAIN)
                console_system(s, "console: the app's input is full; line not sent");
        else if (r < 0)
                console_system(s, "console: line not sent: %s", err.message);
        na_error_clear(&err);
}
