/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/link/progress-pace.h: the first progress at once, then at most one post per gap
 * carrying the latest, the keepalive when nothing is new, and a simulated job that
 * reports a thousand times stays within one post a second.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/link/progress-pace.h"

#define S 1000000u          /* one second in µs */
#define KEEP (20u * S)      /* leaseSec 60: keepalive every 20 s */

static void test_first_at_once(void **state)
{
        (void)state;
        struct progress_pace p;
        progress_pace_init(&p, 5 * S);
        /* Nothing reported: the first keepalive is due leaseSec/3 after the job was taken. */
        assert_int_equal(progress_pace_due(&p, S, KEEP), 5 * S + KEEP);
        p.fresh = true;
        assert_int_equal(progress_pace_due(&p, S, KEEP), 0);
        progress_pace_posted(&p, 5 * S + 10);
        assert_false(p.fresh);
        /* The next: a gap after the post, however soon it comes. */
        p.fresh = true;
        assert_int_equal(progress_pace_due(&p, S, KEEP), 6 * S + 10);
}

static void test_keepalive(void **state)
{
        (void)state;
        struct progress_pace p;
        progress_pace_init(&p, 0);
        p.fresh = true;
        progress_pace_posted(&p, 100);
        assert_int_equal(progress_pace_due(&p, S, KEEP), 100 + KEEP);
        progress_pace_posted(&p, 100 + KEEP);
        assert_int_equal(progress_pace_due(&p, S, KEEP), 100 + 2 * KEEP);
        /* A keepalive shorter than the gap never posts more often than the gap. */
        assert_int_equal(progress_pace_due(&p, S, S / 2), 100 + KEEP + S);
        /* A keepalive that went out first: the first stage waits for the gap. */
        struct progress_pace q;
        progress_pace_init(&q, 0);
        progress_pace_posted(&q, KEEP);
        q.fresh = true;
        assert_int_equal(progress_pace_due(&q, S, KEEP), KEEP + S);
}

/* A job reporting every 7 ms for 10 s; the caller posts whenever the pace allows. */
static void test_simulated_job(void **state)
{
        (void)state;
        struct progress_pace p;
        progress_pace_init(&p, 0);
        uint64_t posts[64];
        unsigned n = 0;
        for (uint64_t now = 0; now < 10 * S; now += 1000) { /* the loop looks every ms */
                if (now % 7000 == 0)
                        p.fresh = true;
                if (progress_pace_due(&p, S, KEEP) <= now) {
                        assert_true(n < 64);
                        posts[n++] = now;
                        progress_pace_posted(&p, now);
                }
        }
        /* The first at once, then one a second: 10 posts in 10 s. */
        assert_int_equal(posts[0], 0);
        assert_int_equal(n, 10);
        for (unsigned i = 1; i < n; i++)
                assert_true(posts[i] - posts[i - 1] >= S);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_first_at_once),
                cmocka_unit_test(test_keepalive),
                cmocka_unit_test(test_simulated_job),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
