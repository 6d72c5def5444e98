#include "agent/link.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>

#include "agent/backoff.h"
#include "agent/http.h"
#include "agent/log.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/job.h"
#include "proto/wire.h"

#define RESULTS_IN_FLIGHT_MAX 8
#define TOKEN_MAX 4096

enum link_state { LINK_CONNECTING, LINK_CONNECTED, LINK_BACKOFF, LINK_AUTH_REFUSED };
static const char *const state_names[] = { "connecting", "connected", "backing-off", "auth-refused" };

/* A remote job while it is queued or running here. */
struct link_job {
        struct link *link;
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;         /* the latest attempt the central API offered */
        struct job_ctx *job;
        struct loop_timer *keepalive;
        uint64_t last_progress_us;
        struct job_progress_info pending[2 * JOB_PROGRESS_LOG]; /* to post, oldest first */
        size_t npending;
        struct job_progress_info last; /* what the keepalive repeats */
        bool progress_in_flight;
        bool dropped;            /* 404/409: post nothing more */
        bool done;               /* the job ended: only its last progress and result remain */
        json_t *result;          /* held until the last stages are posted */
        bool journaled;
        struct link_job *prev, *next;
};

/* A result waiting to be posted, oldest first. */
struct outgoing {
        struct link *link;
        char id[PROTO_ID_MAX + 1];
        char *body;
        bool journaled;
        struct outgoing *next;
};

struct link {
        struct loop *loop;
        struct http *http;
        struct link_options opt;
        char base[2048];
        const char *node_id;

        enum link_state state;
        char cause[80];   /* what the failure was, without which request met it */
        char reason[300];
        char auth_code[48];
        uint64_t state_since_ms, retry_at_ms;
        struct backoff backoff;
        struct loop_timer *retry_timer, *report_timer;

        bool started, draining;
        bool hello_in_flight, poll_in_flight, report_in_flight;
        atomic_bool event_posted;

        int64_t poll_wait_sec, lease_sec, report_interval_sec;

        struct outgoing *out_head, *out_tail;
        unsigned results_in_flight;
        atomic_uint results_pending;

        struct link_job *jobs;

        char *token;
        int inotify_fd, inotify_wd;
        char token_dir[PATH_MAX], token_base[NAME_MAX + 1];

        uint64_t requests, failures;
};

static void maybe_poll(struct link *l);
static void send_results(struct link *l);
static void send_report(struct link *l);
static void send_hello(struct link *l);
static void post_progress(struct link_job *lj);

/* ---- state ---- */

const char *link_state_name(struct link *l)
{
        return state_names[l->state];
}

/*
 * Log once per change: of state, or of cause (an HTTP status and code, or a transport
 * error), never once per try nor because another request met the same cause.
 */
static void set_state(struct link *l, enum link_state s, const char *cause, const char *reason, const char *auth_code)
{
        bool changed = l->state != s || !streq(l->cause, cause ? cause : "");
        l->state = s;
        snprintf(l->cause, sizeof(l->cause), "%s", cause ? cause : "");
        snprintf(l->reason, sizeof(l->reason), "%s", reason ? reason : "");
        snprintf(l->auth_code, sizeof(l->auth_code), "%s", auth_code ? auth_code : "");
        if (!changed)
                return;
        l->state_since_ms = na_now_real_ms();
        switch (s) {
        case LINK_CONNECTED:
                log_info("controller link: connected to %s", l->base);
                break;
        case LINK_BACKOFF:
                log_warn("controller link: %s; backing off (retrying with jitter, at most every %u s)", l->reason,
                         BACKOFF_CAP_MS / 1000);
                break;
        case LINK_AUTH_REFUSED:
                log_error("controller link: authentication refused (%s): %s; re-reading the token file, retrying at "
                          "most every %u s",
                          l->auth_code, l->reason, BACKOFF_AUTH_CAP_MS / 1000);
                break;
        case LINK_CONNECTING:
                break;
        }
}

static void retry_fired(void *userdata)
{
        struct link *l = userdata;
        send_hello(l);
}

