/*
 * The failed-login limiter of nodeagent-sftpd (pure logic, no I/O): the listener
 * counts each failure its session processes report, per key ("addr:<address>" or
 * "user:<name>"); a key with max_failures failures within window_sec is refused for
 * block_sec from the last one. A fixed table (SFTP_RATELIMIT_SLOTS keys): when it is
 * full the entry seen longest ago is reused, so memory stays bounded whatever an
 * attacker sends.
 *
 *   struct sftp_ratelimit rl;
 *   sftp_ratelimit_init(&rl, 10, 300, 600);
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
        time_t blocked_until;
        time_t last_seen;
};

struct sftp_ratelimit {
        unsigned max_failures;
        unsigned window_sec, block_sec;
        struct sftp_ratelimit_entry slots[SFTP_RATELIMIT_SLOTS];
};

void sftp_ratelimit_init(struct sftp_ratelimit *rl, unsigned max_failures, unsigned window_sec, unsigned block_sec);
/* One failure of key at now; true when it makes the key refused. */
bool sftp_ratelimit_fail(struct sftp_ratelimit *rl, const char *key, time_t now);
/* Whether key is refused at now. */
bool sftp_ratelimit_blocked(const struct sftp_ratelimit *rl, const char *key, time_t now);
