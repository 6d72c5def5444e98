/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Retry policy of the controller link (agent API section 1): exponential backoff
 * with full jitter, base 1 s, cap 60 s (300 s after 401/403), Retry-After honoured.
 * The delay never goes below BACKOFF_FLOOR_MS, so even a 0 drawn from the jitter
 * does not make a tight loop.
 */
#pragma once

#include <stdint.h>

#define BACKOFF_BASE_MS 1000u
#define BACKOFF_CAP_MS 60000u
#define BACKOFF_AUTH_CAP_MS 300000u
#define BACKOFF_FLOOR_MS 250u

struct backoff {
        unsigned failures; /* consecutive failures so far */
};

/*
 * The delay before the next try after one more failure: uniform in
 * [FLOOR, min(cap, base * 2^failures)], then at least retry_after_sec (>= 0) when
 * given. rnd is a uniformly random 32-bit value (from getrandom in the daemon, fixed
 * in tests).
 */
uint64_t backoff_next_ms(struct backoff *b, uint64_t cap_ms, int64_t retry_after_sec, uint32_t rnd);
void backoff_reset(struct backoff *b);
