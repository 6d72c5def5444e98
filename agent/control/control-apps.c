/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/control/control-apps.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "agent/control/control-request.h"
#include "agent/base/services.h"
#include "agent/jobs/workers.h"
#include "common/json-cleanup.h"
#include "common/uuid.h"
#include "drivers/app.h"
#include "proto/app-params.h"
#include "proto/decode.h"

#define APPS_THREADS 2
#define APPS_MAX_IN_FLIGHT 32
#define APPS_CLOSE_WAIT_SEC 5 /* control_apps_free: how long a driver call may hold up the exit */

struct app_request {
        struct control_apps *ca;
        uint64_t conn_id;
        bool logs;
        const struct app_driver *drv;
        struct app_conn *conn;
        char app_id[NA_UUID_STRLEN + 1];
        int64_t since_seq; /* -1: the last `limit` lines */
        int64_t limit;
        json_t *answer; /* set by the worker */
        bool done;
        struct app_request *next; /* in ca->requests, newest first */
};

struct control_apps {
        struct loop *loop;
        struct workers *workers;
        int efd;
        control_apps_answer_fn answer;
        void *userdata;
        pthread_mutex_t lock;
        pthread_cond_t idle;          /* running went to 0 */
        struct app_request *requests; /* every request not delivered yet (under lock) */
        unsigned running;             /* requests inside the driver (under lock) */
        bool stopping;                /* control_apps_free began (under lock) */
        unsigned in_flight;           /* loop thread */
};

static bool stopping(struct control_apps *ca)
{
        pthread_mutex_lock(&ca->lock);
        bool s = ca->stopping;
        pthread_mutex_unlock(&ca->lock);
        return s;
}

static json_t *error_answer(const struct na_error *e)
{
        const char *code = e->code ? e->code : NA_E_INTERNAL;
        return json_pack("{s:b, s:s, s:s, s:o}", "ok", 0, "error", e->message, "code", code, "details",
                         na_error_to_json(e));
}

static json_t *message_answer(const char *message)
{
        return json_pack("{s:b, s:s}", "ok", 0, "error", message);
}

/* ---- on a worker thread ---- */

static json_t *apps_rows(struct app_request *r)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *inventory = NULL;
        if (r->drv->inventory(r->conn, &inventory, &err) < 0) {
                na_error_prefix(&err, "apps");
                return error_answer(&err);
        }
        _cleanup_json_ json_t *rows = json_array();
        if (!rows)
                return NULL;
        size_t i;
        json_t *item;
        json_array_foreach(inventory, i, item) {
                if (stopping(r->ca))
                        return message_answer("the agent is stopping");
                const char *id = json_string_value(json_object_get(item, "id"));
                if (!id)
                        continue;
                _cleanup_json_ json_t *row = json_is_object(item) ? json_deep_copy(item) : NULL;
                if (!row)
                        return NULL;
                struct proto_app_status st = { 0 };
                _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
                if (r->drv->status(r->conn, id, &st, &e) < 0) {
                        if (streq_ptr(e.code, NA_E_APP_NOT_FOUND))
                                continue; /* deleted since the inventory */
                        json_object_set_new(row, "error", json_pack("{s:s, s:s}", "code", e.code ? e.code : NA_E_INTERNAL,
                                                                    "message", e.message));
                } else {
                        _cleanup_json_ json_t *s = proto_app_status_encode(&st);
                        if (!s || json_object_update(row, s) < 0)
                                return NULL;
                }
                if (json_array_append(rows, row) < 0)
                        return NULL;
        }
        return json_pack("{s:b, s:O}", "ok", 1, "apps", rows);
}

static json_t *logs_answer(struct app_request *r)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *out = NULL;
        if (r->drv->output(r->conn, r->app_id, r->since_seq, r->limit, &out, &err) < 0) {
                if (!strstr(err.message, r->app_id))
                        na_error_prefix(&err, "app %s", r->app_id);
                return error_answer(&err);
        }
        json_t *lines = json_object_get(out, "lines");
        json_t *next = json_object_get(out, "nextSeq");
        if (!json_is_array(lines) || !json_is_integer(next)) {
                struct na_error bad = NA_ERROR_INIT;
                na_error_set(&bad, EPROTO, NA_E_INTERNAL, "app %s: the driver's output has no lines or nextSeq",
                             r->app_id);
                json_t *a = error_answer(&bad);
                na_error_clear(&bad);
                return a;
        }
        return json_pack("{s:b, s:O, s:O}", "ok", 1, "lines", lines, "nextSeq", next);
}

static void request_run(void *userdata)
{
        struct app_request *r = userdata;
        struct control_apps *ca = r->ca;
        pthread_mutex_lock(&ca->lock);
        bool skip = ca->stopping;
        ca->running += !skip;
        pthread_mutex_unlock(&ca->lock);
        json_t *answer = skip ? message_answer("the agent is stopping") : r->logs ? logs_answer(r) : apps_rows(r);
        if (!answer)
                answer = message_answer("out of memory");
        pthread_mutex_lock(&ca->lock);
        r->answer = answer;
        r->done = true;
        if (!skip && --ca->running == 0)
                pthread_cond_broadcast(&ca->idle);
        pthread_mutex_unlock(&ca->lock);
        uint64_t one = 1;
        (void)!write(ca->efd, &one, sizeof(one));
}

