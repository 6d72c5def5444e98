/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/jobs/jobs.h with a real loop, real worker threads and the test kinds
 * (NODEAGENT_TEST_KINDS=1): per-target createdAt order, the parallelism bound,
 * timeout, cancel, shutdown and lease loss, unknown kinds, wrong target types, bad
 * params, progress coalescing, the listing and the counters.
 *
 * Determinism: jobs that must be "running" are held at a gate in the sink's
 * before_run (a worker thread) until the test, on the loop thread, opens it; nothing
 * depends on how fast anything runs. Assertions run on the loop thread (the test's
 * main thread) only; worker threads record what they saw.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "agent/jobs/job-drain.h"
#include "agent/jobs/jobs.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/unit.h"
#include "common/uuid.h"

#define WATCHDOG_MS 30000
#define MAX_DONE 64

struct done {
        char id[PROTO_ID_MAX + 1];
        char target[80];
        enum job_state state;
        json_t *result;
        char code[40];
        char message[512];
        json_t *details;
        bool had_before_run;
};

struct harness {
        char *dir;
        struct loop *loop;
        struct jobs *jobs;
        struct agent_services services;
        struct loop_timer *watchdog, *poll;
        unsigned max_parallel;

        /* Shared with worker threads. */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool hold_all;                  /* before_run waits while set */
        char hold_id[PROTO_ID_MAX + 1]; /* ...or while this is its job id */
        int inside, max_inside;         /* between before_run and after_run */
        char entered[MAX_DONE][PROTO_ID_MAX + 1];
        int nentered;
        int after_runs;
        /* What worker threads saw through the job.h API. */
        char seen_id[PROTO_ID_MAX + 1], seen_target[PROTO_ID_MAX + 1];
        int64_t seen_attempt;
        uint64_t seen_remaining_ms;
        const struct agent_services *seen_services;

        /* Loop thread only. */
        struct done done[MAX_DONE];
        int ndone, quit_after;
        int progress_calls;
        unsigned max_running_seen;
        void (*on_progress)(struct harness *h, struct job_ctx *job);
        void (*on_poll)(struct harness *h);
        enum job_stop stop_reason;       /* for stop_on_progress */
        char focus_id[PROTO_ID_MAX + 1]; /* the job a test drives */
};

/* The harness of the test running, freed by the teardown when a failed assertion skipped harness_free. */
static struct harness *current;

static void watchdog_fired(void *userdata)
{
        struct harness *h = userdata;
        loop_quit(h->loop, -99);
}

static void poll_fired(void *userdata)
{
        struct harness *h = userdata;
        if (h->on_poll)
                h->on_poll(h);
        loop_timer_arm_ms(h->poll, 2);
}

static struct harness *harness_new(unsigned max_parallel)
{
        struct harness *h = calloc(1, sizeof(*h));
        h->dir = unit_tmpdir("jobs");
        pthread_mutex_init(&h->lock, NULL);
        pthread_cond_init(&h->cond, NULL);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (loop_new(&h->loop, &err) < 0)
                fail_msg("loop: %s", err.message);
        h->services.state_dir = h->dir;
        h->max_parallel = max_parallel;
        if (jobs_new(h->loop, &h->services, max_parallel, &h->jobs, &err) < 0)
                fail_msg("jobs: %s", err.message);
        h->watchdog = loop_timer_new(h->loop, watchdog_fired, h);
        loop_timer_arm_ms(h->watchdog, WATCHDOG_MS);
        h->poll = loop_timer_new(h->loop, poll_fired, h);
        loop_timer_arm_ms(h->poll, 2);
        current = h;
        return h;
}

static void gate_open(struct harness *h);

static void harness_free(struct harness *h)
{
        if (current == h)
                current = NULL;
        /* After a failed assertion workers may still wait at the gate: let them go. */
        gate_open(h);
        loop_timer_free(h->watchdog);
        loop_timer_free(h->poll);
        jobs_free(h->jobs);
        loop_free(h->loop);
        for (int i = 0; i < h->ndone; i++) {
                json_decref(h->done[i].result);
                json_decref(h->done[i].details);
        }
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->cond);
        unit_rmrf_free(h->dir);
        free(h);
}

/* Run the loop until quit_after jobs have finished. */
static void run_until_done(struct harness *h, int n)
{
        h->quit_after = n;
        if (h->ndone >= n)
                return;
        int code = loop_run(h->loop);
        if (code == -99)
                fail_msg("watchdog: only %d of %d jobs finished", h->ndone, n);
}

