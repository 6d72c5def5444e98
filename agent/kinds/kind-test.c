/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Kinds for the project's own tests. They exist only in test builds (-DNA_TEST_HOOKS=ON,
 * the default for development trees; the packaged build is configured with it OFF and
 * has neither this code nor its names), and even there only when the daemon runs with
 * NODEAGENT_TEST_KINDS=1 (otherwise they are UNSUPPORTED_JOB like any unknown kind):
 *   test.append {sleepMs?}  changes the node: appends its job id to
 *                           <state_dir>/test-effects.log unless it is already there
 *                           (converging, like every real kind), and logs every run
 *                           in test-runs.log; the crash test counts both.
 *   test.sleep {sleepMs?, steps?}  changes nothing; sleeps with safe points
 *                           (timeouts, cancels, leases, drain); with steps (1..1000)
 *                           it reports "working" at step * 100 / steps percent after
 *                           each of that many equal parts (the progress pace test).
 *   test.once {sleepMs?}    test.append that is never run twice (.once, like
 *                           vps.exec): killed while it runs, it fails
 *                           JOB_INTERRUPTED when offered again.
 *   test.hang {sleepMs?}    changes the node (journaled) but sleeps with no safe
 *                           point: a driver call that does not return in time, for
 *                           the shutdown that leaves a worker behind.
 * Without steps they report progress once, at start: what keeps their lease alive
 * after that is the link's keepalive, which the lease test observes.
 */
#ifdef NA_TEST_HOOKS

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "common/fileio.h"
#include "proto/decode.h"

static const char *const test_stages[] = { "working", NULL };

struct test_params {
        int64_t sleep_ms;
        int64_t steps;
};

static int test_decode(json_t *params, void **ret, struct na_error *err)
{
        struct test_params *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "params");
        proto_int(params, NULL, "sleepMs", 0, 0, 600000, &p->sleep_ms, err);
        proto_int(params, NULL, "steps", 0, 0, 1000, &p->steps, err);
        if (na_error_is_set(err)) {
                free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

static int sleep_with_safe_points(struct job_ctx *ctx, int64_t ms, struct na_error *err)
{
        int64_t slept = 0;
        while (slept < ms) {
                int r = job_checkpoint(ctx, err);
                if (r < 0)
                        return r;
                int64_t step = ms - slept < 20 ? ms - slept : 20;
                struct timespec ts = { .tv_sec = 0, .tv_nsec = step * 1000000L };
                nanosleep(&ts, NULL);
                slept += step;
        }
        return job_checkpoint(ctx, err);
}

static int append_line(const char *path, const char *line, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        int r = na_write_all(fd, line, strlen(line), path, err);
        if (r < 0)
                return r;
        if (fsync(fd) < 0)
                return na_error_sys(err, errno, "fsync %s", path);
        return 0;
}

static int test_append_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct test_params *p = params;
        const char *dir = job_services(ctx)->state_dir;
        char runs[4096], effects[4096], line[128];
        snprintf(runs, sizeof(runs), "%s/test-runs.log", dir);
        snprintf(effects, sizeof(effects), "%s/test-effects.log", dir);
        snprintf(line, sizeof(line), "%s %lld\n", job_id(ctx), (long long)job_attempt(ctx));
        int r = append_line(runs, line, err);
        if (r < 0)
                return r;
        job_progress(ctx, "working", 0, NULL);
        r = sleep_with_safe_points(ctx, p->sleep_ms / 2, err);
        if (r < 0)
                return r;

        /* The effect, converging: present once whatever the number of runs. */
        _cleanup_free_ char *text = NULL;
        struct na_error rerr = NA_ERROR_INIT;
        if (na_read_file(effects, 64u << 20, &text, NULL, &rerr) < 0)
                text = NULL;
        na_error_clear(&rerr);
        snprintf(line, sizeof(line), "%s\n", job_id(ctx));
        bool applied = false;
        if (!text || !strstr(text, line)) {
                r = append_line(effects, line, err);
                if (r < 0)
                        return r;
                applied = true;
        }
        r = sleep_with_safe_points(ctx, p->sleep_ms - p->sleep_ms / 2, err);
        if (r < 0)
                return r;
        *ret = json_pack("{s:b}", "applied", applied);
        return 0;
}

static int test_sleep_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct test_params *p = params;
        job_progress(ctx, "working", 0, NULL);
        int64_t steps = p->steps > 0 ? p->steps : 1;
        for (int64_t i = 1; i <= steps; i++) {
                int r = sleep_with_safe_points(ctx, p->sleep_ms * i / steps - p->sleep_ms * (i - 1) / steps, err);
                if (r < 0)
                        return r;
                if (p->steps > 0)
                        job_progress(ctx, "working", (int)(i * 100 / steps), "step %lld of %lld", (long long)i,
                                     (long long)steps);
        }
        *ret = json_pack("{s:I}", "sleptMs", (json_int_t)p->sleep_ms);
        return 0;
}

static JOB_KIND(test_append, "test.append", .target = PROTO_TARGET_NODE, .changes = true, .stages = test_stages,
                .decode = test_decode, .free_params = free, .run = test_append_run);

static JOB_KIND(test_once, "test.once", .target = PROTO_TARGET_NODE, .changes = true, .once = true,
                .stages = test_stages, .decode = test_decode, .free_params = free, .run = test_append_run);

static JOB_KIND(test_sleep, "test.sleep", .target = PROTO_TARGET_NODE, .changes = false, .stages = test_stages,
                .decode = test_decode, .free_params = free, .run = test_sleep_run);

static int test_hang_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        (void)err;
        const struct test_params *p = params;
        job_progress(ctx, "working", 0, NULL);
        struct timespec ts = { (time_t)(p->sleep_ms / 1000), (long)(p->sleep_ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        *ret = json_pack("{s:I}", "sleptMs", (json_int_t)p->sleep_ms);
        return 0;
}

static JOB_KIND(test_hang, "test.hang", .target = PROTO_TARGET_NODE, .changes = true, .stages = test_stages,
                .decode = test_decode, .free_params = free, .run = test_hang_run);

job_kind_list test_job_kinds = { &test_append, &test_once, &test_sleep, &test_hang, NULL };

#endif /* NA_TEST_HOOKS */
