/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proto/firewall.h: validation (table of bad inputs), canonical form, encode, diff. No kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/json-cleanup.h"
#include "fw-test.h"
#include "proto/firewall.h"

#define BASE "\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\""

struct bad_case {
        const char *name;
        const char *json;   /* the whole configuration */
        const char *path;   /* where the error must be reported */
        const char *fragment;
};

static const struct bad_case bad_cases[] = {
        { "not an object", "[]", "", "must be a JSON object" },
        { "enabled missing", "{\"inboundPolicy\": \"allow\", \"outboundPolicy\": \"allow\", \"rules\": []}", "enabled",
          "is required" },
        { "enabled wrong type", "{\"enabled\": \"yes\", \"inboundPolicy\": \"allow\", \"outboundPolicy\": \"allow\", \"rules\": []}",
          "enabled", "true or false" },
        { "policy unknown", "{\"enabled\": true, \"inboundPolicy\": \"drop\", \"outboundPolicy\": \"allow\", \"rules\": []}",
          "inboundPolicy", "must be one of: allow, deny" },
        { "policy reject", "{\"enabled\": true, \"inboundPolicy\": \"allow\", \"outboundPolicy\": \"reject\", \"rules\": []}",
          "outboundPolicy", "reject is not a policy" },
        { "policy wrong type", "{\"enabled\": true, \"inboundPolicy\": 1, \"outboundPolicy\": \"allow\", \"rules\": []}",
          "inboundPolicy", "must be one of" },
        { "rules missing", "{" BASE "}", "rules", "is required" },
        { "rules not an array", "{" BASE ", \"rules\": {}}", "rules", "must be an array" },
        { "rule not an object", "{" BASE ", \"rules\": [42]}", "rules.0", "must be an object" },
        { "type missing", "{" BASE ", \"rules\": [{\"protocol\": \"tcp\", \"action\": \"allow\"}]}", "rules.0.type",
          "is required" },
        { "type unknown", "{" BASE ", \"rules\": [{\"type\": \"forward\", \"protocol\": \"tcp\", \"action\": \"allow\"}]}",
          "rules.0.type", "must be one of: inbound, outbound" },
        { "protocol unknown", "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"sctp\", \"action\": \"allow\"}]}",
          "rules.0.protocol", "must be one of: tcp, udp, icmp, icmpv6, all" },
        { "action unknown", "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"drop\"}]}",
          "rules.0.action", "must be one of: allow, deny, reject" },
        { "action wrong type", "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": true}]}",
          "rules.0.action", "must be one of" },
        { "rule enabled wrong type",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"enabled\": 1}]}",
          "rules.0.enabled", "true or false" },
        { "port 0", "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"0\"}]}",
          "rules.0.port", "must be a port 1..65535" },
        { "port above 65535",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"65536\"}]}",
          "rules.0.port", "must be a port 1..65535" },
        { "port not a number",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"ssh\"}]}",
          "rules.0.port", "must be a port" },
        { "port leading zero",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"022\"}]}",
          "rules.0.port", "must be a port" },
        { "port as a number",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": 22}]}",
          "rules.0.port", "must be a string" },
        { "reversed range",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"udp\", \"action\": \"allow\", \"port\": \"2000-1000\"}]}",
          "rules.0.port", "reversed range" },
        { "range to 0",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"udp\", \"action\": \"allow\", \"port\": \"0-10\"}]}",
          "rules.0.port", "must be a port" },
        { "half range",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"udp\", \"action\": \"allow\", \"port\": \"1000-\"}]}",
          "rules.0.port", "must be a port" },
        { "list with empty item",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"22,,80\"}]}",
          "rules.0.port", "must be a port" },
        { "list with a range",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"22,80-90\"}]}",
          "rules.0.port", "single ports only" },
        { "list with a port twice",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"22,80,22\"}]}",
          "rules.0.port", "lists a port twice" },
        { "port with icmp",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"icmp\", \"action\": \"allow\", \"port\": \"22\"}]}",
          "rules.0.port", "only tcp and udp rules take a port" },
        { "port with all",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"all\", \"action\": \"allow\", \"port\": \"1-100\"}]}",
          "rules.0.port", "only tcp and udp rules take a port" },
        { "port with icmpv6",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"icmpv6\", \"action\": \"allow\", \"port\": \"22,23\"}]}",
          "rules.0.port", "only tcp and udp rules take a port" },
        { "bad IPv4",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"10.0.0.256\"}]}",
          "rules.0.source", "not a valid IPv4 address" },
        { "bad IPv6",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"destination\": \"2001:db8:::1\"}]}",
          "rules.0.destination", "not a valid IPv6 address" },
        { "hostname", "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"example.com\"}]}",
          "rules.0.source", "not a valid IPv4 address" },
        { "prefix too long",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"10.0.0.0/33\"}]}",
          "rules.0.source", "invalid prefix length (0..32)" },
        { "prefix not a number",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"fd00::/x\"}]}",
          "rules.0.source", "invalid prefix length (0..128)" },
        { "host bits set",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"10.0.0.5/24\"}]}",
          "rules.0.source", "host bits are set beyond /24 (the network is 10.0.0.0/24)" },
        { "address wrong type",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": [\"10.0.0.1\"]}]}",
          "rules.0.source", "must be a string" },
        { "families differ",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"10.0.0.1\", \"destination\": \"fd00::1\"}]}",
          "rules.0.destination", "is an IPv6 address but the source is IPv4" },
        { "icmp with IPv6",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"icmp\", \"action\": \"allow\", \"source\": \"fd00::/8\"}]}",
          "rules.0.source", "icmp matches IPv4 only" },
        { "icmpv6 with IPv4",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"icmpv6\", \"action\": \"allow\", \"destination\": \"10.1.2.3\"}]}",
          "rules.0.destination", "icmpv6 matches IPv6 only" },
        { "id 0", "{" BASE ", \"rules\": [{\"id\": 0, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"}]}",
          "rules.0.id", "must be between 1 and 2147483647" },
        { "id negative", "{" BASE ", \"rules\": [{\"id\": -3, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"}]}",
          "rules.0.id", "must be between" },
        { "id too large",
          "{" BASE ", \"rules\": [{\"id\": 2147483648, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"}]}",
          "rules.0.id", "must be between" },
        { "id a string", "{" BASE ", \"rules\": [{\"id\": \"1\", \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"}]}",
          "rules.0.id", "must be an integer" },
        { "id a fraction", "{" BASE ", \"rules\": [{\"id\": 1.5, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"}]}",
          "rules.0.id", "must be an integer" },
        { "duplicate ids",
          "{" BASE ", \"rules\": [{\"id\": 4, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"},"
          "{\"type\": \"inbound\", \"protocol\": \"udp\", \"action\": \"allow\"},"
          "{\"id\": 4, \"type\": \"outbound\", \"protocol\": \"tcp\", \"action\": \"deny\"}]}",
          "rules.2.id", "duplicate rule id 4 (also rules.0)" },
        { "comment wrong type",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"comment\": 7}]}",
          "rules.0.comment", "must be a string" },
        { "comment with a newline",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"comment\": \"a\\nb\"}]}",
          "rules.0.comment", "control characters" },
        { "comment with NUL",
          "{" BASE ", \"rules\": [{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"comment\": \"a\\u0000b\"}]}",
          "rules.0.comment", "NUL" },
};

