/*
 * Progress and safe points of long operations, shared by every driver: stages go to
 * the job's progress, checkpoint() says when the job must stop. Every member may be
 * NULL, and so may the struct.
 */
#pragma once

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