static void gate_open(struct harness *h)
{
        pthread_mutex_lock(&h->lock);
        h->hold_all = false;
        h->hold_id[0] = '\0';
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);
}

static int inside(struct harness *h)
{
        pthread_mutex_lock(&h->lock);
        int n = h->inside;
        pthread_mutex_unlock(&h->lock);
        return n;
}

/* ---- the sink ---- */

static int sink_before_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        (void)err;
        struct harness *h = userdata;
        pthread_mutex_lock(&h->lock);
        h->inside++;
        if (h->inside > h->max_inside)
                h->max_inside = h->inside;
        if (h->nentered < MAX_DONE)
                snprintf(h->entered[h->nentered++], PROTO_ID_MAX + 1, "%s", job_id(job));
        snprintf(h->seen_id, sizeof(h->seen_id), "%s", job_id(job));
        snprintf(h->seen_target, sizeof(h->seen_target), "%s", job_target_id(job));
        h->seen_attempt = job_attempt(job);
        h->seen_remaining_ms = job_remaining_ms(job);
        h->seen_services = job_services(job);
        pthread_cond_broadcast(&h->cond);
        while (h->hold_all || streq(h->hold_id, job_id(job)))
                pthread_cond_wait(&h->cond, &h->lock);
        pthread_mutex_unlock(&h->lock);
        return 0;
}

static int sink_after_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        (void)job;
        (void)err;
        struct harness *h = userdata;
        pthread_mutex_lock(&h->lock);
        h->inside--;
        h->after_runs++;
        pthread_mutex_unlock(&h->lock);
        return 0;
}

static void sink_progress(void *userdata, struct job_ctx *job)
{
        struct harness *h = userdata;
        h->progress_calls++;
        unsigned r = jobs_running(h->jobs);
        if (r > h->max_running_seen)
                h->max_running_seen = r;
        if (h->on_progress)
                h->on_progress(h, job);
}

static bool entered(struct harness *h, const char *id)
{
        pthread_mutex_lock(&h->lock);
        bool yes = false;
        for (int i = 0; i < h->nentered; i++)
                yes |= streq(h->entered[i], id);
        pthread_mutex_unlock(&h->lock);
        return yes;
}

static void sink_finished(void *userdata, struct job_ctx *job)
{
        struct harness *h = userdata;
        assert_true(h->ndone < MAX_DONE);
        unsigned r = jobs_running(h->jobs);
        if (r > h->max_running_seen)
                h->max_running_seen = r;
        assert_true(r <= h->max_parallel);
        struct done *d = &h->done[h->ndone++];
        snprintf(d->id, sizeof(d->id), "%s", job->pj.id);
        snprintf(d->target, sizeof(d->target), "%s", job->target_key);
        d->state = job->state;
        d->result = job->result ? json_incref(job->result) : NULL;
        snprintf(d->code, sizeof(d->code), "%s", job->error.code ? job->error.code : "");
        snprintf(d->message, sizeof(d->message), "%s", job->error.message);
        d->details = job->error.details ? json_deep_copy(job->error.details) : NULL;
        d->had_before_run = entered(h, job->pj.id);
        if (h->quit_after && h->ndone >= h->quit_after)
                loop_quit(h->loop, 0);
}

static const struct job_sink sink = {
        .before_run = sink_before_run,
        .after_run = sink_after_run,
        .progress = sink_progress,
        .finished = sink_finished,
};

/* ---- making jobs ---- */

static struct job_ctx *submit(struct harness *h, const char *kind, enum proto_target_type type, const char *target,
                              json_t *params, int64_t created_ms, int64_t timeout_sec, char *id_out)
{
        struct proto_job pj = { 0 };
        na_uuid_random(pj.id, sizeof(pj.id));
        if (id_out)
                snprintf(id_out, PROTO_ID_MAX + 1, "%s", pj.id);
        snprintf(pj.kind, sizeof(pj.kind), "%s", kind);
        pj.attempt = 1;
        pj.target_type = type;
        snprintf(pj.target_id, sizeof(pj.target_id), "%s", target ? target : "");
        pj.params = params ? params : json_object();
        pj.created_at_ms = created_ms;
        pj.timeout_sec = timeout_sec ? timeout_sec : 60;
        struct job_ctx *job = jobs_submit(h->jobs, &pj, &sink, h);
        assert_non_null(job);
        assert_null(pj.params); /* moved into the job */
        return job;
}

