/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/control/control.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "agent/control/control-apps.h"
#include "agent/control/control-request.h"
#include "agent/base/log.h"
#include "agent/base/services.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/uuid.h"
#include "proto/decode.h"

#define LINE_MAX_BYTES (1u << 20)

struct conn {
        struct control *control;
        int fd;
        uint64_t id;
        char *in;
        size_t in_len, in_cap;
        char *out;
        size_t out_len, out_cap;
        bool closing;
        struct conn *next;
};

struct control {
        struct loop *loop;
        struct loop_timer *accept_pause; /* out of descriptors: stop accepting for a moment */
        struct jobs *jobs;
        const struct control_ops *ops;
        void *userdata;
        int listen_fd;
        char *path;
        struct conn *conns;
        uint64_t next_id;
        struct control_apps *apps; /* "apps" and "logs", off the loop */
};

/* A run request waiting for its job; the connection may be gone by then. */
struct pending_run {
        struct control *control;
        uint64_t conn_id;
};

static struct conn *conn_by_id(struct control *c, uint64_t id)
{
        for (struct conn *k = c->conns; k; k = k->next)
                if (k->id == id)
                        return k;
        return NULL;
}

static void conn_free(struct conn *k)
{
        struct control *c = k->control;
        for (struct conn **pp = &c->conns; *pp; pp = &(*pp)->next)
                if (*pp == k) {
                        *pp = k->next;
                        break;
                }
        loop_unwatch(c->loop, k->fd);
        close(k->fd);
        free(k->in);
        free(k->out);
        free(k);
}

static void conn_io(void *userdata, int fd, uint32_t revents);

static void conn_flush(struct conn *k)
{
        while (k->out_len > 0) {
                ssize_t n = send(k->fd, k->out, k->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        k->closing = true;
                        k->out_len = 0;
                        break;
                }
                memmove(k->out, k->out + n, k->out_len - (size_t)n);
                k->out_len -= (size_t)n;
        }
        uint32_t ev = EPOLLIN | (k->out_len ? EPOLLOUT : 0);
        loop_watch(k->control->loop, k->fd, ev, conn_io, k, NULL);
}

static void conn_send(struct conn *k, json_t *msg)
{
        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
        if (!text)
                return;
        size_t len = strlen(text);
        if (k->out_len + len + 1 > k->out_cap) {
                size_t cap = (k->out_len + len + 1) * 2;
                char *n = realloc(k->out, cap);
                if (!n)
                        return;
                k->out = n;
                k->out_cap = cap;
        }
        memcpy(k->out + k->out_len, text, len);
        k->out[k->out_len + len] = '\n';
        k->out_len += len + 1;
        conn_flush(k);
}

static void send_error(struct conn *k, const char *fmt, ...) _printf_(2, 3);
static void send_error(struct conn *k, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        json_t *o = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
        conn_send(k, o);
        json_decref(o);
}

static void run_finished(void *userdata, struct job_ctx *job)
{
        struct pending_run *p = userdata;
        struct conn *k = conn_by_id(p->control, p->conn_id);
        if (k) {
                json_t *o = json_pack("{s:b, s:{s:s, s:s, s:s, s:s}, s:O}", "ok", 1, "job", "id", job->pj.id, "kind",
                                      job->pj.kind, "target", job->target_key, "state", job_state_name(job->state),
                                      "result", job->result ? job->result : json_null());
                conn_send(k, o);
                json_decref(o);
        }
        log_job(job->state == JOB_SUCCEEDED ? LOG_LEVEL_INFO : LOG_LEVEL_WARN, job->pj.id, job->target_key,
                "local job %s %s%s%s", job->pj.kind, job_state_name(job->state), job->error.code ? ": " : "",
                job->error.code ? job->error.message : "");
        free(p);
}

static void apps_answered(void *userdata, uint64_t conn_id, json_t *answer)
{
        struct conn *k = conn_by_id(userdata, conn_id);
        if (k)
                conn_send(k, answer);
}

static void handle_apps(struct conn *k, const char *cmd, json_t *req)
{
        struct control *c = k->control;
        const struct agent_services *s = c->ops->services ? c->ops->services(c->userdata) : NULL;
        _cleanup_json_ json_t *now = control_apps_submit(c->apps, k->id, s, cmd, req);
        if (now)
                conn_send(k, now);
}

static const struct job_sink local_sink = {
        .finished = run_finished,
};

