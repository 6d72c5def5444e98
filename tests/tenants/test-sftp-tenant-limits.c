/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-sftpd's limits against a hostile tenant (issue 20, attack 9 and the
 * admission of attack 2), pure logic with a fixed clock: a block is never evicted by a
 * flood of failures under other names, a user is delayed (1, 2, 4 ... s up to the
 * cap) and never refused, IPv6 sources count by /64, a table full of holding entries
 * stays bounded, and the MaxStartups-style random early drop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sftp/sftp-admit.h"
#include "sftp/sftp-ratelimit.h"

static struct sftp_ratelimit rl;

/* The attack: 10 bad passwords block; 1,024 failures under other names used to evict the block. */
static void block_survives_flood(void **state)
{
        (void)state;
        sftp_ratelimit_init(&rl, 10, 300, 600, 0);
        time_t t = 1000;
        for (int i = 0; i < 9; i++)
                assert_false(sftp_ratelimit_fail(&rl, "addr:192.0.2.1", t));
        assert_true(sftp_ratelimit_fail(&rl, "addr:192.0.2.1", t));
        char key[64];
        for (int i = 0; i < 3 * SFTP_RATELIMIT_SLOTS; i++) {
                snprintf(key, sizeof(key), "addr:10.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
                sftp_ratelimit_fail(&rl, key, t + 1 + i / 100);
        }
        assert_true(sftp_ratelimit_blocked(&rl, "addr:192.0.2.1", t + 100));
        assert_true(sftp_ratelimit_blocked(&rl, "addr:192.0.2.1", t + 599));
        assert_false(sftp_ratelimit_blocked(&rl, "addr:192.0.2.1", t + 600));
        /* Keys that hold nothing are still reused, so new sources are counted. */
        for (int i = 0; i < 10; i++)
                sftp_ratelimit_fail(&rl, "addr:198.51.100.9", t + 50);
        assert_true(sftp_ratelimit_blocked(&rl, "addr:198.51.100.9", t + 51));
}

/* A table where every entry blocks: a new key is not recorded, the blocks hold, memory stays fixed. */
static void full_of_blocks(void **state)
{
        (void)state;
        sftp_ratelimit_init(&rl, 2, 300, 600, 0);
        char key[64];
        time_t t = 5000;
        for (int i = 0; i < SFTP_RATELIMIT_SLOTS; i++) {
                snprintf(key, sizeof(key), "addr:10.1.%d.%d", i >> 8, i & 255);
                sftp_ratelimit_fail(&rl, key, t);
                assert_true(sftp_ratelimit_fail(&rl, key, t));
        }
        assert_false(sftp_ratelimit_fail(&rl, "addr:203.0.113.1", t + 1));
        assert_false(sftp_ratelimit_blocked(&rl, "addr:203.0.113.1", t + 1));
        assert_true(sftp_ratelimit_blocked(&rl, "addr:10.1.0.0", t + 1));
        assert_true(sftp_ratelimit_blocked(&rl, "addr:10.1.3.255", t + 1));
        /* Once the blocks end their entries are reused. */
        sftp_ratelimit_fail(&rl, "addr:203.0.113.1", t + 700);
        assert_true(sftp_ratelimit_fail(&rl, "addr:203.0.113.1", t + 700));
}

/* Users: delayed 1, 2, 4, ... s (capped), never refused for long; the delay survives a flood too. */
static void user_delayed_not_locked(void **state)
{
        (void)state;
        sftp_ratelimit_init(&rl, 10, 300, 0, 30);
        time_t t = 10000;
        for (int i = 0; i < 9; i++)
                assert_false(sftp_ratelimit_fail(&rl, "user:alice", t));
        assert_int_equal(sftp_ratelimit_wait(&rl, "user:alice", t), 0);
        assert_true(sftp_ratelimit_fail(&rl, "user:alice", t));
        assert_int_equal(sftp_ratelimit_wait(&rl, "user:alice", t), 1);
        assert_int_equal(sftp_ratelimit_wait(&rl, "user:alice", t + 1), 0);
        unsigned expect[] = { 2, 4, 8, 16, 30, 30, 30 };
        for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
                t += 1;
                assert_true(sftp_ratelimit_fail(&rl, "user:alice", t));
                assert_int_equal(sftp_ratelimit_wait(&rl, "user:alice", t), expect[i]);
        }
        /* Never longer than the cap: the owner gets in after at most 30 s. */
        assert_int_equal(sftp_ratelimit_wait(&rl, "user:alice", t + 30), 0);
        /* A flood of failures under other names does not reset the count. */
        char key[64];
        for (int i = 0; i < 2 * SFTP_RATELIMIT_SLOTS; i++) {
                snprintf(key, sizeof(key), "user:u%d", i);
                sftp_ratelimit_fail(&rl, key, t + 1);
        }
        assert_true(sftp_ratelimit_fail(&rl, "user:alice", t + 2));
        assert_int_equal(sftp_ratelimit_wait(&rl, "user:alice", t + 2), 30);
        /* Failures spread wider than the window delay nothing. */
        sftp_ratelimit_init(&rl, 3, 300, 0, 30);
        for (int i = 0; i < 10; i++)
                assert_false(sftp_ratelimit_fail(&rl, "user:slow", t + i * 200));
        assert_int_equal(sftp_ratelimit_wait(&rl, "user:slow", t + 1800), 0);
}

