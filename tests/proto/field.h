/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Checks on VALIDATION_ERROR details for the proto/ tests (header-only). */
#pragma once

#include <jansson.h>
#include <string.h>

#include "common/error.h"

/* The "_errors" array of the details node at a dotted path ("" = the payload), or NULL. */
static inline json_t *field_errors(const struct na_error *err, const char *path)
{
        json_t *node = err->details;
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", path ? path : "");
        char *save = NULL;
        for (char *seg = strtok_r(buf, ".", &save); seg && node; seg = strtok_r(NULL, ".", &save))
                node = json_object_get(node, seg);
        return node ? json_object_get(node, "_errors") : NULL;
}

/* Whether the node at path lists exactly msg among its errors. */
static inline bool field_has(const struct na_error *err, const char *path, const char *msg)
{
        json_t *list = field_errors(err, path);
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
                if (json_is_string(v) && strcmp(json_string_value(v), msg) == 0)
                        return true;
        return false;
}

/* Number of error messages anywhere in the details tree. */
static inline size_t field_count(json_t *node)
{
        size_t n = 0;
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
                if (strcmp(key, "_errors") == 0)
                        n += json_array_size(v);
                else if (json_is_object(v))
                        n += field_count(v);
        }
        return n;
}

#define assert_field(err, path, msg)                                                                           \
        do {                                                                                                   \
                if (!field_has((err), (path), (msg))) {                                                        \
                        char *_d = (err)->details ? json_dumps((err)->details, JSON_COMPACT | JSON_SORT_KEYS) : NULL; \
                        fail_msg("expected \"%s\" at \"%s\", details: %s", (msg), (path), _d ? _d : "(none)");   \
                }                                                                                              \
        } while (0)