static void test_bad_inputs(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                const struct bad_case *c = &bad_cases[i];
                _cleanup_json_ json_t *j = fwt_json(c->json);
                struct na_error err = NA_ERROR_INIT;
                struct fw_config cfg;
                int r = proto_fw_decode(j, &cfg, &err);
                if (r != -EINVAL || !na_error_is_set(&err) || strcmp(err.code, NA_E_VALIDATION) != 0 ||
                    err.http_status != 422 || !fwt_field_has(&err, c->path, c->fragment)) {
                        char *d = err.details ? json_dumps(err.details, JSON_COMPACT) : NULL;
                        print_error("case \"%s\": r=%d details=%s\n", c->name, r, d ? d : "(none)");
                        free(d);
                        fail_msg("case \"%s\": expected \"%s\" at %s", c->name, c->fragment, c->path);
                }
                assert_null(cfg.rules);
                assert_int_equal(cfg.n_rules, 0);
                na_error_clear(&err);
        }
}

/* Every field is read before failing: one payload, one error per bad field. */
static void test_all_problems_reported(void **state)
{
        (void)state;
        _cleanup_json_ json_t *j = fwt_json(
                "{\"enabled\": 1, \"inboundPolicy\": \"reject\", \"outboundPolicy\": \"allow\", \"rules\": ["
                "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"0\"},"
                "{\"type\": \"sideways\", \"protocol\": \"icmp\", \"action\": \"allow\", \"port\": \"22\", \"source\": \"1.2.3.4/40\"},"
                "{\"type\": \"outbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"comment\": \"ok\"},"
                "{\"type\": \"outbound\", \"protocol\": \"udp\", \"action\": \"nope\", \"destination\": \"any\"}]}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct fw_config cfg;
        assert_int_equal(proto_fw_decode(j, &cfg, &err), -EINVAL);
        assert_true(fwt_field_has(&err, "enabled", "true or false"));
        assert_true(fwt_field_has(&err, "inboundPolicy", "reject is not a policy"));
        assert_true(fwt_field_has(&err, "rules.0.port", "must be a port"));
        assert_true(fwt_field_has(&err, "rules.1.type", "must be one of"));
        assert_true(fwt_field_has(&err, "rules.1.port", "only tcp and udp"));
        assert_true(fwt_field_has(&err, "rules.1.source", "prefix length"));
        assert_true(fwt_field_has(&err, "rules.3.action", "must be one of"));
        assert_int_equal(fwt_field_count(&err), 7);
        /* the agent API failure object carries the same details */
        _cleanup_json_ json_t *fail = na_error_to_json(&err);
        assert_string_equal(json_string_value(json_object_get(fail, "code")), "VALIDATION_ERROR");
        assert_int_equal(json_integer_value(json_object_get(fail, "httpStatus")), 422);
        assert_non_null(json_object_get(json_object_get(json_object_get(fail, "details"), "rules"), "3"));
}

static void test_rule_limit(void **state)
{
        (void)state;
        for (int n = 1000; n <= 1001; n++) {
                json_t *rules = json_array();
                for (int i = 0; i < n; i++)
                        json_array_append_new(rules, json_pack("{s:s, s:s, s:s, s:s}", "type", "inbound", "protocol",
                                                               "tcp", "action", "allow", "port", "22"));
                _cleanup_json_ json_t *j = json_pack("{s:b, s:s, s:s, s:o}", "enabled", 1, "inboundPolicy", "deny",
                                                     "outboundPolicy", "allow", "rules", rules);
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                struct fw_config cfg;
                int r = proto_fw_decode(j, &cfg, &err);
                if (n == 1000) {
                        assert_int_equal(r, 0);
                        assert_int_equal(cfg.n_rules, 1000);
                        proto_fw_clear(&cfg);
                } else {
                        assert_int_equal(r, -EINVAL);
                        assert_true(fwt_field_has(&err, "rules", "must hold 0..1000 items (got 1001)"));
                }
        }
}

static void test_comment_limit(void **state)
{
        (void)state;
        char comment[512];
        /* 255 bytes: 85 three-byte characters fit exactly; a 256th byte is refused */
        for (int extra = 0; extra <= 1; extra++) {
                size_t n = 0;
                for (int i = 0; i < 85; i++)
                        n += (size_t)snprintf(comment + n, sizeof(comment) - n, "\xe2\x82\xac");
                if (extra)
                        comment[n++] = 'x';
                comment[n] = '\0';
                _cleanup_json_ json_t *j = json_pack("{s:b, s:s, s:s, s:[{s:s, s:s, s:s, s:s}]}", "enabled", 1,
                                                     "inboundPolicy", "deny", "outboundPolicy", "allow", "rules", "type",
                                                     "inbound", "protocol", "tcp", "action", "allow", "comment", comment);
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                struct fw_config cfg;
                int r = proto_fw_decode(j, &cfg, &err);
                if (!extra) {
                        assert_int_equal(r, 0);
                        assert_string_equal(cfg.rules[0].comment, comment);
                        proto_fw_clear(&cfg);
                } else {
                        assert_int_equal(r, -EINVAL);
                        assert_true(fwt_field_has(&err, "rules.0.comment", "at most 255 bytes (got 256)"));
                }
        }
}

/* Decoding gives the canonical form; encoding prints it; defaults are filled in. */
static void test_canonical_round_trip(void **state)
{
        (void)state;
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\"}",
                  "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"any\", \"source\": \"any\", "
                  "\"destination\": \"any\", \"action\": \"allow\", \"enabled\": true, \"comment\": \"\"}" },
                { "{\"id\": 9, \"type\": \"outbound\", \"protocol\": \"udp\", \"action\": \"reject\", \"port\": \"443,22,80\", "
                  "\"source\": \"\", \"destination\": \"2001:DB8:0:0::1\", \"enabled\": false, \"comment\": \"c\"}",
                  "{\"id\": 9, \"type\": \"outbound\", \"protocol\": \"udp\", \"port\": \"22,80,443\", \"source\": \"any\", "
                  "\"destination\": \"2001:db8::1\", \"action\": \"reject\", \"enabled\": false, \"comment\": \"c\"}" },
                { "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"deny\", \"port\": \"80-80\", \"source\": \"10.0.0.1/32\", "
                  "\"destination\": null, \"id\": null, \"comment\": null, \"enabled\": null}",
                  "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"80\", \"source\": \"10.0.0.1\", "
                  "\"destination\": \"any\", \"action\": \"deny\", \"enabled\": true, \"comment\": \"\"}" },
                /* a family-only restriction lives on the source, and goes when an address fixes the family */
                { "{\"type\": \"inbound\", \"protocol\": \"all\", \"action\": \"deny\", \"destination\": \"::/0\"}",
                  "{\"type\": \"inbound\", \"protocol\": \"all\", \"port\": \"any\", \"source\": \"::/0\", "
                  "\"destination\": \"any\", \"action\": \"deny\", \"enabled\": true, \"comment\": \"\"}" },
                { "{\"type\": \"inbound\", \"protocol\": \"udp\", \"action\": \"deny\", \"port\": \"any\", \"source\": \"0.0.0.0/0\", "
                  "\"destination\": \"192.0.2.0/28\"}",
                  "{\"type\": \"inbound\", \"protocol\": \"udp\", \"port\": \"any\", \"source\": \"any\", "
                  "\"destination\": \"192.0.2.0/28\", \"action\": \"deny\", \"enabled\": true, \"comment\": \"\"}" },
                { "{\"type\": \"inbound\", \"protocol\": \"icmpv6\", \"action\": \"allow\", \"source\": \"fe80::/10\", \"port\": \"\"}",
                  "{\"type\": \"inbound\", \"protocol\": \"icmpv6\", \"port\": \"any\", \"source\": \"fe80::/10\", "
                  "\"destination\": \"any\", \"action\": \"allow\", \"enabled\": true, \"comment\": \"\"}" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char text[1024];
                snprintf(text, sizeof(text), "{" BASE ", \"rules\": [%s], \"unknown\": 1}", cases[i].in);
                struct fw_config cfg;
                fwt_config(text, &cfg);
                _cleanup_json_ json_t *got = proto_fw_encode(&cfg);
                _cleanup_json_ json_t *want = fwt_json(cases[i].out);
                if (!json_equal(json_array_get(json_object_get(got, "rules"), 0), want)) {
                        char *g = json_dumps(got, JSON_COMPACT);
                        print_error("case %zu got %s\n", i, g);
                        free(g);
                        fail();
                }
                assert_true(json_is_true(json_object_get(got, "enabled")));
                assert_string_equal(json_string_value(json_object_get(got, "inboundPolicy")), "deny");
                /* decoding the encoding gives the same configuration */
                struct fw_config again;
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                assert_int_equal(proto_fw_decode(got, &again, &err), 0);
                assert_true(proto_fw_equal(&cfg, &again));
                proto_fw_clear(&again);
                proto_fw_clear(&cfg);
        }
}

