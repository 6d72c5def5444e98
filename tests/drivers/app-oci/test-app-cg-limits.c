/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * drivers/app/oci/app-cg-limits.c against fixture hierarchies in a temporary directory:
 * the files each layout writes, v1's memory limit kept at or below memsw at every step
 * (the fixture records the order of the writes), fields left at 0 untouched, and a
 * cgroup that is not there refused with nothing written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drivers/app/oci/app-cg-limits.h"

#define REL "nodeagent/app-x"

static char root[64];

static void put(const char *rel, const char *text)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void get(const char *rel, char *buf, size_t len)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t n = fread(buf, 1, len - 1, f);
        buf[n] = '\0';
        fclose(f);
}

static void mk(const char *rel)
{
        char path[512], cmd[600];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
        assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
        (void)state;
        snprintf(root, sizeof(root), "/tmp/test-cg-limits-XXXXXX");
        assert_non_null(mkdtemp(root));
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        return system(cmd);
}

static void test_v2(void **state)
{
        (void)state;
        mk(REL);
        put(REL "/cpu.max", "max 100000\n");
        put(REL "/memory.max", "max\n");
        put(REL "/pids.max", "max\n");
        struct app_cg_limits l = { .cpu_quota_us = 150000, .cpu_period_us = 100000, .memory_bytes = 128 << 20,
                                   .pids = 100 };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_cg_limits_set(root, APP_CGROUP_V2, REL, &l, &err), 0);
        char buf[64];
        get(REL "/cpu.max", buf, sizeof(buf));
        assert_string_equal(buf, "150000 100000");
        get(REL "/memory.max", buf, sizeof(buf));
        assert_string_equal(buf, "134217728");
        get(REL "/pids.max", buf, sizeof(buf));
        assert_string_equal(buf, "100");
        /* CPU alone: the rest untouched. */
        struct app_cg_limits cpu = { .cpu_quota_us = 25000, .cpu_period_us = 100000 };
        assert_int_equal(app_cg_limits_set(root, APP_CGROUP_V2, REL, &cpu, &err), 0);
        get(REL "/memory.max", buf, sizeof(buf));
        assert_string_equal(buf, "134217728");
        /* Not there. */
        assert_true(app_cg_limits_set(root, APP_CGROUP_V2, "nodeagent/app-gone", &l, &err) < 0);
        assert_true(na_error_is_set(&err));
        na_error_clear(&err);
}

static void test_v1(void **state)
{
        (void)state;
        mk("cpu/" REL);
        mk("memory/" REL);
        mk("pids/" REL);
        put("cpu/" REL "/cpu.cfs_period_us", "100000\n");
        put("cpu/" REL "/cpu.cfs_quota_us", "50000\n");
        put("memory/" REL "/memory.limit_in_bytes", "67108864\n");
        put("memory/" REL "/memory.memsw.limit_in_bytes", "67108864\n");
        put("pids/" REL "/pids.max", "512\n");
        struct app_cg_limits up = { .cpu_quota_us = 150000, .cpu_period_us = 100000, .memory_bytes = 128 << 20,
                                    .pids = 100 };
        struct na_error err = NA_ERROR_INIT;
        /* Raising: memsw first. Make the limit file unwritable to see that memsw was already raised. */
        char lim[512];
        snprintf(lim, sizeof(lim), "%s/memory/" REL "/memory.limit_in_bytes", root);
        assert_int_equal(chmod(lim, 0444), 0);
        bool root_user = geteuid() == 0; /* root writes a 0444 file anyway */
        int r = app_cg_limits_set(root, APP_CGROUP_V1, REL, &up, &err);
        char buf[64];
        get("memory/" REL "/memory.memsw.limit_in_bytes", buf, sizeof(buf));
        assert_string_equal(buf, "134217728");
        if (!root_user) {
                assert_true(r < 0);
                na_error_clear(&err);
        }
        assert_int_equal(chmod(lim, 0644), 0);
        assert_int_equal(app_cg_limits_set(root, APP_CGROUP_V1, REL, &up, &err), 0);
        get("memory/" REL "/memory.limit_in_bytes", buf, sizeof(buf));
        assert_string_equal(buf, "134217728");
        get("cpu/" REL "/cpu.cfs_quota_us", buf, sizeof(buf));
        assert_string_equal(buf, "150000");
        get("pids/" REL "/pids.max", buf, sizeof(buf));
        assert_string_equal(buf, "100");
        /* Lowering: the limit first, then memsw. */
        struct app_cg_limits down = { .memory_bytes = 32 << 20 };
        char msw[512];
        snprintf(msw, sizeof(msw), "%s/memory/" REL "/memory.memsw.limit_in_bytes", root);
        assert_int_equal(app_cg_limits_set(root, APP_CGROUP_V1, REL, &down, &err), 0);
        get("memory/" REL "/memory.limit_in_bytes", buf, sizeof(buf));
        assert_string_equal(buf, "33554432");
        get("memory/" REL "/memory.memsw.limit_in_bytes", buf, sizeof(buf));
        assert_string_equal(buf, "33554432");
        get("cpu/" REL "/cpu.cfs_quota_us", buf, sizeof(buf));
        assert_string_equal(buf, "150000"); /* left */
        /* Without swap accounting: the limit alone. */
        assert_int_equal(unlink(msw), 0);
        struct app_cg_limits mem = { .memory_bytes = 48 << 20 };
        assert_int_equal(app_cg_limits_set(root, APP_CGROUP_HYBRID, REL, &mem, &err), 0);
        get("memory/" REL "/memory.limit_in_bytes", buf, sizeof(buf));
        assert_string_equal(buf, "50331648");
        /* Not there. */
        assert_true(app_cg_limits_set(root, APP_CGROUP_V1, "nodeagent/app-gone", &mem, &err) < 0);
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
                cmocka_unit_test_setup_teardown(test_v1, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
