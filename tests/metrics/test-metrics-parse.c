/* SPDX-License-Identifier: GPL-2.0-or-later */
/* metrics/readfile.c: the number and key parsers every source uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "metrics/metrics-internal.h"

static void test_parse_u64(void **state)
{
        (void)state;
        static const struct {
                const char *in;
                bool ok;
                uint64_t v;
                size_t used;
        } cases[] = {
                { "0", true, 0, 1 },
                { "  \t42 rest", true, 42, 5 },
                { "1048576000\n", true, 1048576000ULL, 10 },
                { "9999999999999999999", true, 9999999999999999999ULL, 19 },      /* 19 digits: the fast path */
                { "18446744073709551615 x", true, UINT64_MAX, 20 },               /* 20 digits that fit */
                { "00000000000000000000042", true, 42, 23 },                      /* long but small */
                { "18446744073709551616", false, 0, 0 },                          /* one more than fits */
                { "99999999999999999999", false, 0, 0 },
                { "x1", false, 0, 0 },
                { "", false, 0, 0 },
                { " -1", false, 0, 0 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *p = cases[i].in;
                uint64_t v = 7;
                bool ok = mparse_u64(&p, &v);
                if (ok != cases[i].ok)
                        fail_msg("\"%s\": %d, want %d", cases[i].in, ok, cases[i].ok);
                if (ok && (v != cases[i].v || (size_t)(p - cases[i].in) != cases[i].used))
                        fail_msg("\"%s\": %llu after %zu chars", cases[i].in, (unsigned long long)v,
                                 (size_t)(p - cases[i].in));
                if (!ok && p != cases[i].in)
                        fail_msg("\"%s\": moved on a failure", cases[i].in);
        }
}

static void test_find_u64(void **state)
{
        (void)state;
        const char *stat = "anon 5\nfile 6\ninactive_anon 7\ninactive_file 8\ninactive_file_x 9\n";
        uint64_t v = 0;
        assert_true(mfind_u64(stat, "inactive_file", &v));
        assert_int_equal(v, 8);
        assert_true(mfind_u64(stat, "anon", &v));
        assert_int_equal(v, 5);
        assert_false(mfind_u64(stat, "file_dirty", &v));
        assert_false(mfind_u64(stat, "inactive", &v)); /* a key is a whole word */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_u64),
                cmocka_unit_test(test_find_u64),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
