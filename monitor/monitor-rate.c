/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The lines-per-second bound of an app's output (see monitor-rate.h). */
#include "monitor/monitor-rate.h"

void mon_rate_init(struct mon_rate *r, uint32_t per_sec, uint32_t burst, int64_t now_ms)
{
        *r = (struct mon_rate){ .per_sec = per_sec, .burst = burst ? burst : per_sec, .last_ms = now_ms };
        r->milli = (uint64_t)r->burst * 1000u;
}

static void refill(struct mon_rate *r, int64_t now_ms)
{
        if (now_ms <= r->last_ms)
                return;
        uint64_t cap = (uint64_t)r->burst * 1000u, elapsed = (uint64_t)(now_ms - r->last_ms);
        /* per_sec tokens a second are per_sec milli-tokens a millisecond */
        uint64_t add = elapsed > cap ? cap : elapsed * r->per_sec;
        r->milli = cap - r->milli <= add ? cap : r->milli + add;
        r->last_ms = now_ms;
}

bool mon_rate_has(struct mon_rate *r, int64_t now_ms)
{
        if (!r->per_sec)
                return true;
        refill(r, now_ms);
        return r->milli >= 1000u;
}

void mon_rate_drop(struct mon_rate *r, uint64_t n, int64_t now_ms)
{
        if (!n)
                return;
        if (!r->dropped)
                r->first_drop_ms = now_ms;
        r->dropped += n;
}

bool mon_rate_take(struct mon_rate *r, int64_t now_ms)
{
        if (mon_rate_has(r, now_ms)) {
                if (r->per_sec)
                        r->milli -= 1000u;
                return true;
        }
        mon_rate_drop(r, 1, now_ms);
        return false;
}

int64_t mon_rate_report_in(const struct mon_rate *r, int64_t now_ms)
{
        if (!r->dropped)
                return -1;
        int64_t due = r->first_drop_ms + MON_RATE_REPORT_MS;
        return due <= now_ms ? 0 : due - now_ms;
}

uint64_t mon_rate_report_due(struct mon_rate *r, int64_t now_ms, bool force)
{
        if (!r->dropped || (!force && mon_rate_report_in(r, now_ms) != 0))
                return 0;
        uint64_t n = r->dropped;
        r->dropped = 0;
        return n;
}
