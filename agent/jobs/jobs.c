/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/jobs/jobs.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agent/jobs/job-drain.h"
#include "agent/jobs/workers.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"

#define TARGET_BUCKETS 1024
#define RECENT_MAX 200

struct target_queue {
        char key[80];
        struct job_ctx *head, *tail;
        bool running;
        bool runnable;
        struct target_queue *next_bucket, *next_runnable;
};

struct job_summary {
        char id[PROTO_ID_MAX + 1];
        char kind[PROTO_KIND_MAX + 1];
        char target[80];
        enum job_state state;
        uint64_t finished_ms;
        uint64_t duration_ms;
        char error_code[40];
        char error[200];
};

struct jobs {
        struct loop *loop;
        const struct agent_services *services;
        struct workers *workers;
        struct job_lane_limits lim;
        struct job_lane_counts counts; /* loop thread */
        atomic_uint running, queued;
        bool stopping;
        bool node_drain; /* `nodeagentctl drain`: creation kinds are refused (job-drain.h) */

        /*
         * The hand-off between workers and the rest of the agent. A worker holds it
         * (read) while it calls its sink or posts to the loop; jobs_free() takes it
         * (write) and sets orphaned when workers are still inside a driver call at
         * shutdown. From then on a returning worker touches nothing but its own job,
         * which it frees: the sinks, the link and the loop may already be gone.
         */
        pthread_rwlock_t handoff;
        bool orphaned;

        struct target_queue *buckets[TARGET_BUCKETS];
        struct target_queue *runnable_head[JOB_LANES], *runnable_tail[JOB_LANES]; /* by the lane of their head job */
        struct job_ctx *all; /* queued and running jobs */

        struct job_summary recent[RECENT_MAX];
        size_t recent_next, recent_len;
        struct jobs_counters counters;
        unsigned since_trim; /* loop thread: jobs finished since the heap was last trimmed */
};

const char *job_state_name(enum job_state s)
{
        static const char *const names[] = { "queued", "running", "succeeded", "failed", "abandoned" };
        return (size_t)s < ARRAY_SIZE(names) ? names[s] : "unknown";
}

static void progress_posted(void *userdata);
static void job_finished(void *userdata);

/* ---- the API handlers see (agent/jobs/job-kind.h) ---- */

const struct agent_services *job_services(struct job_ctx *ctx)
{
        return ctx->jobs->services;
}

const char *job_id(const struct job_ctx *ctx)
{
        return ctx->pj.id;
}

const char *job_target_id(const struct job_ctx *ctx)
{
        return ctx->pj.target_id;
}

enum proto_target_type job_target_type(const struct job_ctx *ctx)
{
        return ctx->pj.target_type;
}

int64_t job_attempt(const struct job_ctx *ctx)
{
        return ctx->pj.attempt;
}

void job_progress(struct job_ctx *ctx, const char *stage, int percent, const char *fmt, ...)
{
        pthread_mutex_lock(&ctx->progress_lock);
        if (stage)
                snprintf(ctx->progress.stage, sizeof(ctx->progress.stage), "%s", stage);
        ctx->progress.percent = percent < 0 ? -1 : (percent > 100 ? 100 : percent);
        ctx->progress.message[0] = '\0';
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(ctx->progress.message, sizeof(ctx->progress.message), fmt, ap);
                va_end(ap);
        }
        /* The latest wins: the sink reads it when the loop gets to it (coalesced). */
        bool post = !ctx->progress_posted;
        ctx->progress_posted = true;
        pthread_mutex_unlock(&ctx->progress_lock);
        if (post) {
                struct jobs *jobs = ctx->jobs;
                pthread_rwlock_rdlock(&jobs->handoff);
                if (!jobs->orphaned)
                        loop_post_queue(jobs->loop, &ctx->progress_post);
                pthread_rwlock_unlock(&jobs->handoff);
        }
}

void job_progress_get(struct job_ctx *job, struct job_progress_info *out)
{
        pthread_mutex_lock(&job->progress_lock);
        *out = job->progress;
        pthread_mutex_unlock(&job->progress_lock);
}

