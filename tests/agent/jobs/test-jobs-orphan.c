/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shutdown with a job still inside its driver call (issue 9, item 3): jobs_free()
 * while a worker runs, then the sink's owner and the loop are freed, then the worker
 * returns. It must touch neither (AddressSanitizer, which CI runs this under, reports
 * a use after free otherwise): it frees its own job and nothing else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/jobs/jobs.h"
#include "common/uuid.h"

struct owner {
        atomic_int before_runs, after_runs;
        char pad[256]; /* a real link job's size, more or less */
};

static int before_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        (void)job;
        (void)err;
        struct owner *o = userdata;
        atomic_fetch_add(&o->before_runs, 1);
        return 0;
}

static int after_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        (void)job;
        (void)err;
        struct owner *o = userdata; /* freed by the time a late worker gets here, before the fix */
        atomic_fetch_add(&o->after_runs, 1);
        return 0;
}

static void progress(void *userdata, struct job_ctx *job)
{
        (void)userdata;
        (void)job;
}

static void finished(void *userdata, struct job_ctx *job)
{
        (void)userdata;
        (void)job;
}

static const struct job_sink sink = {
        .before_run = before_run, .after_run = after_run, .progress = progress, .finished = finished,
};

static void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void test_worker_outlives_the_agent(void **state)
{
        (void)state;
        setenv("NODEAGENT_TEST_KINDS", "1", 1);
        struct na_error err = NA_ERROR_INIT;
        struct loop *loop = NULL;
        assert_int_equal(loop_new(&loop, &err), 0);
        struct agent_services services = { 0 };
        struct jobs *jobs = NULL;
        assert_int_equal(jobs_new(loop, &services, 2, &jobs, &err), 0);

        struct owner *o = calloc(1, sizeof(*o));
        assert_non_null(o);
        struct proto_job pj = { .attempt = 1, .target_type = PROTO_TARGET_NODE, .timeout_sec = 60 };
        assert_int_equal(na_uuid_random(pj.id, sizeof(pj.id)), 0);
        snprintf(pj.kind, sizeof(pj.kind), "test.hang");
        pj.params = json_pack("{s:i}", "sleepMs", 600);
        assert_non_null(jobs_submit(jobs, &pj, &sink, o));
        for (int i = 0; i < 500 && atomic_load(&o->before_runs) == 0; i++)
                sleep_ms(2);
        assert_int_equal(atomic_load(&o->before_runs), 1);
        assert_int_equal(jobs_running(jobs), 1);

        /* The daemon's teardown after the drain's grace: jobs, then the link (the
         * sink's owner), then the loop. */
        jobs_stop_all(jobs, JOB_STOP_SHUTDOWN, true);
        jobs_free(jobs);
        free(o);
        loop_free(loop);

        sleep_ms(1000); /* the worker returns meanwhile */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_worker_outlives_the_agent),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
