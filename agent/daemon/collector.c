/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/daemon/collector.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "agent/base/log.h"
#include "common/timeutil.h"
#include "metrics/metrics.h"

struct collector {
        struct metrics *metrics;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool stopping;
        atomic_uint interval_sec;
        uint64_t failures;
};

static void *collector_main(void *arg)
{
        struct collector *c = arg;
        bool failing = false;
        pthread_mutex_lock(&c->lock);
        while (!c->stopping) {
                uint64_t iv = atomic_load(&c->interval_sec) * 1000ULL, now = na_now_real_ms();
                uint64_t next = (now / iv + 1) * iv;
                struct timespec until = { .tv_sec = (time_t)(next / 1000), .tv_nsec = (long)(next % 1000) * 1000000L };
                while (!c->stopping && pthread_cond_timedwait(&c->wake, &c->lock, &until) == 0)
                        ;
                if (c->stopping)
                        break;
                pthread_mutex_unlock(&c->lock);
                struct na_error err = NA_ERROR_INIT;
                int r = metrics_collect(c->metrics, na_now_real_ms(), &err);
                /* A failing tick is said once, and its recovery once. */
                if (r < 0 && !failing)
                        log_warn("metrics: collection failed: %s", err.message);
                else if (r >= 0 && failing)
                        log_info("metrics: collection works again");
                failing = r < 0;
                na_error_clear(&err);
                pthread_mutex_lock(&c->lock);
        }
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

int collector_start(struct metrics *m, unsigned interval_sec, struct collector **ret, struct na_error *err)
{
        struct collector *c = calloc(1, sizeof(*c));
        if (!c)
                return na_error_sys(err, ENOMEM, "metrics collector");
        c->metrics = m;
        atomic_store(&c->interval_sec, interval_sec ? interval_sec : 10);
        pthread_mutex_init(&c->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_REALTIME);
        pthread_cond_init(&c->wake, &ca);
        pthread_condattr_destroy(&ca);
        int r = pthread_create(&c->thread, NULL, collector_main, c);
        if (r) {
                free(c);
                return na_error_sys(err, r, "metrics collector: start thread");
        }
        *ret = c;
        return 0;
}

void collector_set_interval(struct collector *c, unsigned interval_sec)
{
        if (c && interval_sec)
                atomic_store(&c->interval_sec, interval_sec);
}

void collector_stop(struct collector *c)
{
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
        pthread_cond_destroy(&c->wake);
        pthread_mutex_destroy(&c->lock);
        free(c);
}