/* A request failed in a way that takes the whole link down for a while. */
static void link_failed(struct link *l, const char *what, const struct http_response *resp, const char *code)
{
        l->failures++;
        bool auth = resp->status == 401 || resp->status == 403;
        char reason[300], cause[80];
        if (resp->status)
                snprintf(cause, sizeof(cause), "HTTP %ld%s%s", resp->status, code && *code ? " " : "", code ? code : "");
        else
                snprintf(cause, sizeof(cause), "transport %d", resp->transport_code);
        snprintf(reason, sizeof(reason), "%s: %s", what, resp->status ? cause : resp->error);
        if (l->state == LINK_BACKOFF || l->state == LINK_AUTH_REFUSED) {
                if (loop_timer_armed(l->retry_timer))
                        return; /* already waiting: other requests failing meanwhile change nothing */
        }
        uint32_t rnd = 0;
        (void)!getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK);
        uint64_t delay = backoff_next_ms(&l->backoff, auth ? BACKOFF_AUTH_CAP_MS : BACKOFF_CAP_MS, resp->retry_after_sec, rnd);
        l->retry_at_ms = na_now_real_ms() + delay;
        set_state(l, auth ? LINK_AUTH_REFUSED : LINK_BACKOFF, cause, reason, auth ? (code && *code ? code : "HTTP") : NULL);
        log_debug("controller link: next try in %llu ms", (unsigned long long)delay);
        if (auth)
                link_reload_token(l);
        loop_timer_arm_ms(l->retry_timer, delay);
}

static bool transient(long status)
{
        return status == 0 || status == 408 || status == 429 || status >= 500;
}

/* Decode an answer; returns the envelope root (caller decrefs) or NULL with code filled. */
static json_t *answer(const struct http_response *resp, struct proto_envelope *env, char *code, size_t code_len)
{
        json_t *root = NULL;
        struct na_error err = NA_ERROR_INIT;
        code[0] = '\0';
        if (resp->status && proto_envelope_decode(resp->body, resp->body_len, &root, env, &err) == 0) {
                snprintf(code, code_len, "%s", env->success ? "" : env->code);
        } else
                memset(env, 0, sizeof(*env));
        na_error_clear(&err);
        return root;
}

/* base + "/<collection>/<id>/<what>" (ids are checked URL-safe when decoded). */
static void url(struct link *l, char *buf, size_t len, const char *collection, const char *id, const char *what)
{
        snprintf(buf, len, "%s/%s/%s%s%s", l->base, collection, id, what ? "/" : "", what ? what : "");
}

/* ---- token ---- */

static int read_token(struct link *l, char **ret, struct na_error *err)
{
        int r = config_check_token_file(l->opt.cfg->token_file, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *text = NULL;
        r = na_read_file(l->opt.cfg->token_file, TOKEN_MAX + 2, &text, NULL, err);
        if (r < 0)
                return r;
        text[strcspn(text, "\r\n")] = '\0';
        size_t n = strlen(text);
        if (n == 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "token file %s: empty first line", l->opt.cfg->token_file);
        for (size_t i = 0; i < n; i++)
                if (text[i] <= ' ' || text[i] > '~')
                        return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                            "token file %s: the token must be printable ASCII without spaces",
                                            l->opt.cfg->token_file);
        *ret = TAKE_PTR(text);
        return 0;
}

void link_reload_token(struct link *l)
{
        struct na_error err = NA_ERROR_INIT;
        char *token = NULL;
        if (read_token(l, &token, &err) < 0) {
                log_error("controller link: %s; keeping the token in use", err.message);
                na_error_clear(&err);
                return;
        }
        if (l->token && streq(l->token, token)) {
                free(token);
                return;
        }
        bool first = !l->token;
        free(l->token);
        l->token = token;
        http_set_token(l->http, token);
        if (!first) {
                log_info("controller link: token file %s changed; using the new token", l->opt.cfg->token_file);
                if (l->state == LINK_AUTH_REFUSED) {
                        loop_timer_disarm(l->retry_timer);
                        send_hello(l); /* a rotated token is worth trying at once */
                }
        }
}

static void inotify_event(void *userdata, int fd, uint32_t revents)
{
        struct link *l = userdata;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool ours = false;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *)p;
                        if (ev->len && streq(ev->name, l->token_base))
                                ours = true;
                        p += sizeof(*ev) + ev->len;
                }
        }
        if (ours)
                link_reload_token(l);
}

static void watch_token(struct link *l)
{
        snprintf(l->token_dir, sizeof(l->token_dir), "%s", l->opt.cfg->token_file);
        char *slash = strrchr(l->token_dir, '/');
        if (!slash)
                return;
        snprintf(l->token_base, sizeof(l->token_base), "%s", slash + 1);
        *(slash == l->token_dir ? slash + 1 : slash) = '\0';
        l->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (l->inotify_fd < 0)
                return;
        l->inotify_wd = inotify_add_watch(l->inotify_fd, l->token_dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ATTRIB);
        if (l->inotify_wd < 0 || loop_watch(l->loop, l->inotify_fd, EPOLLIN, inotify_event, l, NULL) < 0) {
                log_warn("controller link: cannot watch %s for token rotation; the token is re-read after a 401 "
                         "and on SIGHUP",
                         l->token_dir);
                close(l->inotify_fd);
                l->inotify_fd = -1;
        }
}

