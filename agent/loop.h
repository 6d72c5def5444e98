/*
 * The one event loop (epoll): fd watches, timers on one timerfd, signals through a
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

struct loop_timer *loop_timer_new(struct loop *l, loop_fn fn, void *userdata);
void loop_timer_free(struct loop_timer *t);
/* Fire once after delay (replacing any earlier arming). */
void loop_timer_arm_ms(struct loop_timer *t, uint64_t delay_ms);
void loop_timer_arm_us(struct loop_timer *t, uint64_t delay_us);
void loop_timer_disarm(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);

/* Block the signals and deliver them through a signalfd to fn. */
int loop_signals(struct loop *l, const int *signals, size_t n, loop_signal_fn fn, void *userdata,
                 struct na_error *err);

/* Thread-safe: run fn(userdata) on the loop thread, in posting order. */
int loop_post(struct loop *l, loop_fn fn, void *userdata);

/* Run until loop_quit(); returns the code given to it. */
int loop_run(struct loop *l);
void loop_quit(struct loop *l, int code);
