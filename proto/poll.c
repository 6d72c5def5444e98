/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A poll answer taken apart job by job (proto/poll.h). */
#include "proto/poll.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_DEPTH_MAX 128

static const char *skip_ws(const char *p, const char *end)
{
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
                p++;
        return p;
}

/* p at '"': returns just past the closing quote, or NULL when cut short. */
static const char *scan_string(const char *p, const char *end)
{
        for (p++; p < end; p++) {
                if (*p == '\\') {
                        p++;
                        continue;
                }
                if (*p == '"')
                        return p + 1;
        }
        return NULL;
}

static bool scalar_char(char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' ||
               c == '.';
}

/*
 * An array or object nested deeper than the scanner checks, p at its opening bracket:
 * just past its end, brackets counted (strings skipped) but not matched one to one.
 * Its job is parsed on its own afterwards, which judges it; the scanner only has to
 * find where it ends, without recursion, whatever its depth.
 */
static const char *skip_nested(const char *p, const char *end)
{
        size_t open = 0;
        while (p < end) {
                char c = *p;
                if (c == '"') {
                        if (!(p = scan_string(p, end)))
                                return NULL;
                        continue;
                }
                if (c == '[' || c == '{')
                        open++;
                else if (c == ']' || c == '}') {
                        if (open == 0)
                                return NULL;
                        if (--open == 0)
                                return p + 1;
                }
                p++;
        }
        return NULL;
}

/* Just past one JSON value starting at p (after white space), or NULL. */
static const char *scan_value(const char *p, const char *end, int depth)
{
        p = skip_ws(p, end);
        if (p >= end)
                return NULL;
        if (depth > SCAN_DEPTH_MAX && (*p == '{' || *p == '['))
                return skip_nested(p, end);
        if (*p == '"')
                return scan_string(p, end);
        if (*p == '{' || *p == '[') {
                char close = *p == '{' ? '}' : ']';
                bool object = *p == '{';
                p = skip_ws(p + 1, end);
                if (p < end && *p == close)
                        return p + 1;
                for (;;) {
                        if (object) {
                                p = skip_ws(p, end);
                                if (p >= end || *p != '"' || !(p = scan_string(p, end)))
                                        return NULL;
                                p = skip_ws(p, end);
                                if (p >= end || *p != ':')
                                        return NULL;
                                p++;
                        }
                        if (!(p = scan_value(p, end, depth + 1)))
                                return NULL;
                        p = skip_ws(p, end);
                        if (p >= end)
                                return NULL;
                        if (*p == close)
                                return p + 1;
                        if (*p != ',')
                                return NULL;
                        p++;
                }
        }
        const char *s = p;
        while (p < end && scalar_char(*p))
                p++;
        return p > s ? p : NULL;
}

static bool raw_key_is(const char *k, const char *kend, const char *want)
{
        /* k at the opening quote, kend just past the closing one. */
        size_t n = strlen(want);
        return (size_t)(kend - k) == n + 2 && memcmp(k + 1, want, n) == 0;
}

int proto_poll_split(const char *body, size_t len, bool *ret_success, struct proto_span **ret, size_t *ret_n,
                     struct na_error *err)
{
        const char *p = skip_ws(body, body + len), *end = body + len;
        *ret = NULL;
        *ret_n = 0;
        if (p >= end || *p != '{')
                return na_error_set(err, EBADMSG, NA_E_VALIDATION, "answer is not a JSON object");
        int success = -1;
        bool have_data = false;
        struct proto_span *spans = NULL;
        size_t n = 0, cap = 0;
        p = skip_ws(p + 1, end);
        if (p < end && *p == '}')
                p = NULL; /* an empty object: no "success" */
        while (p) {
                p = skip_ws(p, end);
                const char *k = p;
                if (p >= end || *p != '"' || !(p = scan_string(p, end)))
                        break;
                const char *kend = p;
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                        break;
                p = skip_ws(p + 1, end);
                if (raw_key_is(k, kend, "success")) {
                        if (success >= 0)
                                break; /* twice */
                        if (end - p >= 4 && memcmp(p, "true", 4) == 0)
                                success = 1;
                        else if (end - p >= 5 && memcmp(p, "false", 5) == 0)
                                success = 0;
                        else
                                break;
                }
                if (raw_key_is(k, kend, "data") && p < end && *p == '[') {
                        if (have_data)
                                break;
                        have_data = true;
                        p = skip_ws(p + 1, end);
                        if (p < end && *p == ']') {
                                p++;
                        } else {
                                for (;;) {
                                        const char *s = skip_ws(p, end);
                                        const char *e = scan_value(s, end, 2);
                                        if (!e) {
                                                p = NULL;
                                                break;
                                        }
                                        if (n == cap) {
                                                size_t nc = cap ? cap * 2 : 16;
                                                struct proto_span *ns = realloc(spans, nc * sizeof(*ns));
                                                if (!ns) {
                                                        free(spans);
                                                        return na_error_sys(err, ENOMEM, "poll answer");
                                                }
                                                spans = ns;
                                                cap = nc;
                                        }
                                        spans[n++] = (struct proto_span){ (size_t)(s - body), (size_t)(e - s) };
                                        p = skip_ws(e, end);
                                        if (p < end && *p == ',') {
                                                p++;
                                                continue;
                                        }
                                        if (p < end && *p == ']')
                                                p++;
                                        else
                                                p = NULL;
                                        break;
                                }
                                if (!p)
                                        break;
                        }
                } else if (!(p = scan_value(p, end, 1)))
                        break;
                p = skip_ws(p, end);
                if (p < end && *p == ',') {
                        p++;
                        continue;
                }
                if (p < end && *p == '}' && skip_ws(p + 1, end) == end) {
                        if (success == 1 && !have_data)
                                break;
                        if (success < 0)
                                break;
                        *ret_success = success == 1;
                        *ret = spans;
                        *ret_n = n;
                        return 0;
                }
                break;
        }
        free(spans);
        return na_error_set(err, EBADMSG, NA_E_VALIDATION,
                            "answer is not an envelope holding \"success\" and, on success, a \"data\" array");
}

