/*
 * app.backup.create, restore, delete and list (AGENT-API 4.2): each a few lines over
 * the app driver's backup functions (drivers/app.h); the params come from
 * proto/app-backup.h. create sends backup.finished, with the same data as a
 * server's (agent/jobs-vps-store.c): the Backup and status "succeeded", or
 * {backupId, status "failed", code, error} once the work had begun.
 */
#include <stdlib.h>

#include "agent/job.h"
#include "agent/services.h"
#include "common/macro.h"
#include "drivers/app.h"
#include "proto/app-backup.h"

struct backup_job {
        const struct agent_services *s;
        const char *id;
        struct na_progress progress;
};

static void bridge_stage(void *userdata, const char *stage, int percent, const char *message)
{
        if (message && *message)
                job_progress(userdata, stage, percent, "%s", message);
        else
                job_progress(userdata, stage, percent, NULL);
}

static int bridge_checkpoint(void *userdata, struct na_error *err)
{
        return job_checkpoint(userdata, err);
}

static int begin(struct job_ctx *ctx, struct backup_job *j, struct na_error *err)
{
        j->s = job_services(ctx);
        j->id = job_target_id(ctx);
        if (!j->s || !j->s->app) {
                const char *why = j->s && j->s->apps_off_reason[0] ? j->s->apps_off_reason : "no container runtime";
                na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: apps are off on this node: %s", j->id, why);
                na_error_detail(err, "reason", json_string(why));
                return -ENOTSUP;
        }
        if (!j->s->app->backup_create)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: the %s driver has no backups", j->id,
                                    j->s->app->name);
        j->progress = (struct na_progress){ .stage = bridge_stage, .checkpoint = bridge_checkpoint, .userdata = ctx };
        return job_checkpoint(ctx, err);
}

static int create_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_app_backup_create_decode(params, (struct proto_app_backup_create **)ret, err);
}

static void create_free(void *p)
{
        proto_app_backup_create_free(p);
}

static int ref_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_app_backup_ref_decode(params, (struct proto_app_backup_ref **)ret, err);
}

static int none_decode(json_t *params, void **ret, struct na_error *err)
{
        (void)params;
        (void)err;
        *ret = NULL;
        return 0;
}

/* Whether a failure happened after the backup's work began (worth an event). */
static bool work_began(const struct na_error *err)
{
        return err->code && !(streq(err->code, NA_E_VALIDATION) || streq(err->code, NA_E_APP_NOT_FOUND) ||
                 streq(err->code, NA_E_INVALID_STATE) || streq(err->code, NA_E_JOB_CANCELLED) ||
                 streq(err->code, NA_E_LEASE_LOST));
}

static int create_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_backup_create *p = params;
        struct backup_job j;
        int r = begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_app_backup b;
        r = j.s->app->backup_create(j.s->app_conn, j.id, p, &j.progress, &b, err);
        if (r < 0) {
                if (j.s->emit_event && work_began(err))
                        j.s->emit_event(j.s, "backup.finished", j.id,
                                        json_pack("{s:s, s:s, s:s, s:s}", "backupId", p->backup_id, "status", "failed",
                                                  "code", err->code, "error", err->message));
                return r;
        }
        if (!(*ret = proto_app_backup_encode(&b)))
                return na_error_sys(err, ENOMEM, "app %s: backup %s", j.id, p->backup_id);
        if (j.s->emit_event) {
                json_t *data = proto_app_backup_encode(&b);
                if (data)
                        json_object_set_new(data, "status", json_string("succeeded"));
                j.s->emit_event(j.s, "backup.finished", j.id, data);
        }
        return 0;
}

static int empty(int r, json_t **ret, struct na_error *err)
{
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "app backup");
        return r;
}

static int restore_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_backup_ref *p = params;
        struct backup_job j;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.s->app->backup_restore(j.s->app_conn, j.id, p->backup_id, &j.progress, err);
        return empty(r, ret, err);
}

static int delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_backup_ref *p = params;
        struct backup_job j;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.s->app->backup_delete(j.s->app_conn, j.id, p->backup_id, err);
        return empty(r, ret, err);
}

static int list_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        (void)params;
        struct backup_job j;
        int r = begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_app_backup *list = NULL;
        size_t n = 0;
        if ((r = j.s->app->backup_list(j.s->app_conn, j.id, &list, &n, err)) < 0)
                return r;
        *ret = proto_app_backup_list_encode(list, n);
        free(list);
        return *ret ? 0 : na_error_sys(err, ENOMEM, "app %s: backups", j.id);
}

static const char *const create_stages[] = { "archiving", "compressing", NULL };
static const char *const restore_stages[] = { "stopping", "restoring", "starting", NULL };

static const struct job_kind create_kind = { .name = "app.backup.create", .target = PROTO_TARGET_APP,
                                             .changes = true, .decode = create_decode, .free_params = create_free,
                                             .run = create_run, .stages = create_stages };
static const struct job_kind restore_kind = { .name = "app.backup.restore", .target = PROTO_TARGET_APP,
                                              .changes = true, .decode = ref_decode, .free_params = free,
                                              .run = restore_run, .stages = restore_stages };
static const struct job_kind delete_kind = { .name = "app.backup.delete", .target = PROTO_TARGET_APP,
                                             .changes = true, .decode = ref_decode, .free_params = free,
                                             .run = delete_run };
static const struct job_kind list_kind = { .name = "app.backup.list", .target = PROTO_TARGET_APP, .changes = false,
                                           .decode = none_decode, .run = list_run };

job_kind_list app_backup_job_kinds = { &create_kind, &restore_kind, &delete_kind, &list_kind, NULL };