/* ---- results ---- */

static void outgoing_free(struct outgoing *o)
{
        free(o->body);
        free(o);
}

static void queue_result(struct link *l, const char *id, json_t *result, int64_t attempt, bool journaled, bool front)
{
        struct outgoing *o = calloc(1, sizeof(*o));
        if (!o)
                return;
        _cleanup_json_ json_t *copy = json_copy(result);
        if (copy && attempt > 0)
                json_object_set_new(copy, "attempt", json_integer(attempt));
        o->body = copy ? json_dumps(copy, JSON_COMPACT) : NULL;
        if (!o->body) {
                free(o);
                return;
        }
        o->link = l;
        snprintf(o->id, sizeof(o->id), "%s", id);
        o->journaled = journaled;
        if (front) {
                o->next = l->out_head;
                l->out_head = o;
                if (!l->out_tail)
                        l->out_tail = o;
        } else {
                if (l->out_tail)
                        l->out_tail->next = o;
                else
                        l->out_head = o;
                l->out_tail = o;
        }
        atomic_fetch_add(&l->results_pending, 1);
}

static bool result_queued(struct link *l, const char *id)
{
        for (struct outgoing *o = l->out_head; o; o = o->next)
                if (streq(o->id, id))
                        return true;
        return false;
}

static void result_done(void *userdata, const struct http_response *resp)
{
        struct outgoing *o = userdata;
        struct link *l = o->link;
        l->results_in_flight--;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = answer(resp, &env, code, sizeof(code));

        if (resp->status >= 200 && resp->status < 300) {
                log_debug("job %s: result taken by the central API", o->id);
        } else if (resp->status == 404 || resp->status == 409) {
                log_warn("job %s: the central API refused its result (HTTP %ld %s); dropped", o->id, resp->status, code);
        } else if (transient(resp->status) || resp->status == 401 || resp->status == 403) {
                /* Back in front: still the oldest. */
                o->next = l->out_head;
                l->out_head = o;
                if (!l->out_tail)
                        l->out_tail = o;
                link_failed(l, "result", resp, code);
                return;
        } else {
                log_error("job %s: the central API rejected its result (HTTP %ld %s: %s); dropped, it would be "
                          "rejected again",
                          o->id, resp->status, code, env.error ? env.error : "");
        }
        if (o->journaled)
                jobstore_record_acked(l->opt.store, o->id);
        atomic_fetch_sub(&l->results_pending, 1);
        outgoing_free(o);
        send_results(l);
        maybe_poll(l);
}

static void send_results(struct link *l)
{
        while (l->state == LINK_CONNECTED && l->out_head && l->results_in_flight < RESULTS_IN_FLIGHT_MAX) {
                struct outgoing *o = l->out_head;
                l->out_head = o->next;
                if (!l->out_head)
                        l->out_tail = NULL;
                o->next = NULL;
                char u[2600];
                url(l, u, sizeof(u), "jobs", o->id, "result");
                l->results_in_flight++;
                l->requests++;
                if (http_request(l->http, "POST", u, o->body, 30000, result_done, o) < 0) {
                        l->results_in_flight--;
                        o->next = l->out_head;
                        l->out_head = o;
                        if (!l->out_tail)
                                l->out_tail = o;
                        break;
                }
        }
}

static void requeue_from_journal(void *userdata, const char *id, json_t *result)
{
        struct link *l = userdata;
        if (!result_queued(l, id))
                queue_result(l, id, result, 0, true, false);
}

/* ---- remote jobs ---- */

static void link_job_free(struct link_job *lj)
{
        struct link *l = lj->link;
        if (lj->prev)
                lj->prev->next = lj->next;
        else if (l->jobs == lj)
                l->jobs = lj->next;
        if (lj->next)
                lj->next->prev = lj->prev;
        loop_timer_free(lj->keepalive);
        if (lj->result)
                json_decref(lj->result);
        free(lj);
}

