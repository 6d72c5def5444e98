/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The live file editing session's pace and its relay's rate (agent/console/files-pace.h). */
#include "agent/console/files-pace.h"

long long files_pace_due(bool sent, long long last_push_ms, bool settle, long long now_ms)
{
        long long due = sent ? last_push_ms + FILES_PUSH_GAP_MS : now_ms;
        if (settle && due < now_ms + FILES_SETTLE_MS)
                due = now_ms + FILES_SETTLE_MS;
        return due;
}

void files_rate_init(struct files_rate *r, long long now_ms)
{
        r->tokens = FILES_RATE_BURST;
        r->at_ms = now_ms;
}

bool files_rate_take(struct files_rate *r, long long now_ms)
{
        if (now_ms > r->at_ms)
                r->tokens += (double)(now_ms - r->at_ms) * FILES_RATE_PER_SEC / 1000.0;
        if (r->tokens > FILES_RATE_BURST)
                r->tokens = FILES_RATE_BURST;
        r->at_ms = now_ms;
        if (r->tokens < 1.0)
                return false;
        r->tokens -= 1.0;
        return true;
}
