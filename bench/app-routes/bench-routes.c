/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Benchmark of issue 12 item 7 (first half): the time to apply one route change
 * through the HAProxy router (routing/app-haproxy.h: map file + runtime API) with
 * N routes present, while a load thread sends R requests/s through HAProxy to a
 * routed backend on loopback (a new connection each, so every failure is counted),
 * printed beside the named peer: the same change made by rewriting the map file and
 * reloading the master (its CLI's "reload": new workers; what an operator
 * without the runtime API does).
 *
 *   bench-routes [--routes 1000] [--changes 200] [--peer-changes 20] [--rate 1000]
 *
 * The backend is a second haproxy answering 200 itself. Targets: <= 5 ms per change,
 * no request dropped. Asserts nothing (exit 0 unless setting up fails).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "common/fileio.h"
#include "routing/app-haproxy-internal.h"

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_until(double t)
{
        double d = t - now_ms();
        if (d <= 0)
                return;
        struct timespec ts = { (time_t)(d / 1e3), (long)(fmod(d, 1e3) * 1e6) };
        nanosleep(&ts, NULL);
}

static unsigned free_port(const char *ip)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET };
        inet_pton(AF_INET, ip, &sa.sin_addr);
        socklen_t l = sizeof(sa);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || getsockname(fd, (struct sockaddr *)&sa, &l) < 0) {
                perror("bind");
                exit(1);
        }
        close(fd);
        return ntohs(sa.sin_port);
}

/* ---- load: one request per new connection, paced ---- */

struct load {
        unsigned port, rate;
        atomic_bool stop;
        atomic_ulong ok, failed;
        pthread_t th;
        bool started;
};

static bool one_request(unsigned port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        struct timeval tv = { 5, 0 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        bool ok = false;
        static const char req[] = "GET / HTTP/1.1\r\nHost: load.example.com\r\nConnection: close\r\n\r\n";
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) > 0) {
                char buf[512];
                size_t have = 0;
                ssize_t k;
                while (have < sizeof(buf) - 1 && (k = recv(fd, buf + have, sizeof(buf) - 1 - have, 0)) > 0)
                        have += (size_t)k;
                buf[have] = '\0';
                ok = strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "backend-ok");
        }
        close(fd);
        return ok;
}

static void *load_main(void *arg)
{
        struct load *l = arg;
        double t = now_ms(), step = 1000.0 / l->rate;
        while (!atomic_load(&l->stop)) {
                if (one_request(l->port))
                        atomic_fetch_add(&l->ok, 1);
                else
                        atomic_fetch_add(&l->failed, 1);
                t += step;
                if (t < now_ms() - 100)
                        t = now_ms(); /* fell behind by more than 100 ms: do not burst */
                sleep_until(t);
        }
        return NULL;
}

/* ---- figures ---- */

static int cmp_d(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void print_row(const char *what, double *v, size_t n, unsigned long ok, unsigned long failed, double secs)
{
        qsort(v, n, sizeof(*v), cmp_d);
        printf("  %-44s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms", what, v[n / 2], v[(size_t)((n - 1) * 0.99)], v[n - 1]);
        if (ok + failed)
                printf("   requests: %lu ok, %lu failed (%.0f/s)", ok, failed, (ok + failed) / secs);
        printf("\n");
}

static pid_t spawn_backend(const char *dir, const char *ip, unsigned port)
{
        char cfg[4096], path[512];
        snprintf(cfg, sizeof(cfg),
                 "global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n"
                 "    timeout server 10s\nfrontend backend\n    bind %s:%u\n"
                 "    http-request return status 200 content-type text/plain string \"backend-ok\\n\"\n",
                 ip, port);
        snprintf(path, sizeof(path), "%s/backend.cfg", dir);
        struct na_error err = NA_ERROR_INIT;
        if (na_atomic_write(path, cfg, strlen(cfg), 0600, &err) < 0) {
                fprintf(stderr, "%s\n", err.message);
                exit(1);
        }
        char *argv[] = { (char *)"/usr/sbin/haproxy", (char *)"-q", (char *)"-f", path, NULL };
        pid_t pid;
        if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
                perror("haproxy");
                exit(1);
        }
        return pid;
}

static double *bench_v;