/* Take the job's new progress into our own queue (the job may end before it is posted). */
static void take_progress(struct link_job *lj)
{
        if (!lj->job)
                return;
        struct job_progress_info got[JOB_PROGRESS_LOG];
        size_t n = job_progress_take(lj->job, got, JOB_PROGRESS_LOG);
        for (size_t i = 0; i < n; i++) {
                if (lj->npending && streq(lj->pending[lj->npending - 1].stage, got[i].stage))
                        lj->pending[lj->npending - 1] = got[i]; /* the same stage: the latest wins */
                else if (lj->npending < ARRAY_SIZE(lj->pending))
                        lj->pending[lj->npending++] = got[i];
                else
                        lj->pending[lj->npending - 1] = got[i];
        }
}

/* The job ended and its progress is out (or cannot go out now): its result goes. */
static void finish(struct link_job *lj)
{
        struct link *l = lj->link;
        if (lj->result && !lj->dropped)
                queue_result(l, lj->id, lj->result, lj->attempt, lj->journaled, false);
        else if (lj->result && lj->journaled)
                jobstore_record_acked(l->opt.store, lj->id);
        link_job_free(lj);
        send_results(l);
}

static void progress_done(void *userdata, const struct http_response *resp)
{
        struct link_job *lj = userdata;
        struct link *l = lj->link;
        lj->progress_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = answer(resp, &env, code, sizeof(code));

        if (resp->status >= 200 && resp->status < 300) {
                /* leaseExpiresAt is the central API's business; keepalives follow leaseSec/3. */
        } else if (resp->status == 409 && streq(code, NA_E_JOB_CANCELLED)) {
                if (!lj->done && lj->job) {
                        log_job(LOG_LEVEL_WARN, lj->id, lj->job->target_key, "cancelled by the central API; stopping at the next safe point");
                        jobs_request_stop(lj->job, JOB_STOP_CANCELLED);
                }
        } else if (resp->status == 404 || resp->status == 409) {
                log_job(LOG_LEVEL_WARN, lj->id, lj->job && !lj->done ? lj->job->target_key : NULL,
                        "the central API no longer holds this job (HTTP %ld %s); stopping it, its result will not be sent",
                        resp->status, code);
                lj->dropped = true;
                if (!lj->done && lj->job)
                        jobs_request_stop(lj->job, JOB_STOP_LEASE_LOST);
        } else if (transient(resp->status) || resp->status == 401 || resp->status == 403) {
                link_failed(l, "progress", resp, code);
        }
        if (lj->npending && !lj->dropped && l->state == LINK_CONNECTED)
                post_progress(lj);
        else if (lj->done)
                finish(lj);
}

/* Post the oldest progress not posted yet, or, as a keepalive, the last one again. */
static void post_progress(struct link_job *lj)
{
        struct link *l = lj->link;
        if (lj->dropped || lj->progress_in_flight || l->state != LINK_CONNECTED)
                return; /* in flight: progress_done posts the next; down: the keepalive tries again */
        struct job_progress_info p = lj->last;
        if (lj->npending) {
                p = lj->pending[0];
                memmove(lj->pending, lj->pending + 1, (lj->npending - 1) * sizeof(p));
                lj->npending--;
                lj->last = p;
        }
        _cleanup_json_ json_t *body = proto_progress_encode(lj->attempt, p.stage[0] ? p.stage : NULL, p.percent,
                                                            p.message);
        _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
        char u[2600];
        url(l, u, sizeof(u), "jobs", lj->id, "progress");
        lj->last_progress_us = na_now_mono_us();
        l->requests++;
        if (text && http_request(l->http, "POST", u, text, 15000, progress_done, lj) == 0)
                lj->progress_in_flight = true;
}

static uint64_t keepalive_ms(const struct link *l)
{
        uint64_t ms = (uint64_t)l->lease_sec * 1000 / 3;
        return ms < 1000 ? 1000 : ms;
}

static void keepalive_fired(void *userdata)
{
        struct link_job *lj = userdata;
        uint64_t since = (na_now_mono_us() - lj->last_progress_us) / 1000;
        if (since + 50 >= keepalive_ms(lj->link) && !lj->done)
                post_progress(lj);
        loop_timer_arm_ms(lj->keepalive, keepalive_ms(lj->link));
}

static int remote_before_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        struct link_job *lj = userdata;
        if (!job->kind || !job->kind->changes)
                return 0;
        int r = jobstore_record_start(lj->link->opt.store, &job->pj, job->target_key, err);
        return r < 0 ? na_error_prefix(err, "job %s: cannot record it before its first effect", job->pj.id) : 0;
}

static int remote_after_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        struct link_job *lj = userdata;
        if (!job->kind || !job->kind->changes || !job->result)
                return 0;
        int r = jobstore_record_result(lj->link->opt.store, job->pj.id, job->pj.attempt, job->result, err);
        return r < 0 ? na_error_prefix(err, "job %s: cannot record its result", job->pj.id) : 0;
}