static int stop_error(const struct job_ctx *ctx, enum job_stop why, struct na_error *err)
{
        switch (why) {
        case JOB_STOP_CANCELLED:
                return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "job %s: cancelled by the central API", ctx->pj.id);
        case JOB_STOP_TIMEOUT:
                return na_error_set(err, ETIMEDOUT, NA_E_JOB_TIMEOUT, "job %s: ran past its timeout of %llds", ctx->pj.id,
                                    (long long)ctx->pj.timeout_sec);
        case JOB_STOP_LEASE_LOST:
                return na_error_set(err, ECANCELED, NA_E_LEASE_LOST, "job %s: lease lost", ctx->pj.id);
        case JOB_STOP_SHUTDOWN:
                return na_error_set(err, ECANCELED, NA_E_INTERNAL, "job %s: the agent is stopping", ctx->pj.id);
        case JOB_STOP_NONE:
                break;
        }
        return 0;
}

int job_checkpoint(struct job_ctx *ctx, struct na_error *err)
{
        return stop_error(ctx, (enum job_stop)atomic_load(&ctx->stop), err);
}

uint64_t job_remaining_ms(const struct job_ctx *ctx)
{
        uint64_t end = ctx->started_us + (uint64_t)ctx->pj.timeout_sec * NA_USEC_PER_SEC, now = na_now_mono_us();
        return end > now ? (end - now) / 1000 : 0;
}

/* ---- targets ---- */

static size_t bucket_of(const char *key)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = key; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        return (size_t)(h % TARGET_BUCKETS);
}

static struct target_queue *target_get(struct jobs *jobs, const char *key, bool create)
{
        size_t b = bucket_of(key);
        for (struct target_queue *t = jobs->buckets[b]; t; t = t->next_bucket)
                if (streq(t->key, key))
                        return t;
        if (!create)
                return NULL;
        struct target_queue *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        snprintf(t->key, sizeof(t->key), "%s", key);
        t->next_bucket = jobs->buckets[b];
        jobs->buckets[b] = t;
        return t;
}

static void target_drop(struct jobs *jobs, struct target_queue *t)
{
        struct target_queue **pp = &jobs->buckets[bucket_of(t->key)];
        while (*pp && *pp != t)
                pp = &(*pp)->next_bucket;
        if (*pp)
                *pp = t->next_bucket;
        free(t);
}

static void runnable_push(struct jobs *jobs, struct target_queue *t)
{
        if (t->runnable || t->running || !t->head)
                return;
        enum job_lane lane = t->head->lane;
        t->runnable = true;
        t->next_runnable = NULL;
        if (jobs->runnable_tail[lane])
                jobs->runnable_tail[lane]->next_runnable = t;
        else
                jobs->runnable_head[lane] = t;
        jobs->runnable_tail[lane] = t;
}

static struct target_queue *runnable_pop(struct jobs *jobs, enum job_lane lane)
{
        struct target_queue *t = jobs->runnable_head[lane];
        if (!t)
                return NULL;
        jobs->runnable_head[lane] = t->next_runnable;
        if (!jobs->runnable_head[lane])
                jobs->runnable_tail[lane] = NULL;
        t->runnable = false;
        return t;
}

/* Insert in createdAt order; equal times keep arrival order. Never before a running head. */
static void target_insert(struct target_queue *t, struct job_ctx *job)
{
        struct job_ctx **pp = &t->head;
        if (t->running && *pp)
                pp = &(*pp)->next_in_target;
        while (*pp && (*pp)->pj.created_at_ms <= job->pj.created_at_ms)
                pp = &(*pp)->next_in_target;
        job->next_in_target = *pp;
        *pp = job;
        if (!job->next_in_target)
                t->tail = job;
        job->tq = t;
}

/* ---- lifecycle ---- */

static void all_link(struct jobs *jobs, struct job_ctx *job)
{
        job->next_all = jobs->all;
        if (jobs->all)
                jobs->all->prev_all = job;
        jobs->all = job;
}

static void all_unlink(struct jobs *jobs, struct job_ctx *job)
{
        if (job->prev_all)
                job->prev_all->next_all = job->next_all;
        else if (jobs->all == job)
                jobs->all = job->next_all;
        if (job->next_all)
                job->next_all->prev_all = job->prev_all;
        job->prev_all = job->next_all = NULL;
}

static void job_free(struct job_ctx *job)
{
        if (!job)
                return;
        loop_timer_free(job->timeout_timer);
        proto_job_clear(&job->pj);
        if (job->result)
                json_decref(job->result);
        na_error_clear(&job->error);
        pthread_mutex_destroy(&job->progress_lock);
        free(job);
}

