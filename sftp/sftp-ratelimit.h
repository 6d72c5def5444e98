/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The failed-login limiter of nodeagent-sftpd (pure logic, no I/O): the listener
 * counts each failure its session processes report, per key, in one of two tables:
 *
 *   sources ("addr:<IPv4 address>" or "addr:<IPv6 /64>", see sftp-admit.h): a key with
 *     max_failures failures within window_sec is refused for block_sec from the last
 *     one (sftp_ratelimit_blocked);
 *   users ("user:<name>"), made with delay_max_sec > 0: a user is never refused, only
 *     delayed: from the max_failures-th failure within the window each attempt waits
 *     (sftp_ratelimit_wait) 1 s, then 2, 4, ... up to delay_max_sec after the last
 *     failure, so a guesser gets few tries while the owner still logs in.
 *
 * A fixed table (SFTP_RATELIMIT_SLOTS keys), so memory stays bounded whatever an
 * attacker sends. When it is full the entry seen longest ago among those that refuse
 * or delay nothing is reused; an entry that blocks or delays is never evicted (a flood
 * of failures under other names cannot unblock it). When every entry is holding, a new
 * key is not recorded (sftp_ratelimit_fail returns false).
 *
 *   static struct sftp_ratelimit rl;
 *   sftp_ratelimit_init(&rl, 10, 300, 600, 0);
 *   sftp_ratelimit_fail(&rl, "addr:192.0.2.1", now);
 *   if (sftp_ratelimit_blocked(&rl, "addr:192.0.2.1", now)) refuse;
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define SFTP_RATELIMIT_SLOTS 1024
#define SFTP_RATELIMIT_MAX_FAILURES 64 /* max_failures is capped at this */
#define SFTP_RATELIMIT_KEY_MAX 96

struct sftp_ratelimit_entry {
        char key[SFTP_RATELIMIT_KEY_MAX];
        time_t fails[SFTP_RATELIMIT_MAX_FAILURES]; /* ring of the last failures' times */
        unsigned n, next;
        unsigned over;        /* delaying table: failures past the threshold in a row */
        time_t blocked_until; /* refused (sources) or delayed (users) until */
        time_t hold_until;    /* never evicted before */
        time_t last_seen;
};

struct sftp_ratelimit {
        unsigned max_failures;
        unsigned window_sec, block_sec;
        unsigned delay_max_sec; /* > 0: a delaying table (users) */
        struct sftp_ratelimit_entry slots[SFTP_RATELIMIT_SLOTS];
};

void sftp_ratelimit_init(struct sftp_ratelimit *rl, unsigned max_failures, unsigned window_sec, unsigned block_sec,
                         unsigned delay_max_sec);
/* One failure of key at now; true when it makes the key refused (or delayed). */
bool sftp_ratelimit_fail(struct sftp_ratelimit *rl, const char *key, time_t now);
/* Whether key is refused (or delayed) at now. */
bool sftp_ratelimit_blocked(const struct sftp_ratelimit *rl, const char *key, time_t now);
/* Seconds key must wait before its next attempt at now (0: none). */
unsigned sftp_ratelimit_wait(const struct sftp_ratelimit *rl, const char *key, time_t now);
