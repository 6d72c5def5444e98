/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "job-double.h"

#include <stdio.h>
#include <string.h>

#include "agent/base/services.h"
#include "agent/kinds/kind-vps.h"
#include "transfer/transfer.h"

const struct agent_services *job_services(struct job_ctx *ctx)
{
        return ctx->services;
}

/* The daemon's (agent/daemon/services.c) for vps.backup.export/import: defaults here. */
void services_transfer_options(const struct agent_services *s, struct transfer_options *ret)
{
        (void)s;
        memset(ret, 0, sizeof(*ret));
}

const char *job_id(const struct job_ctx *ctx)
{
        return ctx->id;
}

const char *job_target_id(const struct job_ctx *ctx)
{
        return ctx->target;
}

int64_t job_attempt(const struct job_ctx *ctx)
{
        return 1;
}

void job_progress(struct job_ctx *ctx, const char *stage, int percent, const char *fmt, ...)
{
        if (stage && (ctx->n_stages == 0 || strcmp(ctx->stages[ctx->n_stages - 1], stage) != 0) &&
            ctx->n_stages < 32)
                snprintf(ctx->stages[ctx->n_stages++], sizeof(ctx->stages[0]), "%s", stage);
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(ctx->message, sizeof(ctx->message), fmt, ap);
                va_end(ap);
        }
}

int job_checkpoint(struct job_ctx *ctx, struct na_error *err)
{
        if (++ctx->checkpoints == ctx->cancel_at)
                return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "job %s: cancelled by the test", ctx->id);
        return 0;
}

uint64_t job_remaining_ms(const struct job_ctx *ctx)
{
        return ctx->remaining_ms ? ctx->remaining_ms : 3600 * 1000;
}

const struct job_kind *job_double_kind(const char *name)
{
        for (const struct job_kind *const *k = vps_job_kinds; *k; k++)
                if (strcmp((*k)->name, name) == 0)
                        return *k;
        return NULL;
}

int job_double_run(const char *name, struct job_ctx *ctx, json_t *params, json_t **ret_data, struct na_error *err)
{
        const struct job_kind *k = job_double_kind(name);
        if (!k)
                return na_error_set(err, ENOENT, NA_E_UNSUPPORTED_JOB, "no kind %s", name);
        void *p = NULL;
        json_t *empty = NULL;
        if (!params)
                params = empty = json_object();
        int r = k->decode ? k->decode(params, &p, err) : 0;
        if (r == 0) {
                *ret_data = NULL;
                r = k->run(ctx, p, ret_data, err);
                if (r == 0 && !*ret_data)
                        *ret_data = json_object();
        }
        if (p && k->free_params)
                k->free_params(p);
        if (empty)
                json_decref(empty);
        return r;
}
