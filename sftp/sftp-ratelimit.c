/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The failed-login limiter of nodeagent-sftpd (sftp-ratelimit.h). */
#include "sftp/sftp-ratelimit.h"

#include <stdio.h>
#include <string.h>

void sftp_ratelimit_init(struct sftp_ratelimit *rl, unsigned max_failures, unsigned window_sec, unsigned block_sec,
                         unsigned delay_max_sec)
{
        memset(rl, 0, sizeof(*rl));
        if (max_failures < 1)
                max_failures = 1;
        if (max_failures > SFTP_RATELIMIT_MAX_FAILURES)
                max_failures = SFTP_RATELIMIT_MAX_FAILURES;
        rl->max_failures = max_failures;
        rl->window_sec = window_sec;
        rl->block_sec = block_sec;
        rl->delay_max_sec = delay_max_sec;
}

static struct sftp_ratelimit_entry *find(const struct sftp_ratelimit *rl, const char *key)
{
        for (size_t i = 0; i < SFTP_RATELIMIT_SLOTS; i++)
                if (rl->slots[i].key[0] && strncmp(rl->slots[i].key, key, SFTP_RATELIMIT_KEY_MAX - 1) == 0)
                        return (struct sftp_ratelimit_entry *)&rl->slots[i];
        return NULL;
}

/* A free slot, else the one seen longest ago that holds nothing; NULL when all hold. */
static struct sftp_ratelimit_entry *evictable(struct sftp_ratelimit *rl, time_t now)
{
        struct sftp_ratelimit_entry *e = NULL;
        for (size_t i = 0; i < SFTP_RATELIMIT_SLOTS; i++) {
                struct sftp_ratelimit_entry *c = &rl->slots[i];
                if (!c->key[0])
                        return c;
                if (c->hold_until > now)
                        continue;
                if (!e || c->last_seen < e->last_seen)
                        e = c;
        }
        return e;
}

static time_t max_time(time_t a, time_t b)
{
        return a > b ? a : b;
}

bool sftp_ratelimit_fail(struct sftp_ratelimit *rl, const char *key, time_t now)
{
        struct sftp_ratelimit_entry *e = find(rl, key);
        if (!e) {
                if (!(e = evictable(rl, now)))
                        return false;
                memset(e, 0, sizeof(*e));
                snprintf(e->key, sizeof(e->key), "%s", key);
        }
        e->last_seen = now;
        e->fails[e->next] = now;
        e->next = (e->next + 1) % rl->max_failures;
        if (e->n < rl->max_failures)
                e->n++;
        /* The oldest of the last max_failures failures is at next once the ring is full. */
        time_t oldest = e->fails[e->next % rl->max_failures];
        bool over = e->n == rl->max_failures && now - oldest < (time_t)rl->window_sec;
        if (!over) {
                e->over = 0;
                return e->blocked_until > now;
        }
        if (rl->delay_max_sec) {
                unsigned d = e->over < 31 ? 1u << e->over : rl->delay_max_sec;
                if (d > rl->delay_max_sec)
                        d = rl->delay_max_sec;
                e->over++;
                e->blocked_until = now + (time_t)d;
                /* Held while its failures are in the window, so the delays keep growing. */
                e->hold_until = max_time(e->blocked_until, oldest + (time_t)rl->window_sec);
        } else {
                e->blocked_until = now + (time_t)rl->block_sec;
                e->hold_until = e->blocked_until;
        }
        return true;
}

bool sftp_ratelimit_blocked(const struct sftp_ratelimit *rl, const char *key, time_t now)
{
        const struct sftp_ratelimit_entry *e = find(rl, key);
        return e && e->blocked_until > now;
}

unsigned sftp_ratelimit_wait(const struct sftp_ratelimit *rl, const char *key, time_t now)
{
        const struct sftp_ratelimit_entry *e = find(rl, key);
        return e && e->blocked_until > now ? (unsigned)(e->blocked_until - now) : 0;
}
