/* SPDX-License-Identifier: GPL-2.0-or-later */
/* When a remote job's progress may be posted: see progress-pace.h. */
#include "agent/link/progress-pace.h"

void progress_pace_init(struct progress_pace *p, uint64_t now_us)
{
        *p = (struct progress_pace){ .last_us = now_us };
}

uint64_t progress_pace_due(const struct progress_pace *p, uint64_t gap_us, uint64_t keepalive_us)
{
        if (p->fresh)
                return p->posted ? p->last_us + gap_us : 0;
        /* Nothing new: the keepalive, never more often than the gap either. */
        return p->last_us + (keepalive_us > gap_us ? keepalive_us : gap_us);
}

void progress_pace_posted(struct progress_pace *p, uint64_t now_us)
{
        p->last_us = now_us;
        p->posted = true;
        p->fresh = false;
}
