/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a job kind implements, and what a running job may call.
 *
 * A kind is a const struct job_kind: decode() validates params into an owned C
 * struct before anything changes (VALIDATION_ERROR with per-field _errors), run()
 * carries the job out on a worker thread and may block. Handlers call
 * job_checkpoint() at safe points: it fails with JOB_CANCELLED, JOB_TIMEOUT or
 * LEASE_LOST when the job must stop, and the handler returns that error as is.
 * This header never pulls in libvirt or netlink headers, and neither may the
 * handlers: they reach the node through the driver tables in agent_services.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"
#include "proto/job.h"

struct job_ctx;
struct agent_services;

struct job_kind {
        const char *name;                  /* "vps.power" */
        enum proto_target_type target;     /* the target.type the kind acts on */
        bool changes;                      /* changes the node: journaled before its first effect */
        /* Never run twice (vps.exec: a command in a guest may not be safe to repeat): a
         * job the agent's death interrupted fails 409 JOB_INTERRUPTED when it comes
         * again, instead of running from the start (AGENT-API 3.2). Needs changes. */
        bool once;
        const char *const *stages;         /* NULL-terminated progress stages, or NULL */
        /* Validate params (never NULL: {} when the job had none) into *ret; may be NULL for kinds without params. */
        int (*decode)(json_t *params, void **ret, struct na_error *err);
        void (*free_params)(void *params);
        /* Carry the job out. *ret_data is the result's data (NULL gives {}). */
        int (*run)(struct job_ctx *ctx, void *params, json_t **ret_data, struct na_error *err);
        /* When non-zero, the target types accepted (1u << type), instead of target alone
         * (console.open: a server or an app). */
        unsigned targets;
};

/*
 * Every kind is declared in one form, its name first and then its fields as designated
 * initializers, so `grep -rn 'JOB_KIND(.*"app.files.move"' agent/kinds` finds any kind
 * in one step (docs/architecture.md lists which file holds which family):
 *
 *   static JOB_KIND(power_kind, "app.power", .target = PROTO_TARGET_APP, .changes = true,
 *                   .decode = power_decode, .free_params = power_free, .run = power_run);
 */
#define JOB_KIND(var, kind_name, ...) const struct job_kind var = { .name = kind_name, __VA_ARGS__ }

/* A NULL-terminated list of kinds, one per module (agent/kinds/kind-registry.c gathers them). */
typedef const struct job_kind *const job_kind_list[];

const struct agent_services *job_services(struct job_ctx *ctx);
const char *job_id(const struct job_ctx *ctx);
const char *job_target_id(const struct job_ctx *ctx);
enum proto_target_type job_target_type(const struct job_ctx *ctx);
int64_t job_attempt(const struct job_ctx *ctx);

/*
 * Report progress. stage must be one of the kind's stages (or NULL to keep the
 * current one); percent < 0 for none. Cheap: the link posts the latest progress at
 * most once a second (coalesced; agent/link/progress-pace.h) and keeps the lease alive on
 * its own between calls. Call it when the percent moved (struct na_progress_meter).
 */
void job_progress(struct job_ctx *ctx, const char *stage, int percent, const char *fmt, ...) _printf_(4, 5);

/* A safe point. 0: go on. < 0: stop now and return; err names why. */
int job_checkpoint(struct job_ctx *ctx, struct na_error *err);


static inline void job_na_progress_stage_(void *userdata, const char *stage, int percent, const char *message)
{
        if (message && *message)
                job_progress(userdata, stage, percent, "%s", message);
        else
                job_progress(userdata, stage, percent, NULL);
}

static inline int job_na_progress_checkpoint_(void *userdata, struct na_error *err)
{
        return job_checkpoint(userdata, err);
}

/*
 * The job's progress and checkpoint as a driver's struct na_progress (stage, percent
 * and message go to job_progress; checkpoint to job_checkpoint). It holds ctx only.
 */
static inline struct na_progress job_na_progress(struct job_ctx *ctx)
{
        return (struct na_progress){ .stage = job_na_progress_stage_, .checkpoint = job_na_progress_checkpoint_,
                                     .userdata = ctx };
}

/* Milliseconds left before the job's timeout (never negative). */
uint64_t job_remaining_ms(const struct job_ctx *ctx);
