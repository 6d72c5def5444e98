/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The output ring of one app: every line the container prints (and the agent's
 * "system" lines) in two append-only segment files <dir>/output.0 and output.1.
 * nodeagent-monitor writes it, the agent reads it (app.output, app consoles) and
 * appends system lines; each append and each read holds a flock on <dir>/output.lock
 * (exclusive to append, shared to read), so writers never interleave and readers
 * never see half a switch between segments.
 *
 * A segment grows to segment_bytes; the next record then empties the older segment
 * and continues there, so at least segment_bytes of the newest output are always
 * kept. A record is {u32 len, u32 crc32c, u64 seq, i64 ts_ms, u8 stream, len bytes}
 * (little endian; the CRC covers everything but itself): a torn tail after a crash
 * is cut by the next writer and skipped by readers, never misread. seq starts at 1
 * and increases forever, across writers and restarts (a writer continues after the
 * last seq on disk).
 *
 * Writer:  app_ring_open(dir, 0, &r, err); app_ring_append(r, APP_RING_STDOUT,
 *          "hello", 5, NULL, err); app_ring_close(r);
 *          or app_ring_append_once(dir, APP_RING_SYSTEM, "stopping", 8, NULL, err).
 * Reader:  app_ring_read(dir, since_seq, limit, 0, cb, userdata, &next, err), or with
 *          APP_RING_TAIL for the last `limit` lines (console start).
 *
 * Needs only libc and common/crc32c.c (nodeagent-monitor compiles it in); errors are
 * struct na_error, which the monitor provides without jansson (monitor/monitor-error.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

enum app_ring_stream {
        APP_RING_STDOUT = 1,
        APP_RING_STDERR = 2,
        APP_RING_SYSTEM = 3,
};

#define APP_RING_SEGMENT_DEFAULT (1024u * 1024u) /* bytes per segment file */
#define APP_RING_SEGMENT_MIN (64u * 1024u)
#define APP_RING_SEGMENT_MAX (256u * 1024u * 1024u)
#define APP_RING_TEXT_MAX 8192u /* a longer line is cut into pieces of this size */
#define APP_RING_READ_LIMIT_MAX 100000u

/* "stdout", "stderr", "system" (NULL for anything else). */
const char *app_ring_stream_name(enum app_ring_stream stream);

struct app_ring;

/*
 * Open (creating when needed, mode 0600) the ring in dir, for appending.
 * segment_bytes 0 means APP_RING_SEGMENT_DEFAULT; otherwise it must lie within
 * [APP_RING_SEGMENT_MIN, APP_RING_SEGMENT_MAX]. A torn tail left by a crash is cut.
 */
int app_ring_open(const char *dir, size_t segment_bytes, struct app_ring **ret, struct na_error *err);
void app_ring_close(struct app_ring *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct app_ring *, app_ring_close);
#define _cleanup_app_ring_ _cleanup_(app_ring_closep)

/*
 * Append text as one or more lines of stream, stamped now: split at every '\n'
 * (a trailing '\n' does not make an empty line) and into pieces of at most
 * APP_RING_TEXT_MAX bytes. Empty text appends one empty line. *ret_last_seq (may be
 * NULL) gets the seq of the last record written.
 */
int app_ring_append(struct app_ring *r, enum app_ring_stream stream, const void *text, size_t len,
                    uint64_t *ret_last_seq, struct na_error *err);

/* The seq the next record will get, as this writer last saw the ring. */
uint64_t app_ring_next_seq(const struct app_ring *r);

/* app_ring_open + app_ring_append + app_ring_close with the default segment size. */
int app_ring_append_once(const char *dir, enum app_ring_stream stream, const void *text, size_t len,
                         uint64_t *ret_last_seq, struct na_error *err);

struct app_ring_line {
        uint64_t seq;
        int64_t ts_ms; /* milliseconds since the epoch */
        enum app_ring_stream stream;
        const char *text; /* len bytes, NUL-terminated after them (text may hold NULs) */
        size_t len;
};

/* Called once per line, oldest first; a negative return stops the read and is returned. */
typedef int (*app_ring_line_fn)(const struct app_ring_line *line, void *userdata);

#define APP_RING_TAIL 0x1u /* only the last `limit` lines with seq >= since_seq */

/*
 * Lines with seq >= since_seq, oldest first, at most limit (1..APP_RING_READ_LIMIT_MAX)
 * of them: the first ones, or with APP_RING_TAIL the last ones. Lines older than the
 * oldest kept are gone; the read starts at the oldest kept. *ret_next_seq (may be
 * NULL) gets the sinceSeq of the next read: the last returned seq + 1, or when none
 * was returned max(since_seq, the seq the next record will get). A ring never written
 * reads as empty with next seq 1. cb runs with the shared lock held: it must not
 * append to this ring.
 */
int app_ring_read(const char *dir, uint64_t since_seq, size_t limit, unsigned flags, app_ring_line_fn cb,
                  void *userdata, uint64_t *ret_next_seq, struct na_error *err);
