/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a server keeps of its past: vps.snapshot.* and vps.backup.*. A finished
 * backup (made or failed once work began) is told to the central API with a
 * backup.finished event.
 */
#include "agent/kinds/kind-vps.h"

#include <stdlib.h>
#include <string.h>

#include "agent/base/services.h"

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
