/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vps.power, vps.status, vps.exec, vps.upgrade and vps.delete, the helpers every
 * vps handler shares, and the list of vps kinds (vps_job_kinds).
 */
#include "agent/kinds/kind-vps.h"

#include <stdlib.h>
#include <string.h>

#include "agent/base/services.h"

int vps_job_begin(struct job_ctx *ctx, struct vps_job *j, struct na_error *err)
{
        memset(j, 0, sizeof(*j));
        j->ctx = ctx;
        j->services = job_services(ctx);
        j->id = job_target_id(ctx);
        if (!j->services || !j->services->vm || !j->services->vm_conn) {
                na_error_set(err, ENOTSUP, NA_E_DRIVER, "vps %s: no VM driver is configured on this node", j->id);
                na_error_detail(err, "reason", json_string("no VM driver configured"));
                return -ENOTSUP;
        }
        j->vm = j->services->vm;
        j->conn = j->services->vm_conn;
        j->progress = job_na_progress(ctx);
        return job_checkpoint(ctx, err);
}

int vps_server_answer(const struct vps_job *j, const struct proto_vps_server *srv, bool restart_required, json_t **ret,
                      struct na_error *err)
{
        json_t *data = proto_vps_server_encode(srv);
        if (!data || json_object_set_new(data, "restartRequired", json_boolean(restart_required)) < 0) {
                json_decref(data);
                return na_error_sys(err, ENOMEM, "vps %s: result", j->id);
        }
        *ret = data;
        return 0;
}

/* ---- vps.power ---- */

static int power_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_power_decode(params, (struct proto_vps_power **)ret, err);
}

static void power_free(void *p)
{
        proto_vps_power_free(p);
}

static int power_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_power *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        enum proto_vps_state st;
        if ((r = j.vm->power(j.conn, j.id, p->action, (unsigned)p->grace_sec, &j.progress, &st, err)) < 0)
                return r;
        *ret = json_pack("{s:s}", "state", proto_vps_state_name(st));
        return 0;
}

static JOB_KIND(vps_power_kind, "vps.power", .target = PROTO_TARGET_VPS, .changes = true, .decode = power_decode,
                .free_params = power_free, .run = power_run);

/* ---- vps.status ---- */

static int status_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_status st;
        if ((r = j.vm->status(j.conn, j.id, &st, err)) < 0)
                return r;
        *ret = proto_vps_status_encode(&st);
        return 0;
}

static JOB_KIND(vps_status_kind, "vps.status", .target = PROTO_TARGET_VPS, .changes = false, .run = status_run);

/* ---- vps.exec ---- */

static int exec_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_exec_decode(params, (struct proto_vps_exec **)ret, err);
}

static void exec_free(void *p)
{
        proto_vps_exec_free(p);
}

static int exec_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_exec *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        /* Never wait past the job's own timeout. */
        uint64_t left_sec = job_remaining_ms(ctx) / 1000;
        unsigned timeout = (unsigned)p->timeout_sec;
        if (left_sec > 0 && left_sec < timeout)
                timeout = (unsigned)left_sec;
        struct proto_vps_exec_result res;
        if ((r = j.vm->exec(j.conn, j.id, p->argv, timeout, &j.progress, &res, err)) < 0)
                return r;
        *ret = proto_vps_exec_result_encode(&res);
        proto_vps_exec_result_clear(&res);
        return *ret ? 0 : na_error_sys(err, ENOMEM, "vps %s: exec result", j.id);
}

static JOB_KIND(vps_exec_kind, "vps.exec", .target = PROTO_TARGET_VPS, .changes = true, .once = true,
                .decode = exec_decode,
                .free_params = exec_free, .run = exec_run);

/* ---- vps.upgrade ---- */

static int upgrade_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_upgrade_decode(params, (struct proto_vps_upgrade **)ret, err);
}

static void upgrade_free(void *p)
{
        proto_vps_upgrade_free(p);
}

static int upgrade_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_upgrade *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_server srv;
        bool restart = false;
        if ((r = j.vm->upgrade(j.conn, j.id, &p->plan, &srv, &restart, err)) < 0)
                return r;
        /* Tell the others (metrics: cpuPercent is relative to the new vCPU count). */
        const struct agent_services *s = job_services(ctx);
        if (s->vps_added)
                s->vps_added(s, j.id, (int)(srv.plan.cpu_cores * srv.plan.cpu_threads), srv.plan.ram_mb);
        return vps_server_answer(&j, &srv, restart, ret, err);
}

static JOB_KIND(vps_upgrade_kind, "vps.upgrade", .target = PROTO_TARGET_VPS, .changes = true, .decode = upgrade_decode,
                .free_params = upgrade_free, .run = upgrade_run);

/* ---- vps.delete ---- */

static int delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        if ((r = j.vm->remove(j.conn, j.id, err)) < 0)
                return r;
        /* The firewall chain and the metrics go with the server, whether or not it was there. */
        if (j.services->vps_removed)
                j.services->vps_removed(j.services, j.id);
        *ret = json_object();
        return 0;
}

static JOB_KIND(vps_delete_kind, "vps.delete", .target = PROTO_TARGET_VPS, .changes = true, .run = delete_run);

job_kind_list vps_job_kinds = {
        &vps_create_kind,
        &vps_power_kind,
        &vps_status_kind,
        &vps_exec_kind,
        &vps_reinstall_kind,
        &vps_network_set_kind,
        &vps_upgrade_kind,
        &vps_delete_kind,
        &vps_snapshot_create_kind,
        &vps_snapshot_list_kind,
        &vps_snapshot_revert_kind,
        &vps_snapshot_delete_kind,
        &vps_backup_create_kind,
        &vps_backup_list_kind,
        &vps_backup_restore_kind,
        &vps_backup_delete_kind,
        &vps_backup_export_kind,
        &vps_backup_import_kind,
        NULL,
};