static void remote_progress(void *userdata, struct job_ctx *job)
{
        struct link_job *lj = userdata;
        take_progress(lj);
        if (!lj->keepalive) {
                lj->keepalive = loop_timer_new(lj->link->loop, keepalive_fired, lj);
                if (lj->keepalive)
                        loop_timer_arm_ms(lj->keepalive, keepalive_ms(lj->link));
        }
        post_progress(lj);
}

static void remote_finished(void *userdata, struct job_ctx *job)
{
        struct link_job *lj = userdata;
        struct link *l = lj->link;
        uint64_t ms = job->started_us && job->finished_us > job->started_us ? (job->finished_us - job->started_us) / 1000 : 0;
        bool journaled = job->kind && job->kind->changes;

        if (job->state == JOB_ABANDONED)
                log_job(LOG_LEVEL_WARN, job->pj.id, job->target_key, "%s abandoned: %s", job->pj.kind, job->error.message);
        else if (job->state == JOB_SUCCEEDED)
                log_job(LOG_LEVEL_INFO, job->pj.id, job->target_key, "%s succeeded in %llu ms", job->pj.kind,
                        (unsigned long long)ms);
        else
                log_job(LOG_LEVEL_WARN, job->pj.id, job->target_key, "%s failed (%s): %s", job->pj.kind,
                        job->error.code ? job->error.code : "?", job->error.message);

        /* The last stages go out before the result; a link that is down sends the result first. */
        take_progress(lj);
        if (job->state != JOB_ABANDONED && job->result) {
                lj->result = json_incref(job->result);
                lj->journaled = journaled;
        }
        lj->done = true;
        lj->job = NULL;
        loop_timer_free(lj->keepalive);
        lj->keepalive = NULL;
        if (!lj->progress_in_flight) { /* else progress_done carries on */
                if (lj->npending && !lj->dropped && l->state == LINK_CONNECTED)
                        post_progress(lj);
                else
                        finish(lj);
        }
        maybe_poll(l);
}

static const struct job_sink remote_sink = {
        .before_run = remote_before_run,
        .after_run = remote_after_run,
        .progress = remote_progress,
        .finished = remote_finished,
};

static struct link_job *link_job_new(struct link *l, const struct proto_job *pj)
{
        struct link_job *lj = calloc(1, sizeof(*lj));
        if (!lj)
                return NULL;
        lj->link = l;
        snprintf(lj->id, sizeof(lj->id), "%s", pj->id);
        lj->attempt = pj->attempt;
        lj->last_progress_us = na_now_mono_us();
        lj->next = l->jobs;
        if (l->jobs)
                l->jobs->prev = lj;
        l->jobs = lj;
        return lj;
}

static struct link_job *link_job_find(struct link *l, const char *id)
{
        for (struct link_job *lj = l->jobs; lj; lj = lj->next)
                if (!lj->done && streq(lj->id, id))
                        return lj;
        return NULL;
}

static void take_job(struct link *l, json_t *item)
{
        struct proto_job pj;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_job_decode(item, &pj, &err);
        if (r == -EBADMSG) {
                log_error("controller link: a job without a usable id was refused: %s", err.message);
                na_error_clear(&err);
                return;
        }

        /* Exactly one effect per id: a recorded result answers a re-offer. */
        json_t *recorded = NULL;
        enum jobrec_state st = jobstore_get(l->opt.store, pj.id, &recorded);
        if (st == JOBREC_RESULT || st == JOBREC_ACKED) {
                log_job(LOG_LEVEL_INFO, pj.id, NULL, "offered again (attempt %lld); answered from the journal without running",
                        (long long)pj.attempt);
                if (!result_queued(l, pj.id))
                        queue_result(l, pj.id, recorded, pj.attempt, true, false);
                json_decref(recorded);
                proto_job_clear(&pj);
                na_error_clear(&err);
                return;
        }
        json_decref(recorded);
        struct link_job *active = link_job_find(l, pj.id);
        if (active || result_queued(l, pj.id)) {
                if (active && pj.attempt > active->attempt)
                        active->attempt = pj.attempt;
                log_job(LOG_LEVEL_DEBUG, pj.id, NULL, "offered again while still here (attempt %lld)", (long long)pj.attempt);
                proto_job_clear(&pj);
                na_error_clear(&err);
                return;
        }

        struct link_job *lj = link_job_new(l, &pj);
        if (!lj) {
                proto_job_clear(&pj);
                na_error_clear(&err);
                return;
        }
        char id[PROTO_ID_MAX + 1], kind[PROTO_KIND_MAX + 1];
        snprintf(id, sizeof(id), "%s", pj.id);
        snprintf(kind, sizeof(kind), "%s", pj.kind);
        if (r < 0) {
                log_job(LOG_LEVEL_WARN, id, NULL, "malformed job refused: %s", err.message);
                lj->job = jobs_submit_failed(l->opt.jobs, &pj, &err, &remote_sink, lj);
        } else {
                log_job(LOG_LEVEL_DEBUG, id, NULL, "%s received (attempt %lld)", kind, (long long)pj.attempt);
                lj->job = jobs_submit(l->opt.jobs, &pj, &remote_sink, lj);
        }
        if (!lj->job) {
                proto_job_clear(&pj);
                link_job_free(lj);
        }
        na_error_clear(&err);
}

