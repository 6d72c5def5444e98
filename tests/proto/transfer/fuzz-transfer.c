/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the `transfer` object (proto/transfer-spec.h) and the params of
 * app.files.export/import (proto/app-files-transfer.h): the input is read as JSON and
 * decoded as a transfer for PUT and for GET, and as the files kinds' params. A decoder
 * must never crash or leak, must fail only with VALIDATION_ERROR in the details shape,
 * and what it accepts must hold to the rules: an https:// URL (or http:// to
 * loopback), no reserved header, at most 32 headers, lowercase sha256, parts only for
 * PUT, expiresAt not passed. proto_transfer_host never prints the query. Run under
 * CTest by tests/proto/fuzz-driver.c (corpus, then seeded mutations).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/app-files-transfer.h"
#include "proto/transfer-spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

#define CHECK(cond, ...)                                                             \
        do {                                                                         \
                if (!(cond)) {                                                       \
                        fprintf(stderr, "fuzz-transfer: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                                \
                        fputc('\n', stderr);                                         \
                        abort();                                                     \
                }                                                                    \
        } while (0)

#define NOW 1800000000000LL

static unsigned long accepted, refused, files_accepted, files_refused;

int fuzz_summary(FILE *out)
{
        fprintf(out, "transfers %lu accepted, %lu refused; files params %lu accepted, %lu refused\n", accepted,
                refused, files_accepted, files_refused);
        return !accepted || !refused || !files_accepted || !files_refused;
}

static void check_details(json_t *node)
{
        CHECK(json_is_object(node) && json_is_array(json_object_get(node, "_errors")), "details node without _errors");
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
                if (streq(key, "_errors")) {
                        size_t i;
                        json_t *m;
                        json_array_foreach(v, i, m) CHECK(json_is_string(m) && json_string_length(m) > 0, "message");
                } else
                        check_details(v);
        }
}

static void check_url(const char *url)
{
        bool plain = true;
        CHECK(proto_transfer_url_problem(url, strlen(url), &plain) == NULL, "accepted url %s", url);
        CHECK(strncasecmp(url, plain ? "http://" : "https://", plain ? 7 : 8) == 0, "scheme of %s", url);
        char host[PROTO_TRANSFER_URL_MAX + 1];
        int r = proto_transfer_host(url, host, sizeof(host));
        CHECK(r == 0, "host of %s", url);
        CHECK(!strchr(host, '?') && !strchr(host, '/') && !strchr(host, '@'), "host %s", host);
}

static void check_accepted(const struct proto_transfer *t, bool put)
{
        CHECK(t->put == put, "method");
        check_url(t->url);
        CHECK(t->n_headers <= PROTO_TRANSFER_HEADERS_MAX, "headers");
        for (size_t i = 0; i < t->n_headers; i++) {
                CHECK(strcasecmp(t->headers[i].name, "Host") && strcasecmp(t->headers[i].name, "Range") &&
                      strcasecmp(t->headers[i].name, "Content-Length"), "reserved header %s", t->headers[i].name);
                CHECK(!strpbrk(t->headers[i].value, "\r\n"), "header value");
        }
        if (t->has_sha256) {
                CHECK(strlen(t->sha256) == 64, "sha256 length");
                for (size_t i = 0; i < 64; i++)
                        CHECK(strchr("0123456789abcdef", t->sha256[i]), "sha256 %s", t->sha256);
        }
        CHECK(t->expires_at_ms == 0 || t->expires_at_ms >= NOW, "expiresAt");
        CHECK(put || t->n_parts == 0, "parts on a GET");
        CHECK((t->parts == NULL) == (t->n_parts == 0), "parts pointer");
        for (size_t i = 0; i < t->n_parts; i++)
                check_url(t->parts[i]);
}

static void one(json_t *v, bool put)
{
        struct proto_transfer *t = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_transfer_decode(v, "transfer", put ? "PUT" : "GET", NOW, &t, &err);
        CHECK(r == 0 || r == -EINVAL, "returned %d", r);
        if (r == 0) {
                accepted++;
                CHECK(!na_error_is_set(&err), "success with an error: %s", err.message);
                check_accepted(t, put);
                proto_transfer_free(t);
        } else {
                refused++;
                CHECK(t == NULL, "ret set on failure");
                CHECK(na_error_is_set(&err) && streq(err.code, NA_E_VALIDATION), "refused without VALIDATION_ERROR");
                check_details(err.details);
        }
        na_error_clear(&err);
}

static void files(json_t *v, bool put)
{
        struct proto_app_files_transfer *p = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_app_files_transfer_decode(v, put ? "PUT" : "GET", NOW, &p, &err);
        CHECK(r == 0 || r == -EINVAL, "files returned %d", r);
        if (r == 0) {
                files_accepted++;
                CHECK(p->path && p->path[0], "path");
                check_accepted(p->transfer, put);
                json_t *o = proto_app_files_transfer_encode(p->path, 1, "00", NULL, 0);
                CHECK(o != NULL, "encode");
                json_decref(o);
                proto_app_files_transfer_free(p);
        } else {
                files_refused++;
                CHECK(p == NULL, "ret set on failure");
                CHECK(na_error_is_set(&err) && streq(err.code, NA_E_VALIDATION), "refused without VALIDATION_ERROR");
                check_details(err.details);
        }
        na_error_clear(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t jerr;
        json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!doc)
                return 0;
        json_t *t = json_is_object(doc) ? json_object_get(doc, "transfer") : NULL;
        one(t ? t : doc, true);
        one(t ? t : doc, false);
        files(doc, true);
        files(doc, false);
        json_decref(doc);
        return 0;
}
