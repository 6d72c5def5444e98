/* SPDX-License-Identifier: GPL-2.0-or-later */
/* common/progress.h: percent over a range, and a meter that reports only when the integer percent moves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/progress.h"

struct seen {
        int n;
        int pct[512];
        const char *stage, *message;
};

static void rec(void *userdata, const char *stage, int percent, const char *message)
{
        struct seen *s = userdata;
        assert_true(s->n < 512);
        s->pct[s->n++] = percent;
        s->stage = stage;
        s->message = message;
}

static void test_percent(void **state)
{
        (void)state;
        assert_int_equal(na_progress_percent(0, 0, 10, 90), 10);  /* unknown total: lo */
        assert_int_equal(na_progress_percent(0, 1000, 0, 100), 0);
        assert_int_equal(na_progress_percent(999, 1000, 0, 100), 99); /* 100 only when done */
        assert_int_equal(na_progress_percent(1000, 1000, 0, 100), 100);
        assert_int_equal(na_progress_percent(5000, 1000, 0, 100), 100);
        assert_int_equal(na_progress_percent(500, 1000, 0, 90), 45);
        assert_int_equal(na_progress_percent(500, 1000, 90, 90), 90);
        /* 16 EiB totals neither overflow nor go backwards. */
        uint64_t big = UINT64_MAX - 1;
        assert_int_equal(na_progress_percent(big / 2, big, 0, 100), 50);
        assert_int_equal(na_progress_percent(big - 1, big, 0, 100), 99);
}

static void test_meter_reports_changes_only(void **state)
{
        (void)state;
        struct seen s = { 0 };
        struct na_progress p = { .stage = rec, .userdata = &s };
        struct na_progress_meter m;
        na_progress_meter_init(&m, &p, "compressing", "compressing with zstd", 0, 100);
        assert_int_equal(s.n, 0);
        uint64_t total = 10ull << 30; /* 10 GiB read 1 MiB at a time: 10240 calls */
        na_progress_meter_total(&m, total);
        for (uint64_t done = 1 << 20; done <= total; done += 1 << 20)
                na_progress_meter_set(&m, done);
        /* lo at once, then each whole percent once: 101 calls, increasing. */
        assert_int_equal(s.n, 101);
        for (int i = 0; i < s.n; i++)
                assert_int_equal(s.pct[i], i);
        assert_string_equal(s.stage, "compressing");
        assert_string_equal(s.message, "compressing with zstd");

        /* A sub-range: 0..90 of the current stage (NULL). */
        memset(&s, 0, sizeof(s));
        na_progress_meter_init(&m, &p, NULL, "unpacking", 0, 90);
        na_progress_meter_total(&m, 300);
        for (uint64_t done = 1; done <= 300; done++)
                na_progress_meter_set(&m, done);
        assert_int_equal(s.n, 91);
        assert_int_equal(s.pct[90], 90);
        assert_null(s.stage);

        /* NULL meter and NULL progress are fine. */
        na_progress_meter_set(NULL, 5);
        na_progress_meter_init(&m, NULL, "x", NULL, 0, 100);
        na_progress_meter_total(&m, 10);
        na_progress_meter_set(&m, 5);
        assert_null(na_progress_meter_progress(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_percent),
                cmocka_unit_test(test_meter_reports_changes_only),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