static json_t *sleep_ms(int64_t ms)
{
        return json_pack("{s:I}", "sleepMs", (json_int_t)ms);
}

static const struct done *done_of(struct harness *h, const char *id)
{
        for (int i = 0; i < h->ndone; i++)
                if (streq(h->done[i].id, id))
                        return &h->done[i];
        fail_msg("job %s never finished", id);
        abort(); /* not reached: fail_msg jumps out */
}

static const char *result_code(const struct done *d)
{
        return json_string_value(json_object_get(json_object_get(d->result, "error"), "code"));
}

static int setup_env(void **state)
{
        (void)state;
        setenv("NODEAGENT_TEST_KINDS", "1", 1);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        if (current)
                harness_free(current);
        return 0;
}

/* ---- tests ---- */

static void test_runs_and_succeeds(void **state)
{
        (void)state;
        struct harness *h = harness_new(4);
        char id[PROTO_ID_MAX + 1];
        struct job_ctx *job = submit(h, "test.sleep", PROTO_TARGET_NODE, "hv-1", sleep_ms(0), 1000, 0, id);
        /* Dispatched at once: a slot was free. (job->state is the worker's now: not read here.) */
        assert_int_equal(jobs_running(h->jobs), 1);
        assert_int_equal(jobs_queued(h->jobs), 0);
        assert_ptr_equal(jobs_find(h->jobs, id), job);
        run_until_done(h, 1);

        const struct done *d = done_of(h, id);
        assert_int_equal(d->state, JOB_SUCCEEDED);
        assert_string_equal(d->target, "node/hv-1");
        assert_string_equal(json_string_value(json_object_get(d->result, "status")), "succeeded");
        assert_int_equal(json_integer_value(json_object_get(d->result, "attempt")), 1);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d->result, "data"), "sleptMs")), 0);
        assert_non_null(json_object_get(d->result, "finishedAt"));
        assert_true(json_is_integer(json_object_get(d->result, "durationMs")));
        assert_true(d->had_before_run);
        assert_int_equal(h->after_runs, 1);

        /* What the handler API gave the worker. */
        assert_string_equal(h->seen_id, id);
        assert_string_equal(h->seen_target, "hv-1");
        assert_int_equal(h->seen_attempt, 1);
        assert_in_range(h->seen_remaining_ms, 1, 60000);
        assert_ptr_equal(h->seen_services, &h->services);

        /* Gone from the live set, present in the counters and the recent list. */
        assert_null(jobs_find(h->jobs, id));
        assert_int_equal(jobs_running(h->jobs), 0);
        assert_int_equal(jobs_active(h->jobs), 0);
        struct jobs_counters c;
        jobs_counters(h->jobs, &c);
        assert_int_equal(c.succeeded, 1);
        assert_int_equal(c.failed, 0);
        _cleanup_json_ json_t *list = jobs_list_json(h->jobs);
        json_t *recent = json_object_get(list, "recent");
        assert_int_equal(json_array_size(recent), 1);
        json_t *r0 = json_array_get(recent, 0);
        assert_string_equal(json_string_value(json_object_get(r0, "id")), id);
        assert_string_equal(json_string_value(json_object_get(r0, "kind")), "test.sleep");
        assert_string_equal(json_string_value(json_object_get(r0, "target")), "node/hv-1");
        assert_string_equal(json_string_value(json_object_get(r0, "state")), "succeeded");
        assert_null(json_object_get(r0, "errorCode"));
        harness_free(h);
}

