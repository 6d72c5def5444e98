/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Params of app.backup.* and the Backup encoder (proto/app-backup.h). */
#include "proto/app-backup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/decode.h"

static bool ignore_decode(json_t *params, char ***ret, struct na_error *err)
{
        *ret = NULL;
        json_t *arr = NULL;
        int r = proto_array(params, NULL, "ignore", 0, 0, PROTO_APP_BACKUP_IGNORE_MAX, &arr, err);
        if (r < 0)
                return false;
        if (r != PROTO_PRESENT)
                return true;
        bool ok = true;
        size_t i;
        json_t *item;
        json_array_foreach(arr, i, item) {
                char field[32];
                snprintf(field, sizeof(field), "ignore.%zu", i);
                if (!json_is_string(item)) {
                        na_error_field(err, field, "must be a string");
                        ok = false;
                } else if (strlen(json_string_value(item)) != json_string_length(item)) {
                        na_error_field(err, field, "must not contain NUL characters");
                        ok = false;
                } else if (json_string_length(item) > PROTO_APP_BACKUP_PATTERN_MAX) {
                        na_error_field(err, field, "must be at most %d bytes", PROTO_APP_BACKUP_PATTERN_MAX);
                        ok = false;
                }
        }
        if (!ok)
                return false;
        char **v = calloc(json_array_size(arr) + 1, sizeof(char *));
        if (!v) {
                na_error_sys(err, ENOMEM, "ignore");
                return false;
        }
        json_array_foreach(arr, i, item) {
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                if (!(v[i] = strdup(json_string_value(item)))) {
                        proto_strv_free(v);
                        na_error_sys(err, ENOMEM, "ignore");
                        return false;
                }
                NA_ANALYZER_FP_END
        }
        *ret = v;
        return true;
}

int proto_app_backup_create_decode(json_t *params, struct proto_app_backup_create **ret, struct na_error *err)
{
        struct proto_app_backup_create p = { 0 };
        bool ok = proto_backup_id_field(params, "backupId", p.backup_id, err);
        ok &= proto_backup_limits_decode(params, &p.limits, err) >= 0;
        char **ignore = NULL;
        ok &= ignore_decode(params, &ignore, err);
        if (!ok) {
                proto_strv_free(ignore);
                return -EINVAL;
        }
        p.ignore = ignore;
        struct proto_app_backup_create *o = malloc(sizeof(*o));
        if (!o) {
                proto_strv_free(ignore);
                return na_error_sys(err, ENOMEM, "app.backup.create params");
        }
        *o = p;
        *ret = o;
        return 0;
NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* p.ignore is handed to *o, which owns it */
}
NA_ANALYZER_FP_END

void proto_app_backup_create_free(struct proto_app_backup_create *p)
{
        if (!p)
                return;
        proto_strv_free(p->ignore);
        free(p);
}

int proto_app_backup_ref_decode(json_t *params, struct proto_app_backup_ref **ret, struct na_error *err)
{
        struct proto_app_backup_ref p = { 0 };
        if (!proto_backup_id_field(params, "backupId", p.backup_id, err))
                return -EINVAL;
        struct proto_app_backup_ref *o = malloc(sizeof(*o));
        if (!o)
                return na_error_sys(err, ENOMEM, "app.backup params");
        *o = p;
        *ret = o;
        return 0;
}

json_t *proto_app_backup_encode(const struct proto_app_backup *b)
{
        return proto_vps_backup_encode(b);
}

json_t *proto_app_backup_list_encode(const struct proto_app_backup *b, size_t n)
{
        return proto_vps_backup_list_encode(b, n);
}