static struct job_ctx *job_alloc(struct jobs *jobs, struct proto_job *pj, const struct job_sink *sink, void *userdata)
{
        struct job_ctx *job = calloc(1, sizeof(*job));
        if (!job)
                return NULL;
        job->pj = *pj;
        memset(pj, 0, sizeof(*pj));
        job->jobs = jobs;
        job->sink = sink;
        job->sink_userdata = userdata;
        job->queued_us = na_now_mono_us();
        job->progress.percent = -1;
        pthread_mutex_init(&job->progress_lock, NULL);
        loop_post_init(&job->finished_post, job_finished, job);
        loop_post_init(&job->progress_post, progress_posted, job);
        snprintf(job->target_key, sizeof(job->target_key), "%s/%s", proto_target_types[job->pj.target_type],
                 job->pj.target_id[0] ? job->pj.target_id : "-");
        return job;
}

static void remember(struct jobs *jobs, const struct job_ctx *job)
{
        struct job_summary *s = &jobs->recent[jobs->recent_next];
        memset(s, 0, sizeof(*s));
        snprintf(s->id, sizeof(s->id), "%s", job->pj.id);
        snprintf(s->kind, sizeof(s->kind), "%s", job->pj.kind);
        snprintf(s->target, sizeof(s->target), "%s", job->target_key);
        s->state = job->state;
        s->finished_ms = na_now_real_ms();
        s->duration_ms = job->started_us && job->finished_us > job->started_us ? (job->finished_us - job->started_us) / 1000 : 0;
        if (job->state == JOB_FAILED || job->state == JOB_ABANDONED) {
                snprintf(s->error_code, sizeof(s->error_code), "%s", job->error.code ? job->error.code : "");
                snprintf(s->error, sizeof(s->error), "%s", job->error.message);
        }
        jobs->recent_next = (jobs->recent_next + 1) % RECENT_MAX;
        if (jobs->recent_len < RECENT_MAX)
                jobs->recent_len++;
        if (job->state == JOB_SUCCEEDED)
                jobs->counters.succeeded++;
        else if (job->state == JOB_FAILED)
                jobs->counters.failed++;
        else
                jobs->counters.abandoned++;
}

static void dispatch(struct jobs *jobs);

/* Hand a job whose work is over to the loop thread (never fails). */
static void post_finished(struct job_ctx *job)
{
        loop_post_queue(job->jobs->loop, &job->finished_post);
}

/*
 * A burst of jobs (a thousand deploys taken at once: their params, results and TLS
 * buffers) leaves the heap's high-water mark in the agent's resident memory after it is
 * freed: glibc gives back only the top of the heap. Once the engine is idle again after
 * TRIM_AFTER_JOBS jobs, the free pages are returned (malloc_trim; a few milliseconds on
 * the loop thread, at most once per that many jobs).
 */
#define TRIM_AFTER_JOBS 32

static void trim_after_burst(struct jobs *jobs)
{
        if (++jobs->since_trim < TRIM_AFTER_JOBS || jobs_running(jobs) > 0 || jobs_queued(jobs) > 0)
                return;
        jobs->since_trim = 0;
        malloc_trim(0);
}

/* Loop thread: the worker is done with job (or it never needed one). */
static void job_finished(void *userdata)
{
        struct job_ctx *job = userdata;
        struct jobs *jobs = job->jobs;
        struct target_queue *t = job->tq;

        loop_timer_free(job->timeout_timer);
        job->timeout_timer = NULL;
        if (t) {
                t->head = job->next_in_target;
                if (!t->head)
                        t->tail = NULL;
                t->running = false;
                atomic_fetch_sub(&jobs->running, 1);
                jobs->counts.slots[job->slot]--;
        }
        if (job->held) {
                job->held = false;
                jobs->counts.held[job->lane]--;
        }
        all_unlink(jobs, job);
        remember(jobs, job);
        if (job->sink && job->sink->finished)
                job->sink->finished(job->sink_userdata, job);
        job_free(job);
        if (t) {
                if (t->head)
                        runnable_push(jobs, t);
                else
                        target_drop(jobs, t);
        }
        dispatch(jobs);
        trim_after_burst(jobs);
}

/* Loop thread: the latest progress of a running job is ready for its sink. */
static void progress_posted(void *userdata)
{
        struct job_ctx *job = userdata;
        pthread_mutex_lock(&job->progress_lock);
        job->progress_posted = false;
        pthread_mutex_unlock(&job->progress_lock);
        /* Posted before job_finished (posts keep their order): the job is still here. */
        if (job->sink && job->sink->progress)
                job->sink->progress(job->sink_userdata, job);
}