static void test_admission_failures(void **state)
{
        (void)state;
        struct harness *h = harness_new(2);
        char unknown[PROTO_ID_MAX + 1], wrong_target[PROTO_ID_MAX + 1], bad_params[PROTO_ID_MAX + 1];
        struct job_ctx *job = submit(h, "vps.teleport", PROTO_TARGET_VPS, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", NULL,
                                     1, 0, unknown);
        assert_null(job->kind);
        submit(h, "test.sleep", PROTO_TARGET_VPS, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", sleep_ms(0), 1, 0,
               wrong_target);
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, json_pack("{s:s}", "sleepMs", "soon"), 1, 0, bad_params);

        /* A job that failed to decode before admission. */
        struct proto_job pj = { .attempt = 3 };
        snprintf(pj.id, sizeof(pj.id), "job-x");
        _cleanup_na_error_ struct na_error derr = NA_ERROR_INIT;
        na_error_field(&derr, "kind", "is required");
        assert_non_null(jobs_submit_failed(h->jobs, &pj, &derr, &sink, h));
        assert_false(na_error_is_set(&derr)); /* moved into the job */
        run_until_done(h, 4);

        const struct done *d = done_of(h, unknown);
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(d->code, NA_E_UNSUPPORTED_JOB);
        assert_string_equal(result_code(d), "UNSUPPORTED_JOB");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d->result, "error"), "httpStatus")), 400);
        assert_non_null(strstr(d->message, "vps.teleport"));
        assert_false(d->had_before_run); /* nothing ran, nothing was recorded */

        d = done_of(h, wrong_target);
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(result_code(d), "VALIDATION_ERROR");
        json_t *errs = json_object_get(json_object_get(json_object_get(d->details, "target"), "type"), "_errors");
        assert_string_equal(json_string_value(json_array_get(errs, 0)), "must be node for test.sleep");
        assert_false(d->had_before_run);

        d = done_of(h, bad_params);
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(result_code(d), "VALIDATION_ERROR");
        errs = json_object_get(json_object_get(d->details, "sleepMs"), "_errors");
        assert_string_equal(json_string_value(json_array_get(errs, 0)), "must be an integer");
        assert_false(d->had_before_run); /* params are checked before anything is recorded */

        d = done_of(h, "job-x");
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(result_code(d), "VALIDATION_ERROR");
        assert_int_equal(json_integer_value(json_object_get(d->result, "attempt")), 3);

        struct jobs_counters c;
        jobs_counters(h->jobs, &c);
        assert_int_equal(c.failed, 4);
        _cleanup_json_ json_t *list = jobs_list_json(h->jobs);
        json_t *recent = json_object_get(list, "recent");
        assert_int_equal(json_array_size(recent), 4);
        size_t i;
        json_t *r;
        bool found = false;
        json_array_foreach(recent, i, r)
                if (streq(json_string_value(json_object_get(r, "id")), "job-x")) {
                        found = true;
                        assert_string_equal(json_string_value(json_object_get(r, "errorCode")), "VALIDATION_ERROR");
                        assert_string_equal(json_string_value(json_object_get(r, "state")), "failed");
                        assert_string_equal(json_string_value(json_object_get(r, "target")), "node/-");
                }
        assert_true(found);
        /* Newest first: the last one to finish leads. */
        assert_string_equal(json_string_value(json_object_get(json_array_get(recent, 0), "id")), h->done[3].id);
        harness_free(h);
}

