/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The crash rule (drivers/app-restart.h) with a fixed clock, no crun: three restarts
 * in ten minutes after 1 s, 10 s and 60 s, the fourth a crash loop; exits older than
 * the window no longer count; configured waits; a start asked for forgets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drivers/app-restart.h"

#define MIN (60 * 1000)

static void test_three_then_loop(void **state)
{
        (void)state;
        struct app_restart_history h = { 0 };
        const unsigned want[] = { 1000, 10000, 60000 };
        int64_t t = 1000000;
        for (size_t i = 0; i < 3; i++) {
                struct app_restart_decision d = app_restart_decide(&h, t, NULL);
                assert_false(d.crash_loop);
                assert_int_equal(d.wait_ms, want[i]);
                assert_int_equal(d.nth, i + 1);
                t += d.wait_ms + 5000; /* it ran a few seconds, then crashed again */
        }
        struct app_restart_decision d = app_restart_decide(&h, t, NULL);
        assert_true(d.crash_loop);
        assert_int_equal(d.wait_ms, 0);
        /* Asked again, still a loop: the history is unchanged by a loop. */
        assert_true(app_restart_decide(&h, t + 1000, NULL).crash_loop);
        assert_int_equal(h.n, 3);
}

static void test_window_slides(void **state)
{
        (void)state;
        struct app_restart_history h = { 0 };
        int64_t t0 = 5000000;
        app_restart_decide(&h, t0, NULL);
        app_restart_decide(&h, t0 + 1 * MIN, NULL);
        app_restart_decide(&h, t0 + 2 * MIN, NULL);
        /* Ten minutes after the first, it no longer counts: a restart, the third in the window. */
        struct app_restart_decision d = app_restart_decide(&h, t0 + 10 * MIN, NULL);
        assert_false(d.crash_loop);
        assert_int_equal(d.nth, 3);
        assert_int_equal(d.wait_ms, 60000);
        /* One millisecond before the second leaves the window: a loop. */
        assert_true(app_restart_decide(&h, t0 + 11 * MIN - 1, NULL).crash_loop);
        /* Crashes far apart are always restarted after the first wait. */
        struct app_restart_history far = { 0 };
        for (int i = 0; i < 20; i++) {
                struct app_restart_decision f = app_restart_decide(&far, t0 + (int64_t)i * 11 * MIN, NULL);
                assert_false(f.crash_loop);
                assert_int_equal(f.wait_ms, 1000);
        }
}

static void test_configured_waits_and_forget(void **state)
{
        (void)state;
        const unsigned waits[APP_RESTART_MAX] = { 5, 50, 500 };
        struct app_restart_history h = { 0 };
        assert_int_equal(app_restart_decide(&h, 100, waits).wait_ms, 5);
        assert_int_equal(app_restart_decide(&h, 200, waits).wait_ms, 50);
        /* All zeros means the defaults. */
        const unsigned zeros[APP_RESTART_MAX] = { 0 };
        assert_int_equal(app_restart_decide(&h, 300, zeros).wait_ms, 60000);
        assert_true(app_restart_decide(&h, 400, waits).crash_loop);
        app_restart_forget(&h);
        struct app_restart_decision d = app_restart_decide(&h, 500, waits);
        assert_false(d.crash_loop);
        assert_int_equal(d.wait_ms, 5);
        assert_int_equal(d.nth, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_three_then_loop),
                cmocka_unit_test(test_window_slides),
                cmocka_unit_test(test_configured_waits_and_forget),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
