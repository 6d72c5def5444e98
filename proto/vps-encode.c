/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Encoders of Server, Snapshot, Backup, vps.status and vps.exec results (AGENT-API 4.1). */
#include "proto/text.h"
#include "proto/vps.h"

#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"

const char *const proto_vps_states[] = { "running", "stopped", "paused", "installing", "crashed", NULL };

const char *proto_vps_state_name(enum proto_vps_state s)
{
        if ((unsigned)s < ARRAY_SIZE(proto_vps_states) - 1)
                return proto_vps_states[s];
        return "stopped";
}

static json_t *time_json(int64_t ms)
{
        char buf[40];
        return json_string(na_format_time_ms(ms > 0 ? (uint64_t)ms : 0, buf, sizeof(buf)));
}

json_t *proto_vps_server_encode(const struct proto_vps_server *s)
{
        json_t *ips = json_array();
        for (size_t i = 0; i < s->n_ip_addresses && i < PROTO_VPS_IPS_MAX; i++)
                json_array_append_new(ips, json_string(s->ip_addresses[i]));
        json_t *tmpl = json_pack("{s:s, s:s, s:s}", "id", s->template_id, "imageSlug", s->image_slug, "os",
                                 proto_vps_os_names[s->os == PROTO_VPS_OS_WINDOWS ? 1 : 0]);
        return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:s, s:o, s:o}", "id", s->id, "state",
                         proto_vps_state_name(s->state), "hostname", s->hostname, "cpuCores",
                         (json_int_t)s->plan.cpu_cores, "cpuThreads", (json_int_t)s->plan.cpu_threads, "ramMB",
                         (json_int_t)s->plan.ram_mb, "storageMB", (json_int_t)s->plan.storage_mb, "ipAddresses", ips,
                         "macAddress", s->mac, "template", tmpl, "createdAt", time_json(s->created_at_ms));
}

json_t *proto_vps_snapshot_encode(const struct proto_vps_snapshot *s)
{
        return json_pack("{s:s, s:s, s:o, s:I, s:b}", "snapshotId", s->snapshot_id, "name", s->name, "createdAt",
                         time_json(s->created_at_ms), "sizeBytes", (json_int_t)s->size_bytes, "current", s->current);
}

json_t *proto_vps_snapshot_list_encode(const struct proto_vps_snapshot *s, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, proto_vps_snapshot_encode(&s[i]));
        return a;
}

json_t *proto_vps_backup_encode(const struct proto_vps_backup *b)
{
        return json_pack("{s:s, s:o, s:I, s:s}", "backupId", b->backup_id, "createdAt", time_json(b->created_at_ms),
                         "sizeBytes", (json_int_t)b->size_bytes, "sha256", b->sha256);
}

json_t *proto_vps_backup_list_encode(const struct proto_vps_backup *b, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, proto_vps_backup_encode(&b[i]));
        return a;
}

json_t *proto_vps_status_encode(const struct proto_vps_status *s)
{
        return json_pack("{s:s, s:I, s:I, s:I}", "state", proto_vps_state_name(s->state), "uptimeSec",
                         (json_int_t)s->uptime_sec, "cpuTimeNs", (json_int_t)s->cpu_time_ns, "memoryMB",
                         (json_int_t)s->memory_mb);
}


json_t *proto_vps_exec_result_encode(const struct proto_vps_exec_result *r)
{
        return json_pack("{s:i, s:o, s:o, s:b}", "exitCode", r->exit_code, "stdout", proto_text_json(r->out, r->out_len),
                         "stderr", proto_text_json(r->err, r->err_len), "truncated", r->truncated);
}

void proto_vps_exec_result_clear(struct proto_vps_exec_result *r)
{
        free(r->out);
        free(r->err);
        memset(r, 0, sizeof(*r));
}