static void build_result(struct job_ctx *job, json_t *data, bool failed)
{
        job->finished_us = na_now_mono_us();
        uint64_t dur = job->started_us ? (job->finished_us - job->started_us) / 1000 : 0;
        job->state = failed ? JOB_FAILED : JOB_SUCCEEDED;
        job->result = proto_result_encode(job->pj.attempt, data, failed ? &job->error : NULL, na_now_real_ms(), dur);
}

/* Worker thread. */
static void job_run(void *userdata)
{
        struct job_ctx *job = userdata;
        const struct job_kind *kind = job->kind;
        struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *data = NULL;
        void *params = NULL;
        bool stopped = false;

        struct jobs *jobs = job->jobs;
        int r = job_checkpoint(job, &err);
        stopped = r < 0;
        if (r >= 0 && kind->decode)
                r = kind->decode(job->pj.params, &params, &err);
        if (r >= 0 && job->sink && job->sink->before_run) {
                pthread_rwlock_rdlock(&jobs->handoff);
                r = jobs->orphaned ? stop_error(job, JOB_STOP_SHUTDOWN, &err)
                                   : job->sink->before_run(job->sink_userdata, job, &err);
                pthread_rwlock_unlock(&jobs->handoff);
        }
        if (r >= 0) {
                r = kind->run(job, params, &data, &err);
                if (r < 0 && !na_error_is_set(&err))
                        na_error_set(&err, -r, NA_E_INTERNAL, "%s: failed without a reason", kind->name);
                /* The handler stopped because it was asked to (its checkpoint said so). */
                stopped = r < 0 && atomic_load(&job->stop) != JOB_STOP_NONE &&
                          (streq(err.code, NA_E_JOB_CANCELLED) || streq(err.code, NA_E_JOB_TIMEOUT) ||
                           streq(err.code, NA_E_LEASE_LOST) || atomic_load(&job->stop) == JOB_STOP_SHUTDOWN);
        }
        if (params && kind->free_params)
                kind->free_params(params);

        enum job_stop why = (enum job_stop)atomic_load(&job->stop);
        pthread_rwlock_rdlock(&jobs->handoff);
        if (jobs->orphaned) {
                /* The agent shut down while this job was inside its driver call: nothing
                 * but the job itself is left to touch. It is recorded as started and not
                 * finished, so it runs again from the start when offered again. */
                pthread_rwlock_unlock(&jobs->handoff);
                na_error_clear(&err);
                job_free(job);
                return;
        }
        if (stopped && (why == JOB_STOP_LEASE_LOST || why == JOB_STOP_SHUTDOWN)) {
                job->finished_us = na_now_mono_us();
                job->state = JOB_ABANDONED;
                na_error_move(&job->error, &err);
        } else {
                if (r < 0)
                        na_error_move(&job->error, &err);
                build_result(job, r < 0 ? NULL : data, r < 0);
                if (job->sink && job->sink->after_run) {
                        struct na_error aerr = NA_ERROR_INIT;
                        if (job->sink->after_run(job->sink_userdata, job, &aerr) < 0 && !na_error_is_set(&job->error))
                                na_error_move(&job->error, &aerr); /* kept for the log; the result stands */
                        na_error_clear(&aerr);
                }
        }
        na_error_clear(&err);
        /* Nothing of this thread may touch the job after the post: the loop frees it. */
        if (data) {
                json_decref(data);
                data = NULL;
        }
        post_finished(job);
        pthread_rwlock_unlock(&jobs->handoff);
}

static void job_timeout(void *userdata)
{
        jobs_request_stop(userdata, JOB_STOP_TIMEOUT);
}

static void start(struct jobs *jobs, struct target_queue *t, enum job_lane slot)
{
        struct job_ctx *job = t->head;
        t->running = true;
        job->slot = slot;
        jobs->counts.slots[slot]++;
        atomic_fetch_add(&jobs->running, 1);
        atomic_fetch_sub(&jobs->queued, 1);
        job->state = JOB_RUNNING;
        job->started_us = na_now_mono_us();
        job->timeout_timer = loop_timer_new(jobs->loop, job_timeout, job);
        if (!job->timeout_timer) {
                /* A job without its timeout could run forever: refuse it instead. */
                na_error_set(&job->error, ENOMEM, NA_E_INTERNAL, "job %s: cannot arm its timeout", job->pj.id);
                build_result(job, NULL, true);
                post_finished(job);
                return;
        }
        loop_timer_arm_ms(job->timeout_timer, (uint64_t)job->pj.timeout_sec * 1000);
        if (workers_submit(jobs->workers, job_run, job) < 0) {
                na_error_set(&job->error, ENOMEM, NA_E_INTERNAL, "job %s: cannot hand to a worker", job->pj.id);
                build_result(job, NULL, true);
                post_finished(job);
        }
}

