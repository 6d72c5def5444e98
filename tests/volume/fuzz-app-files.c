/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the params of every app.files.* kind (proto/app-files.h): the
 * input is read as JSON and its "params" (or the input itself) goes to every decoder.
 * A decoder must never crash or leak, must not succeed with an error set or leave
 * *ret set on failure, must fail only with VALIDATION_ERROR whose every problem is
 * under a field it reads, and what it accepts must pass the path check again and
 * hold to the limits (limit 1..524288, offset >= 0, at most 4 MiB decoded). Run under
 * CTest by tests/proto/fuzz-driver.c (corpus, then seeded mutations).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

#define CHECK(cond, ...)                                                                \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "fuzz-app-files: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                                   \
                        fputc('\n', stderr);                                            \
                        abort();                                                        \
                }                                                                       \
        } while (0)

enum { K_PATH, K_READ, K_WRITE, K_MOVE, K_N };
static const char *const kind_names[K_N] = { "list/mkdir/delete", "read_text", "write", "move" };
static unsigned long accepted[K_N], refused[K_N];

static bool path_ok(const char *p)
{
        return p && !proto_app_files_path_problem(p, strlen(p));
}

static void check_refusal(const struct na_error *err, int k)
{
        CHECK(streq(err->code, NA_E_VALIDATION), "%s refused with %s", kind_names[k], err->code);
        static const char *const fields[] = { "path", "offset", "limit", "contentBase64", "truncate", "from", "to",
                                              "_errors" };
        const char *key;
        json_t *v;
        CHECK(json_is_object(err->details), "details");
        json_object_foreach(err->details, key, v) {
                bool known = false;
                for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++)
                        known |= streq(key, fields[i]);
                CHECK(known, "a problem under %s", key);
                json_t *a = json_object_get(v, "_errors");
                CHECK(streq(key, "_errors") ? json_is_array(v) : json_array_size(a) > 0, "empty _errors at %s", key);
        }
}

static void decode_one(int k, json_t *params)
{
        struct na_error err = NA_ERROR_INIT;
        void *out = (void *)0x1;
        int r;
        switch (k) {
        case K_PATH:
                r = proto_app_files_path_decode(params, (struct proto_app_files_path **)&out, &err);
                break;
        case K_READ:
                r = proto_app_files_read_decode(params, (struct proto_app_files_read **)&out, &err);
                break;
        case K_WRITE:
                r = proto_app_files_write_decode(params, (struct proto_app_files_write **)&out, &err);
                break;
        default:
                r = proto_app_files_move_decode(params, (struct proto_app_files_move **)&out, &err);
                break;
        }
        if (r < 0) {
                CHECK(out == (void *)0x1, "%s: *ret written on failure", kind_names[k]);
                check_refusal(&err, k);
                refused[k]++;
                na_error_clear(&err);
                return;
        }
        CHECK(!na_error_is_set(&err), "%s: success with an error set", kind_names[k]);
        accepted[k]++;
        switch (k) {
        case K_PATH: {
                struct proto_app_files_path *p = out;
                CHECK(path_ok(p->path), "path");
                proto_app_files_path_free(p);
                break;
        }
        case K_READ: {
                struct proto_app_files_read *p = out;
                CHECK(path_ok(p->path) && p->offset >= 0 && p->limit >= 1 && p->limit <= PROTO_APP_FILES_READ_MAX,
                      "read_text");
                proto_app_files_read_free(p);
                break;
        }
        case K_WRITE: {
                struct proto_app_files_write *p = out;
                CHECK(path_ok(p->path) && p->offset >= 0 && p->len <= PROTO_APP_FILES_WRITE_MAX && p->data, "write");
                CHECK(p->has_offset || (p->truncate && p->offset == 0), "a whole-file write");
                proto_app_files_write_free(p);
                break;
        }
        default: {
                struct proto_app_files_move *p = out;
                CHECK(path_ok(p->from) && path_ok(p->to), "move");
                proto_app_files_move_free(p);
                break;
        }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!doc)
                return 0;
        json_t *params = json_object_get(doc, "params");
        json_t *as_params = json_is_object(params) ? params : doc;
        for (int k = 0; k < K_N; k++)
                decode_one(k, as_params);
        json_decref(doc);
        return 0;
}

int fuzz_summary(FILE *out)
{
        int missed = 0;
        for (int k = 0; k < K_N; k++) {
                fprintf(out, "%s%s %lu accepted, %lu refused", k ? "; " : "", kind_names[k], accepted[k], refused[k]);
                missed |= !accepted[k] || !refused[k];
        }
        fputc('\n', out);
        return missed;
}
