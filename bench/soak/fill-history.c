/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * soak-fill-history PATH NOW_SEC: one history file (metrics/history.h) whose three
 * rings are full up to NOW_SEC: a sample every 15 min over 30 days, every minute
 * over the last 25 hours, every 10 s over the last hour. bench_soak.py copies it to
 * every target's file before the agent starts, so the agent runs with full history
 * rings from its first tick instead of after 30 days.
 */
#include <stdio.h>
#include <stdlib.h>

#include "metrics/history.h"

static void sample(struct history *h, uint32_t t)
{
        struct proto_metrics_sample s = { .at_ms = (uint64_t)t * 1000, .valid = PROTO_M_ALL };
        for (int f = 0; f < PROTO_M__COUNT; f++)
                s.v[f] = (double)(t % 997) + f;
        history_record(h, &s);
}

int main(int argc, char **argv)
{
        if (argc != 3) {
                fprintf(stderr, "usage: soak-fill-history PATH NOW_SEC\n");
                return 2;
        }
        uint32_t now = (uint32_t)strtoul(argv[2], NULL, 10);
        now -= now % 900;
        if (now < 31u * 86400) {
                fprintf(stderr, "soak-fill-history: NOW_SEC %s is too early\n", argv[2]);
                return 2;
        }
        struct na_error err = NA_ERROR_INIT;
        struct history *h = NULL;
        if (history_open(argv[1], true, &h, NULL, &err) < 0) {
                fprintf(stderr, "soak-fill-history: %s\n", err.message);
                return 1;
        }
        uint32_t t = now - 2880u * 900;
        for (; t < now - 25u * 3600; t += 900)
                sample(h, t);
        for (; t < now - 3600; t += 60)
                sample(h, t);
        for (; t < now; t += 10)
                sample(h, t);
        history_close(h);
        return 0;
}