static void test_field_parsers(void **state)
{
        (void)state;
        struct fw_ports p;
        struct fw_addr a;
        const char *reason = NULL;
        char buf[512];
        assert_int_equal(proto_fw_ports_parse("65535", &p, &reason), 0);
        assert_string_equal(proto_fw_ports_format(&p, buf, sizeof(buf)), "65535");
        assert_int_equal(proto_fw_ports_parse("1-65535", &p, &reason), 0);
        assert_int_equal(p.kind, FW_PORT_RANGE);
        assert_string_equal(proto_fw_ports_format(&p, buf, sizeof(buf)), "1-65535");
        /* 64 ports fit in a list, 65 do not */
        size_t n = 0;
        for (int i = 1; i <= 65; i++)
                n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d", i > 1 ? "," : "", 1000 + i);
        assert_int_equal(proto_fw_ports_parse(buf, &p, &reason), -EINVAL);
        assert_non_null(strstr(reason, "at most 64"));
        *strrchr(buf, ',') = '\0';
        assert_int_equal(proto_fw_ports_parse(buf, &p, &reason), 0);
        assert_int_equal(p.n, 64);
        assert_int_equal(proto_fw_ports_parse(" 22", &p, &reason), -EINVAL);
        assert_int_equal(proto_fw_ports_parse("+22", &p, &reason), -EINVAL);

        assert_int_equal(proto_fw_addr_parse("any", &a, &reason), 0);
        assert_int_equal(a.family, 0);
        assert_int_equal(proto_fw_addr_parse("::ffff:10.1.2.3", &a, &reason), 0);
        assert_int_equal(a.family, AF_INET6);
        assert_string_equal(proto_fw_addr_format(&a, buf, sizeof(buf)), "::ffff:10.1.2.3");
        assert_int_equal(proto_fw_addr_parse("10.1.2.3/0", &a, &reason), -EDOM);
        assert_int_equal(proto_fw_addr_parse("0.0.0.0/0", &a, &reason), 0);
        assert_string_equal(proto_fw_addr_format(&a, buf, sizeof(buf)), "0.0.0.0/0");
        assert_int_equal(proto_fw_addr_parse("2001:db8::/127", &a, &reason), 0);
        assert_string_equal(proto_fw_addr_format(&a, buf, sizeof(buf)), "2001:db8::/127");
        assert_int_equal(proto_fw_addr_parse("10.0.0.0/08", &a, &reason), -EINVAL);
        assert_int_equal(proto_fw_addr_parse("10.0.0.0/", &a, &reason), -EINVAL);
        assert_int_equal(proto_fw_addr_parse("1.2.3", &a, &reason), -EINVAL);
}