/* The node drains (agent/jobs/job-drain.h): creation kinds refused, the others run, until it ends. */
static void test_node_drain(void **state)
{
        (void)state;
        struct harness *h = harness_new(2);
        char create[PROTO_ID_MAX + 1], deploy[PROTO_ID_MAX + 1], other[PROTO_ID_MAX + 1], after[PROTO_ID_MAX + 1];
        assert_true(job_drain_refuses("vps.create") && job_drain_refuses("app.deploy"));
        assert_false(job_drain_refuses("vps.delete") || job_drain_refuses("app.backup.export") ||
                     job_drain_refuses(NULL));
        jobs_set_node_drain(h->jobs, true);
        assert_true(jobs_node_drain(h->jobs));
        submit(h, "vps.create", PROTO_TARGET_VPS, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", NULL, 1, 0, create);
        submit(h, "app.deploy", PROTO_TARGET_APP, "7f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", NULL, 1, 0, deploy);
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, sleep_ms(0), 1, 0, other);
        run_until_done(h, 3);
        for (int i = 0; i < 2; i++) {
                const struct done *d = done_of(h, i ? deploy : create);
                assert_int_equal(d->state, JOB_FAILED);
                assert_string_equal(result_code(d), "INVALID_STATE");
                assert_int_equal(json_integer_value(json_object_get(json_object_get(d->result, "error"), "httpStatus")), 409);
                assert_string_equal(json_string_value(json_object_get(d->details, "state")), "draining");
                assert_false(d->had_before_run); /* refused before anything was recorded */
        }
        assert_int_equal(done_of(h, other)->state, JOB_SUCCEEDED);
        /* Ended: a creation kind is admitted again (and fails here only on its params). */
        jobs_set_node_drain(h->jobs, false);
        submit(h, "vps.create", PROTO_TARGET_VPS, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", NULL, 1, 0, after);
        run_until_done(h, 4);
        assert_string_not_equal(result_code(done_of(h, after)), "INVALID_STATE");
        harness_free(h);
}

/* Per-target order: a blocker holds the target while jobs arrive out of createdAt order. */
static void test_per_target_order(void **state)
{
        (void)state;
        struct harness *h = harness_new(4);
        char blocker[PROTO_ID_MAX + 1];
        pthread_mutex_lock(&h->lock);
        h->hold_all = true;
        pthread_mutex_unlock(&h->lock);
        submit(h, "test.append", PROTO_TARGET_NODE, "A", sleep_ms(0), 100, 0, blocker);

        /* createdAt 500, 300, 100 (earlier than the running blocker), 400, 200 */
        static const int64_t created[] = { 500, 300, 50, 400, 200 };
        char ids[5][PROTO_ID_MAX + 1];
        for (int i = 0; i < 5; i++)
                submit(h, "test.append", PROTO_TARGET_NODE, "A", sleep_ms(0), created[i], 0, ids[i]);
        /* Another target runs beside it, and its own job is held too. */
        char other[PROTO_ID_MAX + 1];
        submit(h, "test.sleep", PROTO_TARGET_NODE, "B", sleep_ms(0), 10, 0, other);
        assert_int_equal(jobs_running(h->jobs), 2);
        assert_int_equal(jobs_queued(h->jobs), 5);
        assert_int_equal(jobs_active(h->jobs), 7);

        /* jobs lists them: 2 running, 5 queued. */
        _cleanup_json_ json_t *list = jobs_list_json(h->jobs);
        assert_int_equal(json_array_size(json_object_get(list, "running")), 2);
        assert_int_equal(json_array_size(json_object_get(list, "queued")), 5);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(list, "queued"), 0), "state")),
                            "queued");

        gate_open(h);
        run_until_done(h, 7);

        /* Target A: the blocker, then createdAt order (50 first: it never overtakes a running job). */
        static const int want_created[] = { 50, 200, 300, 400, 500 };
        const char *order[6] = { blocker };
        for (int k = 0; k < 5; k++)
                for (int i = 0; i < 5; i++)
                        if (created[i] == want_created[k])
                                order[k + 1] = ids[i];
        int pos = 0;
        for (int i = 0; i < h->ndone; i++) {
                if (!streq(h->done[i].target, "node/A"))
                        continue;
                assert_string_equal(h->done[i].id, order[pos]);
                assert_int_equal(h->done[i].state, JOB_SUCCEEDED);
                pos++;
        }
        assert_int_equal(pos, 6);

        /* The effects landed in the same order (test.append writes its id). */
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/test-effects.log", h->dir) < 0)
                abort();
        _cleanup_free_ char *effects = unit_slurp(path, NULL);
        assert_non_null(effects);
        char want[6 * 40] = "";
        for (int i = 0; i < 6; i++) {
                strcat(want, order[i]);
                strcat(want, "\n");
        }
        assert_string_equal(effects, want);
        harness_free(h);
}

static void poll_parallelism(struct harness *h)
{
        /* All three slots taken and held: check the bound from the loop thread, then let go. */
        if (inside(h) == 3) {
                assert_int_equal(jobs_running(h->jobs), 3);
                assert_int_equal(jobs_queued(h->jobs), 7);
                h->on_poll = NULL;
                gate_open(h);
        }
}

static void test_parallelism_bound(void **state)
{
        (void)state;
        struct harness *h = harness_new(3);
        pthread_mutex_lock(&h->lock);
        h->hold_all = true;
        pthread_mutex_unlock(&h->lock);
        for (int i = 0; i < 10; i++) {
                char target[16];
                snprintf(target, sizeof(target), "t%d", i);
                submit(h, "test.sleep", PROTO_TARGET_NODE, target, sleep_ms(i % 3 * 5), 1000 + i, 0, NULL);
                assert_true(jobs_running(h->jobs) <= 3);
        }
        assert_int_equal(jobs_running(h->jobs), 3);
        assert_int_equal(jobs_queued(h->jobs), 7);
        h->on_poll = poll_parallelism;
        run_until_done(h, 10);
        assert_null(h->on_poll); /* the full house was seen */
        assert_int_equal(h->max_inside, 3);
        assert_true(h->max_running_seen <= 3);
        for (int i = 0; i < 10; i++)
                assert_int_equal(h->done[i].state, JOB_SUCCEEDED);

        /* Raising the bound lets more run at once. */
        assert_int_equal(jobs_max_parallel(h->jobs), 3);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        pthread_mutex_lock(&h->lock);
        h->hold_all = true;
        h->max_inside = 0;
        pthread_mutex_unlock(&h->lock);
        for (int i = 0; i < 6; i++) {
                char target[16];
                snprintf(target, sizeof(target), "u%d", i);
                submit(h, "test.sleep", PROTO_TARGET_NODE, target, sleep_ms(0), 1, 0, NULL);
        }
        assert_int_equal(jobs_running(h->jobs), 3);
        assert_int_equal(jobs_set_max_parallel(h->jobs, 5, &err), 0);
        h->max_parallel = 5;
        assert_int_equal(jobs_max_parallel(h->jobs), 5);
        assert_int_equal(jobs_running(h->jobs), 5);
        assert_int_equal(jobs_queued(h->jobs), 1);
        gate_open(h);
        run_until_done(h, 16);
        assert_true(h->max_inside <= 5);
        harness_free(h);
}

