/* The failed-login limiter of nodeagent-sftpd (sftp-ratelimit.h). */
#include "sftp/sftp-ratelimit.h"

#include <stdio.h>
#include <string.h>

void sftp_ratelimit_init(struct sftp_ratelimit *rl, unsigned max_failures, unsigned window_sec, unsigned block_sec)
{
        memset(rl, 0, sizeof(*rl));
        if (max_failures < 1)
                max_failures = 1;
        if (max_failures > SFTP_RATELIMIT_MAX_FAILURES)
                max_failures = SFTP_RATELIMIT_MAX_FAILURES;
        rl->max_failures = max_failures;
        rl->window_sec = window_sec;
        rl->block_sec = block_sec;
}

static struct sftp_ratelimit_entry *find(const struct sftp_ratelimit *rl, const char *key)
{
        for (size_t i = 0; i < SFTP_RATELIMIT_SLOTS; i++)
                if (rl->slots[i].key[0] && strncmp(rl->slots[i].key, key, SFTP_RATELIMIT_KEY_MAX - 1) == 0)
                        return (struct sftp_ratelimit_entry *)&rl->slots[i];
        return NULL;
}

bool sftp_ratelimit_fail(struct sftp_ratelimit *rl, const char *key, time_t now)
{
        struct sftp_ratelimit_entry *e = find(rl, key);
        if (!e) {
                e = &rl->slots[0];
                for (size_t i = 0; i < SFTP_RATELIMIT_SLOTS; i++) {
                        if (!rl->slots[i].key[0]) {
                                e = &rl->slots[i];
                                break;
                        }
                        if (rl->slots[i].last_seen < e->last_seen)
                                e = &rl->slots[i];
                }
                memset(e, 0, sizeof(*e));
                snprintf(e->key, sizeof(e->key), "%s", key);
        }
        e->last_seen = now;
        e->fails[e->next] = now;
        e->next = (e->next + 1) % rl->max_failures;
        if (e->n < rl->max_failures)
                e->n++;
        /* The oldest of the last max_failures failures is at next once the ring is full. */
        if (e->n == rl->max_failures && now - e->fails[e->next % rl->max_failures] < (time_t)rl->window_sec) {
                e->blocked_until = now + (time_t)rl->block_sec;
                return true;
        }
        return e->blocked_until > now;
}

bool sftp_ratelimit_blocked(const struct sftp_ratelimit *rl, const char *key, time_t now)
{
        const struct sftp_ratelimit_entry *e = find(rl, key);
        return e && e->blocked_until > now;
}