static bool copy_id(const char *s, const char *e, char id[PROTO_ID_MAX + 1])
{
        /* s at the opening quote, e just past the closing one. */
        size_t n = (size_t)(e - s) - 2;
        if (n == 0 || n > PROTO_ID_MAX)
                return false;
        char buf[PROTO_ID_MAX + 1];
        memcpy(buf, s + 1, n);
        buf[n] = '\0';
        if (!proto_id_answerable(buf))
                return false;
        memcpy(id, buf, n + 1);
        return true;
}

static void read_attempt(const char *s, const char *e, int64_t *ret)
{
        char buf[24];
        size_t n = (size_t)(e - s);
        if (n == 0 || n >= sizeof(buf))
                return;
        memcpy(buf, s, n);
        buf[n] = '\0';
        char *x;
        long long v = strtoll(buf, &x, 10);
        if (*x == '\0' && v >= 1 && v <= INT32_MAX)
                *ret = v;
}

bool proto_job_recover(const char *text, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt)
{
        const char *p = skip_ws(text, text + len), *end = text + len;
        bool found = false;
        *ret_attempt = 1;
        if (p >= end || *p != '{')
                return false;
        p++;
        for (;;) {
                p = skip_ws(p, end);
                const char *k = p;
                if (p >= end || *p != '"' || !(p = scan_string(p, end)))
                        break;
                const char *kend = p;
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                        break;
                const char *v = skip_ws(p + 1, end);
                if (!(p = scan_value(v, end, 1)))
                        break;
                if (raw_key_is(k, kend, "id") && *v == '"' && !found)
                        found = copy_id(v, p, id);
                else if (raw_key_is(k, kend, "attempt"))
                        read_attempt(v, p, ret_attempt);
                p = skip_ws(p, end);
                if (p >= end || *p != ',')
                        break;
                p++;
        }
        return found;
}

bool proto_poll_recover_head(const char *head, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt)
{
        const char *p = skip_ws(head, head + len), *end = head + len;
        if (p >= end || *p != '{')
                return false;
        p++;
        for (;;) {
                p = skip_ws(p, end);
                const char *k = p;
                if (p >= end || *p != '"' || !(p = scan_string(p, end)))
                        return false;
                const char *kend = p;
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                        return false;
                p = skip_ws(p + 1, end);
                if (raw_key_is(k, kend, "data")) {
                        if (p >= end || *p != '[')
                                return false;
                        p = skip_ws(p + 1, end);
                        return proto_job_recover(p, (size_t)(end - p), id, ret_attempt);
                }
                if (!(p = scan_value(p, end, 1)))
                        return false;
                p = skip_ws(p, end);
                if (p >= end || *p != ',')
                        return false;
                p++;
        }
}

/* Backwards: p just past a closing '"'; returns the opening quote, or NULL when cut. */
static const char *rscan_string(const char *begin, const char *p)
{
        const char *q = p - 1; /* the closing quote */
        while (q > begin) {
                q--;
                if (*q != '"')
                        continue;
                size_t bs = 0;
                for (const char *b = q; b > begin && b[-1] == '\\'; b--)
                        bs++;
                if (bs % 2 == 0)
                        return q;
        }
        return NULL;
}

bool proto_poll_recover_tail(const char *tail, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt)
{
        /* Tokens read backwards; a key string is recognised by the ':' after it. */
        const char *begin = tail, *p = tail + len;
        int depth = 0;
        bool found = false, after_colon = false;
        const char *val_s = NULL, *val_e = NULL; /* the value token just after (forward) the ':' */
        bool val_string = false;
        *ret_attempt = 1;
        while (p > begin) {
                char c = p[-1];
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                        p--;
                        continue;
                }
                if (c == '}' || c == ']') {
                        depth++;
                        p--;
                        val_s = NULL;
                        after_colon = false;
                        continue;
                }
                if (c == '{' || c == '[') {
                        if (depth == 3)
                                return found; /* the start of the job object */
                        depth--;
                        p--;
                        val_s = NULL;
                        after_colon = false;
                        continue;
                }
                if (c == ':') {
                        after_colon = true;
                        p--;
                        continue;
                }
                if (c == ',') {
                        after_colon = false;
                        val_s = NULL;
                        p--;
                        continue;
                }
                const char *e = p, *s;
                bool is_string = c == '"';
                if (is_string) {
                        if (!(s = rscan_string(begin, p)))
                                return found;
                } else {
                        s = p;
                        while (s > begin && scalar_char(s[-1]))
                                s--;
                        if (s == p)
                                return found; /* not JSON */
                }
                if (after_colon && depth == 3 && is_string && val_s) {
                        if (raw_key_is(s, e, "id") && val_string && !found)
                                found = copy_id(val_s, val_e, id);
                        else if (raw_key_is(s, e, "attempt") && !val_string)
                                read_attempt(val_s, val_e, ret_attempt);
                }
                after_colon = false;
                val_s = s;
                val_e = e;
                val_string = is_string;
                p = s;
        }
        return found;
}
