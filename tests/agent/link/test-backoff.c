/* SPDX-License-Identifier: GPL-2.0-or-later */
/* agent/link/backoff.h: floor, growth, the 60 s cap, the 300 s auth cap, Retry-After, reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/link/backoff.h"

#define RND_MAX UINT32_MAX

/* The ceiling of try n (0-based) for a cap: min(cap, base * 2^n). */
static uint64_t ceiling(unsigned n, uint64_t cap)
{
        uint64_t c = BACKOFF_BASE_MS;
        for (unsigned i = 0; i < n && c < cap; i++)
                c *= 2;
        return c > cap ? cap : c;
}

static void test_floor(void **state)
{
        (void)state;
        /* A zero from the jitter never makes a tight loop. */
        struct backoff b = { 0 };
        for (int i = 0; i < 100; i++)
                assert_int_equal(backoff_next_ms(&b, BACKOFF_CAP_MS, -1, 0), BACKOFF_FLOOR_MS);
        /* Even with a cap below the floor. */
        struct backoff c = { 0 };
        assert_int_equal(backoff_next_ms(&c, 100, -1, RND_MAX), BACKOFF_FLOOR_MS);
        assert_int_equal(backoff_next_ms(&c, 0, -1, 12345), BACKOFF_FLOOR_MS);
}

static void test_growth_and_cap(void **state)
{
        (void)state;
        struct backoff b = { 0 };
        /* The largest draw of each try is its ceiling: 1, 2, 4, ... 32, then 60 s for ever. */
        static const uint64_t want[] = { 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000 };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                uint64_t rnd = want[i] - BACKOFF_FLOOR_MS; /* rnd % (ceiling - floor + 1) == ceiling - floor */
                assert_int_equal(backoff_next_ms(&b, BACKOFF_CAP_MS, -1, (uint32_t)rnd), want[i]);
        }
        /* Any draw stays within [floor, ceiling] (full jitter). */
        struct backoff c = { 0 };
        uint32_t x = 2463534242u;
        for (unsigned n = 0; n < 200; n++) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                uint64_t d = backoff_next_ms(&c, BACKOFF_CAP_MS, -1, x);
                assert_in_range(d, BACKOFF_FLOOR_MS, ceiling(n, BACKOFF_CAP_MS));
                assert_true(d <= BACKOFF_CAP_MS);
        }
        /* Many failures do not overflow anything. */
        struct backoff d = { .failures = 1000000 };
        assert_in_range(backoff_next_ms(&d, BACKOFF_CAP_MS, -1, RND_MAX), BACKOFF_FLOOR_MS, BACKOFF_CAP_MS);
}

static void test_auth_cap(void **state)
{
        (void)state;
        struct backoff b = { 0 };
        uint64_t last = 0;
        for (unsigned n = 0; n < 20; n++) {
                uint64_t c = ceiling(n, BACKOFF_AUTH_CAP_MS);
                last = backoff_next_ms(&b, BACKOFF_AUTH_CAP_MS, -1, (uint32_t)(c - BACKOFF_FLOOR_MS));
                assert_int_equal(last, c);
        }
        assert_int_equal(last, 300000); /* 256 s then 300 s: past the ordinary cap */
}

static void test_retry_after(void **state)
{
        (void)state;
        struct backoff b = { 0 };
        /* Retry-After longer than the drawn delay wins, even past the cap. */
        assert_int_equal(backoff_next_ms(&b, BACKOFF_CAP_MS, 5, 0), 5000);
        assert_int_equal(backoff_next_ms(&b, BACKOFF_CAP_MS, 120, 0), 120000);
        /* Retry-After: 0 asks for nothing: the floor still holds. */
        assert_int_equal(backoff_next_ms(&b, BACKOFF_CAP_MS, 0, 0), BACKOFF_FLOOR_MS);
        /* A shorter Retry-After does not shorten the backoff already due (59750 draws the 60 s ceiling). */
        struct backoff e = { .failures = 10 };
        assert_int_equal(backoff_next_ms(&e, BACKOFF_CAP_MS, 1, 59750), 60000);
        /* Retry-After also wins over the auth cap. */
        struct backoff g = { .failures = 20 };
        assert_int_equal(backoff_next_ms(&g, BACKOFF_AUTH_CAP_MS, 900, 0), 900000);
}

static void test_reset(void **state)
{
        (void)state;
        struct backoff b = { 0 };
        for (int i = 0; i < 10; i++)
                backoff_next_ms(&b, BACKOFF_CAP_MS, -1, 0);
        assert_int_equal(b.failures, 10);
        backoff_reset(&b);
        assert_int_equal(b.failures, 0);
        /* Back to the first ceiling. */
        assert_int_equal(backoff_next_ms(&b, BACKOFF_CAP_MS, -1, RND_MAX), BACKOFF_FLOOR_MS + RND_MAX % (1000 - BACKOFF_FLOOR_MS + 1));
        assert_true(backoff_next_ms(&(struct backoff){ 0 }, BACKOFF_CAP_MS, -1, 750) == 1000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_floor),
                cmocka_unit_test(test_growth_and_cap),
                cmocka_unit_test(test_auth_cap),
                cmocka_unit_test(test_retry_after),
                cmocka_unit_test(test_reset),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