static int wait_new_worker(struct app_haproxy *h, int old, struct na_error *err)
{
        for (int w = 0; w < 2000; w++) {
                char *out = NULL;
                struct na_error e = NA_ERROR_INIT;
                if (app_haproxy_cli(h->sock_path, "show info", 1000, &out, &e) == 0) {
                        const char *pp = strstr(out, "\nPid: ");
                        int now = pp ? atoi(pp + 6) : 0;
                        free(out);
                        if (now && now != old)
                                return 0;
                }
                na_error_clear(&e);
                sleep_until(now_ms() + 2);
        }
        return na_error_set(err, ETIMEDOUT, NA_E_INTERNAL, "reload: no new worker within 4 s");
}

static int run(struct app_haproxy *h, struct load *l, unsigned routes, unsigned changes, unsigned peer_changes,
               unsigned rate, unsigned backend_port, unsigned http_port, struct na_error *err)
{
        /* N routes (their adding timed too), and the load's own. */
        double t0 = now_ms();
        for (unsigned i = 0; i < routes; i++) {
                char host[64];
                snprintf(host, sizeof(host), "bench-%u.example.com", i);
                if (app_haproxy_set_route(h, host, "127.0.0.3", 10000 + i % 50000, err) < 0)
                        return -1;
        }
        double add_ms = now_ms() - t0;
        if (app_haproxy_set_route(h, "load.example.com", "127.0.0.2", backend_port, err) < 0)
                return -1;
        for (int i = 0; i < 100 && !one_request(http_port); i++)
                sleep_until(now_ms() + 20);

        pthread_create(&l->th, NULL, load_main, l);
        l->started = true;
        sleep_until(now_ms() + 300); /* the load settles */

        /* Runtime API: each change moves one route to another port. */
        double *v = bench_v = calloc(changes > peer_changes ? changes : peer_changes, sizeof(double));
        if (!v)
                return na_error_sys(err, ENOMEM, "bench");
        unsigned long ok0 = atomic_load(&l->ok), failed0 = atomic_load(&l->failed);
        double p0 = now_ms();
        for (unsigned i = 0; i < changes; i++) {
                char host[64];
                snprintf(host, sizeof(host), "bench-%u.example.com", (i * 7919u) % routes);
                double t = now_ms();
                if (app_haproxy_set_route(h, host, "127.0.0.3", 20000 + i, err) < 0)
                        return -1;
                v[i] = now_ms() - t;
                sleep_until(t + 10); /* at most one change every 10 ms */
        }
        sleep_until(now_ms() + 200);
        double p1 = now_ms();
        unsigned long ok1 = atomic_load(&l->ok), failed1 = atomic_load(&l->failed);
        printf("route change with %u routes present, under %u requests/s (a new connection each) to a routed backend:\n",
               routes + 1, rate);
        print_row("runtime API (app_haproxy_set_route)", v, changes, ok1 - ok0, failed1 - failed0, (p1 - p0) / 1e3);

        /* Where the time goes: the two halves of a change, each alone. */
        struct app_haproxy_route *r = NULL;
        size_t n = 0;
        if (app_haproxy_list_routes(h, &r, &n, err) < 0)
                return -1;
        char *text = app_haproxy_render_map(r, n);
        char *scratch = na_strdupf("%s.scratch", h->map_path);
        for (unsigned i = 0; text && scratch && i < changes; i++) {
                double t = now_ms();
                if (na_atomic_write(scratch, text, strlen(text), 0600, err) < 0)
                        break;
                v[i] = now_ms() - t;
        }
        if (text && scratch && !na_error_is_set(err))
                print_row("  of which the map file (temp+fsync+rename)", v, changes, 0, 0, 1);
        free(text);
        free(scratch);
        for (unsigned i = 0; i < changes && !na_error_is_set(err); i++) {
                char *cmd = na_strdupf("set map %s bench-%u.example.com 127.0.0.3/%u", h->map_path, (i * 7919u) % routes,
                                       20000 + i);
                char *out = NULL;
                double t = now_ms();
                if (cmd && app_haproxy_cli(h->sock_path, cmd, 5000, &out, err) == 0)
                        v[i] = now_ms() - t;
                free(cmd);
                free(out);
        }
        if (na_error_is_set(err)) {
                free(r);
                return -1;
        }
        print_row("  of which the runtime API call (set map)", v, changes, 0, 0, 1);

        /* Peer: rewrite hosts.map, reload the master, wait until a new worker answers. */
        unsigned long ok1b = atomic_load(&l->ok), failed1b = atomic_load(&l->failed);
        ok1 = ok1b;
        failed1 = failed1b;
        double q0 = now_ms();
        for (unsigned i = 0; i < peer_changes; i++) {
                double t = now_ms();
                r[(i * 7919u) % n].port = 30000 + i;
                char *map = app_haproxy_render_map(r, n);
                char *out = NULL;
                int k = map ? na_atomic_write(h->map_path, map, strlen(map), 0600, err) : -ENOMEM;
                free(map);
                if (k < 0 || app_haproxy_cli(h->sock_path, "show info", 5000, &out, err) < 0) {
                        free(r);
                        return -1;
                }
                const char *pp = strstr(out, "\nPid: ");
                int old = pp ? atoi(pp + 6) : 0;
                free(out);
                if (app_haproxy_master_reload(h, err) < 0 || wait_new_worker(h, old, err) < 0) {
                        free(r);
                        return -1;
                }
                v[i] = now_ms() - t;
                sleep_until(t + 100);
        }
        free(r);
        sleep_until(now_ms() + 200);
        double q1 = now_ms();
        unsigned long ok2 = atomic_load(&l->ok), failed2 = atomic_load(&l->failed);
        if (peer_changes)
                print_row("peer: map file rewrite + reload (master CLI)", v, peer_changes, ok2 - ok1, failed2 - failed1,
                          (q1 - q0) / 1e3);
        printf("  adding the %u routes one by one took %.0f ms (%.2f ms each)\n", routes, add_ms,
               routes ? add_ms / routes : 0);
        return 0;
}

