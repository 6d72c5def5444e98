/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The pure parts of the HAProxy router: what is valid, the configuration's text and
 * the map file's text. No I/O.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routing/app-haproxy-internal.h"

bool app_haproxy_hostname_valid(const char *s)
{
        if (!s)
                return false;
        size_t len = strlen(s);
        if (len == 0 || len > 253)
                return false;
        size_t label = 0;
        for (size_t i = 0; i <= len; i++) {
                char c = s[i];
                if (c == '.' || c == '\0') {
                        if (label == 0 || label > 63 || s[i - 1] == '-')
                                return false;
                        label = 0;
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
                if (label == 0 && c == '-')
                        return false;
                label++;
        }
        return true;
}

bool app_haproxy_user_valid(const char *u)
{
        if (!u || !*u || strlen(u) > 32 || !((*u >= 'a' && *u <= 'z') || *u == '_'))
                return false;
        for (const char *c = u; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
                        return false;
        return true;
}

bool app_haproxy_path_safe(const char *p)
{
        if (!p || p[0] != '/' || strlen(p) > 200)
                return false;
        for (const char *c = p; *c; c++)
                if (!(isalnum((unsigned char)*c) || strchr("/._+-", *c)))
                        return false;
        return true;
}

bool app_haproxy_ip_canonical(const char *ip, char out[46])
{
        unsigned char buf[16];
        if (!ip || strlen(ip) > 45)
                return false;
        if (inet_pton(AF_INET, ip, buf) == 1)
                return inet_ntop(AF_INET, buf, out, 46) != NULL;
        if (inet_pton(AF_INET6, ip, buf) == 1)
                return inet_ntop(AF_INET6, buf, out, 46) != NULL;
        return false;
}

int app_haproxy_parse_listen(const char *s, char ip[46], unsigned *port)
{
        if (!s)
                return -EINVAL;
        const char *colon = strrchr(s, ':');
        if (!colon || colon == s)
                return -EINVAL;
        char addr[64];
        size_t alen = (size_t)(colon - s);
        bool bracket = s[0] == '[';
        if (bracket) {
                if (alen < 3 || s[alen - 1] != ']')
                        return -EINVAL;
                s++;
                alen -= 2;
        }
        if (alen >= sizeof(addr))
                return -EINVAL;
        memcpy(addr, s, alen);
        addr[alen] = '\0';
        if (!bracket && strchr(addr, ':'))
                return -EINVAL; /* IPv6 needs its brackets: "::1:80" is ambiguous */
        const char *p = colon + 1;
        if (!*p || strlen(p) > 5)
                return -EINVAL;
        unsigned v = 0;
        for (; *p; p++) {
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                v = v * 10 + (unsigned)(*p - '0');
        }
        if (v < 1 || v > 65535 || !app_haproxy_ip_canonical(addr, ip))
                return -EINVAL;
        *port = v;
        return 0;
}

void app_haproxy_route_value(const struct app_haproxy_route *r, char out[64])
{
        snprintf(out, 64, "%s/%u", r->ip, r->port);
}

ssize_t app_haproxy_route_find(const struct app_haproxy_route *r, size_t n, const char *hostname)
{
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(r[mid].hostname, hostname);
                if (c == 0)
                        return (ssize_t)mid;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -1 - (ssize_t)lo;
}

/* "bind" address text: IPv6 as ipv6@ADDR:PORT (HAProxy takes the last colon's port). */
static void bind_addr(const char *listen, char out[80])
{
        char ip[46];
        unsigned port = 0;
        if (app_haproxy_parse_listen(listen, ip, &port) < 0) {
                out[0] = '\0';
                return;
        }
        if (strchr(ip, ':'))
                snprintf(out, 80, "ipv6@%s:%u", ip, port);
        else
                snprintf(out, 80, "%s:%u", ip, port);
}

#define NOT_ROUTED_BODY "This domain is not routed here.\\n"

char *app_haproxy_render_config(const struct app_haproxy *h)
{
        char http[80] = "", tls[80] = "";
        if (h->http_listen && *h->http_listen)
                bind_addr(h->http_listen, http);
        if (h->tls_listen && *h->tls_listen)
                bind_addr(h->tls_listen, tls);
        char *http_part = NULL, *tls_part = NULL;
        if (*http && asprintf(&http_part,
                              "frontend http\n"
                              "    mode http\n"
                              "    bind %s\n"
                              /* What a client says of its own address never reaches the app: its
                               * X-Forwarded-For (forwardfor would append to it), Forwarded and
                               * X-Real-IP go, and the app reads the one address HAProxy saw. */
                              "    http-request del-header X-Forwarded-For\n"
                              "    http-request del-header Forwarded\n"
                              "    http-request del-header X-Real-IP\n"
                              "    option forwardfor\n"
                              "    http-request set-var(txn.route) req.hdr(host),field(1,:),lower,regsub(\\\\.$,),map(%s)\n"
                              "    http-request return status 404 content-type text/plain string \"" NOT_ROUTED_BODY
                              "\" unless { var(txn.route) -m found }\n"
                              "    http-request set-dst var(txn.route),field(1,/)\n"
                              "    http-request set-dst-port var(txn.route),field(2,/)\n"
                              "    http-request set-header X-Forwarded-Proto http\n"
                              "    default_backend to_route_http\n"
                              "\n"
                              "backend to_route_http\n"
                              "    mode http\n"
                              "    http-reuse never\n"
                              "    server route 0.0.0.0:0\n"
                              "\n",
                              http, h->map_path) < 0)
                http_part = NULL;
        if (*tls && asprintf(&tls_part,
                             "frontend tls\n"
                             "    mode tcp\n"
                             "    bind %s\n"
                             "    tcp-request inspect-delay 5s\n"
                             "    tcp-request content reject unless { req.ssl_hello_type 1 }\n"
                             "    tcp-request content set-var(sess.route) req.ssl_sni,lower,map(%s)\n"
                             "    tcp-request content reject unless { var(sess.route) -m found }\n"
                             "    tcp-request content set-dst var(sess.route),field(1,/)\n"
                             "    tcp-request content set-dst-port var(sess.route),field(2,/)\n"
                             "    default_backend to_route_tls\n"
                             "\n"
                             "backend to_route_tls\n"
                             "    mode tcp\n"
                             "    server route 0.0.0.0:0\n"
                             "\n",
                             tls, h->map_path) < 0)
                tls_part = NULL;
        char *priv = NULL;
        if (h->run_as && *h->run_as &&
            asprintf(&priv, "    user %s\n    group %s\n    chroot %s\n", h->run_as, h->run_as, h->empty_dir) < 0)
                priv = NULL;
        char *out = NULL;
        if (asprintf(&out,
                     "# Written by nodeagent (routing/app-haproxy-conf.c) at every start: edits are lost.\n"
                     "# Routes live in %s and change through the runtime API (docs/app-routes.md).\n"
                     "global\n"
                     "    stats socket %s mode 600 level admin\n"
                     "    stats timeout 30s\n"
                     "    hard-stop-after 15m\n"
                     "%s"
                     "\n"
                     "defaults\n"
                     "    timeout connect 5s\n"
                     "    timeout client 60s\n"
                     "    timeout server 60s\n"
                     "    timeout http-request 10s\n"
                     "    timeout tunnel 1h\n"
                     "    timeout client-fin 10s\n"
                     "\n"
                     "%s%s",
                     h->map_path, h->sock_path, priv ? priv : "", http_part ? http_part : "",
                     tls_part ? tls_part : "") < 0)
                out = NULL;
        free(priv);
        free(http_part);
        free(tls_part);
        return out;
}

bool app_haproxy_owner_valid(const char *owner)
{
        size_t n = strlen(owner);
        if (n == 0 || n > 63)
                return false;
        for (const char *p = owner; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
                        return false;
        return true;
}

char *app_haproxy_render_map(const struct app_haproxy_route *r, size_t n)
{
        size_t cap = 128 + n * (254 + 64 + 2 + 8 + 64);
        char *out = malloc(cap);
        if (!out)
                return NULL;
        size_t len = (size_t)snprintf(out, cap, "# hostname ip/port: written by nodeagent, changed through the runtime API\n");
        for (size_t i = 0; i < n; i++) {
                char v[64];
                app_haproxy_route_value(&r[i], v);
                if (r[i].owner[0])
                        len += (size_t)snprintf(out + len, cap - len, "# app %s\n", r[i].owner);
                len += (size_t)snprintf(out + len, cap - len, "%s %s\n", r[i].hostname, v);
        }
        return out;
}

static int cmp_route(const void *a, const void *b)
{
        return strcmp(((const struct app_haproxy_route *)a)->hostname, ((const struct app_haproxy_route *)b)->hostname);
}

int app_haproxy_parse_map(const char *text, struct app_haproxy_route **ret, size_t *ret_n, struct na_error *err)
{
        struct app_haproxy_route *r = NULL;
        size_t n = 0, cap = 0;
        unsigned lineno = 0;
        char owner[64] = ""; /* from a "# app <owner>" line: the next route's */
        for (const char *p = text; *p;) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                lineno++;
                char line[512];
                if (len >= sizeof(line)) {
                        free(r);
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "map line %u: too long", lineno);
                }
                memcpy(line, p, len);
                line[len] = '\0';
                p += len + (eol ? 1 : 0);
                if (strncmp(line, "# app ", 6) == 0 && app_haproxy_owner_valid(line + 6)) {
                        snprintf(owner, sizeof(owner), "%s", line + 6);
                        continue;
                }
                if (line[0] == '#' || line[0] == '\0')
                        continue;
                char host[256], value[128], extra[2];
                if (sscanf(line, "%255s %127s %1s", host, value, extra) != 2) {
                        free(r);
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "map line %u: not 'hostname ip/port'", lineno);
                }
                char *slash = strrchr(value, '/');
                char ip[46];
                char *end = NULL;
                unsigned long port = 0;
                if (slash) {
                        *slash = '\0';
                        errno = 0;
                        port = strtoul(slash + 1, &end, 10);
                }
                if (!app_haproxy_hostname_valid(host) || !slash || !end || *end || slash[1] == '\0' || port < 1 ||
                    port > 65535 || !app_haproxy_ip_canonical(value, ip)) {
                        free(r);
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "map line %u: bad route '%s'", lineno, line);
                }
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        struct app_haproxy_route *nr = realloc(r, cap * sizeof(*r));
                        if (!nr) {
                                free(r);
                                return na_error_sys(err, ENOMEM, "map");
                        }
                        r = nr;
                }
                memset(&r[n], 0, sizeof(r[n]));
                snprintf(r[n].hostname, sizeof(r[n].hostname), "%s", host);
                snprintf(r[n].ip, sizeof(r[n].ip), "%s", ip);
                r[n].port = (unsigned)port;
                snprintf(r[n].owner, sizeof(r[n].owner), "%s", owner);
                owner[0] = '\0';
                n++;
        }
        if (n)
                qsort(r, n, sizeof(*r), cmp_route);
        for (size_t i = 1; i < n; i++)
                if (streq(r[i].hostname, r[i - 1].hostname)) {
                        char h[254];
                        snprintf(h, sizeof(h), "%s", r[i].hostname);
                        free(r);
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "map: %s routed twice", h);
                }
        *ret = r;
        *ret_n = n;
        return 0;
}