static int cmp_created(const void *a, const void *b)
{
        json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
        int64_t tx = 0, ty = 0;
        na_parse_time_ms(json_string_value(json_object_get(x, "createdAt")), &tx);
        na_parse_time_ms(json_string_value(json_object_get(y, "createdAt")), &ty);
        return tx < ty ? -1 : tx > ty;
}

/* ---- the long poll ---- */

static void poll_done(void *userdata, const struct http_response *resp)
{
        struct link *l = userdata;
        l->poll_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = answer(resp, &env, code, sizeof(code));

        if (resp->status != 200 || !root || !env.success || !json_is_array(env.data)) {
                if (resp->status == 200) {
                        struct http_response bad = *resp;
                        bad.status = 0;
                        bad.transport_code = -1; /* a protocol error of its own */
                        snprintf(bad.error, sizeof(bad.error), "the answer is not an envelope holding an array of jobs");
                        link_failed(l, "poll", &bad, NULL);
                } else
                        link_failed(l, "poll", resp, code);
                return;
        }
        backoff_reset(&l->backoff);
        size_t n = json_array_size(env.data);
        if (n) {
                json_t **items = calloc(n, sizeof(*items));
                for (size_t i = 0; items && i < n; i++)
                        items[i] = json_array_get(env.data, i);
                if (items) {
                        qsort(items, n, sizeof(*items), cmp_created);
                        for (size_t i = 0; i < n; i++)
                                take_job(l, items[i]);
                        free(items);
                }
        }
        send_results(l); /* re-offers answered from the journal */
        maybe_poll(l);
}

static void maybe_poll(struct link *l)
{
        if (l->state != LINK_CONNECTED || l->draining || l->poll_in_flight)
                return;
        unsigned max = jobs_max_parallel(l->opt.jobs), active = jobs_active(l->opt.jobs);
        if (active >= max)
                return;
        char u[2600];
        snprintf(u, sizeof(u), "%s/nodes/%s/jobs?wait=%lld&max=%u", l->base, l->node_id, (long long)l->poll_wait_sec,
                 max - active);
        l->requests++;
        if (http_request(l->http, "GET", u, NULL, (long)(l->poll_wait_sec + 10) * 1000, poll_done, l) == 0)
                l->poll_in_flight = true;
}

/* ---- reports ---- */

static void report_done(void *userdata, const struct http_response *resp)
{
        struct link *l = userdata;
        l->report_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = answer(resp, &env, code, sizeof(code));
        if (resp->status >= 200 && resp->status < 300 && root && env.success) {
                int64_t ack;
                struct na_error err = NA_ERROR_INIT;
                if (proto_ack_decode(env.data, &ack, &err) == 0)
                        reports_ack(l->opt.reports, ack);
                else
                        log_warn("controller link: report answer without a valid ackSeq: %s", err.message);
                na_error_clear(&err);
                send_report(l);
        } else if (transient(resp->status) || resp->status == 401 || resp->status == 403)
                link_failed(l, "report", resp, code);
        else
                log_error("controller link: report refused (HTTP %ld %s: %s); kept, retried with the next one", resp->status,
                          code, env.error ? env.error : "");
}

static void send_report(struct link *l)
{
        if (l->state != LINK_CONNECTED || l->report_in_flight)
                return;
        int64_t seq;
        _cleanup_free_ char *body = reports_oldest_body(l->opt.reports, na_now_real_ms(), &seq);
        if (!body)
                return;
        char u[2600];
        url(l, u, sizeof(u), "nodes", l->node_id, "reports");
        l->requests++;
        if (http_request(l->http, "POST", u, body, 30000, report_done, l) == 0)
                l->report_in_flight = true;
}

