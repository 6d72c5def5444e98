/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of app.files.export and app.files.import (AGENT-API 4.2 and 4.4):
 * {path, transfer} in, {path, bytes, sha256[, parts]} out. No I/O.
 *
 *   struct proto_app_files_transfer *p;
 *   r = proto_app_files_transfer_decode(params, "PUT", na_now_real_ms(), &p, &err);   // export
 *   ... transfer_put(&o, p->transfer, fd, size, ...) (transfer/transfer.h) ...
 *   data = proto_app_files_transfer_encode(p->path, res.bytes, res.sha256, res.etags, res.n_etags);
 *   proto_app_files_transfer_free(p);
 *
 * path follows proto_app_files_path_problem (proto/app-files.h); transfer follows
 * proto/transfer-spec.h with the kind's method (export PUT, import GET), problems under
 * "transfer.<member>".
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/transfer-spec.h"

struct proto_app_files_transfer {
        char *path;
        struct proto_transfer *transfer;
};
int proto_app_files_transfer_decode(json_t *params, const char *method, int64_t now_ms,
                                    struct proto_app_files_transfer **ret, struct na_error *err);
void proto_app_files_transfer_free(struct proto_app_files_transfer *p);

/* {path, bytes, sha256} and, after a multipart upload (n_etags > 0), parts: [{partNumber, etag}]. */
json_t *proto_app_files_transfer_encode(const char *path, uint64_t bytes, const char *sha256,
                                        const char (*etags)[128], size_t n_etags);
