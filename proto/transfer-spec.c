/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The `transfer` object of AGENT-API 4.4, decoded and validated (proto/transfer-spec.h). */
#include "proto/transfer-spec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/macro.h"
#include "proto/decode.h"

/* Header names the client sets itself (or that would change how the body is framed). */
static const char *const reserved_headers[] = { "Host", "Content-Length", "Transfer-Encoding", "Connection",
                                                "Range", "Expect", NULL };

struct url_parts {
        bool plain_http;
        const char *authority; /* into the URL */
        size_t authority_len;
};

static bool host_is_loopback(const char *host, size_t len)
{
        char buf[64];
        if (len == 0 || len >= sizeof(buf))
                return false;
        memcpy(buf, host, len);
        buf[len] = '\0';
        if (strcasecmp(buf, "localhost") == 0)
                return true;
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, buf, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, buf, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6);
        return false;
}

static bool host_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
               c == '_' || c == '~';
}

static const char *url_parse(const char *url, size_t len, struct url_parts *ret)
{
        if (!url || len == 0)
                return "must not be empty";
        if (len > PROTO_TRANSFER_URL_MAX)
                return "must be at most 8192 bytes";
        if (memchr(url, '\0', len))
                return "must not contain NUL characters";
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)url[i];
                if (c <= 0x20 || c >= 0x7f)
                        return "must not contain spaces, control or non-ASCII characters (percent-encode them)";
        }
        size_t skip;
        bool plain;
        if (len > 8 && strncasecmp(url, "https://", 8) == 0)
                skip = 8, plain = false;
        else if (len > 7 && strncasecmp(url, "http://", 7) == 0)
                skip = 7, plain = true;
        else
                return "must be an https:// URL";
        const char *a = url + skip;
        size_t alen = 0;
        while (skip + alen < len && a[alen] != '/' && a[alen] != '?' && a[alen] != '#')
                alen++;
        if (alen == 0)
                return "must name a host";
        if (memchr(a, '@', alen))
                return "must not contain user information";
        const char *host = a, *port = NULL;
        size_t hlen, plen = 0;
        if (a[0] == '[') {
                const char *end = memchr(a, ']', alen);
                if (!end || end == a + 1)
                        return "must name a host";
                host = a + 1;
                hlen = (size_t)(end - host);
                for (size_t i = 0; i < hlen; i++)
                        if (!(host_char(host[i]) || host[i] == ':' || host[i] == '%'))
                                return "must name a valid host";
                struct in6_addr a6;
                char buf[64];
                if (hlen >= sizeof(buf))
                        return "must name a valid host";
                memcpy(buf, host, hlen);
                buf[hlen] = '\0';
                if (inet_pton(AF_INET6, buf, &a6) != 1)
                        return "must name a valid host";
                size_t rest = alen - (size_t)(end + 1 - a);
                if (rest > 0) {
                        if (end[1] != ':')
                                return "must name a valid host";
                        port = end + 2;
                        plen = rest - 1;
                }
        } else {
                const char *colon = memchr(a, ':', alen);
                hlen = colon ? (size_t)(colon - a) : alen;
                if (colon) {
                        port = colon + 1;
                        plen = alen - hlen - 1;
                }
                if (hlen == 0)
                        return "must name a host";
                for (size_t i = 0; i < hlen; i++)
                        if (!host_char(host[i]))
                                return "must name a valid host";
        }
        if (port) {
                unsigned v = 0;
                if (plen == 0 || plen > 5)
                        return "must have a port of 1..65535";
                for (size_t i = 0; i < plen; i++) {
                        if (port[i] < '0' || port[i] > '9')
                                return "must have a port of 1..65535";
                        v = v * 10 + (unsigned)(port[i] - '0');
                }
                if (v < 1 || v > 65535)
                        return "must have a port of 1..65535";
        }
        if (plain && !host_is_loopback(host, hlen))
                return "must be an https:// URL (plain http:// only to a loopback host)";
        if (ret) {
                ret->plain_http = plain;
                ret->authority = a;
                ret->authority_len = alen;
        }
        return NULL;
}

const char *proto_transfer_url_problem(const char *url, size_t len, bool *ret_plain_http)
{
        struct url_parts u;
        const char *problem = url_parse(url, len, &u);
        if (!problem && ret_plain_http)
                *ret_plain_http = u.plain_http;
        return problem;
}

