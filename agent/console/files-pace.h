/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * When a live file editing session (agent/console/console-files.c) reads its file
 * again, and how many frames its relay may send: the contract's "at most one frame per
 * 100 ms" and the agent's own bounds, as pure functions over a clock the caller passes
 * (unit-tested in tests/agent/console/test-files-pace.c).
 *
 *   long long due = files_pace_due(sent, last_push_ms, settle, now);   // <= now: read now
 *   if (!files_rate_take(&bucket, now)) refuse();                      // a frame from the relay
 */
#pragma once

#include <stdbool.h>

#define FILES_PUSH_GAP_MS 100   /* at most one file/gone frame per this, per session (AGENT-API 4.3) */
#define FILES_SETTLE_MS 10      /* after a bare write (IN_MODIFY), before reading: a writer that truncates
                                 * and then writes is usually done by then (bench/console/bench_files.py) */
#define FILES_DIR_POLL_MS 1000  /* while the file's directory is away: look again */
#define FILES_RATE_PER_SEC 10.0 /* frames from the relay a session may send a second... */
#define FILES_RATE_BURST 20.0   /* ...and in one burst */

/*
 * The earliest time (ms, the caller's monotonic clock) the file may be read again after
 * a change: now for the first read, else FILES_PUSH_GAP_MS after the last file or gone
 * frame (last_push_ms), and with settle (the change was a bare write) not before
 * now + FILES_SETTLE_MS.
 */
long long files_pace_due(bool sent, long long last_push_ms, bool settle, long long now_ms);

struct files_rate {
        double tokens;
        long long at_ms;
};
/* A full bucket at now_ms. */
void files_rate_init(struct files_rate *r, long long now_ms);
/* One frame from the relay at now_ms: true when it may be taken (a token spent). */
bool files_rate_take(struct files_rate *r, long long now_ms);
