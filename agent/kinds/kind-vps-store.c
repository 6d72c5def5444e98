/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a server keeps of its past: vps.snapshot.* and vps.backup.*, and its
 * backups' way to another node through object storage (vps.backup.export and
 * vps.backup.import, transfer/transfer.h). A finished backup (made or failed once
 * work began) is told to the central API with a backup.finished event.
 */
#include "agent/kinds/kind-vps.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/base/services.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "proto/backup.h"
#include "transfer/transfer.h"

static const char *const backup_stages[] = { "exporting", "compressing", NULL };

static void params_free(void *p)
{
        free(p);
}

/* ---- snapshots ---- */

static int snapshot_create_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_snapshot_create_decode(params, (struct proto_vps_snapshot_create **)ret, err);
}

static int snapshot_ref_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_snapshot_ref_decode(params, (struct proto_vps_snapshot_ref **)ret, err);
}

static int snapshot_create_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_snapshot_create *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_snapshot snap;
        if ((r = j.vm->snapshot_create(j.conn, j.id, p->snapshot_id, p->name, p->max_snapshots, &snap, err)) < 0)
                return r;
        *ret = proto_vps_snapshot_encode(&snap);
        return 0;
}

static int snapshot_list_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_snapshot *list = NULL;
        size_t n = 0;
        if ((r = j.vm->snapshot_list(j.conn, j.id, &list, &n, err)) < 0)
                return r;
        *ret = proto_vps_snapshot_list_encode(list, n);
        free(list);
        return 0;
}

static int snapshot_revert_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_snapshot_ref *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        if ((r = j.vm->snapshot_revert(j.conn, j.id, p->snapshot_id, err)) < 0)
                return r;
        *ret = json_object();
        return 0;
}

static int snapshot_delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_snapshot_ref *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        if ((r = j.vm->snapshot_delete(j.conn, j.id, p->snapshot_id, err)) < 0)
                return r;
        *ret = json_object();
        return 0;
}

JOB_KIND(vps_snapshot_create_kind, "vps.snapshot.create", .target = PROTO_TARGET_VPS, .changes = true,
         .decode = snapshot_create_decode, .free_params = params_free, .run = snapshot_create_run);
JOB_KIND(vps_snapshot_list_kind, "vps.snapshot.list", .target = PROTO_TARGET_VPS, .changes = false,
         .run = snapshot_list_run);
JOB_KIND(vps_snapshot_revert_kind, "vps.snapshot.revert", .target = PROTO_TARGET_VPS, .changes = true,
         .decode = snapshot_ref_decode, .free_params = params_free, .run = snapshot_revert_run);
JOB_KIND(vps_snapshot_delete_kind, "vps.snapshot.delete", .target = PROTO_TARGET_VPS, .changes = true,
         .decode = snapshot_ref_decode, .free_params = params_free, .run = snapshot_delete_run);

/* ---- backups ---- */

static int backup_create_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_backup_create_decode(params, (struct proto_vps_backup_create **)ret, err);
}

static int backup_ref_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_backup_ref_decode(params, (struct proto_vps_backup_ref **)ret, err);
}

/* Whether a failure happened after the backup's work began (worth an event). */
static bool work_began(const struct na_error *err)
{
        return !(streq(err->code, NA_E_VALIDATION) || streq(err->code, NA_E_VPS_NOT_FOUND) ||
                 streq(err->code, NA_E_INVALID_STATE) || streq(err->code, NA_E_JOB_CANCELLED) ||
                 streq(err->code, NA_E_LEASE_LOST));
}

static int backup_create_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_backup_create *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_backup b;
        r = j.vm->backup_create(j.conn, j.id, p->backup_id, &p->limits, &j.progress, &b, err);
        if (r < 0) {
                if (j.services->emit_event && work_began(err))
                        j.services->emit_event(j.services, "backup.finished", j.id,
                                               json_pack("{s:s, s:s, s:s, s:s}", "backupId", p->backup_id, "status",
                                                         "failed", "code", err->code, "error", err->message));
                return r;
        }
        *ret = proto_vps_backup_encode(&b);
        if (j.services->emit_event) {
                json_t *data = proto_vps_backup_encode(&b);
                if (data)
                        json_object_set_new(data, "status", json_string("succeeded"));
                j.services->emit_event(j.services, "backup.finished", j.id, data);
        }
        return 0;
}

static int backup_list_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_backup *list = NULL;
        size_t n = 0;
        if ((r = j.vm->backup_list(j.conn, j.id, &list, &n, err)) < 0)
                return r;
        *ret = proto_vps_backup_list_encode(list, n);
        free(list);
        return 0;
}

static int backup_restore_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_backup_ref *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        if ((r = j.vm->backup_restore(j.conn, j.id, p->backup_id, &j.progress, err)) < 0)
                return r;
        *ret = json_object();
        return 0;
}

