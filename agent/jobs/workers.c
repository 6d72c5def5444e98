/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/jobs/workers.h"

#include <pthread.h>
#include <stdbool.h>

struct work {
        work_fn fn;
        void *userdata;
        struct work *next;
};

struct workers {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct work *head, *tail;
        pthread_t *threads;
        unsigned nthreads;
        bool stopping;
};

static void *worker_main(void *arg)
{
        struct workers *w = arg;
        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!w->head && !w->stopping)
                        pthread_cond_wait(&w->cond, &w->lock);
                if (!w->head)
                        break;
                struct work *item = w->head;
                w->head = item->next;
                if (!w->head)
                        w->tail = NULL;
                pthread_mutex_unlock(&w->lock);
                item->fn(item->userdata);
                free(item);
                pthread_mutex_lock(&w->lock);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

int workers_grow(struct workers *w, unsigned threads, struct na_error *err)
{
        pthread_mutex_lock(&w->lock);
        int r = 0;
        if (threads > w->nthreads) {
                pthread_t *t = realloc(w->threads, threads * sizeof(*t));
                if (!t)
                        r = na_error_sys(err, ENOMEM, "worker pool");
                else {
                        w->threads = t;
                        pthread_attr_t attr;
                        pthread_attr_init(&attr);
                        pthread_attr_setstacksize(&attr, 1u << 20); /* 1 MiB: handlers are shallow */
                        while (w->nthreads < threads) {
                                int e = pthread_create(&w->threads[w->nthreads], &attr, worker_main, w);
                                if (e) {
                                        r = na_error_sys(err, e, "worker pool: start thread %u", w->nthreads);
                                        break;
                                }
                                w->nthreads++;
                        }
                        pthread_attr_destroy(&attr);
                }
        }
        pthread_mutex_unlock(&w->lock);
        return r;
}

int workers_new(unsigned threads, struct workers **ret, struct na_error *err)
{
        struct workers *w = calloc(1, sizeof(*w));
        if (!w)
                return na_error_sys(err, ENOMEM, "worker pool");
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        int r = workers_grow(w, threads, err);
        if (r < 0) {
                workers_free(w, true);
                return r;
        }
        *ret = w;
        return 0;
}

int workers_submit(struct workers *w, work_fn fn, void *userdata)
{
        struct work *item = malloc(sizeof(*item));
        if (!item)
                return -ENOMEM;
        item->fn = fn;
        item->userdata = userdata;
        item->next = NULL;
        pthread_mutex_lock(&w->lock);
        if (w->tail)
                w->tail->next = item;
        else
                w->head = item;
        w->tail = item;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
        return 0;
}

void workers_free(struct workers *w, bool join)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        /* Work not started is dropped: its owner abandoned it. */
        struct work *item = w->head;
        w->head = w->tail = NULL;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        while (item) {
                struct work *next = item->next;
                free(item);
                item = next;
        }
        if (!join) {
                /* Threads stuck in a driver call are left to the process exit. */
                for (unsigned i = 0; i < w->nthreads; i++)
                        pthread_detach(w->threads[i]);
                return; /* w stays allocated: detached threads still use it */
        }
        for (unsigned i = 0; i < w->nthreads; i++)
                pthread_join(w->threads[i], NULL);
        free(w->threads);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
}
