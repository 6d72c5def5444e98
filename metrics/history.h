/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * History of one target on the node's disk: one file of fixed size, decided up
 * front, holding three rings of buckets (proto/metrics-params.h tiers):
 *
 *   offset 0      header, 64 bytes (magic "NAHIST01", layout, crc32c)
 *   offset 64     tier 0:  360 buckets of 10 s   (1 hour)
 *   offset 20224  tier 1: 1440 buckets of 1 min  (24 hours)
 *   offset 100864 tier 2: 2880 buckets of 15 min (30 days)
 *   total         262,144 bytes = 256 KiB per target (4680 buckets of 56 bytes)
 *
 * The file is never memory-mapped: buckets are read and written with pread/pwrite
 * on a descriptor kept open per target, so its pages live in the page cache and
 * never count in the process's RSS however many targets there are or how often
 * their history is read. In memory there are only the buckets in progress (about
 * 400 bytes a target) and the closed buckets not written yet (at most 16 of 56
 * bytes); a query reads the ranges it needs (one or two preads) and sees the ones
 * in memory over them. (Files written when the history was mapped have the same
 * layout and stay valid.)
 *
 * A bucket is {u32 start (epoch seconds, 0 = empty), f32 avg[7], f32 max[6]}: the
 * average and maximum of every Sample value over the bucket (memoryLimitMB has no
 * max), NaN where the value was never measured. A bucket lives in slot
 * (start / res) % slots; one whose start does not match its slot is stale or corrupt
 * and reads as empty. Native byte order: the file never leaves its node.
 *
 * Rollups: a sample goes into the 10 s bucket; when a 10 s bucket ends, its
 * averages and maxima enter the minute as one unit, and a finished minute enters
 * its 15 minutes the same way (each finer bucket weighs the same: time-weighted).
 * Writes: a bucket is written once, after it closed, by history_flush: the closed
 * buckets of each tier in one pwrite per run of consecutive slots (2 minutes of
 * 10 s buckets are one write). The collector flushes a target every
 * HISTORY_FLUSH_BUCKETS ticks (its targets spread over the ticks); recording
 * flushes by itself when its room for closed buckets is full, and history_close
 * flushes everything and the 10 s bucket in progress. Recording allocates nothing
 * and makes no system call between flushes. A pwrite costs 2.5-5 us on ext4 (it
 * updates the file's times), more than reading a cgroup file: one a sample for every
 * target was half of a tick.
 *
 * Durability: on open (also read-only) the minute and quarter hour in progress are
 * rebuilt from the finer tiers (reading the 10 s ring and up to 15 minutes), so a
 * restart (history_close, then history_open) loses nothing. A crash of the process
 * loses what was not flushed: the samples of the last 2 minutes at most (at a 10 s
 * interval); everything older is in the page cache and whole (a flush writes the
 * coarser tiers first). A crash of the machine loses what the kernel had not
 * written back, as before (nothing is fsync'ed).
 *
 * A file of the wrong size or with a bad header is recreated empty; stale or
 * corrupt buckets read as empty and are overwritten in time; values that are not
 * finite or negative read as absent. A failed write (a full disk when the file was
 * not preallocated) loses that bucket only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/metrics-params.h"

#define HISTORY_FILE_SIZE 262144u

struct history;

enum history_open_result { HISTORY_OPENED, HISTORY_CREATED, HISTORY_RECREATED };

/*
 * Open or create the history file at path for recording; it keeps one descriptor
 * open until history_close. preallocate reserves its blocks (fallocate) so a full
 * disk cannot make a later write fail.
 * *result (may be NULL) says whether it was found intact, new, or recreated.
 */
int history_open(const char *path, bool preallocate, struct history **ret, enum history_open_result *result,
                 struct na_error *err);
/* Open for reading only (a descriptor until history_close): -ENOENT when there is no file; a corrupt one reads as empty. */
int history_open_readonly(const char *path, struct history **ret, struct na_error *err);
void history_close(struct history *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct history *, history_close)

/* Closed 10 s buckets held in memory before a flush; the collector flushes a target every this many ticks. */
#define HISTORY_FLUSH_BUCKETS 12

/* Record one sample (its at_ms places it). A sample before the current buckets (the
 * clock went back) starts the buckets in progress over. Returns the writes it made
 * (a flush when the room for closed buckets is full; usually none). */
unsigned history_record(struct history *h, const struct proto_metrics_sample *s);
/* Write the closed buckets held in memory (nothing for a read-only history); returns the writes made. */
unsigned history_flush(struct history *h);

/*
 * The points of q (tier, step, from..to, no later than q->now_ms) in time order, in
 * a malloc'ed array. Intervals without data are left out.
 */
int history_series(const struct history *h, const struct proto_metrics_query *q, struct proto_metrics_point **ret,
                   size_t *ret_n, struct na_error *err);

/* One bucket as a query sees it (the file's, or the one in progress) into *ret; false when absent. */
bool history_bucket(const struct history *h, unsigned tier, uint32_t start, struct proto_metrics_point *ret);
