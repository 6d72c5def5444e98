/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The params and result of app.files.export and app.files.import (proto/app-files-transfer.h). */
#include "proto/app-files-transfer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/app-files.h"
#include "proto/decode.h"

void proto_app_files_transfer_free(struct proto_app_files_transfer *p)
{
        if (!p)
                return;
        free(p->path);
        proto_transfer_free(p->transfer);
        free(p);
}

int proto_app_files_transfer_decode(json_t *params, const char *method, int64_t now_ms,
                                    struct proto_app_files_transfer **ret, struct na_error *err)
{
        const char *path = NULL;
        struct proto_transfer *t = NULL;
        bool ok = proto_app_files_path_field(params, NULL, "path", PROTO_REQUIRED, &path, err) >= 0;
        json_t *tv = params && json_is_object(params) ? json_object_get(params, "transfer") : NULL;
        int r = proto_transfer_decode(tv, "transfer", method, now_ms, &t, err);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !ok) {
                proto_transfer_free(t);
                return -EINVAL;
        }
        struct proto_app_files_transfer *p = calloc(1, sizeof(*p));
        if (!p || !(p->path = strdup(path))) {
                free(p);
                proto_transfer_free(t);
                return na_error_sys(err, ENOMEM, "app.files transfer params");
        }
        p->transfer = t;
        *ret = p;
        return 0;
}

json_t *proto_app_files_transfer_encode(const char *path, uint64_t bytes, const char *sha256,
                                        const char (*etags)[128], size_t n_etags)
{
        json_t *o = json_pack("{s:s, s:I, s:s}", "path", path, "bytes", (json_int_t)bytes, "sha256", sha256);
        if (o && n_etags > 0) {
                json_t *parts = proto_transfer_parts_encode(etags, n_etags);
                if (!parts || json_object_set_new(o, "parts", parts) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}
