/* Encoders of Server, Snapshot, Backup, vps.status and vps.exec results (AGENT-API 4.1). */
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

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
        if (p[0] < 0x80)
                return 1;
        size_t n;
        uint32_t cp;
        if ((p[0] & 0xe0) == 0xc0) {
                n = 2;
                cp = p[0] & 0x1f;
        } else if ((p[0] & 0xf0) == 0xe0) {
                n = 3;
                cp = p[0] & 0x0f;
        } else if ((p[0] & 0xf8) == 0xf0) {
                n = 4;
                cp = p[0] & 0x07;
        } else
                return 0;
        if (n > left)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

/* A JSON string of bytes, invalid UTF-8 and NUL replaced by U+FFFD. */
static json_t *text_json(const char *s, size_t len)
{
        if (!s)
                return json_string("");
        char *buf = malloc(len * 3 + 1);
        if (!buf)
                return NULL;
        size_t o = 0;
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t n = p[i] ? utf8_seq(p + i, len - i) : 0;
                if (n == 0) {
                        memcpy(buf + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                } else {
                        memcpy(buf + o, p + i, n);
                        o += n;
                        i += n;
                }
        }
        json_t *j = json_stringn(buf, o);
        free(buf);
        return j;
}

json_t *proto_vps_exec_result_encode(const struct proto_vps_exec_result *r)
{
        return json_pack("{s:i, s:o, s:o, s:b}", "exitCode", r->exit_code, "stdout", text_json(r->out, r->out_len),
                         "stderr", text_json(r->err, r->err_len), "truncated", r->truncated);
}

void proto_vps_exec_result_clear(struct proto_vps_exec_result *r)
{
        free(r->out);
        free(r->err);
        memset(r, 0, sizeof(*r));
}
