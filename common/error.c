/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/error.h"

#include <stdio.h>
#include <string.h>

struct code_info {
        const char *code;
        int status;
        const char *fixed_message; /* the reference's message, or NULL to use ours */
};

static const struct code_info codes[] = {
        { "AUTHENTICATION_ERROR", 401, "Authentication required" },
        { "INVALID_API_KEY", 401, "Invalid API key" },
        { "EXPIRED_API_KEY", 401, "API key has expired" },
        { "ACCOUNT_BANNED", 403, "Account is banned" },
        { "ACCOUNT_SUSPENDED", 403, "Account is suspended" },
        { "AUTHORIZATION_ERROR", 403, "Insufficient permissions" },
        { "APP_NOT_FOUND", 404, "App not found" },
        { NA_E_COMMAND_MANAGED, 409, "This template decides how it starts" },
        { NA_E_VALIDATION, 422, "Validation error" },
        { NA_E_INTERNAL, 500, "Internal server error" },
        { NA_E_VPS_NOT_FOUND, 404, NULL },
        { NA_E_SNAPSHOT_NOT_FOUND, 404, NULL },
        { NA_E_BACKUP_NOT_FOUND, 404, NULL },
        { NA_E_FILE_NOT_FOUND, 404, NULL },
        { NA_E_IMAGE_NOT_FOUND, 404, NULL },
        { NA_E_EXPOSURE_NOT_FOUND, 404, NULL },
        { NA_E_PORT_IN_USE, 409, NULL },
        { NA_E_QUOTA_EXCEEDED, 409, NULL },
        { NA_E_ROLLED_BACK, 409, NULL },
        { NA_E_JOB_NOT_FOUND, 404, NULL },
        { NA_E_FILE_ACCESS_DISABLED, 403, NULL },
        { NA_E_INVALID_STATE, 409, NULL },
        { NA_E_SNAPSHOT_LIMIT, 409, NULL },
        { NA_E_GUEST_AGENT, 409, NULL },
        { NA_E_JOB_CANCELLED, 409, NULL },
        { NA_E_LEASE_LOST, 409, NULL },
        { NA_E_JOB_INTERRUPTED, 409, NULL },
        { NA_E_UNSUPPORTED_JOB, 400, NULL },
        { NA_E_JOB_TIMEOUT, 504, NULL },
        { NA_E_DRIVER, 502, NULL },
};

static const struct code_info *code_lookup(const char *code)
{
        if (!code)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
                if (streq(codes[i].code, code))
                        return &codes[i];
        return NULL;
}

int na_error_code_status(const char *code)
{
        const struct code_info *ci = code_lookup(code);
        return ci ? ci->status : 500;
}

void na_error_clear(struct na_error *e)
{
        if (!e)
                return;
        if (e->details)
                json_decref(e->details);
        memset(e, 0, sizeof(*e));
}

void na_error_move(struct na_error *dst, struct na_error *src)
{
        na_error_clear(dst);
        *dst = *src;
        memset(src, 0, sizeof(*src));
}

bool na_error_is_set(const struct na_error *e)
{
        return e && e->code != NULL;
}

/* The length of the valid UTF-8 sequence at s (as jansson accepts it), 0 when it is not one. */
static size_t utf8_seq_len(const unsigned char *s)
{
        unsigned char c = s[0], lo = 0x80, hi = 0xbf;
        size_t n;
        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2;
        else if (c >= 0xe0 && c <= 0xef) {
                n = 3;
                lo = c == 0xe0 ? 0xa0 : 0x80;
                hi = c == 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
                n = 4;
                lo = c == 0xf0 ? 0x90 : 0x80;
                hi = c == 0xf4 ? 0x8f : 0xbf;
        } else
                return 0;
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
        return n;
}

/*
 * A message always ends in the JSON of a failure object or an answer, and jansson
 * refuses a string that is not UTF-8: a byte that is not part of a valid sequence
 * (input quoted in a message, a sequence cut by the 512-byte bound) becomes '?'.
 */
static void utf8_scrub(char *s)
{
        for (unsigned char *p = (unsigned char *)s; *p;) {
                size_t n = utf8_seq_len(p);
                if (n == 0) {
                        *p++ = '?';
                        continue;
                }
                p += n;
        }
}

