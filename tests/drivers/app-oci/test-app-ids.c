/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-app id slots: lowest free first, idempotent per app, persistent across calls
 * (the file), freed slots reused, bad input refused, ranges never past 2^32-1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/wait.h>

#include "common/unit.h"
#include "drivers/app/oci/app-ids.h"

static int setup(void **state)
{
        *state = unit_tmpdir("app-ids");
        return 0;
}

static int teardown(void **state)
{
        unit_rmrf_free(*state);
        return 0;
}

static uint32_t alloc(const char *dir, uint32_t base, const char *id)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_ids ids;
        if (app_ids_allocate(dir, base, id, &ids, &err) < 0)
                fail_msg("allocate %s: %s", id, err.message);
        assert_int_equal(ids.count, APP_IDS_RANGE);
        assert_int_equal(ids.uid_base, base + ids.slot * APP_IDS_RANGE);
        return ids.slot;
}

static void test_allocate(void **state)
{
        const char *dir = *state;
        struct na_error err = NA_ERROR_INIT;
        struct app_ids ids;
        assert_int_equal(app_ids_lookup(dir, APP_IDS_DEFAULT_BASE, "a", &ids, &err), -ENOENT);
        assert_false(na_error_is_set(&err));
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "a"), 0);
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "b"), 1);
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "c"), 2);
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "b"), 1); /* idempotent */
        assert_int_equal(app_ids_lookup(dir, APP_IDS_DEFAULT_BASE, "c", &ids, &err), 0);
        assert_int_equal(ids.uid_base, 1000000000u + 2 * 65536);

        assert_int_equal(app_ids_free(dir, "b", &err), 0);
        assert_int_equal(app_ids_free(dir, "b", &err), 0); /* not held: fine */
        assert_int_equal(app_ids_free(dir, "zz", &err), 0);
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "d"), 1); /* lowest free */
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "e"), 3);
        assert_int_equal(app_ids_free(dir, "a", &err), 0);
        assert_int_equal(alloc(dir, APP_IDS_DEFAULT_BASE, "f"), 0);

        /* The file is what persists: a fresh reader sees the same. */
        char path[4096];
        snprintf(path, sizeof(path), "%s/" APP_IDS_FILE, dir);
        char *text = unit_slurp(path, NULL);
        assert_non_null(text);
        assert_non_null(strstr(text, "\"d\": 1"));
        free(text);
}

static void test_concurrent(void **state)
{
        /* Eight processes allocate 16 apps each: 128 distinct slots 0..127. */
        const char *dir = *state;
        for (int p = 0; p < 8; p++) {
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        for (int i = 0; i < 16; i++) {
                                char id[32];
                                snprintf(id, sizeof(id), "p%d-%d", p, i);
                                struct na_error err = NA_ERROR_INIT;
                                struct app_ids ids;
                                if (app_ids_allocate(dir, APP_IDS_DEFAULT_BASE, id, &ids, &err) < 0)
                                        _exit(1);
                        }
                        _exit(0);
                }
        }
        for (int p = 0; p < 8; p++) {
                int st;
                assert_true(wait(&st) > 0);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        bool seen[128] = { false };
        for (int p = 0; p < 8; p++)
                for (int i = 0; i < 16; i++) {
                        char id[32];
                        snprintf(id, sizeof(id), "p%d-%d", p, i);
                        uint32_t s = alloc(dir, APP_IDS_DEFAULT_BASE, id);
                        assert_true(s < 128);
                        assert_false(seen[s]);
                        seen[s] = true;
                }
}

static void test_limits(void **state)
{
        const char *dir = *state;
        struct na_error err = NA_ERROR_INIT;
        struct app_ids ids;
        /* A base that leaves two ranges below 2^32-1. */
        uint32_t base = UINT32_MAX - 2 * 65536;
        assert_int_equal(alloc(dir, base, "x"), 0);
        assert_int_equal(alloc(dir, base, "y"), 1);
        assert_int_equal(app_ids_allocate(dir, base, "z", &ids, &err), -ENOSPC);
        na_error_clear(&err);
        assert_int_equal(app_ids_allocate(dir, 0, "z", &ids, &err), -EINVAL);
        na_error_clear(&err);
        assert_int_equal(app_ids_allocate(dir, APP_IDS_DEFAULT_BASE, "../z", &ids, &err), -EINVAL);
        na_error_clear(&err);
        assert_int_equal(app_ids_allocate("relative", APP_IDS_DEFAULT_BASE, "z", &ids, &err), -EINVAL);
        na_error_clear(&err);

        /* A damaged file is an error, not a fresh start that would hand out taken ranges. */
        char *p = unit_write_str(dir, APP_IDS_FILE, "{\"slots\": [1]}", 0600);
        free(p);
        assert_true(app_ids_allocate(dir, APP_IDS_DEFAULT_BASE, "q", &ids, &err) < 0);
        assert_non_null(strstr(err.message, "damaged"));
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_allocate, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