/* ---- on the loop thread ---- */

static void deliver(void *userdata, int fd, uint32_t revents)
{
        struct control_apps *ca = userdata;
        (void)revents;
        uint64_t n;
        (void)!read(fd, &n, sizeof(n));
        for (;;) {
                /* The oldest finished request first: answers keep their order where they can. */
                struct app_request *r = NULL, **rp = NULL;
                pthread_mutex_lock(&ca->lock);
                for (struct app_request **pp = &ca->requests; *pp; pp = &(*pp)->next)
                        if ((*pp)->done) {
                                r = *pp;
                                rp = pp;
                        }
                if (r)
                        *rp = r->next;
                pthread_mutex_unlock(&ca->lock);
                if (!r)
                        return;
                ca->in_flight--;
                ca->answer(ca->userdata, r->conn_id, r->answer);
                json_decref(r->answer);
                free(r);
        }
}

bool control_apps_handles(const char *cmd)
{
        return streq(cmd, "apps") || streq(cmd, "logs");
}

json_t *control_apps_submit(struct control_apps *ca, uint64_t conn_id, const struct agent_services *s,
                            const char *cmd, json_t *req)
{
        if (!s || !s->app) {
                char msg[640];
                snprintf(msg, sizeof(msg), "apps are not enabled on this node%s%s", s && s->apps_off_reason[0] ? ": " : "",
                         s ? s->apps_off_reason : "");
                return message_answer(msg);
        }
        _cleanup_free_ struct app_request *r = calloc(1, sizeof(*r));
        if (!r)
                return message_answer("out of memory");
        r->ca = ca;
        r->conn_id = conn_id;
        r->drv = s->app;
        r->conn = s->app_conn;
        r->logs = streq(cmd, "logs");
        r->since_seq = -1;
        r->limit = PROTO_APP_OUTPUT_LIMIT_DEFAULT;
        if (r->logs) {
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                struct control_logs_request lr;
                if (control_logs_decode(req, &lr, &err) < 0)
                        return error_answer(&err);
                snprintf(r->app_id, sizeof(r->app_id), "%s", lr.app_id);
                r->since_seq = lr.since_seq;
                r->limit = lr.limit;
        }
        if (ca->in_flight >= APPS_MAX_IN_FLIGHT)
                return message_answer("too many app requests under way; try again");
        pthread_mutex_lock(&ca->lock);
        r->next = ca->requests;
        ca->requests = r;
        pthread_mutex_unlock(&ca->lock);
        if (workers_submit(ca->workers, request_run, r) < 0) {
                pthread_mutex_lock(&ca->lock);
                ca->requests = r->next;
                pthread_mutex_unlock(&ca->lock);
                return message_answer("out of memory");
        }
        ca->in_flight++;
        TAKE_PTR(r);
        return NULL;
}

int control_apps_new(struct loop *loop, control_apps_answer_fn answer, void *userdata, struct control_apps **ret,
                     struct na_error *err)
{
        struct control_apps *ca = calloc(1, sizeof(*ca));
        if (!ca)
                return na_error_sys(err, ENOMEM, "control socket: app requests");
        ca->loop = loop;
        ca->answer = answer;
        ca->userdata = userdata;
        pthread_mutex_init(&ca->lock, NULL);
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&ca->idle, &attr);
        pthread_condattr_destroy(&attr);
        ca->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ca->efd < 0) {
                int r = na_error_sys(err, errno, "control socket: app requests: eventfd");
                control_apps_free(ca);
                return r;
        }
        int r = workers_new(APPS_THREADS, &ca->workers, err);
        if (r >= 0)
                r = loop_watch(loop, ca->efd, EPOLLIN, deliver, ca, err);
        if (r < 0) {
                control_apps_free(ca);
                return na_error_prefix(err, "control socket: app requests");
        }
        *ret = ca;
        return 0;
}

void control_apps_free(struct control_apps *ca)
{
        if (!ca)
                return;
        /* Driver calls under way get a few seconds (apps stops between two apps). */
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += APPS_CLOSE_WAIT_SEC;
        pthread_mutex_lock(&ca->lock);
        ca->stopping = true;
        while (ca->running > 0 && pthread_cond_timedwait(&ca->idle, &ca->lock, &deadline) == 0)
                ;
        bool stuck = ca->running > 0;
        pthread_mutex_unlock(&ca->lock);
        if (ca->efd >= 0)
                loop_unwatch(ca->loop, ca->efd);
        if (stuck) {
                /* A thread stuck in the driver is left to the process exit, and so is
                 * what it may still touch (ca, its request, the eventfd). */
                workers_free(ca->workers, false);
                return;
        }
        /* Joined: no worker touches a request any more; those never started were dropped. */
        workers_free(ca->workers, true);
        while (ca->requests) {
                struct app_request *r = ca->requests;
                ca->requests = r->next;
                json_decref(r->answer);
                free(r);
        }
        if (ca->efd >= 0)
                close(ca->efd);
        pthread_cond_destroy(&ca->idle);
        pthread_mutex_destroy(&ca->lock);
        free(ca);
}