/* Start what the lanes allow (agent/jobs/job-lanes.h), node lane first; each lane in arrival order. */
static void dispatch(struct jobs *jobs)
{
        bool moved = true;
        while (!jobs->stopping && moved) {
                moved = false;
                for (int lane = JOB_LANE_NODE; lane >= JOB_LANE_TENANT; lane--) {
                        struct target_queue *t = jobs->runnable_head[lane];
                        if (!t)
                                continue;
                        if (!t->head) {
                                runnable_pop(jobs, (enum job_lane)lane);
                                moved = true;
                                continue;
                        }
                        if (t->head->lane != (enum job_lane)lane) {
                                /* An earlier job of another lane became the target's head meanwhile. */
                                runnable_pop(jobs, (enum job_lane)lane);
                                runnable_push(jobs, t);
                                moved = true;
                                continue;
                        }
                        enum job_lane slot;
                        if (!job_lane_may_start(&jobs->lim, &jobs->counts, (enum job_lane)lane, &slot))
                                continue;
                        runnable_pop(jobs, (enum job_lane)lane);
                        start(jobs, t, slot);
                        moved = true;
                }
        }
}

static struct job_ctx *finish_at_once(struct jobs *jobs, struct job_ctx *job, struct na_error *err)
{
        na_error_move(&job->error, err);
        job->started_us = na_now_mono_us();
        build_result(job, NULL, true);
        all_link(jobs, job);
        post_finished(job);
        return job;
}

struct job_ctx *jobs_submit_failed(struct jobs *jobs, struct proto_job *pj, struct na_error *err,
                                   const struct job_sink *sink, void *userdata)
{
        struct job_ctx *job = job_alloc(jobs, pj, sink, userdata);
        if (!job)
                return NULL;
        return finish_at_once(jobs, job, err);
}

static struct job_ctx *submit_kind(struct jobs *jobs, struct proto_job *pj, const struct job_kind *kind,
                                   const struct job_sink *sink, void *userdata)
{
        struct job_ctx *job = job_alloc(jobs, pj, sink, userdata);
        if (!job)
                return NULL;
        struct na_error err = NA_ERROR_INIT;

        job->kind = kind;
        if (!job->kind) {
                na_error_set(&err, EOPNOTSUPP, NA_E_UNSUPPORTED_JOB, "job kind %s is not supported by this agent",
                             job->pj.kind);
                return finish_at_once(jobs, job, &err);
        }
        if (job->kind->targets ? !(job->kind->targets & (1u << job->pj.target_type))
                               : job->kind->target != job->pj.target_type) {
                if (job->kind->targets)
                        na_error_field(&err, "target.type", "%s does not act on a %s", job->kind->name,
                                       proto_target_types[job->pj.target_type]);
                else
                        na_error_field(&err, "target.type", "must be %s for %s", proto_target_types[job->kind->target],
                                       job->kind->name);
                return finish_at_once(jobs, job, &err);
        }
        if (jobs->node_drain && job_drain_refuses(job->kind->name)) {
                na_error_set(&err, EBUSY, NA_E_INVALID_STATE,
                             "the node is draining: it takes no new %s (nodeagentctl drain --off ends it)",
                             job->kind->name);
                na_error_detail(&err, "state", json_string(JOB_DRAIN_STATE));
                return finish_at_once(jobs, job, &err);
        }
        if (jobs->stopping) {
                na_error_set(&err, ESHUTDOWN, NA_E_INTERNAL, "job %s: the agent is stopping", job->pj.id);
                job->state = JOB_ABANDONED;
                na_error_move(&job->error, &err);
                all_link(jobs, job);
                post_finished(job);
                return job;
        }
        struct target_queue *t = target_get(jobs, job->target_key, true);
        if (!t) {
                na_error_set(&err, ENOMEM, NA_E_INTERNAL, "job %s: out of memory", job->pj.id);
                return finish_at_once(jobs, job, &err);
        }
        job->state = JOB_QUEUED;
        job->lane = job_lane_of(job->pj.kind);
        job->held = true;
        jobs->counts.held[job->lane]++;
        target_insert(t, job);
        all_link(jobs, job);
        atomic_fetch_add(&jobs->queued, 1);
        runnable_push(jobs, t);
        dispatch(jobs);
        return job;
}

