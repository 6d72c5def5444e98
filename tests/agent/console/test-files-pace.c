/* SPDX-License-Identifier: GPL-2.0-or-later */
/* agent/console/files-pace.h with a fixed clock: the 100 ms gap, the settle, the relay's rate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/console/files-pace.h"

static void gap_and_settle(void **state)
{
        (void)state;
        /* Nothing sent yet: at once; with settle, 10 ms on. */
        assert_int_equal(files_pace_due(false, 0, false, 5000), 5000);
        assert_int_equal(files_pace_due(false, 0, true, 5000), 5010);
        /* A frame went out at 5000: not before 5100, whatever the event. */
        assert_int_equal(files_pace_due(true, 5000, false, 5001), 5100);
        assert_int_equal(files_pace_due(true, 5000, true, 5001), 5100);
        assert_int_equal(files_pace_due(true, 5000, true, 5095), 5105); /* the settle reaches past the gap */
        /* Long after: at once (a due time already past), or after the settle. */
        assert_true(files_pace_due(true, 5000, false, 9000) <= 9000);
        assert_int_equal(files_pace_due(true, 5000, true, 9000), 9010);
}

static void rate(void **state)
{
        (void)state;
        struct files_rate r;
        files_rate_init(&r, 0);
        int taken = 0;
        for (int i = 0; i < 100; i++) /* a burst at one instant: 20 */
                taken += files_rate_take(&r, 0);
        assert_int_equal(taken, 20);
        assert_false(files_rate_take(&r, 99)); /* 0.99 of a token back */
        assert_true(files_rate_take(&r, 100));
        /* Ten a second go on for ever at that pace. */
        taken = 0;
        for (long long t = 200; t < 10200; t += 100)
                taken += files_rate_take(&r, t);
        assert_int_equal(taken, 100);
        /* A quiet minute fills the bucket, never beyond the burst. */
        taken = 0;
        for (int i = 0; i < 100; i++)
                taken += files_rate_take(&r, 70000);
        assert_int_equal(taken, 20);
        /* A clock that goes back gives nothing. */
        assert_false(files_rate_take(&r, 1000));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(gap_and_settle),
                cmocka_unit_test(rate),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
