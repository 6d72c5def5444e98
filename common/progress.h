/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Progress and safe points of long operations, shared by every driver: stages go to
 * the job's progress, checkpoint() says when the job must stop. Every member may be
 * NULL, and so may the struct.
 *
 * Work measured in bytes reports through a meter, which passes a percent on only when
 * its integer value changes (at most 101 calls a stage, whatever the size):
 *
 *   struct na_progress_meter m;
 *   na_progress_meter_init(&m, progress, "preparing-disk", "verifying the template image", 0, 100);
 *   na_progress_meter_total(&m, size);      // reports 0 % (lo) at once
 *   ... na_progress_meter_set(&m, done); ... // lo..hi as done goes to size
 */
#pragma once

#include <stdint.h>

#include "common/error.h"

struct na_progress {
        void (*stage)(void *userdata, const char *stage, int percent, const char *message);
        int (*checkpoint)(void *userdata, struct na_error *err); /* < 0: stop, err says why */
        void *userdata;
};

static inline void na_progress_stage(const struct na_progress *p, const char *stage, int percent, const char *message)
{
        if (p && p->stage)
                p->stage(p->userdata, stage, percent, message);
}

static inline int na_progress_checkpoint(const struct na_progress *p, struct na_error *err)
{
        if (p && p->checkpoint)
                return p->checkpoint(p->userdata, err);
        return 0;
}

struct na_progress_meter {
        const struct na_progress *progress;
        const char *stage;   /* NULL: the current stage */
        const char *message; /* kept with every percent */
        int lo, hi;          /* the stage's percent range this work covers */
        uint64_t total;      /* 0: unknown, the meter stays at lo */
        int last;            /* the last percent passed on; -1: none yet */
};

/* A meter over lo..hi (0 <= lo <= hi <= 100) of stage; reports nothing yet. */
void na_progress_meter_init(struct na_progress_meter *m, const struct na_progress *progress, const char *stage,
                            const char *message, int lo, int hi);
/* The amount of work; reports lo. */
void na_progress_meter_total(struct na_progress_meter *m, uint64_t total);
/* done of total: reports the percent when its integer value changed. m may be NULL. */
void na_progress_meter_set(struct na_progress_meter *m, uint64_t done);
/* lo + (hi - lo) * done / total, clamped to lo..hi (lo when total is 0). */
int na_progress_percent(uint64_t done, uint64_t total, int lo, int hi);
/* The meter's progress for safe points (NULL for a NULL meter). */
static inline const struct na_progress *na_progress_meter_progress(const struct na_progress_meter *m)
{
        return m ? m->progress : NULL;
}
