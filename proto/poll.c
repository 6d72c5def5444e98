/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A poll answer taken apart job by job (proto/poll.h). */
#include "proto/poll.h"

#include <jansson.h>
#include <stdio.h>
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

/* p just past a '[' : the spans of the array's elements; returns just past ']' or NULL. */
static const char *scan_spans(const char *body, const char *p, const char *end, struct proto_span **spans, size_t *n,
                              size_t *cap, bool *oom)
{
        p = skip_ws(p, end);
        if (p < end && *p == ']')
                return p + 1;
        for (;;) {
                const char *s = skip_ws(p, end);
                const char *e = scan_value(s, end, 2);
                if (!e)
                        return NULL;
                if (*n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 16;
                        struct proto_span *ns = realloc(*spans, nc * sizeof(*ns));
                        if (!ns) {
                                *oom = true;
                                return NULL;
                        }
                        *spans = ns;
                        *cap = nc;
                }
                (*spans)[(*n)++] = (struct proto_span){ (size_t)(s - body), (size_t)(e - s) };
                p = skip_ws(e, end);
                if (p < end && *p == ',') {
                        p++;
                        continue;
                }
                return p < end && *p == ']' ? p + 1 : NULL;
        }
}

/* p just past data's '{' (an exchange answer): "jobs" split, "taken" and "lost" spanned. */
static const char *scan_exchange_data(const char *body, const char *p, const char *end, struct proto_span **spans,
                                      size_t *n, size_t *cap, struct proto_exchange_spans *x, bool *oom)
{
        bool have_jobs = false;
        p = skip_ws(p, end);
        if (p < end && *p == '}')
                return NULL; /* no "jobs" */
        for (;;) {
                p = skip_ws(p, end);
                const char *k = p;
                if (p >= end || *p != '"' || !(p = scan_string(p, end)))
                        return NULL;
                const char *kend = p;
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                        return NULL;
                p = skip_ws(p + 1, end);
                if (raw_key_is(k, kend, "jobs")) {
                        if (have_jobs || p >= end || *p != '[')
                                return NULL;
                        have_jobs = true;
                        if (!(p = scan_spans(body, p + 1, end, spans, n, cap, oom)))
                                return NULL;
                } else {
                        const char *v = p;
                        if (!(p = scan_value(v, end, 2)))
                                return NULL;
                        struct proto_span *dst = raw_key_is(k, kend, "taken") ? &x->taken
                                                 : raw_key_is(k, kend, "lost") ? &x->lost
                                                                               : NULL;
                        if (dst)
                                *dst = (struct proto_span){ (size_t)(v - body), (size_t)(p - v) };
                }
                p = skip_ws(p, end);
                if (p < end && *p == ',') {
                        p++;
                        continue;
                }
                return p < end && *p == '}' && have_jobs ? p + 1 : NULL;
        }
}

