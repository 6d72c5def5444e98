/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verifier's DNS client: one question to the configured resolver (or those of
 * resolv.conf, in turn), over UDP with a retry each second, over TCP when the answer
 * is truncated; an answer counts only when it comes from the server asked (connected
 * socket) with our random ID and our question. Everything is bounded by one deadline.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "common/fileio.h"
#include "routing/app-dns-internal.h"

#define RETRY_MS 1000

/* "ADDR", "ADDR:PORT", "[V6]:PORT", "V6" into s (appended). */
static int add_server(struct app_dns_servers *s, const char *text)
{
        if (s->n >= ARRAY_SIZE(s->addr))
                return 0;
        char host[64];
        unsigned port = 53;
        const char *colon = strrchr(text, ':');
        size_t tl = strlen(text);
        if (tl == 0 || tl >= sizeof(host) + 8)
                return -EINVAL;
        if (text[0] == '[') {
                const char *close = strchr(text, ']');
                if (!close || (size_t)(close - text - 1) >= sizeof(host))
                        return -EINVAL;
                memcpy(host, text + 1, (size_t)(close - text - 1));
                host[close - text - 1] = '\0';
                if (close[1] == ':') {
                        char *end;
                        unsigned long p = strtoul(close + 2, &end, 10);
                        if (!close[2] || *end || p < 1 || p > 65535)
                                return -EINVAL;
                        port = (unsigned)p;
                } else if (close[1]) {
                        return -EINVAL;
                }
        } else if (colon && strchr(text, ':') == colon) {
                /* one colon: IPv4 with a port */
                if ((size_t)(colon - text) >= sizeof(host))
                        return -EINVAL;
                memcpy(host, text, (size_t)(colon - text));
                host[colon - text] = '\0';
                char *end;
                unsigned long p = strtoul(colon + 1, &end, 10);
                if (!colon[1] || *end || p < 1 || p > 65535)
                        return -EINVAL;
                port = (unsigned)p;
        } else {
                if (tl >= sizeof(host))
                        return -EINVAL;
                memcpy(host, text, tl + 1);
        }
        struct sockaddr_storage *ss = &s->addr[s->n];
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
                v4->sin_family = AF_INET;
                v4->sin_port = htons((uint16_t)port);
                s->len[s->n] = sizeof(*v4);
                snprintf(s->text[s->n], sizeof(s->text[0]), "%s:%u", host, port);
        } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
                v6->sin6_family = AF_INET6;
                v6->sin6_port = htons((uint16_t)port);
                s->len[s->n] = sizeof(*v6);
                snprintf(s->text[s->n], sizeof(s->text[0]), "[%s]:%u", host, port);
        } else {
                return -EINVAL;
        }
        s->n++;
        return 0;
}

int app_dns_servers_from(const struct app_dns_options *o, struct app_dns_servers *ret, struct na_error *err)
{
        memset(ret, 0, sizeof(*ret));
        if (o->resolver && *o->resolver) {
                if (add_server(ret, o->resolver) < 0)
                        return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                            "dns: resolver '%s' is not ADDR, ADDR:PORT or [V6ADDR]:PORT", o->resolver);
                return 0;
        }
        const char *path = o->resolv_conf ? o->resolv_conf : "/etc/resolv.conf";
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (f) {
                char line[512];
                while (fgets(line, sizeof(line), f)) {
                        char word[32], addr[128];
                        if (sscanf(line, "%31s %127s", word, addr) == 2 && streq(word, "nameserver")) {
                                char *pct = strchr(addr, '%'); /* fe80::1%eth0: no scope support, skip */
                                if (!pct)
                                        (void)add_server(ret, addr);
                        }
                }
        }
        if (ret->n == 0)
                (void)add_server(ret, "127.0.0.1"); /* what glibc does without a nameserver line */
        return 0;
}

static bool matches(const struct app_dns_msg *m, uint16_t id, const char *qname, uint16_t type)
{
        return m->qr && m->id == id && m->qtype == type && m->qclass == APP_DNS_C_IN && streq(m->qname, qname);
}

