/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The lines-per-second bound of an app's output (monitor/monitor-rate.c, issue 20) on a
 * fixed clock: the burst, the refill, bulk drops, one report a second, the forced report
 * at the end, no bound at 0, no overflow at the largest settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "monitor/monitor-rate.h"

static void test_burst_then_rate(void **state)
{
        (void)state;
        struct mon_rate r;
        mon_rate_init(&r, 100, 1000, 5000);
        for (int i = 0; i < 1000; i++)
                assert_true(mon_rate_take(&r, 5000));
        assert_false(mon_rate_take(&r, 5000)); /* the burst is spent */
        assert_false(mon_rate_has(&r, 5009));  /* 100 a second: one every 10 ms */
        assert_true(mon_rate_take(&r, 5010));
        assert_false(mon_rate_take(&r, 5010));
        /* a second later: 100 lines more, not one more */
        int kept = 0;
        for (int i = 0; i < 1000; i++)
                kept += mon_rate_take(&r, 6010);
        assert_int_equal(kept, 100);
}

static void test_refill_capped_at_burst(void **state)
{
        (void)state;
        struct mon_rate r;
        mon_rate_init(&r, 1000, 10000, 0);
        for (int i = 0; i < 10000; i++)
                assert_true(mon_rate_take(&r, 0));
        int kept = 0;
        for (int i = 0; i < 50000; i++)
                kept += mon_rate_take(&r, 3600 * 1000); /* an hour of silence gives back the burst only */
        assert_int_equal(kept, 10000);
        assert_false(mon_rate_has(&r, 0)); /* a clock going back gives nothing */
}

static void test_reports(void **state)
{
        (void)state;
        struct mon_rate r;
        mon_rate_init(&r, 10, 10, 0);
        assert_int_equal(mon_rate_report_in(&r, 0), -1);
        for (int i = 0; i < 10; i++)
                assert_true(mon_rate_take(&r, 0));
        assert_false(mon_rate_take(&r, 50)); /* the first drop at 50 ms (one token is 100 ms) */
        assert_false(mon_rate_has(&r, 80));
        mon_rate_drop(&r, 41, 80);
        assert_int_equal(mon_rate_report_in(&r, 80), 970);
        assert_int_equal(mon_rate_report_due(&r, 1049, false), 0); /* not a second yet */
        assert_int_equal(mon_rate_report_due(&r, 1050, false), 42);
        assert_int_equal(mon_rate_report_due(&r, 1100, false), 0); /* said once */
        assert_int_equal(mon_rate_report_in(&r, 1100), -1);
        mon_rate_drop(&r, 5, 1200);
        assert_int_equal(mon_rate_report_due(&r, 1201, true), 5); /* the end says it at once */
        assert_int_equal(mon_rate_report_due(&r, 5000, true), 0);
}

static void test_unbounded(void **state)
{
        (void)state;
        struct mon_rate r;
        mon_rate_init(&r, 0, 0, 0);
        for (int i = 0; i < 100000; i++)
                assert_true(mon_rate_take(&r, 0));
        assert_int_equal(mon_rate_report_in(&r, 0), -1);
}

static void test_largest_settings(void **state)
{
        (void)state;
        struct mon_rate r;
        mon_rate_init(&r, 1000000, 10000000, 0);
        assert_true(mon_rate_has(&r, INT64_C(1) << 40));
        assert_int_equal(r.milli, UINT64_C(10000000) * 1000u);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_burst_then_rate), cmocka_unit_test(test_refill_capped_at_burst),
                cmocka_unit_test(test_reports),         cmocka_unit_test(test_unbounded),
                cmocka_unit_test(test_largest_settings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
