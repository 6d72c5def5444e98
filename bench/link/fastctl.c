/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A controller that keeps up, for the link benchmark only: one thread, epoll,
 * non-blocking OpenSSL, HTTP/1.1 keep-alive, just the agent API endpoints the
 * benchmark needs, every job a node.status. It hands out N jobs and prints, as one
 * JSON line, the round trip of each (sequential mode) or the throughput (parallel
 * mode), then exits. Mode win keeps MAXJOBS jobs in flight: a new one is offered as
 * soon as a result comes back (throughput and each job's round trip under load).
 * With FORM "exchange" the settings offer the exchange endpoint (AGENT-API 2.3) and
 * results ride on it; "posts" (the default) is the two-request form. Either way the
 * line counts the agent's job requests (polls, exchanges, result and progress posts).
 *
 *   fastctl PORT CERT KEY NODE_ID N MODE(seq|par|win) MAXJOBS [posts|exchange]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 256
#define BUFSZ (1 << 20)

struct conn {
        int fd;
        SSL *ssl;
        bool handshaken;
        char *in;
        size_t in_len;
        bool poll_waiting; /* a long poll held until a job is available */
        bool poll_exchange; /* the waiting poll is an exchange: its answer is an object */
        unsigned poll_max;
        char *taken;        /* the waiting exchange's "taken" list, "" when none */
};

static struct conn *conns[65536];
static int max_fd; /* the highest descriptor a connection has had */
static SSL_CTX *ctx;
static int epfd;
static const char *node_id;
static long n_jobs, offered, done, max_in_flight;
static bool sequential, windowed; /* seq: one job at a time; win: MAXJOBS in flight */
static bool exchange_form;
static long job_requests;
static long x_count[2][2][2]; /* [wait][carried results][jobs given] (FASTCTL_DEBUG) */
static unsigned max_jobs;
static double *offer_at, *result_at, first_offer, last_result;

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void conn_close(struct conn *c)
{
        epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        SSL_free(c->ssl);
        free(c->taken);
        close(c->fd);
        conns[c->fd] = NULL;
        free(c->in);
        free(c);
}

static void send_all(struct conn *c, const char *data, size_t len)
{
        while (len > 0) {
                int n = SSL_write(c->ssl, data, (int)len);
                if (n <= 0) {
                        int e = SSL_get_error(c->ssl, n);
                        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
                                continue; /* loopback: the peer drains quickly */
                        return;
                }
                data += n;
                len -= (size_t)n;
        }
}

static void respond(struct conn *c, const char *body)
{
        char head[256];
        size_t blen = strlen(body);
        int h = snprintf(head, sizeof(head),
                         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", blen);
        char *msg = malloc((size_t)h + blen);
        memcpy(msg, head, (size_t)h);
        memcpy(msg + h, body, blen);
        send_all(c, msg, (size_t)h + blen);
        free(msg);
}

static bool answer_poll(struct conn *c, bool now_anyway)
{
        long avail = n_jobs - offered;
        if (sequential && offered > done)
                avail = 0; /* one at a time: the next only when the last is back */
        if (windowed && avail > (long)max_jobs - (offered - done))
                avail = (long)max_jobs - (offered - done); /* a window of MAXJOBS in flight */
        if (avail < 0)
                avail = 0;
        long give = avail < (long)c->poll_max ? avail : (long)c->poll_max;
        if (sequential && give > 1)
                give = 1;
        if (give == 0 && !now_anyway)
                return false;
        size_t cap = 256 + (size_t)give * 400 + (c->taken ? strlen(c->taken) : 0);
        char *body = malloc(cap);
        size_t len = (size_t)snprintf(body, cap, "{\"success\":true,\"message\":\"\",\"data\":%s",
                                      c->poll_exchange ? "{\"jobs\":[" : "[");
        double t = now();
        for (long i = 0; i < give; i++) {
                long k = offered++;
                offer_at[k] = t;
                if (offered - done > max_in_flight)
                        max_in_flight = offered - done;
                if (k == 0)
                        first_offer = t;
                len += (size_t)snprintf(body + len, cap - len,
                                        "%s{\"id\":\"00000000-0000-4000-8000-%012lx\",\"kind\":\"node.status\",\"attempt\":1,"
                                        "\"target\":{\"type\":\"node\",\"id\":\"%s\"},\"params\":{},"
                                        "\"createdAt\":\"2026-11-21T10:00:00Z\",\"timeoutSec\":600}",
                                        i ? "," : "", k, node_id);
        }
        if (c->poll_exchange)
                snprintf(body + len, cap - len, "],\"taken\":[%s],\"lost\":[],\"leases\":[]}}", c->taken ? c->taken : "");
        else
                snprintf(body + len, cap - len, "]}");
        c->poll_waiting = false;
        respond(c, body);
        free(body);
        return true;
}

static void wake_polls(void)
{
        for (int fd = 0; fd <= max_fd; fd++)
                if (conns[fd] && conns[fd]->poll_waiting && !answer_poll(conns[fd], false))
                        break;
}

/* A result for the job whose id ends in k (hex). */
static void take_result(const char *id)
{
        long k = strtol(id + 24, NULL, 16);
        if (k >= 0 && k < n_jobs && result_at[k] == 0) {
                result_at[k] = last_result = now();
                done++;
        }
}

/* An exchange: the results of its body are recorded first, then it is answered like a poll. */
static void handle_exchange(struct conn *c, const char *path, const char *body)
{
        const char *m = strstr(path, "max="), *w = strstr(path, "wait=");
        c->poll_max = m ? (unsigned)atoi(m + 4) : 1;
        bool wait = !w || atoi(w + 5) > 0;
        const char *progress = strstr(body, "\"progress\":");
        size_t cap = 64, len = 0;
        free(c->taken);
        c->taken = malloc(cap);
        c->taken[0] = '\0';
        for (const char *p = body; (p = strstr(p, "\"jobId\":\"")) && (!progress || p < progress); p += 9) {
                const char *id = p + 9;
                take_result(id);
                if (len + 48 > cap)
                        c->taken = realloc(c->taken, cap *= 2);
                len += (size_t)snprintf(c->taken + len, cap - len, "%s\"%.36s\"", len ? "," : "", id);
        }
        c->poll_exchange = true;
        c->poll_waiting = true;
        long before = offered;
        if (!answer_poll(c, !wait) && !wait)
                c->poll_waiting = false;
        x_count[wait][len > 0][offered > before]++;
        if (len && (sequential || windowed))
                wake_polls();
}

static void handle(struct conn *c, const char *method, const char *path, const char *body)
{
        if (!strstr(path, "/hello") && !strstr(path, "/reports"))
                job_requests++;
        if (strstr(path, "/hello")) {
                char settings[256];
                snprintf(settings, sizeof(settings),
                         "{\"success\":true,\"message\":\"\",\"data\":{\"pollWaitSec\":30,\"maxJobs\":%u,\"leaseSec\":60,"
                         "\"reportIntervalSec\":3600%s}}",
                         max_jobs, exchange_form ? ",\"exchange\":true" : "");
                respond(c, settings);
        } else if (strstr(path, "/exchange?")) {
                handle_exchange(c, path, body);
        } else if (strstr(path, "/jobs?")) {
                const char *m = strstr(path, "max=");
                c->poll_max = m ? (unsigned)atoi(m + 4) : 1;
                c->poll_exchange = false;
                c->poll_waiting = true;
                answer_poll(c, false);
        } else if (strstr(path, "/result")) {
                take_result(strstr(path, "/jobs/") + 6);
                respond(c, "{\"success\":true,\"message\":\"\",\"data\":{}}");
                if (sequential || windowed)
                        wake_polls();
        } else if (strstr(path, "/progress"))
                respond(c, "{\"success\":true,\"message\":\"\",\"data\":{\"leaseExpiresAt\":\"2030-01-01T00:00:00Z\"}}");
        else if (strstr(path, "/reports"))
                respond(c, "{\"success\":true,\"message\":\"\",\"data\":{\"ackSeq\":1000000}}");
        else
                respond(c, "{\"success\":true,\"message\":\"\",\"data\":null}");
        (void)method;
}

/* Parse as many complete requests as the buffer holds. */
static void parse(struct conn *c)
{
        for (;;) {
                c->in[c->in_len] = '\0';
                char *end = strstr(c->in, "\r\n\r\n");
                if (!end)
                        return;
                size_t head = (size_t)(end - c->in) + 4, clen = 0;
                char *cl = strcasestr(c->in, "content-length:");
                if (cl && cl < end)
                        clen = (size_t)atol(cl + 15);
                if (c->in_len < head + clen)
                        return;
                char method[8] = "", path[512] = "";
                sscanf(c->in, "%7s %511s", method, path);
                char saved = c->in[head + clen];
                c->in[head + clen] = '\0';
                handle(c, method, path, c->in + head);
                c->in[head + clen] = saved;
                memmove(c->in, c->in + head + clen, c->in_len - head - clen);
                c->in_len -= head + clen;
        }
}

static void on_readable(struct conn *c)
{
        if (!c->handshaken) {
                int r = SSL_accept(c->ssl);
                if (r <= 0) {
                        int e = SSL_get_error(c->ssl, r);
                        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                                conn_close(c);
                        return;
                }
                c->handshaken = true;
        }
        for (;;) {
                int n = SSL_read(c->ssl, c->in + c->in_len, (int)(BUFSZ - 1 - c->in_len));
                if (n <= 0) {
                        int e = SSL_get_error(c->ssl, n);
                        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                                conn_close(c);
                        return;
                }
                c->in_len += (size_t)n;
                parse(c);
        }
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        if (argc != 8 && argc != 9) {
                fprintf(stderr, "usage: fastctl PORT CERT KEY NODE_ID N seq|par|win MAXJOBS [posts|exchange]\n");
                return 2;
        }
        exchange_form = argc == 9 && strcmp(argv[8], "exchange") == 0;
        int port = atoi(argv[1]);
        node_id = argv[4];
        n_jobs = atol(argv[5]);
        sequential = strcmp(argv[6], "seq") == 0;
        windowed = strcmp(argv[6], "win") == 0;
        max_jobs = (unsigned)atoi(argv[7]);
        offer_at = calloc((size_t)n_jobs, sizeof(double));
        result_at = calloc((size_t)n_jobs, sizeof(double));

        ctx = SSL_CTX_new(TLS_server_method());
        if (SSL_CTX_use_certificate_chain_file(ctx, argv[2]) != 1 || SSL_CTX_use_PrivateKey_file(ctx, argv[3], SSL_FILETYPE_PEM) != 1) {
                ERR_print_errors_fp(stderr);
                return 1;
        }
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0) {
                perror("fastctl: listen");
                return 1;
        }
        epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
        epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
        printf("{\"listening\":%d}\n", port);
        fflush(stdout);

        while (done < n_jobs) {
                struct epoll_event evs[64];
                int n = epoll_wait(epfd, evs, 64, 1000);
                for (int i = 0; i < n; i++) {
                        int fd = evs[i].data.fd;
                        if (fd == lfd) {
                                int cfd;
                                while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                                        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                                        struct conn *c = calloc(1, sizeof(*c));
                                        c->fd = cfd;
                                        c->in = malloc(BUFSZ);
                                        c->ssl = SSL_new(ctx);
                                        SSL_set_fd(c->ssl, cfd);
                                        conns[cfd] = c;
                                        if (cfd > max_fd)
                                                max_fd = cfd;
                                        struct epoll_event cev = { .events = EPOLLIN, .data.fd = cfd };
                                        epoll_ctl(epfd, EPOLL_CTL_ADD, cfd, &cev);
                                }
                        } else if (conns[fd])
                                on_readable(conns[fd]);
                }
        }
        double *lat = calloc((size_t)n_jobs, sizeof(double));
        for (long k = 0; k < n_jobs; k++)
                lat[k] = (result_at[k] - offer_at[k]) * 1000;
        double sum = 0;
        for (long k = 0; k < n_jobs; k++)
                sum += lat[k];
        qsort(lat, (size_t)n_jobs, sizeof(double), cmp);
        printf("{\"jobs\":%ld,\"seconds\":%.6f,\"jobsPerSec\":%.1f,\"p50Ms\":%.3f,\"p99Ms\":%.3f,\"meanMs\":%.3f,"
               "\"maxInFlight\":%ld,\"requests\":%ld,\"requestsPerJob\":%.4f}\n",
               n_jobs, last_result - first_offer, n_jobs / (last_result - first_offer), lat[n_jobs / 2],
               lat[(long)((n_jobs - 1) * 0.99)], sum / (double)n_jobs, max_in_flight, job_requests,
               (double)job_requests / (double)n_jobs);
        if (getenv("FASTCTL_DEBUG"))
                for (int w = 0; w < 2; w++)
                        for (int r = 0; r < 2; r++)
                                for (int g = 0; g < 2; g++)
                                        fprintf(stderr, "exchanges wait=%d results=%d jobs=%d: %ld\n", w, r, g, x_count[w][r][g]);
        fflush(stdout); /* before anything at exit (a sanitizer's report) could end the process */
        for (int fd = 0; fd < 65536; fd++)
                if (conns[fd])
                        conn_close(conns[fd]);
        close(lfd);
        close(epfd);
        SSL_CTX_free(ctx);
        free(lat);
        free(offer_at);
        free(result_at);
        return 0;
}
