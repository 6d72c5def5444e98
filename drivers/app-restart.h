/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The crash rule of AGENT-API 4.2, as a pure function any app runtime asks: an exit
 * nobody asked for is restarted at most APP_RESTART_MAX times in APP_RESTART_WINDOW_MS,
 * after the waits of the configuration ([apps] crash_backoff_ms, default 1 s, 10 s,
 * 60 s); the next one inside the window leaves the app crashed with crashLoop. The
 * runtime records facts (the history of its unasked exits, kept with the app) and asks
 * app_restart_decide; it restarts nothing on its own judgement. No clock, no I/O.
 *
 *   struct app_restart_decision d = app_restart_decide(&a->crashes, now_ms, o->crash_backoff_ms);
 *   if (d.crash_loop) ... leave it crashed ... else ... restart at now_ms + d.wait_ms ...
 *
 * Numbers of the rule live here and nowhere else.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define APP_RESTART_WINDOW_MS (10 * 60 * 1000)
#define APP_RESTART_MAX 3
#define APP_RESTART_WAITS_MS { 1000, 10000, 60000 }

/* The unasked exits of an app that still count: their times (ms), oldest first. */
struct app_restart_history {
        int64_t crash_ms[APP_RESTART_MAX];
        size_t n;
};

struct app_restart_decision {
        bool crash_loop;  /* leave the app crashed: APP_RESTART_MAX restarts inside the window already */
        unsigned wait_ms; /* otherwise: restart after this long */
        size_t nth;       /* and this restart is the nth (1..APP_RESTART_MAX) inside the window */
};

/*
 * One more unasked exit at now_ms: drops from h the exits older than the window,
 * decides, and records this exit in h when it is restarted (a crash loop leaves h as
 * it is: the next start asked for clears it). waits_ms: APP_RESTART_MAX waits, or
 * NULL or all zeros for the defaults.
 */
struct app_restart_decision app_restart_decide(struct app_restart_history *h, int64_t now_ms,
                                               const unsigned *waits_ms);

/* A start asked for (app.power start, a deploy): the history starts again. */
void app_restart_forget(struct app_restart_history *h);
