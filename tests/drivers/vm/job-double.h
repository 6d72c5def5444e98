/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A stand-in for the job layer (agent/jobs/job-kind.h) so that the vps handlers run
 * directly in a test: it records stages and progress, answers job_services and
 * job_target_id, and fails job_checkpoint when told to.
 */
#pragma once

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"

struct job_ctx {
        const struct agent_services *services;
        char id[64];
        char target[64];
        char stages[32][32]; /* distinct stages, in order */
        int n_stages;
        char message[256];
        int checkpoints;
        int cancel_at;       /* fail the n-th checkpoint (1-based); 0: never */
        uint64_t remaining_ms;
};

/* Decode params with the kind named name, run it in ctx, free the params. */
int job_double_run(const char *name, struct job_ctx *ctx, json_t *params, json_t **ret_data, struct na_error *err);
const struct job_kind *job_double_kind(const char *name);