struct job_ctx *jobs_submit(struct jobs *jobs, struct proto_job *pj, const struct job_sink *sink, void *userdata)
{
        return submit_kind(jobs, pj, job_kind_find(pj->kind), sink, userdata);
}

struct job_ctx *jobs_submit_local(struct jobs *jobs, struct proto_job *pj, const struct job_kind *kind,
                                  const struct job_sink *sink, void *userdata)
{
        return submit_kind(jobs, pj, kind, sink, userdata);
}

void jobs_request_stop(struct job_ctx *job, enum job_stop why)
{
        int none = JOB_STOP_NONE;
        atomic_compare_exchange_strong(&job->stop, &none, (int)why);
}

struct job_ctx *jobs_find(struct jobs *jobs, const char *id)
{
        for (struct job_ctx *j = jobs->all; j; j = j->next_all)
                if (streq(j->pj.id, id))
                        return j;
        return NULL;
}

/* Loop thread: take a queued job out of its target's queue and end it as abandoned. */
static void abandon_queued(struct jobs *jobs, struct job_ctx *job, enum job_stop why)
{
        struct target_queue *t = job->tq;
        struct job_ctx *prev = NULL;
        for (struct job_ctx **pp = &t->head; *pp; prev = *pp, pp = &(*pp)->next_in_target)
                if (*pp == job) {
                        *pp = job->next_in_target;
                        if (t->tail == job)
                                t->tail = prev;
                        break;
                }
        /* An emptied target stays in its bucket (and maybe the runnable list, which
         * nothing pops once stopping): jobs_free() takes it. */
        job->next_in_target = NULL;
        job->tq = NULL;
        atomic_fetch_sub(&jobs->queued, 1);
        job->state = JOB_ABANDONED;
        job->finished_us = na_now_mono_us();
        stop_error(job, why != JOB_STOP_NONE ? why : JOB_STOP_SHUTDOWN, &job->error);
        post_finished(job);
}

void jobs_stop_all(struct jobs *jobs, enum job_stop why, bool include_running)
{
        jobs->stopping = true;
        for (struct job_ctx *j = jobs->all; j; j = j->next_all)
                if (j->state == JOB_QUEUED)
                        abandon_queued(jobs, j, why);
                else if (include_running)
                        jobs_request_stop(j, why);
}

unsigned jobs_running(const struct jobs *jobs)
{
        return atomic_load(&jobs->running);
}

unsigned jobs_queued(const struct jobs *jobs)
{
        return atomic_load(&jobs->queued);
}

unsigned jobs_active(const struct jobs *jobs)
{
        return jobs_running(jobs) + jobs_queued(jobs);
}

unsigned jobs_max_parallel(const struct jobs *jobs)
{
        return jobs->lim.tenant_max;
}

void jobs_set_node_drain(struct jobs *jobs, bool on)
{
        jobs->node_drain = on;
}

bool jobs_node_drain(const struct jobs *jobs)
{
        return jobs->node_drain;
}

unsigned jobs_poll_room(const struct jobs *jobs)
{
        return job_lane_poll_room(&jobs->lim, &jobs->counts);
}

/* One thread per slot of both lanes: a job that may start always finds one idle. */
static int set_limits(struct jobs *jobs, struct job_lane_limits lim, struct na_error *err)
{
        int r = workers_grow(jobs->workers, lim.tenant_max + lim.node_max, err);
        if (r < 0)
                return r;
        jobs->lim = lim;
        dispatch(jobs);
        return 0;
}

int jobs_set_max_parallel(struct jobs *jobs, unsigned n, struct na_error *err)
{
        struct job_lane_limits lim = jobs->lim;
        lim.tenant_max = n < 1 ? 1 : n;
        return set_limits(jobs, lim, err);
}

int jobs_set_lanes(struct jobs *jobs, unsigned node_max, unsigned queued_max, struct na_error *err)
{
        struct job_lane_limits lim = jobs->lim;
        lim.node_max = node_max < 1 ? 1 : node_max;
        lim.queued_max = queued_max;
        return set_limits(jobs, lim, err);
}