int proto_transfer_host(const char *url, char *buf, size_t len)
{
        struct url_parts u;
        if (len == 0)
                return -EINVAL;
        buf[0] = '\0';
        if (!url || url_parse(url, strlen(url), &u)) {
                snprintf(buf, len, "(invalid URL)");
                return -EINVAL;
        }
        if ((size_t)snprintf(buf, len, "%.*s", (int)u.authority_len, u.authority) >= len)
                return -ENAMETOOLONG;
        for (char *p = buf; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                        *p = (char)(*p - 'A' + 'a');
        return 0;
}

void proto_transfer_free(struct proto_transfer *t)
{
        if (!t)
                return;
        free(t->url);
        for (size_t i = 0; i < t->n_headers; i++) {
                free(t->headers[i].name);
                free(t->headers[i].value);
        }
        free(t->headers);
        for (size_t i = 0; i < t->n_parts; i++)
                free(t->parts[i]);
        free(t->parts);
        free(t);
}

/* A URL member: checked as text; *out borrowed from obj. */
static int url_field(json_t *obj, const char *prefix, const char *key, const char **out, struct na_error *err)
{
        char path[256];
        json_t *v = json_object_get(obj, key);
        if (!v || json_is_null(v))
                return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "is required");
        if (!json_is_string(v))
                return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "must be a string");
        const char *problem = url_parse(json_string_value(v), json_string_length(v), NULL);
        if (problem)
                return na_error_field(err, proto_path(path, sizeof(path), prefix, key), "%s", problem);
        *out = json_string_value(v);
        return 0;
}

static bool token_char(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *header_name_problem(const char *name)
{
        size_t n = strlen(name);
        if (n == 0 || n > 128)
                return "names must be 1..128 characters";
        for (size_t i = 0; i < n; i++)
                if (!token_char((unsigned char)name[i]))
                        return "names must be HTTP tokens";
        for (const char *const *r = reserved_headers; *r; r++)
                if (strcasecmp(name, *r) == 0)
                        return "names must not be Host, Content-Length, Transfer-Encoding, Connection, Range or Expect";
        return NULL;
}

static int headers_decode(json_t *obj, const char *field, struct proto_transfer *t, struct na_error *err)
{
        json_t *h;
        int r = proto_object(obj, field, "headers", 0, &h, err);
        if (r != PROTO_PRESENT)
                return r;
        char path[256];
        proto_path(path, sizeof(path), field, "headers");
        if (json_object_size(h) > PROTO_TRANSFER_HEADERS_MAX)
                return na_error_field(err, path, "must hold at most 32 headers");
        t->headers = calloc(json_object_size(h) + 1, sizeof(*t->headers));
        if (!t->headers)
                return na_error_sys(err, ENOMEM, "transfer params");
        bool ok = true;
        const char *name;
        json_t *v;
        json_object_foreach(h, name, v) {
                char hp[512];
                snprintf(hp, sizeof(hp), "%s.%s", path, name);
                const char *problem = header_name_problem(name);
                if (problem) {
                        na_error_field(err, path, "%s", problem);
                        ok = false;
                        continue;
                }
                if (!json_is_string(v)) {
                        na_error_field(err, hp, "must be a string");
                        ok = false;
                        continue;
                }
                size_t vlen = json_string_length(v);
                const char *s = json_string_value(v);
                if (vlen > 4096 || strlen(s) != vlen || strpbrk(s, "\r\n")) {
                        na_error_field(err, hp, "must be at most 4096 bytes without CR, LF or NUL");
                        ok = false;
                        continue;
                }
                struct proto_transfer_header *e = &t->headers[t->n_headers];
                if (!(e->name = strdup(name)) || !(e->value = strdup(s))) {
                        free(e->name);
                        return na_error_sys(err, ENOMEM, "transfer params");
                }
                t->n_headers++;
        }
        return ok ? PROTO_PRESENT : -EINVAL;
}

static int sha256_decode(json_t *obj, const char *field, struct proto_transfer *t, struct na_error *err)
{
        const char *s;
        int r = proto_string(obj, field, "sha256", 0, 64, 64, &s, err);
        if (r != PROTO_PRESENT)
                return r;
        for (size_t i = 0; i < 64; i++) {
                char c = s[i];
                if (c >= 'A' && c <= 'F')
                        c = (char)(c - 'A' + 'a');
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
                        char path[256];
                        return na_error_field(err, proto_path(path, sizeof(path), field, "sha256"),
                                              "must be 64 hexadecimal digits");
                }
                t->sha256[i] = c;
        }
        t->sha256[64] = '\0';
        t->has_sha256 = true;
        return r;
}

