/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Strict field readers for decoders. Each reads obj[key], checks type and bounds,
 * and on a problem records it under "<prefix>.<key>" in err's VALIDATION_ERROR
 * details, then returns a negative value; decoders read every field, then fail once
 * with all problems listed. No I/O, no logging.
 *
 * Returns: < 0 invalid (recorded), PROTO_ABSENT, PROTO_NULL (only with
 * PROTO_NULLABLE) or PROTO_PRESENT (the value is in *out).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

enum { PROTO_ABSENT = 0, PROTO_NULL = 1, PROTO_PRESENT = 2 };

enum {
        PROTO_REQUIRED = 1 << 0, /* absent (or null without NULLABLE) is an error */
        PROTO_NULLABLE = 1 << 1, /* null is a value of its own (reinstall: null clears) */
};

/* Characters (UTF-8 code points) of s; strings never hold NUL. */
size_t proto_utf8_chars(const char *s);

int proto_string(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_chars,
                 size_t max_chars, const char **out, struct na_error *err);
int proto_int(json_t *obj, const char *prefix, const char *key, unsigned flags, int64_t min, int64_t max,
              int64_t *out, struct na_error *err);
int proto_bool(json_t *obj, const char *prefix, const char *key, unsigned flags, bool *out, struct na_error *err);
int proto_uuid(json_t *obj, const char *prefix, const char *key, unsigned flags, const char **out,
               struct na_error *err);
/* One of values (a NULL-terminated list); *out is the index. */
int proto_enum(json_t *obj, const char *prefix, const char *key, unsigned flags, const char *const *values,
               int *out, struct na_error *err);
int proto_object(json_t *obj, const char *prefix, const char *key, unsigned flags, json_t **out,
                 struct na_error *err);
int proto_array(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_items,
                size_t max_items, json_t **out, struct na_error *err);
/* RFC 3339 date-time to epoch milliseconds. */
int proto_time(json_t *obj, const char *prefix, const char *key, unsigned flags, int64_t *out_ms,
               struct na_error *err);
/*
 * An exec-form argument vector: an array of min_items..max_items strings of
 * min_chars..max_chars characters each. *out is a NULL-terminated, newly allocated
 * vector (free with proto_strv_free).
 */
int proto_strv(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_items,
               size_t max_items, size_t min_chars, size_t max_chars, char ***out, struct na_error *err);
void proto_strv_free(char **v);

/* "<prefix>.<key>" or "<key>" into buf. */
const char *proto_path(char *buf, size_t len, const char *prefix, const char *key);
