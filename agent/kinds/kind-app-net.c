/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app network kinds (AGENT-API 4.2): app.group.join, app.group.leave and
 * app.exposure.add, verify, remove, list. Each a few lines over the app driver's
 * table (drivers/app.h); params from proto/app-exposure.h.
 */
#include <string.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "drivers/app.h"
#include "proto/app-exposure.h"

struct net_job {
        const struct app_driver *app;
        struct app_conn *conn;
        const char *id;
};

static int begin(struct job_ctx *ctx, struct net_job *j, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        j->id = job_target_id(ctx);
        if (services_apps_on(s, j->id, err) < 0)
                return -ENOTSUP;
        j->app = s->app;
        j->conn = s->app_conn;
        if (!j->app->group_set || !j->app->exposure_add)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: the %s driver has no networks", j->id,
                                    j->app->name);
        return job_checkpoint(ctx, err);
}

static int group_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_app_group_decode(params, (struct proto_app_group **)ret, err);
}

static void group_free(void *p)
{
        proto_app_group_free(p);
}

static int add_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_exposure_add_decode(params, (struct proto_exposure_add **)ret, err);
}

static void add_free(void *p)
{
        proto_exposure_add_free(p);
}

static int ref_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_exposure_ref_decode(params, (struct proto_exposure_ref **)ret, err);
}

static void ref_free(void *p)
{
        proto_exposure_ref_free(p);
}

static int join_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_group *g = params;
        struct net_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->group_set(j.conn, j.id, g->id, false, ret, err);
}

/*
 * Leaving a group the app is not in changes nothing and answers the App (converging,
 * like a second leave): the controller's view and ours agree either way.
 */
static int leave_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_group *g = params;
        struct net_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->group_set(j.conn, j.id, g->id, true, ret, err);
}

static int add_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct net_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->exposure_add(j.conn, j.id, params, ret, err);
}

static int verify_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_exposure_ref *p = params;
        struct net_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->exposure_verify(j.conn, j.id, p->id, ret, err);
}

static int remove_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_exposure_ref *p = params;
        struct net_job j;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.app->exposure_remove(j.conn, j.id, p->id, err);
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "app %s", j.id);
        return r;
}

static int list_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        (void)params;
        struct net_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->exposure_list(j.conn, j.id, ret, err);
}

static JOB_KIND(group_join_kind, "app.group.join", .target = PROTO_TARGET_APP, .changes = true, .decode = group_decode,
                .free_params = group_free, .run = join_run);
static JOB_KIND(group_leave_kind, "app.group.leave", .target = PROTO_TARGET_APP, .changes = true,
                .decode = group_decode, .free_params = group_free, .run = leave_run);
static JOB_KIND(exposure_add_kind, "app.exposure.add", .target = PROTO_TARGET_APP, .changes = true,
                .decode = add_decode, .free_params = add_free, .run = add_run);
static JOB_KIND(exposure_verify_kind, "app.exposure.verify", .target = PROTO_TARGET_APP, .changes = true,
                .decode = ref_decode, .free_params = ref_free, .run = verify_run);
static JOB_KIND(exposure_remove_kind, "app.exposure.remove", .target = PROTO_TARGET_APP, .changes = true,
                .decode = ref_decode, .free_params = ref_free, .run = remove_run);
static JOB_KIND(exposure_list_kind, "app.exposure.list", .target = PROTO_TARGET_APP, .changes = false,
                .run = list_run);

job_kind_list app_net_job_kinds = { &group_join_kind, &group_leave_kind, &exposure_add_kind, &exposure_verify_kind,
                                    &exposure_remove_kind, &exposure_list_kind, NULL };