static int parts_decode(json_t *obj, const char *field, bool put, struct proto_transfer *t, struct na_error *err)
{
        json_t *a;
        char path[256];
        proto_path(path, sizeof(path), field, "parts");
        json_t *raw = json_object_get(obj, "parts");
        if (raw && !json_is_null(raw) && !put)
                return na_error_field(err, path, "is only for PUT (a multipart upload)");
        int r = proto_array(obj, field, "parts", 0, 1, PROTO_TRANSFER_PARTS_MAX, &a, err);
        if (r != PROTO_PRESENT)
                return r;
        t->parts = calloc(json_array_size(a), sizeof(*t->parts));
        if (!t->parts)
                return na_error_sys(err, ENOMEM, "transfer params");
        bool ok = true;
        size_t i;
        json_t *item;
        json_array_foreach(a, i, item) {
                char ip[256];
                snprintf(ip, sizeof(ip), "%s.%zu", path, i);
                if (!json_is_object(item)) {
                        na_error_field(err, ip, "must be an object");
                        ok = false;
                        continue;
                }
                const char *url;
                if (url_field(item, ip, "url", &url, err) < 0) {
                        ok = false;
                        continue;
                }
                if (!ok)
                        continue;
                if (!(t->parts[t->n_parts] = strdup(url)))
                        return na_error_sys(err, ENOMEM, "transfer params");
                t->n_parts++;
        }
        return ok ? PROTO_PRESENT : -EINVAL;
}

/* Every member of v into t; all problems recorded. -EINVAL (validation) or -ENOMEM. */
static int fill(json_t *v, const char *field, const char *method, int64_t now_ms, struct proto_transfer *t,
                struct na_error *err)
{
        char path[256];
        bool ok = true;
        const char *url = NULL, *m = NULL;
        ok &= url_field(v, field, "url", &url, err) >= 0;
        int rm = proto_string(v, field, "method", PROTO_REQUIRED, 1, 16, &m, err);
        ok &= rm >= 0;
        if (rm == PROTO_PRESENT && !streq(m, method)) {
                na_error_field(err, proto_path(path, sizeof(path), field, "method"), "must be %s for this kind", method);
                ok = false;
        }
        int rh = headers_decode(v, field, t, err);
        if (rh == -ENOMEM)
                return rh;
        ok &= rh >= 0;
        ok &= sha256_decode(v, field, t, err) >= 0;
        int64_t exp = 0;
        int re = proto_time(v, field, "expiresAt", 0, &exp, err);
        ok &= re >= 0;
        if (re == PROTO_PRESENT && (exp < now_ms || exp <= 0)) {
                na_error_field(err, proto_path(path, sizeof(path), field, "expiresAt"), "has passed: the URL expired");
                ok = false;
        }
        int rp = parts_decode(v, field, t->put, t, err);
        if (rp == -ENOMEM)
                return rp;
        ok &= rp >= 0;
        if (!ok)
                return -EINVAL;
        if (!(t->url = strdup(url)))
                return na_error_sys(err, ENOMEM, "transfer params");
        t->expires_at_ms = re == PROTO_PRESENT ? exp : 0;
        if (t->n_parts == 0) {
                free(t->parts);
                t->parts = NULL;
        }
        return 0;
}

int proto_transfer_decode(json_t *v, const char *field, const char *method, int64_t now_ms,
                          struct proto_transfer **ret, struct na_error *err)
{
        if (!v || json_is_null(v))
                return na_error_field(err, field, "is required");
        if (!json_is_object(v))
                return na_error_field(err, field, "must be an object");
        struct proto_transfer *t = calloc(1, sizeof(*t));
        if (!t)
                return na_error_sys(err, ENOMEM, "transfer params");
        t->put = streq(method, "PUT");
        int r = fill(v, field, method, now_ms, t, err);
        if (r < 0) {
                proto_transfer_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

json_t *proto_transfer_parts_encode(const char (*etags)[128], size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++) {
                if (json_array_append_new(a, json_pack("{s:I, s:s}", "partNumber", (json_int_t)(i + 1), "etag",
                                                       etags[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}
