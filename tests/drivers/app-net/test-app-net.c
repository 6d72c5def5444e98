/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Units of the app network code (drivers/app/net/app-net*.c, proto/app-exposure.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/app/net/app-net-internal.h"
#include "tests/firewall/fw-test.h"
#include "proto/app-exposure.h"

#define G1 "0b9e7a52-8c1f-4d3e-9a4b-5c6d7e8f9a0b"
#define G2 "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"

static uint32_t ip(const char *s)
{
        uint32_t a = 0;
        assert_int_equal(app_net_addr_parse(s, &a), 0);
        return a;
}

static void test_range(void **state)
{
        (void)state;
        struct app_net_range r;
        const char *why = NULL;
        assert_int_equal(app_net_range_parse("10.88.0.0/16", &r, &why), 0);
        assert_int_equal(r.base, ip("10.88.0.0"));
        assert_int_equal(r.size, 65536);
        assert_int_equal(app_net_gateway(&r), ip("10.88.0.1"));
        assert_true(app_net_range_parse("10.88.0.1/16", &r, &why) < 0);
        assert_string_equal(why, "must not have host bits set");
        assert_true(app_net_range_parse("10.88.0.0/31", &r, &why) < 0);
        assert_true(app_net_range_parse("10.88.0.0", &r, &why) < 0);
        assert_true(app_net_range_parse("10.88.0.0/x", &r, &why) < 0);
        assert_true(app_net_range_parse("example/16", &r, &why) < 0);
        uint16_t lo, hi;
        assert_int_equal(app_net_ports_parse("20000-40000", &lo, &hi), 0);
        assert_int_equal(lo, 20000);
        assert_int_equal(hi, 40000);
        assert_true(app_net_ports_parse("40000-20000", &lo, &hi) < 0);
        assert_true(app_net_ports_parse("0-10", &lo, &hi) < 0);
        assert_true(app_net_ports_parse("1-70000", &lo, &hi) < 0);
}

static void test_allocator(void **state)
{
        (void)state;
        struct app_net_range r;
        const char *why;
        assert_int_equal(app_net_range_parse("10.88.0.0/29", &r, &why), 0); /* .2 .. .6 for apps */
        uint32_t a = 0, taken[8];
        assert_int_equal(app_net_addr_pick(&r, NULL, 0, &a), 0);
        assert_int_equal(a, ip("10.88.0.2")); /* .0 network, .1 the node */
        taken[0] = ip("10.88.0.2");
        taken[1] = ip("10.88.0.4");
        assert_int_equal(app_net_addr_pick(&r, taken, 2, &a), 0);
        assert_int_equal(a, ip("10.88.0.3")); /* the lowest free one */
        taken[2] = ip("10.88.0.3");
        taken[3] = ip("10.88.0.6");
        assert_int_equal(app_net_addr_pick(&r, taken, 4, &a), 0);
        assert_int_equal(a, ip("10.88.0.5"));
        taken[4] = ip("10.88.0.5");
        assert_int_equal(app_net_addr_pick(&r, taken, 5, &a), -ENOSPC); /* .7 is the broadcast */
}

static void test_names(void **state)
{
        (void)state;
        char n[NA_IFNAME_LEN], g[APP_NET_SET_NAME_LEN];
        app_net_ifname("6F1C2A3B-4c5d-4e6f-8a9b-0c1d2e3f4a5b", n);
        assert_string_equal(n, "nap6f1c2a3b4c5d");
        app_net_group_set_name(G1, g);
        assert_string_equal(g, "g0b9e7a528c1f4d3e9a4b5c6d7e8f9a0b");
}

static void test_domains(void **state)
{
        (void)state;
        char out[PROTO_DOMAIN_MAX + 1];
        const char *why = NULL;
        assert_int_equal(proto_domain_normalize("Play.Example.COM.", out, &why), 0);
        assert_string_equal(out, "play.example.com");
        assert_int_equal(proto_domain_normalize("xn--bcher-kva.example", out, &why), 0);
        static const char *const bad[] = { "", ".", "com", "*.example.com", "a..b", "-a.example.com",
                                           "a-.example.com", "bücher.example", "a_b.example.com", "1.2.3.4",
                                           "a b.example.com", "example.com..", NULL };
        for (size_t i = 0; bad[i]; i++) {
                why = NULL;
                assert_true(proto_domain_normalize(bad[i], out, &why) < 0);
                assert_non_null(why);
        }
        char label[80], name[300];
        memset(label, 'a', 63);
        label[63] = '\0';
        snprintf(name, sizeof(name), "%s.com", label);
        assert_int_equal(proto_domain_normalize(name, out, &why), 0);
        snprintf(name, sizeof(name), "a%s.com", label);
        assert_true(proto_domain_normalize(name, out, &why) < 0);
        assert_string_equal(why, "labels must be at most 63 characters");
        /* 253 characters is the limit: four labels of 63 and one of 1 with dots = 256 */
        snprintf(name, sizeof(name), "%s.%s.%s.%s.a", label, label, label, label);
        assert_true(proto_domain_normalize(name, out, &why) < 0);
        assert_string_equal(why, "must be at most 253 characters");
        assert_true(proto_domain_under("x.apps.example.com", "apps.example.com"));
        assert_true(proto_domain_under("apps.example.com", "apps.example.com"));
        assert_false(proto_domain_under("xapps.example.com", "apps.example.com"));
        assert_false(proto_domain_under("example.com", "apps.example.com"));
}

/* Random names (a fixed seed): whatever is accepted obeys every rule and is a fixed point. */
static void test_domains_random(void **state)
{
        (void)state;
        static const char alphabet[] = "abcXYZ019-.*_\xc3\xbc ";
        unsigned seed = 12345;
        size_t accepted = 0;
        for (int i = 0; i < 50000; i++) {
                char in[300], out[PROTO_DOMAIN_MAX + 1], again[PROTO_DOMAIN_MAX + 1];
                seed = seed * 1103515245u + 12345u;
                size_t len = (seed >> 16) % 270;
                for (size_t k = 0; k < len; k++) {
                        seed = seed * 1103515245u + 12345u;
                        /* mostly letters and dots, so that some names pass */
                        unsigned pick = (seed >> 16) % 40;
                        in[k] = pick < 20 ? "abcdefghij"[pick % 10] : pick < 26 ? '.' : alphabet[pick % (sizeof(alphabet) - 1)];
                }
                in[len] = '\0';
                const char *why = NULL;
                if (proto_domain_normalize(in, out, &why) < 0) {
                        assert_non_null(why);
                        continue;
                }
                accepted++;
                size_t n = strlen(out), label = 0, labels = 1;
                assert_true(n >= 3 && n <= 253);
                for (size_t k = 0; k < n; k++) {
                        char c = out[k];
                        assert_true((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
                        if (c == '.') {
                                assert_true(label >= 1 && out[k - 1] != '-' && out[k + 1] != '-');
                                labels++;
                                label = 0;
                        } else
                                assert_true(++label <= 63);
                }
                assert_true(labels >= 2 && out[0] != '-' && out[n - 1] != '-' && out[n - 1] != '.');
                assert_int_equal(proto_domain_normalize(out, again, &why), 0);
                assert_string_equal(out, again);
        }
        assert_true(accepted > 100); /* the generator reaches the accepting side too */
}

static void test_exposure_decode(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        struct proto_exposure_add *p = NULL;
        json_t *j = json_pack("{s:s, s:s, s:i, s:i}", "exposureId", G1, "type", "port", "containerPort", 25565,
                              "externalPort", 20001);
        assert_int_equal(proto_exposure_add_decode(j, &p, &err), 0);
        assert_int_equal(p->protocol, PROTO_EXPOSURE_TCP);
        assert_int_equal(p->external_port, 20001);
        proto_exposure_add_free(p);
        json_decref(j);
        j = json_pack("{s:s, s:s, s:i, s:s}", "exposureId", G1, "type", "domain", "containerPort", 0, "hostname",
                      "*.x.com");
        assert_true(proto_exposure_add_decode(j, &p, &err) < 0);
        assert_string_equal(err.code, NA_E_VALIDATION);
        assert_non_null(json_object_get(err.details, "containerPort"));
        assert_non_null(json_object_get(err.details, "hostname"));
        na_error_clear(&err);
        json_decref(j);
        j = json_pack("{s:s}", "groupId", "nope");
        struct proto_app_group *g = NULL;
        assert_true(proto_app_group_decode(j, &g, &err) < 0);
        assert_non_null(json_object_get(err.details, "groupId"));
        na_error_clear(&err);
        json_decref(j);
}

static void test_files(void **state)
{
        (void)state;
        struct app_net_host_entry self = { ip("10.88.0.2"), "web" }, others[] = { { ip("10.88.0.3"), "db" } };
        char *t = app_net_hosts_render(&self, others, 1);
        assert_non_null(strstr(t, "10.88.0.2\tweb\n10.88.0.3\tdb\n"));
        free(t);
        t = app_net_resolv_render("# c\nnameserver 127.0.0.53\nnameserver 192.0.2.53\nsearch x\n", NULL);
        assert_non_null(strstr(t, "nameserver 192.0.2.53\n"));
        assert_null(strstr(t, "127.0.0.53"));
        free(t);
        t = app_net_resolv_render("nameserver 127.0.0.53\n", "192.0.2.9");
        assert_non_null(strstr(t, "nameserver 192.0.2.9\n"));
        free(t);
        t = app_net_resolv_render(NULL, NULL);
        assert_non_null(strstr(t, "nameserver 1.1.1.1\n"));
        free(t);
}

static void render(struct nft_batch *b, const char *golden)
{
        char *text = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(nft_batch_render(b, NULL, &text, &err), 0);
        fwt_golden(golden, text);
        free(text);
        nft_batch_clear(b);
}

static void test_golden(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        const char *groups[] = { G1, G2 };
        struct app_net_port ports[] = { { 20001, 25565, IPPROTO_TCP, ip("10.88.0.2") },
                                        { 20002, 53, IPPROTO_UDP, ip("10.88.0.4") } };
        struct app_net_rules rs = { .table = APP_NET_DEFAULT_TABLE, .public_addr = ip("192.0.2.1"),
                                    .groups = groups, .n_groups = 2, .ports = ports, .n_ports = 2 };
        const char *why;
        assert_int_equal(app_net_range_parse("10.88.0.0/16", &rs.range, &why), 0);
        const char *mg[] = { G1, G1, G2, NULL };
        uint32_t ma[] = { ip("10.88.0.2"), ip("10.88.0.3"), ip("10.88.0.4"), ip("10.88.0.5") };
        struct nft_batch b;
        nft_batch_init(&b, APP_NET_DEFAULT_TABLE);
        assert_int_equal(app_net_nft_full(&b, &rs, mg, ma, 4, &err), 0);
        render(&b, "tests/drivers/app-net/golden/full.txt");

        /* A join into an existing group: one element out, one in (O(1)); no rule changes. */
        nft_batch_init(&b, APP_NET_DEFAULT_TABLE);
        assert_int_equal(app_net_nft_member(&b, G2, ip("10.88.0.4"), false, &err), 0);
        assert_int_equal(app_net_nft_member(&b, G1, ip("10.88.0.4"), true, &err), 0);
        assert_int_equal(b.n, 2);
        render(&b, "tests/drivers/app-net/golden/join.txt");

        /* A new group and an emptied one: the set made, the groups chain again, the old set deleted. */
        nft_batch_init(&b, APP_NET_DEFAULT_TABLE);
        rs.public_addr = 0; /* every local address */
        assert_int_equal(app_net_nft_groups(&b, &rs, "2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a", G2, &err), 0);
        assert_int_equal(app_net_nft_ports(&b, &rs, &err), 0);
        render(&b, "tests/drivers/app-net/golden/groups.txt");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_range),      cmocka_unit_test(test_allocator),
                cmocka_unit_test(test_names),      cmocka_unit_test(test_domains),
                cmocka_unit_test(test_domains_random),
                cmocka_unit_test(test_exposure_decode), cmocka_unit_test(test_files),
                cmocka_unit_test(test_golden),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
