/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/link/backoff.h"

uint64_t backoff_next_ms(struct backoff *b, uint64_t cap_ms, int64_t retry_after_sec, uint32_t rnd)
{
        uint64_t ceiling = BACKOFF_BASE_MS;
        for (unsigned i = 0; i < b->failures && ceiling < cap_ms; i++)
                ceiling *= 2;
        if (ceiling > cap_ms)
                ceiling = cap_ms;
        if (b->failures < 64)
                b->failures++;
        uint64_t delay = ceiling <= BACKOFF_FLOOR_MS
                                 ? BACKOFF_FLOOR_MS
                                 : BACKOFF_FLOOR_MS + (uint64_t)rnd % (ceiling - BACKOFF_FLOOR_MS + 1);
        if (retry_after_sec >= 0 && (uint64_t)retry_after_sec * 1000 > delay)
                delay = (uint64_t)retry_after_sec * 1000;
        return delay;
}

void backoff_reset(struct backoff *b)
{
        b->failures = 0;
}