static int query_tcp(const struct app_dns_servers *s, size_t i, const uint8_t *q, size_t qlen, uint16_t id,
                     const char *qname, uint16_t type, long long deadline, struct app_dns_msg *ret)
{
        _cleanup_close_ int fd = socket(s->addr[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *)&s->addr[i], s->len[i]) < 0) {
                if (errno != EINPROGRESS)
                        return -errno;
                int r = na_wait_fd(fd, POLLOUT, deadline);
                if (r < 0)
                        return r;
                int e = 0;
                socklen_t el = sizeof(e);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
                if (e)
                        return -e;
        }
        uint8_t out[2 + 512];
        out[0] = (uint8_t)(qlen >> 8);
        out[1] = (uint8_t)qlen;
        memcpy(out + 2, q, qlen);
        for (size_t off = 0; off < qlen + 2;) {
                ssize_t k = send(fd, out + off, qlen + 2 - off, MSG_NOSIGNAL);
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = na_wait_fd(fd, POLLOUT, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (k < 0)
                        return -errno;
                off += (size_t)k;
        }
        _cleanup_free_ uint8_t *buf = malloc(2 + 65535);
        if (!buf)
                return -ENOMEM;
        size_t have = 0, want = 2;
        while (have < want) {
                ssize_t k = recv(fd, buf + have, want - have, 0);
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = na_wait_fd(fd, POLLIN, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -ECONNRESET;
                have += (size_t)k;
                if (have == 2 && want == 2)
                        want = 2 + (size_t)(buf[0] << 8 | buf[1]);
        }
        if (app_dns_parse(buf + 2, want - 2, ret) < 0 || !matches(ret, id, qname, type))
                return -EBADMSG;
        return 0;
}

int app_dns_query(const struct app_dns_servers *s, const char *name, uint16_t type, long long deadline,
                  struct app_dns_msg *ret)
{
        uint16_t id;
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = (uint16_t)(na_now_mono_ms() * 2654435761u);
        uint8_t q[512];
        size_t qlen;
        int r = app_dns_build_query(id, name, type, q, sizeof(q), &qlen);
        if (r < 0)
                return r;
        char qname[256];
        (void)app_dns_name_normalize(name, qname);
        int last = -ETIMEDOUT;
        for (size_t attempt = 0; na_now_mono_ms() < deadline; attempt++) {
                size_t i = attempt % s->n;
                _cleanup_close_ int fd = socket(s->addr[i].ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        return -errno;
                long long until = na_now_mono_ms() + RETRY_MS;
                if (until > deadline)
                        until = deadline;
                if (connect(fd, (const struct sockaddr *)&s->addr[i], s->len[i]) < 0 ||
                    send(fd, q, qlen, MSG_NOSIGNAL) < 0) {
                        last = -errno;
                        /* an unreachable server is no answer: wait out this try as for silence */
                        (void)na_wait_fd(-1, 0, until);
                        continue;
                }
                while (na_wait_fd(fd, POLLIN, until) == 0) {
                        uint8_t buf[4096];
                        ssize_t k = recv(fd, buf, sizeof(buf), 0);
                        if (k < 0) {
                                if (errno == ECONNREFUSED) {
                                        /* ICMP port unreachable: nobody answers there; wait out the try */
                                        struct timespec ts = { 0, 200 * 1000000L };
                                        nanosleep(&ts, NULL);
                                        (void)send(fd, q, qlen, MSG_NOSIGNAL);
                                }
                                continue;
                        }
                        if (app_dns_parse(buf, (size_t)k, ret) < 0 || !matches(ret, id, qname, type))
                                continue; /* not the answer to our question: keep listening */
                        if (ret->tc) {
                                r = query_tcp(s, i, q, qlen, id, qname, type, deadline, ret);
                                if (r == 0)
                                        return 0;
                                last = r;
                                break;
                        }
                        return 0;
                }
        }
        return last == -ETIMEDOUT || last == -ECONNREFUSED ? -ETIMEDOUT : last;
}