static void handle_run(struct conn *k, json_t *req)
{
        struct control *c = k->control;
        struct proto_job pj = { 0 };
        struct na_error err = NA_ERROR_INIT;

        if (control_run_decode(req, &pj, &err) < 0) {
                _cleanup_json_ json_t *e = na_error_to_json(&err);
                json_t *o = json_pack("{s:b, s:s, s:O}", "ok", 0, "error", err.message, "details", e);
                conn_send(k, o);
                json_decref(o);
                na_error_clear(&err);
                return;
        }
        na_uuid_random(pj.id, sizeof(pj.id));
        pj.attempt = 1;
        pj.created_at_ms = (int64_t)na_now_real_ms();

        struct pending_run *p = calloc(1, sizeof(*p));
        if (!p) {
                proto_job_clear(&pj);
                send_error(k, "out of memory");
                return;
        }
        p->control = c;
        p->conn_id = k->id;
        log_job(LOG_LEVEL_INFO, pj.id, NULL, "local job %s submitted from the control socket", pj.kind);
        if (!jobs_submit(c->jobs, &pj, &local_sink, p)) {
                proto_job_clear(&pj);
                free(p);
                send_error(k, "could not queue the job");
        }
}

static void handle_drain(struct conn *k, json_t *req)
{
        struct control *c = k->control;
        struct na_error err = NA_ERROR_INIT;
        bool on;
        _cleanup_json_ json_t *drain = NULL;
        if (control_drain_decode(req, &on, &err) == 0) {
                if (!c->ops->set_drain)
                        na_error_set(&err, EOPNOTSUPP, NA_E_INTERNAL, "this agent cannot drain");
                else
                        drain = c->ops->set_drain(c->userdata, on, &err);
        }
        if (!drain) {
                send_error(k, "drain: %s", err.message[0] ? err.message : "failed");
                na_error_clear(&err);
                return;
        }
        json_t *o = json_pack("{s:b, s:O}", "ok", 1, "drain", drain);
        conn_send(k, o);
        json_decref(o);
}

static void handle_line(struct conn *k, const char *line, size_t len)
{
        struct control *c = k->control;
        struct na_error err = NA_ERROR_INIT;
        enum control_cmd cmd;
        _cleanup_json_ json_t *req = NULL;
        if (control_request_parse(line, len, &cmd, &req, &err) < 0) {
                send_error(k, "%s", err.message);
                na_error_clear(&err);
                return;
        }
        switch (cmd) {
        case CONTROL_CMD_STATUS: {
                json_t *o = json_pack("{s:b, s:o}", "ok", 1, "status", c->ops->status(c->userdata));
                conn_send(k, o);
                json_decref(o);
                break;
        }
        case CONTROL_CMD_JOBS: {
                json_t *o = json_pack("{s:b, s:o}", "ok", 1, "jobs", jobs_list_json(c->jobs));
                conn_send(k, o);
                json_decref(o);
                break;
        }
        case CONTROL_CMD_RUN:
                handle_run(k, req);
                break;
        case CONTROL_CMD_APPS:
        case CONTROL_CMD_LOGS:
                handle_apps(k, control_cmd_name(cmd), req);
                break;
        case CONTROL_CMD_DRAIN:
                handle_drain(k, req);
                break;
        }
}

static void conn_io(void *userdata, int fd, uint32_t revents)
{
        struct conn *k = userdata;
        if (revents & EPOLLOUT)
                conn_flush(k);
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                for (;;) {
                        if (k->in_cap - k->in_len < 4096) {
                                size_t cap = k->in_cap ? k->in_cap * 2 : 8192;
                                char *n = realloc(k->in, cap);
                                if (!n) {
                                        k->closing = true;
                                        break;
                                }
                                k->in = n;
                                k->in_cap = cap;
                        }
                        ssize_t n = recv(fd, k->in + k->in_len, k->in_cap - k->in_len, MSG_DONTWAIT);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                break;
                        if (n <= 0) {
                                k->closing = true;
                                break;
                        }
                        k->in_len += (size_t)n;
                        char *start = k->in, *nl;
                        while ((nl = memchr(start, '\n', k->in_len - (size_t)(start - k->in)))) {
                                if (nl > start)
                                        handle_line(k, start, (size_t)(nl - start));
                                start = nl + 1;
                        }
                        size_t rest = k->in_len - (size_t)(start - k->in);
                        memmove(k->in, start, rest);
                        k->in_len = rest;
                        if (k->in_len > LINE_MAX_BYTES) {
                                send_error(k, "request line longer than %u bytes", LINE_MAX_BYTES);
                                k->closing = true;
                                break;
                        }
                }
        }
        if (k->closing && k->out_len == 0)
                conn_free(k);
}

