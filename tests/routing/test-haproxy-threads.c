/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The HAProxy router from several threads on one handle (its one lock): 4 threads
 * each set, move and remove routes, some hostnames shared between them; at the end the
 * handle's list, hosts.map and the running HAProxy's map (runtime API "show map") are
 * the same set. Real haproxy on a loopback high port; 77 when it is not installed.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "common/fileio.h"
#include "common/spawn.h"
#include "routing/app-haproxy-internal.h"

#define THREADS 4
#define OPS 60

static struct app_haproxy *h;

static void *worker(void *arg)
{
        unsigned t = (unsigned)(uintptr_t)arg;
        for (unsigned i = 0; i < OPS; i++) {
                struct na_error err = NA_ERROR_INIT;
                char host[64];
                /* hosts 0..19 are shared by every thread, the others are the thread's own */
                unsigned k = (i * 7 + t) % 40;
                snprintf(host, sizeof(host), k < 20 ? "shared-%u.example.com" : "t%u-%u.example.com", k < 20 ? k : t, k);
                int r = (i % 5 == 4) ? app_haproxy_remove_route(h, host, &err)
                                     : app_haproxy_set_route(h, host, "127.0.0.2", 1000 + t * 100 + i, &err);
                if (r < 0) {
                        fprintf(stderr, "thread %u: %s\n", t, err.message);
                        na_error_clear(&err);
                        return (void *)1;
                }
        }
        return NULL;
}

static unsigned free_port(void)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(sa);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &l), 0);
        close(fd);
        return ntohs(sa.sin_port);
}

static void test_threads(void **state)
{
        (void)state;
        char dir[] = "/tmp/na-haproxy-threads-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char listen[32];
        snprintf(listen, sizeof(listen), "127.0.0.1:%u", free_port());
        struct app_haproxy_options o = { .haproxy = "/usr/sbin/haproxy", .state_dir = dir, .http_listen = listen };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_haproxy_open(&o, &h, &err), 0);

        pthread_t th[THREADS];
        for (unsigned t = 0; t < THREADS; t++)
                pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
        for (unsigned t = 0; t < THREADS; t++) {
                void *ret;
                pthread_join(th[t], &ret);
                assert_null(ret);
        }

        /* The handle, the file and the running map agree. */
        struct app_haproxy_route *r = NULL;
        size_t n = 0;
        assert_int_equal(app_haproxy_list_routes(h, &r, &n, &err), 0);
        assert_true(n > 20);
        char *text = NULL;
        assert_int_equal(na_read_file(h->map_path, 1 << 20, &text, NULL, &err), 0);
        char *want = app_haproxy_render_map(r, n);
        assert_string_equal(text, want);
        char cmd[600], *out = NULL;
        snprintf(cmd, sizeof(cmd), "show map %s", h->map_path);
        assert_int_equal(app_haproxy_cli(h->sock_path, cmd, 5000, &out, &err), 0);
        size_t lines = 0;
        for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char ptr[32], key[256], value[128], v[64];
                assert_int_equal(sscanf(line, "%31s %255s %127s", ptr, key, value), 3);
                ssize_t i = app_haproxy_route_find(r, n, key);
                assert_true(i >= 0);
                app_haproxy_route_value(&r[i], v);
                assert_string_equal(value, v);
                lines++;
        }
        assert_int_equal(lines, n);
        free(out);
        free(want);
        free(text);
        free(r);

        assert_int_equal(app_haproxy_stop(h, &err), 0);
        app_haproxy_close(h);
        char *const argv[] = { (char *)"/bin/rm", (char *)"-rf", dir, NULL };
        assert_int_equal(na_spawn(argv, NULL, NULL, 0, &err), 0);
}

int main(void)
{
        if (access("/usr/sbin/haproxy", X_OK) < 0) {
                fprintf(stderr, "SKIP: /usr/sbin/haproxy is not installed\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_threads),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