static void test_timeout(void **state)
{
        (void)state;
        struct harness *h = harness_new(2);
        char id[PROTO_ID_MAX + 1];
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, sleep_ms(600000), 1, 1, id); /* timeoutSec 1 */
        run_until_done(h, 1);
        const struct done *d = done_of(h, id);
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(d->code, NA_E_JOB_TIMEOUT);
        assert_string_equal(result_code(d), "JOB_TIMEOUT");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d->result, "error"), "httpStatus")), 504);
        assert_non_null(strstr(d->message, "ran past its timeout of 1s"));
        assert_true(json_integer_value(json_object_get(d->result, "durationMs")) >= 1000);
        assert_int_equal(h->after_runs, 1); /* a timed-out job has a result to record */
        harness_free(h);
}

static void cancel_on_progress(struct harness *h, struct job_ctx *job)
{
        jobs_request_stop(job, JOB_STOP_CANCELLED);
        jobs_request_stop(job, JOB_STOP_SHUTDOWN); /* the first reason stands */
        h->on_progress = NULL;
}

static void test_cancel_running(void **state)
{
        (void)state;
        struct harness *h = harness_new(2);
        char id[PROTO_ID_MAX + 1];
        h->on_progress = cancel_on_progress; /* test.sleep reports progress as it starts */
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, sleep_ms(600000), 1, 0, id);
        run_until_done(h, 1);
        const struct done *d = done_of(h, id);
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(d->code, NA_E_JOB_CANCELLED);
        assert_string_equal(result_code(d), "JOB_CANCELLED");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d->result, "error"), "httpStatus")), 409);
        harness_free(h);
}

static void test_cancel_queued(void **state)
{
        (void)state;
        struct harness *h = harness_new(2);
        pthread_mutex_lock(&h->lock);
        h->hold_all = true;
        pthread_mutex_unlock(&h->lock);
        char first[PROTO_ID_MAX + 1], queued[PROTO_ID_MAX + 1];
        submit(h, "test.append", PROTO_TARGET_NODE, "A", sleep_ms(0), 1, 0, first);
        struct job_ctx *q = submit(h, "test.append", PROTO_TARGET_NODE, "A", sleep_ms(0), 2, 0, queued);
        assert_int_equal(q->state, JOB_QUEUED);
        jobs_request_stop(q, JOB_STOP_CANCELLED);
        gate_open(h);
        run_until_done(h, 2);
        assert_int_equal(done_of(h, first)->state, JOB_SUCCEEDED);
        const struct done *d = done_of(h, queued);
        assert_int_equal(d->state, JOB_FAILED);
        assert_string_equal(result_code(d), "JOB_CANCELLED");
        assert_false(d->had_before_run); /* it never started */
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/test-runs.log", h->dir) < 0)
                abort();
        _cleanup_free_ char *runs = unit_slurp(path, NULL);
        assert_null(strstr(runs, queued));
        harness_free(h);
}

static void stop_on_progress(struct harness *h, struct job_ctx *job)
{
        jobs_request_stop(job, h->stop_reason);
        h->on_progress = NULL;
}

static void check_abandoned(enum job_stop why)
{
        struct harness *h = harness_new(2);
        char id[PROTO_ID_MAX + 1];
        h->on_progress = stop_on_progress;
        h->stop_reason = why;
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, sleep_ms(600000), 1, 0, id);
        run_until_done(h, 1);
        const struct done *d = done_of(h, id);
        assert_int_equal(d->state, JOB_ABANDONED);
        assert_null(d->result); /* nothing is posted: it runs again when offered again */
        assert_int_equal(h->after_runs, 0);
        struct jobs_counters c;
        jobs_counters(h->jobs, &c);
        assert_int_equal(c.abandoned, 1);
        harness_free(h);
}