static void listen_io(void *userdata, int fd, uint32_t revents);

static void accept_resume(void *userdata)
{
        struct control *c = userdata;
        loop_watch(c->loop, c->listen_fd, EPOLLIN, listen_io, c, NULL);
}

static void listen_io(void *userdata, int fd, uint32_t revents)
{
        struct control *c = userdata;
        for (;;) {
                int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (cfd < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED && c->accept_pause) {
                                /* EMFILE and friends: the socket stays readable; pause, do not spin. */
                                log_warn("control socket: accept: %s; pausing for 200 ms", strerror(errno));
                                loop_unwatch(c->loop, fd);
                                loop_timer_arm_ms(c->accept_pause, 200);
                        }
                        return;
                }
                struct conn *k = calloc(1, sizeof(*k));
                if (!k) {
                        close(cfd);
                        return;
                }
                k->control = c;
                k->fd = cfd;
                k->id = ++c->next_id;
                if (loop_watch(c->loop, cfd, EPOLLIN, conn_io, k, NULL) < 0) {
                        close(cfd);
                        free(k);
                        continue;
                }
                k->next = c->conns;
                c->conns = k;
        }
}

int control_open(struct loop *loop, struct jobs *jobs, const char *path, const struct control_ops *ops,
                 void *userdata, struct control **ret, struct na_error *err)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "control socket %s: path too long", path);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);

        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return na_error_sys(err, ENOMEM, "control socket");
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                int r = na_mkdir_p(dir, 0755, err);
                if (r < 0)
                        return na_error_prefix(err, "control socket %s", path);
        }

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return na_error_sys(err, errno, "control socket %s", path);
        /* A socket file left by a crashed agent: remove it only if nobody answers. */
        struct stat st;
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return na_error_set(err, EEXIST, NA_E_INTERNAL, "control socket %s: exists and is not a socket", path);
                _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        return na_error_set(err, EADDRINUSE, NA_E_INTERNAL, "control socket %s: another agent is listening", path);
                unlink(path);
        }
        /* Bound under a temporary name, given its mode, then renamed into place: no
         * process-wide umask() (threads run already), and never a moment where the
         * socket answers at the real path with a wider mode. */
        struct sockaddr_un tmp = { .sun_family = AF_UNIX };
        if ((size_t)snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.%d.tmp", path, (int)getpid()) >= sizeof(tmp.sun_path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "control socket %s: path too long", path);
        unlink(tmp.sun_path);
        if (bind(fd, (struct sockaddr *)&tmp, sizeof(tmp)) < 0)
                return na_error_sys(err, errno, "control socket %s: bind", path);
        if (chmod(tmp.sun_path, 0660) < 0 || rename(tmp.sun_path, path) < 0) {
                int e = errno;
                unlink(tmp.sun_path);
                return na_error_sys(err, e, "control socket %s: mode and name", path);
        }
        if (listen(fd, 16) < 0)
                return na_error_sys(err, errno, "control socket %s: listen", path);
        int r;

        struct control *c = calloc(1, sizeof(*c));
        if (!c)
                return na_error_sys(err, ENOMEM, "control socket");
        c->loop = loop;
        c->jobs = jobs;
        c->ops = ops;
        c->userdata = userdata;
        c->path = strdup(path);
        r = control_apps_new(loop, apps_answered, c, &c->apps, err);
        if (r >= 0)
                r = loop_watch(loop, fd, EPOLLIN, listen_io, c, err);
        if (r < 0) {
                control_apps_free(c->apps);
                free(c->path);
                free(c);
                return r;
        }
        c->listen_fd = TAKE_FD(fd);
        c->accept_pause = loop_timer_new(loop, accept_resume, c);
        *ret = c;
        return 0;
}

void control_close(struct control *c)
{
        if (!c)
                return;
        control_apps_free(c->apps); /* waits for the driver calls under way */
        while (c->conns)
                conn_free(c->conns);
        loop_unwatch(c->loop, c->listen_fd);
        loop_timer_free(c->accept_pause);
        close(c->listen_fd);
        unlink(c->path);
        free(c->path);
        free(c);
}
