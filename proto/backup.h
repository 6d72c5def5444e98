/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What server backups (vps.backup.*) and app backups (app.backup.*) share on the
 * wire and in their rules: the backupId field, the limits object and the retention
 * rule that follows each new backup. No I/O.
 *
 *   char id[PROTO_VPS_OBJECT_ID_MAX + 1];
 *   struct proto_vps_backup_limits l;
 *   ok = proto_backup_id_field(params, "backupId", id, &err);
 *   ok &= proto_backup_limits_decode(params, &l, &err) >= 0;
 *   ...
 *   proto_backup_retention(list, n, &l, now_ms, gone);   // gone[i]: delete list[i]
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/transfer-spec.h"
#include "proto/vps.h"

/* A backupId-like field (1..64 of [A-Za-z0-9_-]) of obj into buf; false with err filled on key. */
bool proto_backup_id_field(json_t *obj, const char *key, char buf[PROTO_VPS_OBJECT_ID_MAX + 1], struct na_error *err);
/* The optional (nullable) "limits" object of obj: each absent or null member is -1. */
int proto_backup_limits_decode(json_t *obj, struct proto_vps_backup_limits *out, struct na_error *err);
/*
 * Which backups retention removes. list is sorted oldest first; the newest (the last)
 * always stays. From the oldest on, a backup goes when it is older than
 * retentionDays, or more than maxBackups would remain, or the total would stay above
 * maxStorageGB. gone has n entries.
 */
void proto_backup_retention(const struct proto_vps_backup *list, size_t n, const struct proto_vps_backup_limits *limits,
                            int64_t now_ms, bool *gone);

/*
 * vps.backup.export and app.backup.export (method "PUT"), vps.backup.import and
 * app.backup.import ("GET"): {backupId, transfer} (proto/transfer-spec.h: problems
 * under "transfer.<member>"; now_ms for expiresAt).
 */
struct proto_backup_transfer {
        char backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        struct proto_transfer *transfer;
};
int proto_backup_transfer_decode(json_t *params, const char *method, int64_t now_ms,
                                 struct proto_backup_transfer **ret, struct na_error *err);
void proto_backup_transfer_free(struct proto_backup_transfer *p); /* NULL-safe */
