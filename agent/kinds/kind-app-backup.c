/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.backup.create, restore, delete and list (AGENT-API 4.2): each a few lines over
 * the app driver's backup functions (drivers/app.h); the params come from
 * proto/app-backup.h. create sends backup.finished, with the same data as a
 * server's (agent/kinds/kind-vps-store.c): the Backup and status "succeeded", or
 * {backupId, status "failed", code, error} once the work had begun. export and import
 * move a backup file to and from object storage through the transfer client
 * (transfer/transfer.h, AGENT-API 4.4): export PUTs the file as it is; import downloads
 * into an unnamed file in the app's backups directory that becomes the listed backup
 * only once it checked out (sha256, zstd): a failure keeps nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "drivers/app.h"
#include "transfer/transfer.h"
#include "proto/app-backup.h"

struct backup_job {
        const struct agent_services *s;
        const char *id;
        struct na_progress progress;
};

static int begin(struct job_ctx *ctx, struct backup_job *j, struct na_error *err)
{
        j->s = job_services(ctx);
        j->id = job_target_id(ctx);
        if (services_apps_on(j->s, j->id, err) < 0)
                return -ENOTSUP;
        if (!j->s->app->backup_create)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: the %s driver has no backups", j->id,
                                    j->s->app->name);
        j->progress = job_na_progress(ctx);
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

static int export_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_backup_transfer_decode(params, "PUT", (int64_t)na_now_real_ms(),
                                                (struct proto_backup_transfer **)ret, err);
}

static int import_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_backup_transfer_decode(params, "GET", (int64_t)na_now_real_ms(),
                                                (struct proto_backup_transfer **)ret, err);
}

static void transfer_free(void *p)
{
        proto_backup_transfer_free(p);
}

/* The Backup, with the parts' ETags after a multipart upload. */
static int transfer_answer(struct backup_job *j, const char *what, const char *backup_id, int r,
                           const struct proto_app_backup *b, struct transfer_result *res, json_t **ret,
                           struct na_error *err)
{
        if (r >= 0 && !(*ret = proto_app_backup_encode(b)))
                r = na_error_sys(err, ENOMEM, "app %s: backup %s", j->id, backup_id);
        if (r >= 0 && res->n_etags > 0) {
                json_t *parts = proto_transfer_parts_encode(res->etags, res->n_etags);
                if (!parts || json_object_set_new(*ret, "parts", parts) < 0) {
                        json_decref(*ret);
                        *ret = NULL;
                        r = na_error_sys(err, ENOMEM, "app %s: backup %s", j->id, backup_id);
                }
        }
        if (r < 0 && (err->errnum == ENOSPC || err->errnum == EDQUOT))
                r = na_error_set(err, ENOSPC, NA_E_INTERNAL, "the node's backups directory is full; nothing was kept");
        if (r < 0 && !strstr(err->message, backup_id))
                na_error_prefix(err, "app %s: backup %s: %s", j->id, backup_id, what);
        transfer_result_clear(res);
        return r;
}

static int export_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_backup_transfer *p = params;
        struct backup_job j;
        struct proto_app_backup b;
        struct transfer_options o;
        struct transfer_result res = { 0 };
        _cleanup_close_ int fd = -1;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.s->app->backup_open(j.s->app_conn, j.id, p->backup_id, &fd, &b, err);
        if (r >= 0) {
                services_transfer_options(j.s, &o);
                r = transfer_put(&o, p->transfer, fd, (uint64_t)b.size_bytes, &j.progress, &res, err);
        }
        return transfer_answer(&j, "export", p->backup_id, r, &b, &res, ret, err);
}

static int import_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_backup_transfer *p = params;
        struct backup_job j;
        struct proto_app_backup b;
        struct transfer_options o;
        struct transfer_result res = { 0 };
        _cleanup_close_ int fd = -1;
        uint64_t max_bytes = 0;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.s->app->backup_tmpfile(j.s->app_conn, j.id, &fd, &max_bytes, err);
        if (r >= 0) {
                /* Bounded while it arrives (issue 20): never more than the app's quota can restore. */
                services_transfer_options(j.s, &o);
                o.max_bytes = max_bytes;
                o.max_bytes_what = "what the app's volume quota can restore";
                r = transfer_get(&o, p->transfer, fd, &j.progress, &res, err);
        }
        if (r >= 0)
                r = job_checkpoint(ctx, err);
        if (r >= 0)
                r = j.s->app->backup_adopt(j.s->app_conn, j.id, p->backup_id, fd,
                                           p->transfer->has_sha256 ? p->transfer->sha256 : NULL, &j.progress, &b,
                                           err);
        return transfer_answer(&j, "import", p->backup_id, r, &b, &res, ret, err);
}

static const char *const transfer_stages[] = { "transferring", NULL };
static const char *const create_stages[] = { "archiving", "compressing", NULL };
static const char *const restore_stages[] = { "stopping", "restoring", "starting", NULL };

static JOB_KIND(create_kind, "app.backup.create", .target = PROTO_TARGET_APP, .changes = true, .decode = create_decode,
                .free_params = create_free, .run = create_run, .stages = create_stages);
static JOB_KIND(restore_kind, "app.backup.restore", .target = PROTO_TARGET_APP, .changes = true, .decode = ref_decode,
                .free_params = free, .run = restore_run, .stages = restore_stages);
static JOB_KIND(delete_kind, "app.backup.delete", .target = PROTO_TARGET_APP, .changes = true, .decode = ref_decode,
                .free_params = free, .run = delete_run);
static JOB_KIND(list_kind, "app.backup.list", .target = PROTO_TARGET_APP, .changes = false, .decode = none_decode,
                .run = list_run);

static JOB_KIND(export_kind, "app.backup.export", .target = PROTO_TARGET_APP, .changes = false,
                .decode = export_decode, .free_params = transfer_free, .run = export_run, .stages = transfer_stages);
static JOB_KIND(import_kind, "app.backup.import", .target = PROTO_TARGET_APP, .changes = true, .decode = import_decode,
                .free_params = transfer_free, .run = import_run, .stages = transfer_stages);

job_kind_list app_backup_job_kinds = { &create_kind, &restore_kind, &delete_kind, &list_kind, &export_kind,
                                       &import_kind, NULL };
