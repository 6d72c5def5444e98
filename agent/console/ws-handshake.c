/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The pure parts of the WebSocket client's opening (RFC 6455 4.1): the URL, the key,
 * the accept value and the check of the relay's answer head. No I/O.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/base/config.h"
#include "agent/console/ws.h"
#include "common/macro.h"

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static bool host_char_ok(char c)
{
        return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

int ws_url_parse(const char *url, bool allow_insecure, struct ws_url *ret, const char *field, struct na_error *err)
{
        struct ws_url u = { 0 };
        const char *p;
        if (!url)
                return na_error_field(err, field, "required");
        if (strncasecmp(url, "wss://", 6) == 0) {
                u.tls = true;
                p = url + 6;
        } else if (strncasecmp(url, "ws://", 5) == 0)
                p = url + 5;
        else
                return na_error_field(err, field, "must be a wss:// URL");
        for (const char *q = url; *q; q++)
                if ((unsigned char)*q <= 0x20 || *q == 0x7f)
                        return na_error_field(err, field, "must not hold spaces or control characters");
        const char *host_end;
        const char *h = p;
        if (*p == '[') {
                host_end = strchr(p, ']');
                if (!host_end)
                        return na_error_field(err, field, "unclosed [ in the host");
                h = p + 1;
                p = host_end + 1;
        } else {
                host_end = p + strcspn(p, ":/?#");
                p = host_end;
        }
        size_t hlen = (size_t)(host_end - h);
        if (hlen == 0 || hlen >= sizeof(u.host))
                return na_error_field(err, field, "has no host, or one too long");
        memcpy(u.host, h, hlen);
        if (memchr(url, '@', (size_t)(p - url)))
                return na_error_field(err, field, "must not carry user information");
        for (size_t i = 0; i < hlen; i++)
                if (!host_char_ok(u.host[i]) && !(h[-1] == '[' && (u.host[i] == ':' || isxdigit((unsigned char)u.host[i]))))
                        return na_error_field(err, field, "has an invalid host");
        snprintf(u.port, sizeof(u.port), "%s", u.tls ? "443" : "80");
        if (*p == ':') {
                p++;
                char *end;
                long port = strtol(p, &end, 10);
                if (end == p || port < 1 || port > 65535 || (*end && *end != '/' && *end != '?'))
                        return na_error_field(err, field, "has an invalid port");
                snprintf(u.port, sizeof(u.port), "%ld", port);
                p = end;
        }
        if (*p == '#')
                return na_error_field(err, field, "must not carry a fragment");
        if (strchr(p, '#'))
                return na_error_field(err, field, "must not carry a fragment");
        if (strlen(p) + 2 > sizeof(u.path))
                return na_error_field(err, field, "path too long");
        snprintf(u.path, sizeof(u.path), "%s%s", *p == '/' ? "" : "/", p);
        if (!u.tls && !(allow_insecure && config_host_is_loopback(u.host)))
                return na_error_field(err, field,
                                      "must be a wss:// URL (ws:// only to a loopback host with [controller] "
                                      "allow_insecure_http)");
        bool dflt = streq(u.port, u.tls ? "443" : "80");
        bool v6 = strchr(u.host, ':') != NULL;
        snprintf(u.host_header, sizeof(u.host_header), "%s%s%s%s%s", v6 ? "[" : "", u.host, v6 ? "]" : "",
                 dflt ? "" : ":", dflt ? "" : u.port);
        *ret = u;
        return 0;
}

/* The host of an http(s):// or ws(s):// URL, without brackets, into out; false when it has none. */
static bool url_host(const char *url, char *out, size_t len)
{
        const char *p = strstr(url ? url : "", "://");
        if (!p)
                return false;
        p += 3;
        const char *at = p + strcspn(p, "/?#");
        const char *cred = memchr(p, '@', (size_t)(at - p));
        if (cred)
                p = cred + 1;
        const char *end;
        if (*p == '[') {
                p++;
                end = strchr(p, ']');
                if (!end)
                        return false;
        } else
                end = p + strcspn(p, ":/?#");
        size_t n = (size_t)(end - p);
        if (n == 0 || n >= len)
                return false;
        memcpy(out, p, n);
        out[n] = 0;
        return true;
}

int ws_url_allowed(const struct ws_url *u, const char *controller_url, const char *relays, const char *field,
                   struct na_error *err)
{
        char host[256];
        if (url_host(controller_url, host, sizeof(host)) && strcasecmp(host, u->host) == 0)
                return 0;
        for (const char *p = relays ? relays : ""; *p;) {
                p += strspn(p, ", \t");
                size_t n = strcspn(p, ", \t");
                const char *h = p;
                if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
                        h++, n -= 2;
                if (n && n == strlen(u->host) && strncasecmp(h, u->host, n) == 0)
                        return 0;
                p += strcspn(p, ", \t");
        }
        return na_error_field(err, field, "%s is neither the controller's host nor a relay of [consoles] relays",
                              u->host);
}

int ws_key_new(char key[25])
{
        unsigned char raw[16];
        if (RAND_bytes(raw, sizeof(raw)) != 1)
                return -EIO;
        EVP_EncodeBlock((unsigned char *)key, raw, sizeof(raw));
        return 0;
}

void ws_accept_for(const char *key, char out[29])
{
        char buf[128];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        int n = snprintf(buf, sizeof(buf), "%s%s", key, WS_GUID);
        EVP_Digest(buf, (size_t)n, md, &mdlen, EVP_sha1(), NULL);
        EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
}

/* The value of header name in head (first occurrence), trimmed, into out. */
static bool header_value(const char *head, size_t len, const char *name, char *out, size_t outlen)
{
        size_t nlen = strlen(name);
        const char *end = head + len;
        const char *line = memchr(head, '\n', len);
        while (line && line + 1 < end) {
                line++;
                const char *eol = memchr(line, '\n', (size_t)(end - line));
                if (!eol)
                        eol = end;
                if ((size_t)(eol - line) > nlen && strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
                        const char *v = line + nlen + 1;
                        const char *ve = eol;
                        while (v < ve && (*v == ' ' || *v == '\t'))
                                v++;
                        while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                                ve--;
                        size_t vl = (size_t)(ve - v);
                        if (vl >= outlen)
                                vl = outlen - 1;
                        memcpy(out, v, vl);
                        out[vl] = 0;
                        return true;
                }
                line = eol < end ? eol : NULL;
        }
        return false;
}

static bool has_token(const char *list, const char *token)
{
        size_t tl = strlen(token);
        for (const char *p = list; *p;) {
                while (*p == ' ' || *p == ',' || *p == '\t')
                        p++;
                size_t n = strcspn(p, ", \t");
                if (n == tl && strncasecmp(p, token, tl) == 0)
                        return true;
                p += n;
        }
        return false;
}

int ws_check_response(const char *head, size_t len, const char *key, int *ret_status, struct na_error *err)
{
        *ret_status = 0;
        int major, minor, status;
        char first[64] = { 0 };
        const char *nl = memchr(head, '\n', len);
        size_t fl = nl ? (size_t)(nl - head) : len;
        memcpy(first, head, fl < sizeof(first) - 1 ? fl : sizeof(first) - 1);
        if (sscanf(first, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 || status > 999)
                return na_error_set(err, EPROTO, NA_E_DRIVER, "the relay's answer is not HTTP");
        *ret_status = status;
        if (status != 101)
                return na_error_set(err, EPROTO, NA_E_DRIVER, "the relay answered HTTP %d, not 101 Switching Protocols",
                                    status);
        char v[256];
        if (!header_value(head, len, "Upgrade", v, sizeof(v)) || strcasecmp(v, "websocket") != 0)
                return na_error_set(err, EPROTO, NA_E_DRIVER, "the relay's 101 has no Upgrade: websocket");
        if (!header_value(head, len, "Connection", v, sizeof(v)) || !has_token(v, "upgrade"))
                return na_error_set(err, EPROTO, NA_E_DRIVER, "the relay's 101 has no Connection: upgrade");
        char want[29];
        ws_accept_for(key, want);
        if (!header_value(head, len, "Sec-WebSocket-Accept", v, sizeof(v)) || !streq(v, want))
                return na_error_set(err, EPROTO, NA_E_DRIVER, "the relay's Sec-WebSocket-Accept does not match the key");
        if (header_value(head, len, "Sec-WebSocket-Extensions", v, sizeof(v)) && *v)
                return na_error_set(err, EPROTO, NA_E_DRIVER, "the relay chose an extension we did not offer");
        return 0;
}