int na_error_setv(struct na_error *e, int errnum, const char *code, const char *fmt, va_list ap)
{
        if (errnum <= 0)
                errnum = EIO;
        if (!e)
                return -errnum;
        na_error_clear(e);
        e->errnum = errnum;
        e->code = code ? code : NA_E_INTERNAL;
        e->http_status = na_error_code_status(e->code);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        utf8_scrub(e->message);
        return -errnum;
}

int na_error_set(struct na_error *e, int errnum, const char *code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = na_error_setv(e, errnum, code, fmt, ap);
        va_end(ap);
        return r;
}

int na_error_sys(struct na_error *e, int errnum, const char *fmt, ...)
{
        char what[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return na_error_set(e, errnum, NA_E_INTERNAL, "%s: %s", what, strerror(errnum > 0 ? errnum : EIO));
}

int na_error_prefix(struct na_error *e, const char *fmt, ...)
{
        if (!e)
                return -EIO;
        if (!na_error_is_set(e))
                return -(e->errnum ? e->errnum : EIO);
        char outer[256], joined[sizeof(e->message)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(outer, sizeof(outer), fmt, ap);
        va_end(ap);
        snprintf(joined, sizeof(joined), "%s: %s", outer, e->message);
        memcpy(e->message, joined, sizeof(joined));
        utf8_scrub(e->message);
        return -e->errnum;
}

static json_t *node_child(json_t *node, const char *key)
{
        json_t *child = json_object_get(node, key);
        if (!child || !json_is_object(child)) {
                child = json_object();
                json_object_set_new(child, "_errors", json_array());
                json_object_set_new(node, key, child);
        }
        return child;
}

int na_error_field(struct na_error *e, const char *path, const char *fmt, ...)
{
        if (!e)
                return -EINVAL;
        if (!na_error_is_set(e) || !streq(e->code, NA_E_VALIDATION)) {
                na_error_clear(e);
                e->errnum = EINVAL;
                e->code = NA_E_VALIDATION;
                e->http_status = 422;
                snprintf(e->message, sizeof(e->message), "validation failed");
        }
        if (!e->details || !json_is_object(e->details)) {
                if (e->details)
                        json_decref(e->details);
                e->details = json_object();
                json_object_set_new(e->details, "_errors", json_array());
        }

        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        json_t *node = e->details;
        if (path && *path) {
                char buf[256];
                snprintf(buf, sizeof(buf), "%s", path);
                char *save = NULL;
                for (char *seg = strtok_r(buf, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
                        if (streq(seg, "_errors")) {
                                /* A key of the input named "_errors" (a header, a label): its node
                                 * would replace the list of messages. The message goes to the
                                 * parent's list, naming the rest of the path. */
                                char named[sizeof(msg)];
                                size_t off = (size_t)(seg - buf);
                                snprintf(named, sizeof(named), "%s: %s", path + off, msg);
                                memcpy(msg, named, sizeof(msg));
                                break;
                        }
                        node = node_child(node, seg);
                }
        }
        json_t *list = json_object_get(node, "_errors");
        json_array_append_new(list, json_string(msg));

        /* Keep the log message useful: the first field problem names the field. */
        if (streq(e->message, "validation failed"))
                snprintf(e->message, sizeof(e->message), "validation failed: %s%s%s",
                         path && *path ? path : "", path && *path ? ": " : "", msg);
        return -EINVAL;
}

void na_error_detail(struct na_error *e, const char *key, json_t *value)
{
        if (!e || !value)
                return;
        if (!e->details || !json_is_object(e->details)) {
                if (e->details)
                        json_decref(e->details);
                e->details = json_object();
        }
        json_object_set_new(e->details, key, value);
}

json_t *na_error_to_json(const struct na_error *e)
{
        const char *code = (e && e->code) ? e->code : NA_E_INTERNAL;
        const struct code_info *ci = code_lookup(code);
        const char *text = ci && ci->fixed_message ? ci->fixed_message : (e && e->message[0] ? e->message : code);
        json_t *details;

        if (streq(code, NA_E_INTERNAL))
                details = json_null();
        else if (e && e->details)
                details = json_deep_copy(e->details);
        else if (streq(code, NA_E_VALIDATION))
                details = json_pack("{s:[]}", "_errors");
        else
                details = json_null();

        return json_pack("{s:i, s:s, s:s, s:o}", "httpStatus", e && e->http_status ? e->http_status : (ci ? ci->status : 500),
                         "code", code, "error", text, "details", details);
}
