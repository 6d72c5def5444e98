/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Job kinds vps.metrics and app.metrics (agent API 4.1, 4.2, 5.1): params {from?, to?,
 * step?} decoded and checked by proto/metrics-params.c; the answer comes from the metrics
 * module's history. Neither changes the node.
 *
 * A server that the metrics module does not track but that exists on the node (the
 * vps_exists hook says so: created before metrics were tracked, or its tracking was
 * dropped) answers with whatever history its file holds and a `now` without values;
 * an unknown server is VPS_NOT_FOUND. Apps likewise, through the app driver: a
 * deployed app that has not run yet answers with an empty history; an unknown one
 * is APP_NOT_FOUND.
 */
#include <stdlib.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "common/timeutil.h"
#include "drivers/app.h"
#include "metrics/metrics.h"
#include "proto/metrics-params.h"

static int metrics_params_decode(json_t *params, void **ret, struct na_error *err)
{
        struct proto_metrics_query *q = calloc(1, sizeof(*q));
        if (!q)
                return na_error_sys(err, ENOMEM, "metrics params");
        int r = proto_metrics_query_decode(params, (int64_t)na_now_real_ms(), q, err);
        if (r < 0) {
                free(q);
                return r;
        }
        *ret = q;
        return 0;
}

static void metrics_params_free(void *params)
{
        free(params);
}

static int metrics_run(struct job_ctx *ctx, enum metrics_kind kind, const struct proto_metrics_query *q,
                       json_t **ret_data, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        const char *id = job_target_id(ctx);
        if (!s || !s->metrics)
                return na_error_set(err, ENOTSUP, NA_E_INTERNAL, "%s %s: metrics are not collected on this node",
                                    metrics_kind_names[kind], id);
        bool known = kind == METRICS_VPS ? s->vps_exists && s->vps_exists(s, id)
                                         : s->app && s->app->exists(s->app_conn, id);
        int r = metrics_query(s->metrics, kind, id, q, known, ret_data, err);
        if (r < 0 && !na_error_is_set(err))
                na_error_sys(err, -r, "%s %s: metrics", metrics_kind_names[kind], id);
        return r;
}

static int vps_metrics_run(struct job_ctx *ctx, void *params, json_t **ret_data, struct na_error *err)
{
        return metrics_run(ctx, METRICS_VPS, params, ret_data, err);
}

static int app_metrics_run(struct job_ctx *ctx, void *params, json_t **ret_data, struct na_error *err)
{
        return metrics_run(ctx, METRICS_APP, params, ret_data, err);
}

static JOB_KIND(vps_metrics_kind, "vps.metrics", .target = PROTO_TARGET_VPS, .changes = false, .stages = NULL,
                .decode = metrics_params_decode, .free_params = metrics_params_free, .run = vps_metrics_run);

static JOB_KIND(app_metrics_kind, "app.metrics", .target = PROTO_TARGET_APP, .changes = false, .stages = NULL,
                .decode = metrics_params_decode, .free_params = metrics_params_free, .run = app_metrics_run);

job_kind_list metrics_job_kinds = { &vps_metrics_kind, &app_metrics_kind, NULL };