static void test_diff(void **state)
{
        (void)state;
        struct fw_config stored, live;
        fwt_config("{" BASE ", \"rules\": ["
                   "{\"id\": 1, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"22\"},"
                   "{\"id\": 2, \"type\": \"outbound\", \"protocol\": \"udp\", \"action\": \"deny\", \"port\": \"53\"},"
                   "{\"id\": 3, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"80\"},"
                   "{\"id\": 4, \"type\": \"inbound\", \"protocol\": \"icmp\", \"action\": \"allow\"}]}",
                   &stored);
        fwt_config("{\"enabled\": false, \"inboundPolicy\": \"allow\", \"outboundPolicy\": \"allow\", \"rules\": ["
                   "{\"id\": 3, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"80\"},"
                   "{\"id\": 2, \"type\": \"outbound\", \"protocol\": \"udp\", \"action\": \"deny\", \"port\": \"53\"},"
                   "{\"id\": 1, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"port\": \"2222\", \"comment\": \"x\"},"
                   "{\"id\": 9, \"type\": \"inbound\", \"protocol\": \"all\", \"action\": \"deny\"}]}",
                   &live);
        _cleanup_json_ json_t *reasons = json_array();
        size_t n = proto_fw_diff(&live, &stored, reasons);
        const char *want[] = { "enabled: kernel false, stored true", "inboundPolicy: kernel allow, stored deny",
                               "rule 1: port: kernel 2222, stored 22", "rule 1: comment differs",
                               "rule 4: only in the stored configuration", "rule 9: only in the kernel",
                               "inbound rule order differs" };
        assert_int_equal(n, sizeof(want) / sizeof(want[0]));
        for (size_t i = 0; i < n; i++)
                assert_string_equal(json_string_value(json_array_get(reasons, i)), want[i]);
        /* the interleaving of inbound and outbound rules is not a difference */
        assert_int_equal(proto_fw_diff(&stored, &stored, NULL), 0);
        struct fw_config moved;
        assert_int_equal(proto_fw_copy(&moved, &stored, NULL), 0);
        struct fw_rule t = moved.rules[0];
        moved.rules[0] = moved.rules[1];
        moved.rules[1] = t;
        assert_int_equal(proto_fw_diff(&moved, &stored, NULL), 0);
        assert_false(proto_fw_equal(&moved, &stored));
        proto_fw_clear(&moved);
        proto_fw_clear(&stored);
        proto_fw_clear(&live);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bad_inputs),          cmocka_unit_test(test_all_problems_reported),
                cmocka_unit_test(test_rule_limit),          cmocka_unit_test(test_comment_limit),
                cmocka_unit_test(test_canonical_round_trip), cmocka_unit_test(test_field_parsers),
                cmocka_unit_test(test_diff),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
