/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "proto/decode.h"

#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"
#include "common/uuid.h"

const char *proto_path(char *buf, size_t len, const char *prefix, const char *key)
{
        if (prefix && *prefix)
                snprintf(buf, len, "%s.%s", prefix, key);
        else
                snprintf(buf, len, "%s", key);
        return buf;
}

size_t proto_utf8_chars(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                if (((unsigned char)*s & 0xc0) != 0x80)
                        n++;
        return n;
}

/* Common head of every reader: absent and null handling. Returns 1 to go on reading. */
static int presence(json_t *obj, const char *prefix, const char *key, unsigned flags, json_t **val,
                    struct na_error *err)
{
        char path[256];
        *val = obj && json_is_object(obj) ? json_object_get(obj, key) : NULL;
        if (!*val) {
                if (flags & PROTO_REQUIRED)
                        return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "is required");
                return PROTO_ABSENT;
        }
        if (json_is_null(*val)) {
                if (flags & PROTO_NULLABLE)
                        return PROTO_NULL;
                if (flags & PROTO_REQUIRED)
                        return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "must not be null");
                return PROTO_ABSENT;
        }
        return 1 + PROTO_PRESENT;
}

#define PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err)                 \
        do {                                                                  \
                int _p = presence(obj, prefix, key, flags, &(val), err);      \
                if (_p != 1 + PROTO_PRESENT)                                  \
                        return _p;                                            \
        } while (0)

static int bad(struct na_error *err, const char *prefix, const char *key, const char *msg)
{
        char path[256];
        return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "%s", msg);
}

static int check_string(json_t *val, const char *prefix, const char *key, size_t min_chars, size_t max_chars,
                        struct na_error *err)
{
        char path[256];
        if (!json_is_string(val))
                return bad(err, prefix, key, "must be a string");
        const char *s = json_string_value(val);
        if (strlen(s) != json_string_length(val))
                return bad(err, prefix, key, "must not contain NUL characters");
        size_t n = proto_utf8_chars(s);
        if (n < min_chars || n > max_chars) {
                proto_path(path, sizeof(path), prefix, key);
                if (min_chars == max_chars)
                        return na_error_field(err, path, "must be exactly %zu characters", min_chars);
                if (n < min_chars && min_chars == 1)
                        return na_error_field(err, path, "must not be empty");
                return na_error_field(err, path, "must be %zu..%zu characters (got %zu)", min_chars, max_chars, n);
        }
        return 0;
}

int proto_string(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_chars,
                 size_t max_chars, const char **out, struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        int r = check_string(val, prefix, key, min_chars, max_chars, err);
        if (r < 0)
                return r;
        if (out)
                *out = json_string_value(val);
        return PROTO_PRESENT;
}

int proto_int(json_t *obj, const char *prefix, const char *key, unsigned flags, int64_t min, int64_t max,
              int64_t *out, struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        int64_t v;
        if (json_is_integer(val))
                v = json_integer_value(val);
        else if (json_is_real(val) && json_real_value(val) >= -9.0e15 && json_real_value(val) <= 9.0e15 &&
                 json_real_value(val) == (double)(int64_t)json_real_value(val))
                v = (int64_t)json_real_value(val); /* 4.0 is 4: JSON has one number type */
        else
                return bad(err, prefix, key, "must be an integer");
        if (v < min || v > max) {
                char path[256];
                return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "must be between %lld and %lld",
                                      (long long)min, (long long)max);
        }
        if (out)
                *out = v;
        return PROTO_PRESENT;
}

int proto_bool(json_t *obj, const char *prefix, const char *key, unsigned flags, bool *out, struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        if (!json_is_boolean(val))
                return bad(err, prefix, key, "must be true or false");
        if (out)
                *out = json_is_true(val);
        return PROTO_PRESENT;
}

int proto_uuid(json_t *obj, const char *prefix, const char *key, unsigned flags, const char **out,
               struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        if (!json_is_string(val) || !na_uuid_valid(json_string_value(val)))
                return bad(err, prefix, key, "must be a UUID");
        if (out)
                *out = json_string_value(val);
        return PROTO_PRESENT;
}

int proto_enum(json_t *obj, const char *prefix, const char *key, unsigned flags, const char *const *values,
               int *out, struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        if (json_is_string(val))
                for (int i = 0; values[i]; i++)
                        if (streq(values[i], json_string_value(val))) {
                                if (out)
                                        *out = i;
                                return PROTO_PRESENT;
                        }
        char list[512] = "", path[256];
        size_t used = 0;
        for (int i = 0; values[i] && used < sizeof(list); i++)
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", values[i]);
        return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "must be one of: %s", list);
}

int proto_object(json_t *obj, const char *prefix, const char *key, unsigned flags, json_t **out,
                 struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        if (!json_is_object(val))
                return bad(err, prefix, key, "must be an object");
        if (out)
                *out = val;
        return PROTO_PRESENT;
}

int proto_array(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_items,
                size_t max_items, json_t **out, struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        if (!json_is_array(val))
                return bad(err, prefix, key, "must be an array");
        size_t n = json_array_size(val);
        if (n < min_items || n > max_items) {
                char path[256];
                return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "must hold %zu..%zu items (got %zu)",
                                      min_items, max_items, n);
        }
        if (out)
                *out = val;
        return PROTO_PRESENT;
}

int proto_time(json_t *obj, const char *prefix, const char *key, unsigned flags, int64_t *out_ms,
               struct na_error *err)
{
        json_t *val;
        PRESENCE_OR_RETURN(obj, prefix, key, flags, val, err);
        int64_t ms;
        if (!json_is_string(val) || !na_parse_time_ms(json_string_value(val), &ms))
                return bad(err, prefix, key, "must be an RFC 3339 date-time");
        if (out_ms)
                *out_ms = ms;
        return PROTO_PRESENT;
}

void proto_strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

int proto_strv(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_items,
               size_t max_items, size_t min_chars, size_t max_chars, char ***out, struct na_error *err)
{
        json_t *arr;
        int r = proto_array(obj, prefix, key, flags, min_items, max_items, &arr, err);
        if (r != PROTO_PRESENT)
                return r;
        char path[256];
        proto_path(path, sizeof(path), prefix, key);
        bool ok = true;
        size_t i;
        json_t *item;
        json_array_foreach(arr, i, item) {
                char idx[24];
                snprintf(idx, sizeof(idx), "%zu", i);
                if (check_string(item, path, idx, min_chars, max_chars, err) < 0)
                        ok = false;
        }
        if (!ok)
                return -EINVAL;
        if (!out)
                return PROTO_PRESENT;
        NA_ANALYZER_FP("-Wanalyzer-use-of-uninitialized-value") /* calloc zeroes the array; GCC 12 misreads json_array_size */
        char **v = calloc(json_array_size(arr) + 1, sizeof(char *));
        NA_ANALYZER_FP_END
        if (!v)
                return na_error_sys(err, ENOMEM, "%s", path);
        json_array_foreach(arr, i, item) {
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                v[i] = strdup(json_string_value(item));
                if (!v[i]) {
                        proto_strv_free(v);
                        return na_error_sys(err, ENOMEM, "%s", path);
                }
                NA_ANALYZER_FP_END
        }
        *out = v;
        return PROTO_PRESENT;
}