int main(int argc, char **argv)
{
        unsigned routes = 1000, changes = 200, peer_changes = 20, rate = 1000;
        static const struct option opts[] = { { "routes", 1, NULL, 'n' }, { "changes", 1, NULL, 'c' },
                                              { "peer-changes", 1, NULL, 'p' }, { "rate", 1, NULL, 'r' }, { 0 } };
        for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
                unsigned v = (unsigned)strtoul(optarg, NULL, 10);
                if (c == 'n')
                        routes = v;
                else if (c == 'c')
                        changes = v;
                else if (c == 'p')
                        peer_changes = v;
                else if (c == 'r')
                        rate = v ? v : 1;
                else
                        return 2;
        }
        if (access("/usr/sbin/haproxy", X_OK) < 0) {
                fprintf(stderr, "bench-routes: /usr/sbin/haproxy is not installed\n");
                return 77;
        }
        char dir[] = "/tmp/na-bench-routes-XXXXXX";
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        unsigned backend_port = free_port("127.0.0.2"), http_port = free_port("127.0.0.1");
        pid_t backend = spawn_backend(dir, "127.0.0.2", backend_port);
        char http_listen[64];
        snprintf(http_listen, sizeof(http_listen), "127.0.0.1:%u", http_port);
        struct app_haproxy_options o = { .haproxy = "/usr/sbin/haproxy", .state_dir = dir, .http_listen = http_listen };
        struct na_error err = NA_ERROR_INIT;
        struct app_haproxy *h = NULL;
        int rc = 1;
        struct load l = { .port = http_port, .rate = rate };
        if (app_haproxy_open(&o, &h, &err) == 0 &&
            run(h, &l, routes, changes, peer_changes, rate, backend_port, http_port, &err) == 0)
                rc = 0;
        if (l.started) {
                atomic_store(&l.stop, true);
                pthread_join(l.th, NULL);
        }
        free(bench_v);
        if (rc)
                fprintf(stderr, "bench-routes: %s\n", err.message);
        na_error_clear(&err);
        if (h) {
                app_haproxy_stop(h, &err);
                app_haproxy_close(h);
        }
        kill(backend, SIGTERM);
        waitpid(backend, NULL, 0);
        char *rm[] = { (char *)"/bin/rm", (char *)"-rf", dir, NULL };
        pid_t p;
        if (posix_spawn(&p, rm[0], NULL, NULL, rm, environ) == 0)
                waitpid(p, NULL, 0);
        return rc;
}