int jobs_new(struct loop *loop, const struct agent_services *services, unsigned max_parallel, struct jobs **ret,
             struct na_error *err)
{
        struct jobs *jobs = calloc(1, sizeof(*jobs));
        if (!jobs)
                return na_error_sys(err, ENOMEM, "jobs");
        jobs->loop = loop;
        jobs->services = services;
        jobs->lim = (struct job_lane_limits){ .tenant_max = max_parallel ? max_parallel : 1,
                                              .node_max = JOBS_NODE_SLOTS_DEFAULT,
                                              .queued_max = JOBS_QUEUED_MAX_DEFAULT };
        pthread_rwlock_init(&jobs->handoff, NULL);
        int r = workers_new(jobs->lim.tenant_max + jobs->lim.node_max, &jobs->workers, err);
        if (r < 0) {
                pthread_rwlock_destroy(&jobs->handoff);
                free(jobs);
                return r;
        }
        *ret = jobs;
        return 0;
}

void jobs_free(struct jobs *jobs)
{
        if (!jobs)
                return;
        bool idle = jobs_running(jobs) == 0;
        workers_free(jobs->workers, idle);
        if (!idle) {
                /* Workers still inside a driver call: from here on they touch only their
                 * own job (and free it), never a sink, the link or the loop. Held while
                 * the list is taken apart, so no worker frees a job under our feet. */
                pthread_rwlock_wrlock(&jobs->handoff);
                jobs->orphaned = true;
        }
        while (jobs->all) {
                struct job_ctx *j = jobs->all;
                all_unlink(jobs, j);
                if (j->state == JOB_RUNNING && !idle) {
                        loop_timer_free(j->timeout_timer); /* the loop goes; the worker keeps the job */
                        j->timeout_timer = NULL;
                        continue;
                }
                job_free(j);
        }
        for (size_t b = 0; b < TARGET_BUCKETS; b++)
                while (jobs->buckets[b]) {
                        struct target_queue *t = jobs->buckets[b];
                        jobs->buckets[b] = t->next_bucket;
                        free(t);
                }
        if (!idle) {
                pthread_rwlock_unlock(&jobs->handoff);
                /* Orphaned workers still read jobs->handoff: it stays until the process
                 * exits, reachable from here so leak checkers see it is kept on purpose. */
                static struct jobs *orphans_home;
                orphans_home = jobs;
                (void)orphans_home;
                return;
        }
        pthread_rwlock_destroy(&jobs->handoff);
        free(jobs);
}

void jobs_counters(const struct jobs *jobs, struct jobs_counters *out)
{
        *out = jobs->counters;
}

static json_t *summary_json(const char *id, const char *kind, const char *target, const char *state,
                            uint64_t duration_ms, const char *code, const char *error)
{
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", id, "kind", kind, "target", target, "state", state,
                              "durationMs", (json_int_t)duration_ms);
        if (code && *code)
                json_object_set_new(o, "errorCode", json_string(code));
        if (error && *error)
                json_object_set_new(o, "error", json_string(error));
        return o;
}

json_t *jobs_list_json(const struct jobs *jobs)
{
        json_t *running = json_array(), *queued = json_array(), *recent = json_array();
        uint64_t now = na_now_mono_us();
        for (const struct job_ctx *j = jobs->all; j; j = j->next_all) {
                if (j->state != JOB_RUNNING && j->state != JOB_QUEUED)
                        continue;
                uint64_t since = j->state == JOB_RUNNING ? j->started_us : j->queued_us;
                json_array_append_new(j->state == JOB_RUNNING ? running : queued,
                                      summary_json(j->pj.id, j->pj.kind, j->target_key, job_state_name(j->state),
                                                   (now - since) / 1000, NULL, NULL));
        }
        for (size_t i = 0; i < jobs->recent_len; i++) {
                const struct job_summary *s = &jobs->recent[(jobs->recent_next + RECENT_MAX - 1 - i) % RECENT_MAX];
                json_t *o = summary_json(s->id, s->kind, s->target, job_state_name(s->state), s->duration_ms,
                                         s->error_code, s->error);
                char at[40];
                json_object_set_new(o, "finishedAt", json_string(na_format_time_ms(s->finished_ms, at, sizeof(at))));
                json_array_append_new(recent, o);
        }
        return json_pack("{s:o, s:o, s:o}", "running", running, "queued", queued, "recent", recent);
}
