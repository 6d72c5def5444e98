/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The metrics collector thread: one tick every interval (aligned to the interval
 * on the realtime clock, so history buckets line up across restarts). Collection
 * reads many small files; it runs here, never on the loop.
 */
#pragma once

#include "common/error.h"

struct metrics;
struct collector;

int collector_start(struct metrics *m, unsigned interval_sec, struct collector **ret, struct na_error *err);
/* Takes effect from the next tick (metricsIntervalSec from hello). */
void collector_set_interval(struct collector *c, unsigned interval_sec);
void collector_stop(struct collector *c);