/* IPv6 sources count by /64: ten addresses of one /64 are one source. */
static void sources(void **state)
{
        (void)state;
        char a[64], b[64];
        assert_int_equal(sftp_admit_source("192.0.2.7", a, sizeof(a)), 0);
        assert_string_equal(a, "192.0.2.7");
        assert_int_equal(sftp_admit_source("::ffff:192.0.2.7", a, sizeof(a)), 0);
        assert_string_equal(a, "192.0.2.7");
        assert_int_equal(sftp_admit_source("2001:db8:1:2::5", a, sizeof(a)), 0);
        assert_string_equal(a, "2001:db8:1:2::/64");
        assert_int_equal(sftp_admit_source("2001:db8:1:2:ffff:eeee:dddd:cccc", b, sizeof(b)), 0);
        assert_string_equal(a, b);
        assert_int_equal(sftp_admit_source("2001:db8:1:3::5", b, sizeof(b)), 0);
        assert_string_not_equal(a, b);
        assert_int_equal(sftp_admit_source("?", a, sizeof(a)), -EINVAL);
        assert_int_equal(sftp_admit_source("2001:db8:1:2::5", a, 8), -ENAMETOOLONG);

        sftp_ratelimit_init(&rl, 10, 300, 600, 0);
        for (int i = 1; i <= 10; i++) {
                char peer[64], key[96];
                snprintf(peer, sizeof(peer), "2001:db8:aa:bb::%x", i);
                assert_int_equal(sftp_admit_source(peer, a, sizeof(a)), 0);
                snprintf(key, sizeof(key), "addr:%s", a);
                assert_int_equal(sftp_ratelimit_fail(&rl, key, 100), i == 10);
        }
        assert_true(sftp_ratelimit_blocked(&rl, "addr:2001:db8:aa:bb::/64", 101));
        assert_false(sftp_ratelimit_blocked(&rl, "addr:2001:db8:aa:bc::/64", 101));
}

static void startups(void **state)
{
        (void)state;
        struct sftp_startups s;
        assert_int_equal(sftp_startups_parse("64:30:256", &s), 0);
        assert_int_equal(s.start, 64);
        assert_int_equal(s.rate, 30);
        assert_int_equal(s.full, 256);
        assert_int_equal(sftp_startups_parse("10", &s), 0);
        assert_true(s.start == 10 && s.rate == 100 && s.full == 10);
        const char *bad[] = { "", "0", "10:30", "10:0:20", "10:101:20", "20:30:10", "1:2:3:4", "a:b:c", "-1:30:5",
                              "10:30:20x", "65537:30:70000", " 10:30:20" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(sftp_startups_parse(bad[i], &s), -EINVAL);

        assert_int_equal(sftp_startups_parse("10:30:110", &s), 0);
        for (unsigned roll = 0; roll < 100; roll++) {
                assert_false(sftp_admit_drop(&s, 9, roll));
                assert_true(sftp_admit_drop(&s, 110, roll));
                assert_true(sftp_admit_drop(&s, 500, roll));
        }
        /* At start 30 % are dropped, half way 65 %, near full almost all. */
        unsigned at_start = 0, half = 0;
        for (unsigned roll = 0; roll < 100; roll++) {
                at_start += sftp_admit_drop(&s, 10, roll);
                half += sftp_admit_drop(&s, 60, roll);
        }
        assert_int_equal(at_start, 30);
        assert_int_equal(half, 65);
        assert_int_equal(sftp_startups_parse("5", &s), 0);
        assert_false(sftp_admit_drop(&s, 4, 99));
        assert_true(sftp_admit_drop(&s, 5, 0));
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(block_survives_flood), cmocka_unit_test(full_of_blocks),
                                            cmocka_unit_test(user_delayed_not_locked), cmocka_unit_test(sources),
                                            cmocka_unit_test(startups) };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