static void seal_report(struct link *l)
{
        _cleanup_json_ json_t *metrics = l->opt.metrics_samples ? l->opt.metrics_samples(l->opt.userdata) : NULL;
        reports_seal(l->opt.reports, metrics);
        send_report(l);
}

static void report_timer_fired(void *userdata)
{
        struct link *l = userdata;
        seal_report(l);
        loop_timer_arm_ms(l->report_timer, (uint64_t)l->report_interval_sec * 1000);
}

static void event_posted(void *userdata)
{
        struct link *l = userdata;
        atomic_store(&l->event_posted, false);
        seal_report(l);
}

void link_emit_event(struct link *l, json_t *event)
{
        reports_add_event(l->opt.reports, event);
        if (!atomic_exchange(&l->event_posted, true))
                loop_post(l->loop, event_posted, l);
}

/* ---- hello ---- */

static void apply_settings(struct link *l, json_t *data)
{
        struct proto_settings s;
        struct na_error err = NA_ERROR_INIT;
        if (proto_settings_decode(data, &s, &err) < 0)
                log_warn("controller link: settings partly ignored: %s", err.message);
        na_error_clear(&err);
        if (s.poll_wait_sec > 0)
                l->poll_wait_sec = s.poll_wait_sec;
        if (s.lease_sec > 0)
                l->lease_sec = s.lease_sec;
        if (s.report_interval_sec > 0 && s.report_interval_sec != l->report_interval_sec) {
                l->report_interval_sec = s.report_interval_sec;
                loop_timer_arm_ms(l->report_timer, (uint64_t)l->report_interval_sec * 1000);
        }
        if (s.max_jobs > 0 && (unsigned)s.max_jobs != jobs_max_parallel(l->opt.jobs)) {
                if (jobs_set_max_parallel(l->opt.jobs, (unsigned)s.max_jobs, &err) < 0)
                        log_error("controller link: maxJobs %lld not applied: %s", (long long)s.max_jobs, err.message);
                na_error_clear(&err);
        }
        if (l->opt.settings_applied)
                l->opt.settings_applied(l->opt.userdata, &s);
        log_debug("controller link: settings pollWaitSec=%lld leaseSec=%lld reportIntervalSec=%lld maxJobs=%u",
                  (long long)l->poll_wait_sec, (long long)l->lease_sec, (long long)l->report_interval_sec,
                  jobs_max_parallel(l->opt.jobs));
}

static void hello_done(void *userdata, const struct http_response *resp)
{
        struct link *l = userdata;
        l->hello_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = answer(resp, &env, code, sizeof(code));
        if (resp->status != 200 || !root || !env.success) {
                link_failed(l, "hello", resp, code);
                return;
        }
        backoff_reset(&l->backoff);
        set_state(l, LINK_CONNECTED, NULL, NULL, NULL);
        apply_settings(l, env.data);
        send_results(l);
        send_report(l);
        maybe_poll(l);
}

static void send_hello(struct link *l)
{
        if (l->hello_in_flight)
                return;
        if (l->state != LINK_CONNECTED && l->state != LINK_AUTH_REFUSED && l->state != LINK_BACKOFF)
                set_state(l, LINK_CONNECTING, NULL, NULL, NULL);
        struct proto_host host;
        hostinfo_to_proto(l->opt.host, &host);
        /* What this agent really has: no container runtime yet, and no firewall when it is off. */
        json_t *caps = json_pack("{s:o, s:s, s:s, s:s, s:s}", "jobKinds", job_kinds_json(), "vmDriver", "libvirt",
                                 "vmDriverUri", l->opt.cfg->vm_uri, "appDriver", "none", "firewall",
                                 l->opt.cfg->fw_enabled ? "nftables" : "none");
        json_t *inventory = l->opt.inventory ? l->opt.inventory(l->opt.userdata) : NULL;
        _cleanup_json_ json_t *hello = proto_hello_encode(NA_VERSION, l->opt.host->boot_id, &host, caps, inventory,
                                                          jobstore_unfinished_json(l->opt.store));
        _cleanup_free_ char *body = json_dumps(hello, JSON_COMPACT);
        char u[2600];
        url(l, u, sizeof(u), "nodes", l->node_id, "hello");
        l->requests++;
        if (body && http_request(l->http, "POST", u, body, 30000, hello_done, l) == 0)
                l->hello_in_flight = true;
}

/* ---- lifecycle ---- */

