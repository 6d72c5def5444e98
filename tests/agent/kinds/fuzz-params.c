/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the params of every job kind: the input is read as JSON; an
 * object {"kind": K, "params": P} goes to K's decoder, and whatever the input is, it
 * also goes as params to every kind's decoder (reinstall rules, firewall rules,
 * metrics ranges, ...). A decoder must never crash or leak, must not succeed with an
 * error set, and must fail only with VALIDATION_ERROR in the reference's details
 * shape. Run under CTest by tests/proto/fuzz-driver.c (corpus, then seeded mutations).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/jobs/jobs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long accepted, refused;

#define CHECK(cond, ...)                                                          \
        do {                                                                      \
                if (!(cond)) {                                                    \
                        fprintf(stderr, "fuzz-params: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                             \
                        fputc('\n', stderr);                                      \
                        abort();                                                  \
                }                                                                 \
        } while (0)

static void check_details(json_t *node)
{
        CHECK(json_is_object(node) && json_is_array(json_object_get(node, "_errors")), "details node without _errors");
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) if (!streq(key, "_errors")) check_details(v);
}

static void decode_one(const struct job_kind *kind, json_t *params)
{
        if (!kind->decode)
                return;
        void *out = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = kind->decode(params, &out, &err);
        if (r >= 0) {
                accepted++;
                CHECK(!na_error_is_set(&err), "%s: success with an error set: %s", kind->name, err.message);
                if (out && kind->free_params)
                        kind->free_params(out);
        } else {
                refused++;
                CHECK(out == NULL, "%s: failed but returned params", kind->name);
                CHECK(na_error_is_set(&err) && streq(err.code, NA_E_VALIDATION), "%s: failed with %s: %s", kind->name,
                      err.code ? err.code : "no error", err.message);
                CHECK(err.http_status == 422, "%s: VALIDATION_ERROR with status %d", kind->name, err.http_status);
                check_details(err.details);
        }
        na_error_clear(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
        if (!doc)
                return 0;
        /* Decoders get an object (the job layer gives {} for absent params). */
        json_t *params = json_object_get(doc, "params");
        const char *name = json_string_value(json_object_get(doc, "kind"));
        const struct job_kind *kind = name ? job_kind_find(name) : NULL;
        if (kind && json_is_object(params))
                decode_one(kind, params);
        json_t *as_params = json_is_object(params) ? params : (json_is_object(doc) ? doc : NULL);
        if (as_params) {
                json_t *names = job_kinds_json();
                size_t i;
                json_t *n;
                json_array_foreach(names, i, n) decode_one(job_kind_find(json_string_value(n)), as_params);
                json_decref(names);
        }
        json_decref(doc);
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "params decoded %lu times, refused %lu times\n", accepted, refused);
        return !accepted || !refused;
}
