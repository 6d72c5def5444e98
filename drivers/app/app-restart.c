/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The crash rule (drivers/app-restart.h): pure, unit-tested with a fixed clock. */
#include "drivers/app-restart.h"

static const unsigned default_waits_ms[APP_RESTART_MAX] = APP_RESTART_WAITS_MS;

struct app_restart_decision app_restart_decide(struct app_restart_history *h, int64_t now_ms,
                                               const unsigned *waits_ms)
{
        if (!waits_ms || !waits_ms[0])
                waits_ms = default_waits_ms;
        size_t kept = 0;
        for (size_t i = 0; i < h->n && i < APP_RESTART_MAX; i++)
                if (now_ms - h->crash_ms[i] < APP_RESTART_WINDOW_MS)
                        h->crash_ms[kept++] = h->crash_ms[i];
        h->n = kept;
        struct app_restart_decision d = { .crash_loop = h->n >= APP_RESTART_MAX };
        if (d.crash_loop) {
                d.nth = h->n;
                return d;
        }
        d.wait_ms = waits_ms[h->n];
        h->crash_ms[h->n++] = now_ms;
        d.nth = h->n;
        return d;
}

void app_restart_forget(struct app_restart_history *h)
{
        h->n = 0;
}
