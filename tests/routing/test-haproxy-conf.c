/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The HAProxy router's pure parts: names and addresses, listen strings, the map file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "routing/app-haproxy-internal.h"

static void test_hostnames(void **state)
{
        (void)state;
        const char *good[] = { "a", "example.com", "play.example.com", "x-1.y2.example", "0.example.com" };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                assert_true(app_haproxy_hostname_valid(good[i]));
        char long_label[80], long_name[300];
        memset(long_label, 'a', 64);
        strcpy(long_label + 64, ".com");
        memset(long_name, 0, sizeof(long_name));
        for (int i = 0; i < 127; i++)
                strcat(long_name, "a.");
        strcat(long_name, "co"); /* 256 bytes */
        const char *bad[] = { "", "Example.com", "a..b", ".a", "a.", "-a.com", "a-.com", "a b.com", "a_b.com",
                              "*.example.com", "a\nb", "a/b", "é.com", long_label, long_name };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_false(app_haproxy_hostname_valid(bad[i]));
        assert_false(app_haproxy_hostname_valid(NULL));
        long_label[63] = '\0';
        assert_true(app_haproxy_hostname_valid(long_label));
}

static void test_addresses(void **state)
{
        (void)state;
        char ip[46];
        unsigned port;
        assert_true(app_haproxy_ip_canonical("10.88.0.5", ip));
        assert_string_equal(ip, "10.88.0.5");
        assert_true(app_haproxy_ip_canonical("FD00:0:0::5", ip));
        assert_string_equal(ip, "fd00::5");
        assert_false(app_haproxy_ip_canonical("10.88.0.5 x", ip));
        assert_false(app_haproxy_ip_canonical("10.88.0", ip));
        assert_false(app_haproxy_ip_canonical("host", ip));
        assert_int_equal(app_haproxy_parse_listen("0.0.0.0:80", ip, &port), 0);
        assert_string_equal(ip, "0.0.0.0");
        assert_int_equal(port, 80);
        assert_int_equal(app_haproxy_parse_listen("[::]:443", ip, &port), 0);
        assert_string_equal(ip, "::");
        assert_int_equal(port, 443);
        const char *bad[] = { "0.0.0.0", ":80", "0.0.0.0:0", "0.0.0.0:65536", "0.0.0.0:8a", "::1:80", "[::1:80",
                              "host:80", "0.0.0.0:" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(app_haproxy_parse_listen(bad[i], ip, &port), -EINVAL);
        assert_true(app_haproxy_path_safe("/var/lib/nodeagent"));
        assert_false(app_haproxy_path_safe("/var/lib/node agent"));
        assert_false(app_haproxy_path_safe("var/lib"));
        assert_false(app_haproxy_path_safe("/var/lib\n"));
        assert_true(app_haproxy_user_valid("haproxy"));
        assert_true(app_haproxy_user_valid("_ha-1"));
        assert_false(app_haproxy_user_valid("HAProxy"));
        assert_false(app_haproxy_user_valid("ha proxy"));
        assert_false(app_haproxy_user_valid("1ha"));
        assert_false(app_haproxy_user_valid(""));
}

static void test_map_roundtrip(void **state)
{
        (void)state;
        struct app_haproxy_route *r = NULL;
        size_t n = 0;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_haproxy_parse_map("# c\n\nb.example.com 10.0.0.2/80\na.example.com fd00::5/8443\n", &r, &n,
                                               &err),
                         0);
        assert_int_equal(n, 2);
        assert_string_equal(r[0].hostname, "a.example.com");
        assert_string_equal(r[0].ip, "fd00::5");
        assert_int_equal(r[0].port, 8443);
        assert_int_equal(app_haproxy_route_find(r, n, "b.example.com"), 1);
        assert_int_equal(app_haproxy_route_find(r, n, "c.example.com"), -3);
        assert_int_equal(app_haproxy_route_find(r, n, "0.example.com"), -1);
        char *text = app_haproxy_render_map(r, n);
        assert_non_null(text);
        assert_non_null(strstr(text, "\na.example.com fd00::5/8443\nb.example.com 10.0.0.2/80\n"));
        struct app_haproxy_route *r2 = NULL;
        size_t n2 = 0;
        assert_int_equal(app_haproxy_parse_map(text, &r2, &n2, &err), 0);
        assert_int_equal(n2, 2);
        assert_memory_equal(r, r2, n * sizeof(*r));
        free(text);
        free(r);
        free(r2);

        const char *bad[] = { "a.example.com 10.0.0.2\n", "a.example.com 10.0.0.2/0\n", "A.example.com 10.0.0.2/80\n",
                              "a.example.com 10.0.0.2/80 x\n", "a.example.com host/80\n", "a.example.com 10.0.0.2/8x\n",
                              "a.example.com 1.2.3.4/80\na.example.com 1.2.3.5/80\n", "a.example.com 10.0.0.2/\n" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                r = NULL;
                assert_int_equal(app_haproxy_parse_map(bad[i], &r, &n, &err), -EINVAL);
                assert_non_null(strstr(err.message, "map"));
                na_error_clear(&err);
        }
}

static void test_config(void **state)
{
        (void)state;
        struct app_haproxy h = { .map_path = (char *)"/s/haproxy/hosts.map", .sock_path = (char *)"/s/haproxy/stats.sock",
                                 .http_listen = (char *)"0.0.0.0:80", .tls_listen = (char *)"[::]:443" };
        char *c = app_haproxy_render_config(&h);
        assert_non_null(c);
        assert_non_null(strstr(c, "stats socket /s/haproxy/stats.sock mode 600 level admin\n"));
        assert_non_null(strstr(c, "    bind 0.0.0.0:80\n"));
        assert_non_null(strstr(c, "    bind ipv6@:::443\n"));
        assert_non_null(strstr(c, "req.hdr(host),field(1,:),lower,regsub(\\\\.$,),map(/s/haproxy/hosts.map)"));
        assert_non_null(strstr(c, "req.ssl_sni,lower,map(/s/haproxy/hosts.map)"));
        assert_non_null(strstr(c, "server route 0.0.0.0:0"));
        assert_null(strstr(c, "    user "));
        free(c);
        h.run_as = (char *)"haproxy";
        h.empty_dir = (char *)"/s/haproxy/empty";
        c = app_haproxy_render_config(&h);
        assert_non_null(strstr(c, "    user haproxy\n    group haproxy\n    chroot /s/haproxy/empty\n"));
        free(c);
        h.tls_listen = (char *)"";
        c = app_haproxy_render_config(&h);
        assert_null(strstr(c, "frontend tls"));
        assert_non_null(strstr(c, "frontend http"));
        free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hostnames),
                cmocka_unit_test(test_addresses),
                cmocka_unit_test(test_map_roundtrip),
                cmocka_unit_test(test_config),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
