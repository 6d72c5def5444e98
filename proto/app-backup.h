/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of app.backup.create, restore, delete and list (AGENT-API 4.2): params
 * decoders and the Backup encoder. The Backup object has the same shape as a server's
 * ({backupId, createdAt, sizeBytes, sha256}), so struct proto_app_backup is
 * struct proto_vps_backup and the encoders are shared (proto/vps.h); backupId and
 * limits follow the same rules (proto/backup.h).
 *
 *   struct proto_app_backup_create *p;
 *   if (proto_app_backup_create_decode(params, &p, &err) < 0) return ...;  // 422, per field
 *   ... p->backup_id, p->limits, p->ignore (NULL-terminated; NULL when absent) ...
 *   proto_app_backup_create_free(p);
 *
 * ignore: at most PROTO_APP_BACKUP_IGNORE_MAX strings of at most
 * PROTO_APP_BACKUP_PATTERN_MAX bytes each, without NUL; an invalid one is
 * VALIDATION_ERROR on "ignore.<i>". Their meaning: drivers/app/backup/app-backup-parts.h.
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/backup.h"
#include "proto/vps.h"

#define PROTO_APP_BACKUP_IGNORE_MAX 1000
#define PROTO_APP_BACKUP_PATTERN_MAX 4096

#define proto_app_backup proto_vps_backup

struct proto_app_backup_create {
        char backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        struct proto_vps_backup_limits limits; /* -1: no limit */
        char **ignore;                         /* NULL-terminated; NULL: none */
};
int proto_app_backup_create_decode(json_t *params, struct proto_app_backup_create **ret, struct na_error *err);
void proto_app_backup_create_free(struct proto_app_backup_create *p);

/* app.backup.restore, app.backup.delete: {backupId}. Free with free(). */
struct proto_app_backup_ref {
        char backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
};
int proto_app_backup_ref_decode(json_t *params, struct proto_app_backup_ref **ret, struct na_error *err);

/* Backup, and an array of them. */
json_t *proto_app_backup_encode(const struct proto_app_backup *b);
json_t *proto_app_backup_list_encode(const struct proto_app_backup *b, size_t n);
