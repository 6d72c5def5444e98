/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Issue 20, hostname takeover at the router: a route is its app's. Against a real
 * haproxy on a loopback high port (77 when it is not installed): app A routes a
 * hostname; app B can neither replace nor remove it (INVALID_STATE naming A, nothing
 * changed in the handle, hosts.map or the running map); the owner survives a reopen
 * (hosts.map keeps it as "# app <owner>"); a route from before owners is taken by the
 * first app that sets it; A removes its own route. Before the fix
 * app_haproxy_set_route took any hostname for any app, and a remove by any app
 * removed it.
 */
#include <arpa/inet.h>
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

#define A "0b8f7c1e-1111-4aaa-8aaa-000000000001"
#define B "0b8f7c1e-2222-4bbb-8bbb-000000000002"
#define HOST "web.apps.example.com"

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

/* The running HAProxy's value for host ("" when it has none). */
static void running_value(struct app_haproxy *h, const char *host, char out[128])
{
        char cmd[600], *text = NULL;
        struct na_error err = NA_ERROR_INIT;
        snprintf(cmd, sizeof(cmd), "show map %s", h->map_path);
        assert_int_equal(app_haproxy_cli(h->sock_path, cmd, 5000, &text, &err), 0);
        out[0] = '\0';
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char ptr[32], key[256], value[128];
                if (sscanf(line, "%31s %255s %127s", ptr, key, value) == 3 && strcmp(key, host) == 0)
                        snprintf(out, 128, "%s", value);
        }
        free(text);
}

static void expect_route(struct app_haproxy *h, const char *value, const char *owner)
{
        struct app_haproxy_route *r = NULL;
        size_t n = 0;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_haproxy_list_routes(h, &r, &n, &err), 0);
        ssize_t i = app_haproxy_route_find(r, n, HOST);
        assert_true(i >= 0);
        char v[64], running[128];
        app_haproxy_route_value(&r[i], v);
        assert_string_equal(v, value);
        assert_string_equal(r[i].owner, owner);
        running_value(h, HOST, running);
        assert_string_equal(running, value);
        char *file = NULL;
        assert_int_equal(na_read_file(h->map_path, 1 << 20, &file, NULL, &err), 0);
        char *want = app_haproxy_render_map(r, n);
        assert_string_equal(file, want);
        free(want);
        free(file);
        free(r);
}

static void test_route_owner(void **state)
{
        (void)state;
        char dir[] = "/tmp/na-images-route-owner-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char listen[32];
        snprintf(listen, sizeof(listen), "127.0.0.1:%u", free_port());
        struct app_haproxy_options o = { .haproxy = "/usr/sbin/haproxy", .state_dir = dir, .http_listen = listen };
        struct na_error err = NA_ERROR_INIT;
        struct app_haproxy *h = NULL;
        assert_int_equal(app_haproxy_open(&o, &h, &err), 0);

        assert_int_equal(app_haproxy_set_owned_route(h, A, HOST, "10.88.0.2", 8080, &err), 0);
        expect_route(h, "10.88.0.2/8080", A);
        /* B takes nothing: not by setting, not by removing. */
        assert_int_equal(app_haproxy_set_owned_route(h, B, HOST, "10.88.0.3", 8080, &err), -EEXIST);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        assert_non_null(strstr(err.message, A));
        assert_string_equal(json_string_value(json_object_get(err.details, "owner")), A);
        na_error_clear(&err);
        assert_int_equal(app_haproxy_remove_owned_route(h, B, HOST, &err), -EPERM);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        expect_route(h, "10.88.0.2/8080", A);
        /* A moves its own route. */
        assert_int_equal(app_haproxy_set_owned_route(h, A, HOST, "10.88.0.2", 9090, &err), 0);
        expect_route(h, "10.88.0.2/9090", A);

        /* The owner outlives the handle: hosts.map says it. */
        app_haproxy_close(h);
        h = NULL;
        assert_int_equal(app_haproxy_open(&o, &h, &err), 0);
        expect_route(h, "10.88.0.2/9090", A);
        assert_int_equal(app_haproxy_set_owned_route(h, B, HOST, "10.88.0.3", 8080, &err), -EEXIST);
        na_error_clear(&err);

        /* A route without an owner (set before owners existed) is the first owner's. */
        assert_int_equal(app_haproxy_remove_owned_route(h, A, HOST, &err), 0);
        assert_int_equal(app_haproxy_set_route(h, HOST, "10.88.0.9", 80, &err), 0);
        expect_route(h, "10.88.0.9/80", "");
        assert_int_equal(app_haproxy_set_owned_route(h, B, HOST, "10.88.0.9", 80, &err), 0);
        expect_route(h, "10.88.0.9/80", B);
        assert_int_equal(app_haproxy_remove_owned_route(h, A, HOST, &err), -EPERM);
        na_error_clear(&err);
        assert_int_equal(app_haproxy_remove_owned_route(h, B, HOST, &err), 0);
        char running[128];
        running_value(h, HOST, running);
        assert_string_equal(running, "");

        assert_int_equal(app_haproxy_stop(h, &err), 0);
        app_haproxy_close(h);
        char *const argv[] = { (char *)"/bin/rm", (char *)"-rf", dir, NULL };
        assert_int_equal(na_spawn(argv, NULL, NULL, 0, &err), 0);
}

/* The map text: an owner line belongs to the next route only; a bad owner line is a comment. */
static void test_map_owner_lines(void **state)
{
        (void)state;
        struct app_haproxy_route *r = NULL;
        size_t n = 0;
        struct na_error err = NA_ERROR_INIT;
        const char *text = "# hostname ip/port\n# app " A "\nb.example.com 10.0.0.2/80\na.example.com 10.0.0.1/80\n"
                           "# app bad owner!\nc.example.com 10.0.0.3/80\n";
        assert_int_equal(app_haproxy_parse_map(text, &r, &n, &err), 0);
        assert_int_equal(n, 3);
        assert_string_equal(r[0].hostname, "a.example.com");
        assert_string_equal(r[0].owner, "");
        assert_string_equal(r[1].owner, A);
        assert_string_equal(r[2].owner, "");
        char *out = app_haproxy_render_map(r, n);
        assert_non_null(strstr(out, "# app " A "\nb.example.com 10.0.0.2/80\n"));
        struct app_haproxy_route *r2 = NULL;
        size_t n2 = 0;
        assert_int_equal(app_haproxy_parse_map(out, &r2, &n2, &err), 0);
        assert_int_equal(n2, 3);
        assert_memory_equal(r, r2, n * sizeof(*r));
        free(out);
        free(r);
        free(r2);
}

int main(void)
{
        const struct CMUnitTest units[] = { cmocka_unit_test(test_map_owner_lines) };
        int failed = cmocka_run_group_tests_name("map", units, NULL, NULL);
        if (access("/usr/sbin/haproxy", X_OK) < 0) {
                fprintf(stderr, "SKIP: /usr/sbin/haproxy is not installed\n");
                return failed ? 1 : 77;
        }
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_route_owner) };
        return failed | cmocka_run_group_tests_name("haproxy", tests, NULL, NULL);
}
