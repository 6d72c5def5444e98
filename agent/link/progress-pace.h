/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * When a remote job's progress may be posted (AGENT-API 3.2/3.3, proto/README.md
 * "Progress"): the first progress of a job at once, then at most one post per
 * PROGRESS_GAP_US carrying the latest stage, percent and message (what came between
 * is coalesced), and, with nothing new, the latest again as the lease keepalive once
 * keepalive_us passed since the last post. Pure: the caller passes the clock and does
 * the posting (agent/link/link-jobs.c).
 *
 *   struct progress_pace p;
 *   progress_pace_init(&p, now);              // the job was taken
 *   p.fresh = true;                           // the job reported something new
 *   uint64_t due = progress_pace_due(&p, PROGRESS_GAP_US, keepalive);
 *   if (due <= now) { post(); progress_pace_posted(&p, now); } else arm_timer(due - now);
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define PROGRESS_GAP_US 1000000u /* at most one progress post per second per job */

struct progress_pace {
        uint64_t last_us; /* the last post, or when the job was taken */
        bool posted;      /* a post went out */
        bool fresh;       /* there is progress not posted yet */
};

void progress_pace_init(struct progress_pace *p, uint64_t now_us);
/* The monotonic time (µs) from which the next post may go: 0 for at once. */
uint64_t progress_pace_due(const struct progress_pace *p, uint64_t gap_us, uint64_t keepalive_us);
/* A post went out at now_us, carrying the latest progress. */
void progress_pace_posted(struct progress_pace *p, uint64_t now_us);
