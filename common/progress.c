/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Byte meters over a stage's percent range: see progress.h. */
#include "common/progress.h"

int na_progress_percent(uint64_t done, uint64_t total, int lo, int hi)
{
        if (total == 0 || hi <= lo)
                return lo;
        if (done >= total)
                return hi;
        int part = (int)((double)done * (hi - lo) / (double)total); /* rounds down: hi only when done */
        return lo + (part < hi - lo ? part : hi - lo - 1);
}

void na_progress_meter_init(struct na_progress_meter *m, const struct na_progress *progress, const char *stage,
                            const char *message, int lo, int hi)
{
        lo = lo < 0 ? 0 : lo > 100 ? 100 : lo;
        hi = hi < lo ? lo : hi > 100 ? 100 : hi;
        *m = (struct na_progress_meter){
                .progress = progress, .stage = stage, .message = message, .lo = lo, .hi = hi, .last = -1
        };
}

void na_progress_meter_total(struct na_progress_meter *m, uint64_t total)
{
        if (!m)
                return;
        m->total = total;
        m->last = m->lo;
        na_progress_stage(m->progress, m->stage, m->lo, m->message);
}

void na_progress_meter_set(struct na_progress_meter *m, uint64_t done)
{
        if (!m)
                return;
        int pct = na_progress_percent(done, m->total, m->lo, m->hi);
        if (pct == m->last)
                return;
        m->last = pct;
        na_progress_stage(m->progress, m->stage, pct, m->message);
}
