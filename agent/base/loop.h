/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one event loop (epoll): fd watches, timers (a heap whose earliest deadline is
 * epoll's timeout: no descriptor, no syscall to arm one), signals through a
 * signalfd, and loop_post() for other threads to hand work back. Callbacks run on
 * the loop thread and must never block.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "common/error.h"

struct loop;
struct loop_timer;

typedef void (*loop_io_fn)(void *userdata, int fd, uint32_t revents);
typedef void (*loop_fn)(void *userdata);
typedef void (*loop_signal_fn)(void *userdata, int signo);

int loop_new(struct loop **ret, struct na_error *err);
void loop_free(struct loop *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct loop *, loop_free)

/* Watch fd for events (EPOLLIN/EPOLLOUT); calling again changes the events or callback. */
int loop_watch(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *userdata, struct na_error *err);
void loop_unwatch(struct loop *l, int fd);

/* NULL when out of memory: check it. Arming a timer made here never fails. */
struct loop_timer *loop_timer_new(struct loop *l, loop_fn fn, void *userdata) _warn_unused_;
void loop_timer_free(struct loop_timer *t);
/* Fire once after delay (replacing any earlier arming). */
void loop_timer_arm_ms(struct loop_timer *t, uint64_t delay_ms);
void loop_timer_arm_us(struct loop_timer *t, uint64_t delay_us);
void loop_timer_disarm(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);

/* Block the signals and deliver them through a signalfd to fn. */
int loop_signals(struct loop *l, const int *signals, size_t n, loop_signal_fn fn, void *userdata,
                 struct na_error *err);

/*
 * Thread-safe: run fn(userdata) on the loop thread, in posting order.
 *
 * loop_post() allocates, so it can fail (-ENOMEM). Where a lost post would wedge
 * something (a job's end, its progress), embed a struct loop_post_node in the object
 * instead: loop_post_init() it once, then loop_post_queue() never fails. Queueing a
 * node that is already queued does nothing (one run follows); once its run starts,
 * it may be queued again, and fn may free the object it lives in.
 */
int loop_post(struct loop *l, loop_fn fn, void *userdata) _warn_unused_;

struct loop_post_node {
        loop_fn fn;
        void *userdata;
        struct loop_post_node *next;
        bool queued; /* under the loop's post lock */
        bool owned;  /* allocated by loop_post() */
};
void loop_post_init(struct loop_post_node *n, loop_fn fn, void *userdata);
void loop_post_queue(struct loop *l, struct loop_post_node *n);

/* Run until loop_quit(); returns the code given to it. */
int loop_run(struct loop *l);
void loop_quit(struct loop *l, int code);
