/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of a transfer (AGENT-API 4.4): the `transfer` object of
 * app.files.export/import and app.backup.export/import, decoded and validated with no
 * I/O. { "url": "https://…", "method": "PUT" | "GET", "headers"?: {name: value},
 * "sha256"?: "<hex>", "expiresAt"?: date-time, "parts"?: [{"url": "https://…"}] }.
 *
 *   struct proto_transfer *t;
 *   r = proto_transfer_decode(json_object_get(params, "transfer"), "transfer", "PUT", now_ms, &t, &err);
 *   ... transfer_put(&o, t, ...) (transfer/transfer.h) ...
 *   proto_transfer_free(t);
 *
 * Checked here, each a VALIDATION_ERROR under "<field>.<member>": url https:// (or
 * http:// to a loopback host: whether that is allowed is the client's call, with
 * allow_insecure_http), no user info, no spaces or control characters, at most 8192
 * bytes; method the one the kind expects; headers at most 32, names HTTP tokens of at
 * most 128 bytes other than Host, Content-Length, Transfer-Encoding, Connection,
 * Range and Expect, values at most 4096 bytes without CR, LF or NUL; sha256 64
 * hexadecimal digits (stored lowercase); expiresAt RFC 3339 and not before now_ms;
 * parts (PUT only, multipart: decided in proto/README.md) 1..10000 URLs checked as
 * url is.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_TRANSFER_URL_MAX 8192
#define PROTO_TRANSFER_HEADERS_MAX 32
#define PROTO_TRANSFER_PARTS_MAX 10000

struct proto_transfer_header {
        char *name, *value;
};

struct proto_transfer {
        char *url;
        bool put; /* method: PUT, else GET */
        struct proto_transfer_header *headers;
        size_t n_headers;
        bool has_sha256;
        char sha256[65]; /* lowercase hex */
        int64_t expires_at_ms; /* 0: none */
        char **parts; /* part URLs, in order; NULL: one request */
        size_t n_parts;
};

/*
 * Decode v (the JSON object under field) for a kind whose method is method ("PUT" or
 * "GET"); now_ms is the wall clock for expiresAt. Problems go under "<field>.<member>".
 */
int proto_transfer_decode(json_t *v, const char *field, const char *method, int64_t now_ms,
                          struct proto_transfer **ret, struct na_error *err);
void proto_transfer_free(struct proto_transfer *t); /* NULL-safe */

/* The URL's host for messages (never its query, which holds the signature): "host[:port]". */
int proto_transfer_host(const char *url, char *buf, size_t len);

/*
 * The URL rules above as text: NULL when url (len bytes, which may hold NUL) is a
 * usable transfer URL, else a static message. *ret_plain_http (may be NULL) says it
 * is http:// (then to a loopback host), which the client allows only with
 * allow_insecure_http. Added so that the client checks the same rules again.
 */
const char *proto_transfer_url_problem(const char *url, size_t len, bool *ret_plain_http);

/* The result's `parts` of a multipart upload: [{partNumber (from 1), etag}]. */
json_t *proto_transfer_parts_encode(const char (*etags)[128], size_t n);
