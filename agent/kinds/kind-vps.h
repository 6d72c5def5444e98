/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vps.* job kinds of AGENT-API 4.1 (all but vps.firewall.* and vps.metrics),
 * carried out through the VM driver table (job_services(ctx)->vm, ->vm_conn); no
 * libvirt header here. agent/kinds/kind-vps*.c; shared helpers below.
 */
#pragma once

#include "agent/jobs/job-kind.h"
#include "drivers/vm.h"

extern job_kind_list vps_job_kinds;

/* What every vps handler needs: the driver, its connection and the server id. */
struct vps_job {
        struct job_ctx *ctx;
        const struct agent_services *services;
        const struct vm_driver *vm;
        struct vm_conn *conn;
        const char *id;
        struct na_progress progress; /* stages and safe points into the job layer */
};
int vps_job_begin(struct job_ctx *ctx, struct vps_job *j, struct na_error *err);
/* The Server with restartRequired (vps.upgrade, vps.network.set) into *ret. */
int vps_server_answer(const struct vps_job *j, const struct proto_vps_server *srv, bool restart_required, json_t **ret,
                      struct na_error *err);

extern const struct job_kind vps_create_kind, vps_reinstall_kind, vps_network_set_kind;
extern const struct job_kind vps_snapshot_create_kind, vps_snapshot_list_kind, vps_snapshot_revert_kind,
        vps_snapshot_delete_kind;
extern const struct job_kind vps_backup_create_kind, vps_backup_list_kind, vps_backup_restore_kind,
        vps_backup_delete_kind, vps_backup_export_kind, vps_backup_import_kind;
