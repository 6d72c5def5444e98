/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The bound on an app's output lines per second (issue 20): a token bucket of
 * `burst` lines refilled at `per_sec` lines a second. A line past it is dropped and
 * counted; the monitor writes one `system` line with the count once a second while
 * lines are being dropped (and when the container ends). Pure arithmetic on a clock
 * the caller passes, so the rule is tested without sleeping.
 *
 *      struct mon_rate r;
 *      mon_rate_init(&r, 1000, 10000, now_ms);
 *      if (mon_rate_take(&r, now_ms)) keep the line; else it was counted as dropped
 *      uint64_t n = mon_rate_report_due(&r, now_ms, false);   n > 0: say "n lines dropped"
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define MON_RATE_REPORT_MS 1000 /* at most one drop report a second */

struct mon_rate {
        uint32_t per_sec;   /* 0: no bound */
        uint32_t burst;
        uint64_t milli;     /* tokens × 1000 */
        int64_t last_ms;    /* time of the last refill */
        uint64_t dropped;   /* lines dropped and not yet reported */
        int64_t first_drop_ms; /* when the first of them went */
};

void mon_rate_init(struct mon_rate *r, uint32_t per_sec, uint32_t burst, int64_t now_ms);
/* Refill to now; true and one token taken, or false and the line counted as dropped. */
bool mon_rate_take(struct mon_rate *r, int64_t now_ms);
/* Whether a line arriving now would be kept (nothing taken, nothing counted). */
bool mon_rate_has(struct mon_rate *r, int64_t now_ms);
/* Count n more dropped lines (the caller dropped them in bulk while mon_rate_has was false). */
void mon_rate_drop(struct mon_rate *r, uint64_t n, int64_t now_ms);
/* The count to report now (and forget): lines were dropped and a report is due, a
 * second after the first of them, or at once with force. 0: nothing to say. */
uint64_t mon_rate_report_due(struct mon_rate *r, int64_t now_ms, bool force);
/* Milliseconds until a pending report is due (0: due now), -1 when none is pending. */
int64_t mon_rate_report_in(const struct mon_rate *r, int64_t now_ms);