static void test_shutdown_and_lease_lost_abandon(void **state)
{
        (void)state;
        check_abandoned(JOB_STOP_SHUTDOWN);
        check_abandoned(JOB_STOP_LEASE_LOST);
}

static void test_stop_all(void **state)
{
        (void)state;
        struct harness *h = harness_new(2);
        pthread_mutex_lock(&h->lock);
        h->hold_all = true;
        pthread_mutex_unlock(&h->lock);
        char running[PROTO_ID_MAX + 1], queued1[PROTO_ID_MAX + 1], queued2[PROTO_ID_MAX + 1], other[PROTO_ID_MAX + 1];
        submit(h, "test.append", PROTO_TARGET_NODE, "A", sleep_ms(0), 1, 0, running);
        submit(h, "test.append", PROTO_TARGET_NODE, "A", sleep_ms(0), 2, 0, queued1);
        submit(h, "test.sleep", PROTO_TARGET_NODE, "B", sleep_ms(0), 1, 0, other);
        submit(h, "test.sleep", PROTO_TARGET_NODE, "C", sleep_ms(0), 1, 0, queued2); /* no free slot */
        assert_int_equal(jobs_running(h->jobs), 2);
        assert_int_equal(jobs_queued(h->jobs), 2);

        /* Stop taking work, but let the running ones finish. */
        jobs_stop_all(h->jobs, JOB_STOP_SHUTDOWN, false);
        char late[PROTO_ID_MAX + 1];
        submit(h, "test.sleep", PROTO_TARGET_NODE, "D", sleep_ms(0), 1, 0, late);
        gate_open(h);
        run_until_done(h, 5);
        assert_int_equal(done_of(h, running)->state, JOB_SUCCEEDED);
        assert_int_equal(done_of(h, other)->state, JOB_SUCCEEDED);
        assert_int_equal(done_of(h, queued1)->state, JOB_ABANDONED);
        assert_int_equal(done_of(h, queued2)->state, JOB_ABANDONED);
        assert_int_equal(done_of(h, late)->state, JOB_ABANDONED);
        assert_false(done_of(h, queued1)->had_before_run);
        assert_int_equal(jobs_active(h->jobs), 0);
        harness_free(h);
}

static void burst_on_progress(struct harness *h, struct job_ctx *job)
{
        /* 100 calls while the loop is busy here: they reach the sink as one. */
        h->on_progress = NULL;
        h->progress_calls = 0;
        for (int i = 1; i <= 100; i++)
                job_progress(job, "working", i, "step %d", i);
        struct job_progress_info after;
        job_progress_get(job, &after);
        assert_int_equal(after.percent, 100);
        assert_string_equal(after.message, "step 100");
        job_progress(job, NULL, 250, NULL); /* no stage: keeps "working"; percent capped */
        job_progress_get(job, &after);
        assert_string_equal(after.stage, "working");
        assert_int_equal(after.percent, 100);
        assert_string_equal(after.message, "");
        job_progress(job, "working", -7, "%s", "no percent");
        job_progress_get(job, &after);
        assert_int_equal(after.percent, -1);
}

static void poll_burst_done(struct harness *h)
{
        /* Once the coalesced progress arrived, stop the job. */
        if (h->progress_calls >= 1 && !h->on_progress) {
                struct job_ctx *job = jobs_find(h->jobs, h->focus_id);
                if (job)
                        jobs_request_stop(job, JOB_STOP_CANCELLED);
                h->on_poll = NULL;
        }
}

static void test_progress_coalesced(void **state)
{
        (void)state;
        struct harness *h = harness_new(1);
        char id[PROTO_ID_MAX + 1];
        h->on_progress = burst_on_progress;
        h->on_poll = poll_burst_done;
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, sleep_ms(600000), 1, 0, id);
        snprintf(h->focus_id, sizeof(h->focus_id), "%s", id);
        run_until_done(h, 1);
        /* 102 calls from the loop thread, at most 2 more from the worker's own timer: a handful of sink calls. */
        assert_in_range(h->progress_calls, 1, 3);
        assert_string_equal(result_code(done_of(h, id)), "JOB_CANCELLED");
        harness_free(h);
}

