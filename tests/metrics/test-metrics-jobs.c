/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/kinds/kind-metrics.c: the vps.metrics and app.metrics kinds, run against a real
 * metrics module on a fixture tree, with a minimal job context standing in for the
 * job layer (only job_services and job_target_id are used by these kinds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "fixture.h"
#include "metrics/metrics.h"

#define VPS1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define VPS1_ESC "6f1c2a3b\\x2d4c5d\\x2d4e6f\\x2d8a9b\\x2d0c1d2e3f4a5b"
#define VPS2 "22222222-2222-4222-8222-222222222222"
#define APP1 "11111111-2222-4333-8444-555555555555"

extern job_kind_list metrics_job_kinds;

struct job_ctx {
        const struct agent_services *s;
        const char *target;
};

const struct agent_services *job_services(struct job_ctx *ctx)
{
        return ctx->s;
}

const char *job_target_id(const struct job_ctx *ctx)
{
        return ctx->target;
}

static bool exists_vps2(const struct agent_services *s, const char *id)
{
        return streq(id, VPS2);
}

static const struct job_kind *kind(const char *name)
{
        for (const struct job_kind *const *k = metrics_job_kinds; *k; k++)
                if (streq((*k)->name, name))
                        return *k;
        fail_msg("no kind %s", name);
        abort();
}

struct fx {
        char *root;
        struct metrics *m;
        struct agent_services s;
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));
        struct na_error err = NA_ERROR_INIT;
        char proc[600], sys[600], cg[600], st[600];
        f->root = fx_mkdtemp("jobs");
        snprintf(proc, sizeof(proc), "%s/proc", f->root);
        snprintf(sys, sizeof(sys), "%s/sys", f->root);
        snprintf(cg, sizeof(cg), "%s/cg", f->root);
        snprintf(st, sizeof(st), "%s/state", f->root);
        struct fx_node n = { .busy = 10, .idle = 10, .cpus = 2, .mem_total_kb = 1000, .mem_avail_kb = 500 };
        fx_write_node(f->root, &n);
        fx_write(cg, "cgroup.controllers", "cpu io memory\n");
        fx_write(cg, "cpu.stat", "usage_usec 1\n");
        fx_cg2(cg, "machine.slice/machine-qemu\\x2d1\\x2dvps\\x2d" VPS1_ESC ".scope", 1000000, 1 << 20, 0, "max", 0, 0);
        struct metrics_options o = { .state_dir = st, .proc_root = proc, .sys_root = sys, .cgroup_root = cg,
                                     .no_preallocate = true };
        assert_int_equal(metrics_open(&o, &f->m, &err), 0);
        struct metrics_target_spec spec = { .kind = METRICS_VPS, .id = VPS1, .vcpus = 1, .memory_limit_bytes = 1 << 30 };
        assert_int_equal(metrics_track(f->m, &spec, &err), 0);
        uint64_t now = na_now_real_ms();
        assert_int_equal(metrics_collect(f->m, now - 20000, &err), 0);
        fx_cg2(cg, "machine.slice/machine-qemu\\x2d1\\x2dvps\\x2d" VPS1_ESC ".scope", 3000000, 1 << 20, 0, "max", 0, 0);
        assert_int_equal(metrics_collect(f->m, now - 10000, &err), 0);
        f->s.metrics = f->m;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        metrics_close(f->m);
        fx_remove(f->root);
        free(f->root);
        free(f);
        return 0;
}

/* decode + run + free, as the job layer does it. */
static int run(struct fx *f, const char *kname, const char *target, const char *params, json_t **data,
               struct na_error *err)
{
        const struct job_kind *k = kind(kname);
        _cleanup_json_ json_t *p = json_loads(params, 0, NULL);
        assert_non_null(p);
        void *decoded = NULL;
        int r = k->decode(p, &decoded, err);
        if (r < 0)
                return r;
        struct job_ctx ctx = { .s = &f->s, .target = target };
        r = k->run(&ctx, decoded, data, err);
        k->free_params(decoded);
        return r;
}

static void test_kinds(void **state)
{
        size_t n = 0;
        for (const struct job_kind *const *k = metrics_job_kinds; *k; k++)
                n++;
        assert_int_equal(n, 2);
        assert_int_equal(kind("vps.metrics")->target, PROTO_TARGET_VPS);
        assert_int_equal(kind("app.metrics")->target, PROTO_TARGET_APP);
        assert_false(kind("vps.metrics")->changes);
        assert_false(kind("app.metrics")->changes);
}

static void test_vps_metrics(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        json_t *data = NULL;
        assert_int_equal(run(f, "vps.metrics", VPS1, "{}", &data, &err), 0);
        json_t *now = json_object_get(data, "now");
        assert_string_equal(json_string_value(json_object_get(now, "targetId")), VPS1);
        assert_true(json_real_value(json_object_get(now, "cpuPercent")) == 20.0);
        assert_int_equal(json_integer_value(json_object_get(now, "memoryLimitMB")), 1024);
        json_t *series = json_object_get(data, "series");
        assert_int_equal(json_integer_value(json_object_get(series, "step")), 10);
        assert_int_equal(json_array_size(json_object_get(series, "points")), 2);
        json_decref(data);
}

static void test_validation(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        json_t *data = NULL;
        assert_int_equal(run(f, "vps.metrics", VPS1, "{\"step\":5,\"from\":\"x\"}", &data, &err), -EINVAL);
        _cleanup_json_ json_t *j = na_error_to_json(&err);
        assert_int_equal(json_integer_value(json_object_get(j, "httpStatus")), 422);
        assert_string_equal(json_string_value(json_object_get(j, "code")), "VALIDATION_ERROR");
        json_t *details = json_object_get(j, "details");
        assert_non_null(json_object_get(json_object_get(details, "step"), "_errors"));
        assert_non_null(json_object_get(json_object_get(details, "from"), "_errors"));
        na_error_clear(&err);
}

static void test_not_found(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        json_t *data = NULL;

        assert_int_equal(run(f, "vps.metrics", VPS2, "{}", &data, &err), -ENOENT);
        _cleanup_json_ json_t *j = na_error_to_json(&err);
        assert_int_equal(json_integer_value(json_object_get(j, "httpStatus")), 404);
        assert_string_equal(json_string_value(json_object_get(j, "code")), "VPS_NOT_FOUND");
        na_error_clear(&err);

        assert_int_equal(run(f, "app.metrics", APP1, "{}", &data, &err), -ENOENT);
        assert_string_equal(err.code, "APP_NOT_FOUND");
        na_error_clear(&err);

        /* the node knows the server (it was never measured): an empty answer, not an error */
        f->s.vps_exists = exists_vps2;
        assert_int_equal(run(f, "vps.metrics", VPS2, "{}", &data, &err), 0);
        assert_int_equal(json_array_size(json_object_get(json_object_get(data, "series"), "points")), 0);
        assert_string_equal(json_string_value(json_object_get(json_object_get(data, "now"), "targetId")), VPS2);
        json_decref(data);
        f->s.vps_exists = NULL;

        /* no metrics module: an internal error, not a crash */
        f->s.metrics = NULL;
        assert_true(run(f, "vps.metrics", VPS1, "{}", &data, &err) < 0);
        assert_string_equal(err.code, NA_E_INTERNAL);
        na_error_clear(&err);
        f->s.metrics = f->m;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),
                cmocka_unit_test_setup_teardown(test_vps_metrics, setup, teardown),
                cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