static int backup_delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_backup_ref *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        if ((r = j.vm->backup_delete(j.conn, j.id, p->backup_id, err)) < 0)
                return r;
        *ret = json_object();
        return 0;
}

JOB_KIND(vps_backup_create_kind, "vps.backup.create", .target = PROTO_TARGET_VPS, .changes = true,
         .stages = backup_stages, .decode = backup_create_decode, .free_params = params_free,
         .run = backup_create_run);
JOB_KIND(vps_backup_list_kind, "vps.backup.list", .target = PROTO_TARGET_VPS, .changes = false,
         .run = backup_list_run);
JOB_KIND(vps_backup_restore_kind, "vps.backup.restore", .target = PROTO_TARGET_VPS, .changes = true,
         .decode = backup_ref_decode, .free_params = params_free, .run = backup_restore_run);
JOB_KIND(vps_backup_delete_kind, "vps.backup.delete", .target = PROTO_TARGET_VPS, .changes = true,
         .decode = backup_ref_decode, .free_params = params_free, .run = backup_delete_run);

/* ---- moving a server: export and import through object storage ---- */

static const char *const transfer_stages[] = { "transferring", NULL };

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
static int transfer_answer(struct vps_job *j, const char *what, const char *backup_id, int r,
                           const struct proto_vps_backup *b, struct transfer_result *res, json_t **ret,
                           struct na_error *err)
{
        if (r >= 0 && !(*ret = proto_vps_backup_encode(b)))
                r = na_error_sys(err, ENOMEM, "vps %s: backup %s", j->id, backup_id);
        if (r >= 0 && res->n_etags > 0) {
                json_t *parts = proto_transfer_parts_encode(res->etags, res->n_etags);
                if (!parts || json_object_set_new(*ret, "parts", parts) < 0) {
                        json_decref(*ret);
                        *ret = NULL;
                        r = na_error_sys(err, ENOMEM, "vps %s: backup %s", j->id, backup_id);
                }
        }
        if (r < 0 && (err->errnum == ENOSPC || err->errnum == EDQUOT))
                r = na_error_set(err, ENOSPC, NA_E_INTERNAL, "the node's backups directory is full; nothing was kept");
        if (r < 0 && !strstr(err->message, backup_id))
                na_error_prefix(err, "vps %s: backup %s: %s", j->id, backup_id, what);
        transfer_result_clear(res);
        return r;
}

static int backup_export_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_backup_transfer *p = params;
        struct vps_job j;
        struct proto_vps_backup b = { 0 };
        struct transfer_options o;
        struct transfer_result res = { 0 };
        _cleanup_close_ int fd = -1;
        int r = vps_job_begin(ctx, &j, err);
        if (r >= 0)
                r = j.vm->backup_open(j.conn, j.id, p->backup_id, &fd, &b, err);
        if (r >= 0) {
                services_transfer_options(j.services, &o);
                r = transfer_put(&o, p->transfer, fd, (uint64_t)b.size_bytes, &j.progress, &res, err);
        }
        return transfer_answer(&j, "export", p->backup_id, r, &b, &res, ret, err);
}

/* The largest server disk a plan may have (proto/vps.h: storageMB), compressed or not. */
#define IMPORT_MAX_BYTES ((uint64_t)16777216 << 20)

static int backup_import_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_backup_transfer *p = params;
        struct vps_job j;
        struct proto_vps_backup b = { 0 };
        struct transfer_options o;
        struct transfer_result res = { 0 };
        _cleanup_close_ int fd = -1;
        int r = vps_job_begin(ctx, &j, err);
        if (r >= 0)
                r = j.vm->backup_tmpfile(j.conn, j.id, &fd, err);
        if (r >= 0) {
                services_transfer_options(j.services, &o);
                o.max_bytes = IMPORT_MAX_BYTES;
                o.max_bytes_what = "the largest disk a plan may have";
                r = transfer_get(&o, p->transfer, fd, &j.progress, &res, err);
        }
        if (r >= 0)
                r = job_checkpoint(ctx, err);
        if (r >= 0)
                r = j.vm->backup_adopt(j.conn, j.id, p->backup_id, fd,
                                       p->transfer->has_sha256 ? p->transfer->sha256 : NULL, &j.progress, &b, err);
        return transfer_answer(&j, "import", p->backup_id, r, &b, &res, ret, err);
}

JOB_KIND(vps_backup_export_kind, "vps.backup.export", .target = PROTO_TARGET_VPS, .changes = false,
         .stages = transfer_stages, .decode = export_decode, .free_params = transfer_free, .run = backup_export_run);
JOB_KIND(vps_backup_import_kind, "vps.backup.import", .target = PROTO_TARGET_VPS, .changes = true,
         .stages = transfer_stages, .decode = import_decode, .free_params = transfer_free, .run = backup_import_run);