static void stages_on_progress(struct harness *h, struct job_ctx *job)
{
        h->on_progress = NULL;
        struct job_progress_info got;
        /* What test.sleep said as it started. */
        job_progress_get(job, &got);
        assert_string_equal(got.stage, "working");

        /* Stage changes coalesce like percents: the link posts the latest (agent/link/progress-pace.h). */
        job_progress(job, "preparing-disk", 10, "a1");
        job_progress(job, "writing-image", 40, "b1");
        job_progress(job, NULL, 50, "b2"); /* no stage: still writing-image */
        job_progress_get(job, &got);
        assert_string_equal(got.stage, "writing-image");
        assert_int_equal(got.percent, 50);
        assert_string_equal(got.message, "b2");
        job_progress(job, "booting", -1, NULL);
        job_progress_get(job, &got);
        assert_string_equal(got.stage, "booting");
        assert_int_equal(got.percent, -1);
        assert_string_equal(got.message, "");
        jobs_request_stop(job, JOB_STOP_CANCELLED);
}

static void test_progress_latest_stage(void **state)
{
        (void)state;
        struct harness *h = harness_new(1);
        char id[PROTO_ID_MAX + 1];
        h->on_progress = stages_on_progress;
        submit(h, "test.sleep", PROTO_TARGET_NODE, NULL, sleep_ms(600000), 1, 0, id);
        run_until_done(h, 1);
        assert_null(h->on_progress);
        assert_string_equal(result_code(done_of(h, id)), "JOB_CANCELLED");
        harness_free(h);
}

static void test_many_jobs_many_targets(void **state)
{
        (void)state;
        /* A burst like a long poll's: 60 jobs over 7 targets, max 4; each target's jobs in createdAt order. */
        struct harness *h = harness_new(4);
        char ids[60][PROTO_ID_MAX + 1];
        int64_t created[60];
        for (int i = 0; i < 60; i++) {
                char target[8];
                snprintf(target, sizeof(target), "T%d", i % 7);
                created[i] = 1000 - (i * 37) % 101; /* scrambled */
                submit(h, "test.append", PROTO_TARGET_NODE, target, sleep_ms(0), created[i], 0, ids[i]);
                assert_true(jobs_running(h->jobs) <= 4);
        }
        run_until_done(h, 60);
        assert_true(h->max_inside <= 4);
        assert_true(h->max_running_seen <= 4);
        /*
         * The first job of T0..T3 started as it was submitted (four free slots); the
         * jobs behind it, and every job of T4..T6 (no slot left), ran in createdAt order.
         */
        int64_t last[7];
        int count[7] = { 0 };
        for (int k = 0; k < h->ndone; k++) {
                int i = 0;
                while (!streq(ids[i], h->done[k].id))
                        i++;
                int t = i % 7;
                assert_int_equal(h->done[k].state, JOB_SUCCEEDED);
                bool first_ran_at_once = t < 4 && count[t] == 1;
                if (count[t] > 0 && !first_ran_at_once && created[i] < last[t])
                        fail_msg("target T%d: createdAt %lld ran after %lld", t, (long long)created[i], (long long)last[t]);
                if (count[t] == 0 && t < 4)
                        assert_int_equal(i, t); /* the first one submitted */
                count[t]++;
                last[t] = created[i];
        }
        for (int t = 0; t < 7; t++)
                assert_int_equal(count[t], t < 4 ? 9 : 8);
        harness_free(h);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_runs_and_succeeds, teardown),
                cmocka_unit_test_teardown(test_admission_failures, teardown),
                cmocka_unit_test_teardown(test_node_drain, teardown),
                cmocka_unit_test_teardown(test_per_target_order, teardown),
                cmocka_unit_test_teardown(test_parallelism_bound, teardown),
                cmocka_unit_test_teardown(test_timeout, teardown),
                cmocka_unit_test_teardown(test_cancel_running, teardown),
                cmocka_unit_test_teardown(test_cancel_queued, teardown),
                cmocka_unit_test_teardown(test_shutdown_and_lease_lost_abandon, teardown),
                cmocka_unit_test_teardown(test_stop_all, teardown),
                cmocka_unit_test_teardown(test_progress_coalesced, teardown),
                cmocka_unit_test_teardown(test_progress_latest_stage, teardown),
                cmocka_unit_test_teardown(test_many_jobs_many_targets, teardown),
        };
        return cmocka_run_group_tests(tests, setup_env, NULL);
}
