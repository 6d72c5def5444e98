/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/daemon/prometheus-http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "metrics/metrics.h"

#define REQUEST_MAX 8192
#define CLIENTS_MAX 16
#define REQUEST_TIMEOUT_MS 5000
#define SEND_TIMEOUT_MS 30000 /* a whole page to a slow scraper */

struct client {
        struct prometheus *p;
        int fd;
        char buf[REQUEST_MAX];
        size_t len;
        char *out; /* the answer being sent (head and body), NULL before */
        size_t out_len, out_off;
        struct loop_timer *deadline;
        struct client *next;
};

struct prometheus {
        struct loop *loop;
        int fd;
        struct metrics *metrics;
        prometheus_health_fn health;
        void *userdata;
        struct client *clients;
        unsigned nclients;
};

static void client_free(struct client *c)
{
        struct prometheus *p = c->p;
        for (struct client **pp = &p->clients; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        p->nclients--;
        loop_unwatch(p->loop, c->fd);
        close(c->fd);
        loop_timer_free(c->deadline);
        free(c->out);
        free(c);
}

static void client_io(void *userdata, int fd, uint32_t revents);

/*
 * Send what the socket takes now (it is non-blocking: the loop never waits on a
 * scraper). true when the answer is out or the client failed: free it; false when
 * the rest waits for EPOLLOUT.
 */
static bool flush_out(struct client *c)
{
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return false;
                if (n <= 0)
                        return true; /* the scraper went away */
                c->out_off += (size_t)n;
        }
        return true;
}

/*
 * Queue the answer and send it, now or as the socket drains (gcc -fanalyzer, issue 20:
 * a send() on the non-blocking socket that wrote part of a large page ended the answer
 * there). Frees c once the answer is out or sending failed: the caller must not use c
 * after this.
 */
static void reply(struct client *c, const char *status, const char *type, const char *body, size_t len)
{
        char head[256];
        int n = snprintf(head, sizeof(head), "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                         status, type, len);
        c->out = malloc((size_t)n + len);
        if (!c->out) {
                client_free(c);
                return;
        }
        memcpy(c->out, head, (size_t)n);
        if (len)
                memcpy(c->out + n, body, len);
        c->out_len = (size_t)n + len;
        if (flush_out(c)) {
                client_free(c);
                return;
        }
        /* The rest as the socket drains, within its own deadline. */
        loop_unwatch(c->p->loop, c->fd);
        if (loop_watch(c->p->loop, c->fd, EPOLLOUT, client_io, c, NULL) < 0) {
                client_free(c);
                return;
        }
        if (c->deadline)
                loop_timer_arm_ms(c->deadline, SEND_TIMEOUT_MS);
}

static void answer(struct client *c)
{
        struct prometheus *p = c->p;
        if (strncmp(c->buf, "GET /metrics ", 13) != 0 && strncmp(c->buf, "GET / ", 6) != 0) {
                const char *msg = "only GET /metrics is served here\n";
                reply(c, "404 Not Found", "text/plain", msg, strlen(msg));
                return;
        }
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) {
                reply(c, "500 Internal Server Error", "text/plain", "", 0);
                return;
        }
        struct na_error err = NA_ERROR_INIT;
        if (p->metrics && metrics_prometheus_render(p->metrics, f, &err) < 0)
                fprintf(f, "# metrics unavailable: %s\n", err.message);
        na_error_clear(&err);
        if (p->health)
                p->health(p->userdata, f);
        if (fclose(f) != 0 || !text) {
                free(text);
                reply(c, "500 Internal Server Error", "text/plain", "", 0);
                return;
        }
        reply(c, "200 OK", "text/plain; version=0.0.4", text, len);
        free(text);
}

static void client_io(void *userdata, int fd, uint32_t revents)
{
        struct client *c = userdata;
        if (c->out) {
                if (flush_out(c))
                        client_free(c);
                return;
        }
        ssize_t n = recv(fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                client_free(c);
                return;
        }
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
        if (strstr(c->buf, "\r\n\r\n") || strstr(c->buf, "\n\n"))
                answer(c); /* frees c once the answer is out */
        else if (c->len >= sizeof(c->buf) - 1)
                reply(c, "431 Request Header Fields Too Large", "text/plain", "", 0);
}

static void client_timeout(void *userdata)
{
        client_free(userdata);
}

static void listen_io(void *userdata, int fd, uint32_t revents)
{
        struct prometheus *p = userdata;
        for (;;) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0)
                        return;
                if (p->nclients >= CLIENTS_MAX) {
                        close(cfd); /* a scraper, not a crowd */
                        continue;
                }
                struct client *c = calloc(1, sizeof(*c));
                if (!c || loop_watch(p->loop, cfd, EPOLLIN, client_io, c, NULL) < 0) {
                        free(c);
                        close(cfd);
                        continue;
                }
                c->p = p;
                c->fd = cfd;
                c->deadline = loop_timer_new(p->loop, client_timeout, c);
                if (c->deadline)
                        loop_timer_arm_ms(c->deadline, REQUEST_TIMEOUT_MS);
                c->next = p->clients;
                p->clients = c;
                p->nclients++;
        }
}

int prometheus_open(struct loop *loop, const char *listen_addr, struct metrics *m, prometheus_health_fn health,
                    void *userdata, struct prometheus **ret, struct na_error *err)
{
        char host[256];
        const char *colon = strrchr(listen_addr, ':');
        if (!colon || (size_t)(colon - listen_addr) >= sizeof(host))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "prometheus_listen %s: expected ADDRESS:PORT", listen_addr);
        memcpy(host, listen_addr, (size_t)(colon - listen_addr));
        host[colon - listen_addr] = '\0';
        if (host[0] == '[') { /* [::1] */
                memmove(host, host + 1, strlen(host));
                host[strcspn(host, "]")] = '\0';
        }
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai = NULL;
        int gai = getaddrinfo(host, colon + 1, &hints, &ai);
        if (gai != 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "prometheus_listen %s: %s", listen_addr, gai_strerror(gai));
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd >= 0)
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
                int e = errno;
                freeaddrinfo(ai);
                if (fd >= 0)
                        close(fd);
                return na_error_sys(err, e, "prometheus_listen %s", listen_addr);
        }
        freeaddrinfo(ai);
        struct prometheus *p = calloc(1, sizeof(*p));
        if (!p) {
                close(fd);
                return na_error_sys(err, ENOMEM, "prometheus");
        }
        p->loop = loop;
        p->fd = fd;
        p->metrics = m;
        p->health = health;
        p->userdata = userdata;
        int r = loop_watch(loop, fd, EPOLLIN, listen_io, p, err);
        if (r < 0) {
                close(fd);
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void prometheus_close(struct prometheus *p)
{
        if (!p)
                return;
        while (p->clients)
                client_free(p->clients);
        loop_unwatch(p->loop, p->fd);
        close(p->fd);
        free(p);
}