void link_start(struct link *l)
{
        l->started = true;
        jobstore_foreach_pending(l->opt.store, requeue_from_journal, l);
        unsigned pending = atomic_load(&l->results_pending);
        if (pending)
                log_info("controller link: %u result(s) recorded by an earlier run will be sent first", pending);
        loop_timer_arm_ms(l->report_timer, (uint64_t)l->report_interval_sec * 1000);
        send_hello(l);
}

void link_drain(struct link *l)
{
        l->draining = true;
}

bool link_idle(struct link *l)
{
        if (l->state != LINK_CONNECTED)
                return true;
        bool progress = false;
        for (struct link_job *lj = l->jobs; lj; lj = lj->next)
                progress |= lj->progress_in_flight;
        return !l->out_head && l->results_in_flight == 0 && !progress && !l->report_in_flight;
}

unsigned link_results_pending(struct link *l)
{
        return l ? atomic_load(&l->results_pending) : 0;
}

json_t *link_status_json(struct link *l)
{
        char since[40], retry[40];
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "state", state_names[l->state], "controller", l->base,
                              "since", na_format_time_ms(l->state_since_ms, since, sizeof(since)), "resultsPending",
                              (json_int_t)atomic_load(&l->results_pending), "requests", (json_int_t)l->requests,
                              "failures", (json_int_t)l->failures);
        if (l->reason[0])
                json_object_set_new(o, "reason", json_string(l->reason));
        if (l->auth_code[0])
                json_object_set_new(o, "authCode", json_string(l->auth_code));
        if ((l->state == LINK_BACKOFF || l->state == LINK_AUTH_REFUSED) && loop_timer_armed(l->retry_timer))
                json_object_set_new(o, "retryAt", json_string(na_format_time_ms(l->retry_at_ms, retry, sizeof(retry))));
        struct reports_stats rs;
        reports_get_stats(l->opt.reports, &rs);
        json_object_set_new(o, "reportsPending", json_integer((json_int_t)rs.pending));
        json_object_set_new(o, "nextReportSeq", json_integer((json_int_t)rs.next_seq));
        return o;
}

int link_new(struct loop *loop, const struct link_options *opt, struct link **ret, struct na_error *err)
{
        struct link *l = calloc(1, sizeof(*l));
        if (!l)
                return na_error_sys(err, ENOMEM, "controller link");
        l->loop = loop;
        l->opt = *opt;
        l->inotify_fd = -1;
        l->node_id = opt->cfg->node_id;
        snprintf(l->base, sizeof(l->base), "%s", opt->cfg->url);
        size_t bl = strlen(l->base);
        while (bl > 0 && l->base[bl - 1] == '/')
                l->base[--bl] = '\0';
        l->poll_wait_sec = opt->cfg->poll_wait_sec;
        l->lease_sec = 60;
        l->report_interval_sec = 15;
        l->state_since_ms = na_now_real_ms();

        char ua[64];
        snprintf(ua, sizeof(ua), "nodeagent/%s", NA_VERSION);
        struct http_options ho = {
                .node_id = opt->cfg->node_id,
                .user_agent = ua,
                .ca_file = opt->cfg->ca_file,
                .pinned_pubkey = opt->cfg->pinned_pubkey,
                .client_cert = opt->cfg->client_cert,
                .client_key = opt->cfg->client_key,
                .allow_http = opt->cfg->allow_insecure_http,
                .max_connections = RESULTS_IN_FLIGHT_MAX + 4,
        };
        int r = http_new(loop, &ho, &l->http, err);
        if (r < 0) {
                free(l);
                return r;
        }
        l->retry_timer = loop_timer_new(loop, retry_fired, l);
        l->report_timer = loop_timer_new(loop, report_timer_fired, l);
        r = read_token(l, &l->token, err);
        if (r < 0) {
                link_free(l);
                return r;
        }
        http_set_token(l->http, l->token);
        watch_token(l);
        if (strncmp(l->base, "http://", 7) == 0)
                log_warn("controller link: plain http:// to %s (allow_insecure_http); use https outside of tests", l->base);
        *ret = l;
        return 0;
}

void link_free(struct link *l)
{
        if (!l)
                return;
        http_free(l->http); /* drops in-flight requests without their callbacks */
        while (l->out_head) {
                struct outgoing *o = l->out_head;
                l->out_head = o->next;
                outgoing_free(o);
        }
        while (l->jobs)
                link_job_free(l->jobs);
        loop_timer_free(l->retry_timer);
        loop_timer_free(l->report_timer);
        if (l->inotify_fd >= 0) {
                loop_unwatch(l->loop, l->inotify_fd);
                close(l->inotify_fd);
        }
        free(l->token);
        free(l);
}
