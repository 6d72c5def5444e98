/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The backupId field, the limits object and the retention rule of server and app backups (proto/backup.h). */
#include "proto/backup.h"

#include <stdio.h>
#include <stdlib.h>

#include "proto/decode.h"

#define GIB (1024LL * 1024 * 1024)

bool proto_backup_id_field(json_t *obj, const char *key, char buf[PROTO_VPS_OBJECT_ID_MAX + 1], struct na_error *err)
{
        const char *s = NULL;
        if (proto_string(obj, NULL, key, PROTO_REQUIRED, 1, PROTO_VPS_OBJECT_ID_MAX, &s, err) != PROTO_PRESENT)
                return false;
        if (!proto_vps_object_id_valid(s)) {
                na_error_field(err, key, "must be 1..64 letters, digits, hyphens or underscores");
                return false;
        }
        snprintf(buf, PROTO_VPS_OBJECT_ID_MAX + 1, "%s", s);
        return true;
}

int proto_backup_limits_decode(json_t *obj, struct proto_vps_backup_limits *out, struct na_error *err)
{
        *out = (struct proto_vps_backup_limits){ -1, -1, -1 };
        json_t *limits = NULL;
        int r = proto_object(obj, NULL, "limits", PROTO_NULLABLE, &limits, err);
        if (r < 0)
                return r;
        if (r != PROTO_PRESENT)
                return 0;
        bool ok = proto_int(limits, "limits", "maxStorageGB", PROTO_NULLABLE, 1, 1000000, &out->max_storage_gb, err) >= 0;
        ok &= proto_int(limits, "limits", "maxBackups", PROTO_NULLABLE, 1, 10000, &out->max_backups, err) >= 0;
        ok &= proto_int(limits, "limits", "retentionDays", PROTO_NULLABLE, 1, 36500, &out->retention_days, err) >= 0;
        return ok ? 0 : -EINVAL;
}

void proto_backup_retention(const struct proto_vps_backup *list, size_t n, const struct proto_vps_backup_limits *limits,
                            int64_t now_ms, bool *gone)
{
        int64_t total = 0;
        size_t kept = n;
        for (size_t i = 0; i < n; i++) {
                total += list[i].size_bytes;
                gone[i] = false;
        }
        for (size_t i = 0; i + 1 < n; i++) {
                bool old = limits->retention_days > 0 &&
                           list[i].created_at_ms < now_ms - limits->retention_days * 86400LL * 1000;
                bool many = limits->max_backups > 0 && kept > (size_t)limits->max_backups;
                bool big = limits->max_storage_gb > 0 && total > limits->max_storage_gb * GIB;
                if (old || many || big) {
                        gone[i] = true;
                        kept--;
                        total -= list[i].size_bytes;
                }
        }
}

int proto_backup_transfer_decode(json_t *params, const char *method, int64_t now_ms,
                                     struct proto_backup_transfer **ret, struct na_error *err)
{
        struct proto_backup_transfer p = { 0 };
        bool ok = proto_backup_id_field(params, "backupId", p.backup_id, err);
        json_t *tv = params && json_is_object(params) ? json_object_get(params, "transfer") : NULL;
        int r = proto_transfer_decode(tv, "transfer", method, now_ms, &p.transfer, err);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !ok) {
                proto_transfer_free(p.transfer);
                return -EINVAL;
        }
        struct proto_backup_transfer *o = malloc(sizeof(*o));
        if (!o) {
                proto_transfer_free(p.transfer);
                return na_error_sys(err, ENOMEM, "backup transfer params");
        }
        *o = p;
        *ret = o;
        return 0;
}

void proto_backup_transfer_free(struct proto_backup_transfer *p)
{
        if (!p)
                return;
        proto_transfer_free(p->transfer);
        free(p);
}