/* The envelope of a poll answer (x NULL: data is the array of jobs) or of an exchange answer. */
static int split_answer(const char *body, size_t len, bool *ret_success, struct proto_span **ret, size_t *ret_n,
                        struct proto_exchange_spans *x, struct na_error *err)
{
        const char *p = skip_ws(body, body + len), *end = body + len;
        *ret = NULL;
        *ret_n = 0;
        if (x)
                *x = (struct proto_exchange_spans){ { 0, 0 }, { 0, 0 } };
        if (p >= end || *p != '{')
                return na_error_set(err, EBADMSG, NA_E_VALIDATION, "answer is not a JSON object");
        int success = -1;
        bool have_data = false, oom = false;
        struct proto_span *spans = NULL;
        size_t n = 0, cap = 0;
        char open = x ? '{' : '[';
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
                if (raw_key_is(k, kend, "data") && p < end && *p == open) {
                        if (have_data)
                                break;
                        have_data = true;
                        p = x ? scan_exchange_data(body, p + 1, end, &spans, &n, &cap, x, &oom)
                              : scan_spans(body, p + 1, end, &spans, &n, &cap, &oom);
                        if (!p)
                                break;
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
        if (oom)
                return na_error_sys(err, ENOMEM, "poll answer");
        return na_error_set(err, EBADMSG, NA_E_VALIDATION,
                            x ? "answer is not an envelope holding \"success\" and, on success, a \"data\" object "
                                "with a \"jobs\" array"
                              : "answer is not an envelope holding \"success\" and, on success, a \"data\" array");
}

int proto_poll_split(const char *body, size_t len, bool *ret_success, struct proto_span **ret, size_t *ret_n,
                     struct na_error *err)
{
        return split_answer(body, len, ret_success, ret, ret_n, NULL, err);
}

int proto_exchange_split(const char *body, size_t len, bool *ret_success, struct proto_span **ret, size_t *ret_n,
                         struct proto_exchange_spans *x, struct na_error *err)
{
        return split_answer(body, len, ret_success, ret, ret_n, x, err);
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
                if (raw_key_is(k, kend, "data") && p < end && *p == '{') {
                        p++; /* an exchange answer: its members, "jobs" among them */
                        continue;
                }
                if (raw_key_is(k, kend, "data") || raw_key_is(k, kend, "jobs")) {
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

/* job_depth: the brackets between the answer's end and the job's object (3 in a poll answer). */
static bool recover_tail(const char *tail, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt, int job_depth)
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
                        if (depth == job_depth)
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
                if (after_colon && depth == job_depth && is_string && val_s) {
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

static int ack_push(struct proto_exchange_ack **v, size_t *n, size_t *cap, const char *id, const char *code)
{
        if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 8;
                struct proto_exchange_ack *nv = realloc(*v, nc * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                *v = nv;
                *cap = nc;
        }
        struct proto_exchange_ack *a = &(*v)[(*n)++];
        snprintf(a->id, sizeof(a->id), "%s", id);
        snprintf(a->code, sizeof(a->code), "%s", code);
        return 0;
}

static const char *const lost_codes[] = { NA_E_JOB_NOT_FOUND, NA_E_LEASE_LOST, NA_E_JOB_CANCELLED, NULL };

int proto_exchange_acks_decode(const char *body, const struct proto_exchange_spans *x,
                               struct proto_exchange_ack **ret, size_t *ret_n, struct na_error *err)
{
        struct proto_exchange_ack *v = NULL;
        size_t n = 0, cap = 0;
        *ret = NULL;
        *ret_n = 0;
        const struct proto_span *parts[2] = { &x->taken, &x->lost };
        for (size_t part = 0; part < 2; part++) {
                const char *what = part ? "lost" : "taken";
                if (!parts[part]->len)
                        continue;
                json_t *arr = json_loadb(body + parts[part]->off, parts[part]->len, JSON_DECODE_ANY, NULL);
                if (!json_is_array(arr)) {
                        na_error_field(err, what, "must be an array");
                        json_decref(arr);
                        continue;
                }
                size_t i;
                json_t *it;
                json_array_foreach (arr, i, it) {
                        const char *id = part ? json_string_value(json_object_get(it, "jobId")) : json_string_value(it);
                        const char *code = part ? json_string_value(json_object_get(it, "code")) : "";
                        bool code_ok = !part;
                        for (size_t c = 0; part && code && lost_codes[c]; c++)
                                code_ok |= strcmp(code, lost_codes[c]) == 0;
                        if (!id || !proto_id_answerable(id) || !code_ok) {
                                na_error_field(err, what, "entry %zu is not %s", i,
                                               part ? "{jobId, code: JOB_NOT_FOUND|LEASE_LOST|JOB_CANCELLED}" : "a job id");
                                continue;
                        }
                        if (ack_push(&v, &n, &cap, id, code) < 0) {
                                json_decref(arr);
                                free(v);
                                return na_error_sys(err, ENOMEM, "exchange answer");
                        }
                }
                json_decref(arr);
        }
        *ret = v;
        *ret_n = n;
        return na_error_is_set(err) ? -EINVAL : 0;
}

bool proto_poll_recover_tail(const char *tail, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt)
{
        return recover_tail(tail, len, id, ret_attempt, 3);
}

bool proto_exchange_recover_tail(const char *tail, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt)
{
        return recover_tail(tail, len, id, ret_attempt, 4);
}
