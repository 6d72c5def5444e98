/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/vps*.c: every vps params decoder (bad input answered with per-field
 * _errors, all problems at once), the reinstall rules of reference 4.4 as a table,
 * and the encoders of Server, Snapshot, Backup, status and exec results.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <arpa/inet.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/vps.h"

#define KEY_ED "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host"
#define KEY_RSA \
        "ssh-rsa " "AAAAB3NzaC1yc2EAAAADAQABAAAAgQAAAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8wMTIz" \
        "NDU2Nzg5Ojs8PT4/QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl9gYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+" \
        "fw==" " rsa@host"

/* Whether err's details hold _errors for path ("" for the payload's own). */
static bool has_field(const struct na_error *err, const char *path)
{
        json_t *node = err->details;
        if (path && *path) {
                char buf[128];
                snprintf(buf, sizeof(buf), "%s", path);
                for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg && node;
                     seg = strtok_r(NULL, ".", &save))
                        node = json_object_get(node, seg);
        }
        return node && json_array_size(json_object_get(node, "_errors")) > 0;
}

/* Every comma-separated field of want has errors (and the code is VALIDATION_ERROR). */
static void expect_fields(const struct na_error *err, const char *want, const char *what)
{
        if (!err->code || !streq(err->code, NA_E_VALIDATION))
                fail_msg("%s: expected VALIDATION_ERROR, got %s (%s)", what, err->code ? err->code : "success",
                         err->message);
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", want);
        char *save = NULL;
        for (char *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
                const char *path = streq(f, "_") ? "" : f;
                if (!has_field(err, path)) {
                        char *d = json_dumps(err->details, JSON_COMPACT);
                        fail_msg("%s: no _errors for '%s' in %s", what, f, d);
                }
        }
        /* Nothing else than what was expected. */
        size_t n = 0;
        const char *k;
        json_t *v;
        json_object_foreach(err->details, k, v) if (!streq(k, "_errors")) n++;
        size_t expected = 0;
        for (const char *p = want; *p; p++)
                expected += *p == ',';
        expected++;
        bool payload = strstr(want, "_") == want || strstr(want, ",_");
        if (payload)
                expected--;
        /* nested paths (plan.x) count once per top-level key: only check top-level sets */
        if (!strchr(want, '.') && n != expected) {
                char *d = json_dumps(err->details, JSON_COMPACT);
                fail_msg("%s: expected %zu fields, got %zu: %s", what, expected, n, d);
        }
}

/* ---- field rules ---- */

static void test_hostname_rule(void **state)
{
        assert_true(proto_vps_hostname_valid("a"));
        assert_true(proto_vps_hostname_valid("web-1"));
        assert_true(proto_vps_hostname_valid("9lives"));
        assert_true(proto_vps_hostname_valid("x123456789012345678901234567890123456789012345678901234567890ab"));
        assert_false(proto_vps_hostname_valid(""));
        assert_false(proto_vps_hostname_valid("-a"));
        assert_false(proto_vps_hostname_valid("a-"));
        assert_false(proto_vps_hostname_valid("a.b"));
        assert_false(proto_vps_hostname_valid("a_b"));
        assert_false(proto_vps_hostname_valid("héllo"));
        assert_false(proto_vps_hostname_valid("x123456789012345678901234567890123456789012345678901234567890abc"));
}

static void test_password_rule(void **state)
{
        assert_null(proto_vps_password_problem("Secret#1"));
        assert_null(proto_vps_password_problem("Pässwörd1"));
        assert_null(proto_vps_password_problem("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaA1!x"));
        assert_non_null(proto_vps_password_problem("Sec#1"));
        assert_non_null(proto_vps_password_problem("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaA1!xy"));
        assert_non_null(proto_vps_password_problem("secret#123"));
        assert_non_null(proto_vps_password_problem("SECRET#123"));
        assert_non_null(proto_vps_password_problem("Secret#abc"));
        assert_non_null(proto_vps_password_problem("Secret1234"));
        assert_non_null(proto_vps_password_problem("Secret#1\n"));
}

static void test_ssh_key_rule(void **state)
{
        assert_true(proto_vps_ssh_key_valid(KEY_ED));
        assert_true(proto_vps_ssh_key_valid("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"));
        assert_true(proto_vps_ssh_key_valid(KEY_RSA));
        assert_false(proto_vps_ssh_key_valid("ssh-ed25519"));
        assert_false(proto_vps_ssh_key_valid("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"));
        assert_false(proto_vps_ssh_key_valid("ssh-dsa AAAA"));
        assert_false(proto_vps_ssh_key_valid("hello world"));
        assert_false(proto_vps_ssh_key_valid(KEY_ED "\ncommand=\"rm -rf /\" ssh-ed25519 AAAA"));
        assert_false(proto_vps_ssh_key_valid("ssh-ed25519 AAAAC3Nza!1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"));
}

/* ---- vps.create ---- */

static json_t *create_params(void)
{
        return json_pack("{s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:{s:s, s:s, s:s}, s:s, s:{s:[{s:s, s:i}]}}",
                         "name", "web", "hostname", "web1", "plan", "cpuCores", 2, "cpuThreads", 2, "ramMB", 2048,
                         "storageMB", 20480, "networkSpeedLimitMbps", 100, "bandwidthLimitGb", 1000, "maxSnapshots", 3,
                         "template", "id", "debian", "imageSlug", "12", "os", "linux", "vmPassword", "Secret#123",
                         "network", "ipv4", "address", "203.0.113.10", "prefix", 24);
}

/* network: decoded, and every problem under its own field. */
static void test_network_decode(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_network_set *p = NULL;
        _cleanup_json_ json_t *ok = json_loads(
                "{\"network\": {\"ipv4\": [{\"address\": \"203.0.113.10\", \"prefix\": 24},"
                " {\"address\": \"198.51.100.7\", \"prefix\": 32}],"
                " \"ipv6\": [{\"address\": \"2001:db8:1::10\", \"prefix\": 64}],"
                " \"dns\": [\"192.0.2.53\", \"2001:db8::53\"]}}", 0, NULL);
        assert_int_equal(proto_vps_network_set_decode(ok, &p, &err), 0);
        assert_int_equal(p->network.n_ipv4, 2);
        assert_int_equal(p->network.n_ipv6, 1);
        assert_int_equal(p->network.n_dns, 2);
        assert_string_equal(p->network.ipv4[1].text, "198.51.100.7");
        assert_int_equal(p->network.ipv6[0].prefix, 64);
        assert_int_equal(p->network.dns[1].family, AF_INET6);
        /* Encoded back, decoded again: the same network. */
        _cleanup_json_ json_t *back = proto_vps_network_encode(&p->network);
        struct proto_vps_network again;
        assert_int_equal(proto_vps_network_decode(back, "network", &again, &err), 0);
        assert_true(proto_vps_network_equal(&again, &p->network));
        char field[64];
        assert_null(proto_vps_network_overlap(&again, &(struct proto_vps_network){ 0 }, field));
        const struct proto_vps_addr *a = proto_vps_network_overlap(&again, &p->network, field);
        assert_non_null(a);
        assert_string_equal(field, "network.ipv4.0.address");
        proto_vps_network_set_free(p);

        /* IPv6 only is an address; none at all is not. */
        _cleanup_json_ json_t *v6 = json_loads("{\"network\": {\"ipv6\": [{\"address\": \"2001:db8::5\", \"prefix\": 128}]}}",
                                               0, NULL);
        assert_int_equal(proto_vps_network_set_decode(v6, &p, &err), 0);
        proto_vps_network_set_free(p);
        _cleanup_json_ json_t *none = json_loads("{\"network\": {\"ipv4\": [], \"dns\": [\"192.0.2.53\"]}}", 0, NULL);
        assert_int_equal(proto_vps_network_set_decode(none, &p, &err), -EINVAL);
        expect_fields(&err, "network", "no address");
        na_error_clear(&err);
        _cleanup_json_ json_t *missing = json_object();
        assert_int_equal(proto_vps_network_set_decode(missing, &p, &err), -EINVAL);
        expect_fields(&err, "network", "no network");
        na_error_clear(&err);

        /* Every problem at once, each under its own field. */
        static const struct {
                const char *json, *field, *what;
        } bad[] = {
                { "{\"address\": \"203.0.113.010\", \"prefix\": 24}", "network.ipv4.0.address", "leading zero" },
                { "{\"address\": \"203.0.113.10\", \"prefix\": 33}", "network.ipv4.0.prefix", "prefix > 32" },
                { "{\"address\": \"203.0.113.10\", \"prefix\": 4}", "network.ipv4.0.prefix", "prefix < 8" },
                { "{\"address\": \"224.0.0.1\", \"prefix\": 32}", "network.ipv4.0.address", "multicast" },
                { "{\"address\": \"127.0.0.1\", \"prefix\": 32}", "network.ipv4.0.address", "loopback" },
                { "{\"address\": \"169.254.0.1\", \"prefix\": 32}", "network.ipv4.0.address", "link-local" },
                { "{\"address\": \"255.255.255.255\", \"prefix\": 32}", "network.ipv4.0.address", "broadcast" },
                { "{\"address\": \"0.0.0.0\", \"prefix\": 32}", "network.ipv4.0.address", "unspecified" },
                { "{\"address\": \"203.0.113.0\", \"prefix\": 24}", "network.ipv4.0.address", "network address" },
                { "{\"address\": \"203.0.113.255\", \"prefix\": 24}", "network.ipv4.0.address", "broadcast of /24" },
                { "{\"address\": \"2001:db8::1\", \"prefix\": 64}", "network.ipv4.0.address", "v6 in ipv4" },
                { "{\"prefix\": 24}", "network.ipv4.0.address", "no address" },
                { "\"203.0.113.10\"", "network.ipv4.0", "not an object" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[256];
                snprintf(text, sizeof(text), "{\"network\": {\"ipv4\": [%s]}}", bad[i].json);
                _cleanup_json_ json_t *doc = json_loads(text, 0, NULL);
                assert_non_null(doc);
                assert_int_equal(proto_vps_network_set_decode(doc, &p, &err), -EINVAL);
                if (!has_field(&err, bad[i].field))
                        fail_msg("%s: no _errors for %s in %s", bad[i].what, bad[i].field,
                                 json_dumps(err.details, JSON_COMPACT));
                na_error_clear(&err);
        }
        static const struct {
                const char *json, *field, *what;
        } bad6[] = {
                { "{\"address\": \"2001:DB8::1\", \"prefix\": 64}", "network.ipv6.0.address", "upper case" },
                { "{\"address\": \"2001:db8:0:0::1\", \"prefix\": 64}", "network.ipv6.0.address", "not compressed" },
                { "{\"address\": \"fe80::2\", \"prefix\": 64}", "network.ipv6.0.address", "link-local" },
                { "{\"address\": \"ff02::1\", \"prefix\": 128}", "network.ipv6.0.address", "multicast" },
                { "{\"address\": \"::1\", \"prefix\": 128}", "network.ipv6.0.address", "loopback" },
                { "{\"address\": \"::\", \"prefix\": 128}", "network.ipv6.0.address", "unspecified" },
                { "{\"address\": \"::ffff:192.0.2.1\", \"prefix\": 128}", "network.ipv6.0.address", "v4-mapped" },
                { "{\"address\": \"2001:db8:1::\", \"prefix\": 64}", "network.ipv6.0.address", "subnet anycast" },
                { "{\"address\": \"2001:db8::1\", \"prefix\": 8}", "network.ipv6.0.prefix", "prefix < 16" },
                { "{\"address\": \"2001:db8::1\", \"prefix\": 129}", "network.ipv6.0.prefix", "prefix > 128" },
        };
        for (size_t i = 0; i < sizeof(bad6) / sizeof(bad6[0]); i++) {
                char text[256];
                snprintf(text, sizeof(text), "{\"network\": {\"ipv6\": [%s]}}", bad6[i].json);
                _cleanup_json_ json_t *doc = json_loads(text, 0, NULL);
                assert_non_null(doc);
                assert_int_equal(proto_vps_network_set_decode(doc, &p, &err), -EINVAL);
                if (!has_field(&err, bad6[i].field))
                        fail_msg("%s: no _errors for %s in %s", bad6[i].what, bad6[i].field,
                                 json_dumps(err.details, JSON_COMPACT));
                na_error_clear(&err);
        }

        /* Duplicates, bounds, resolvers. */
        _cleanup_json_ json_t *dup = json_loads(
                "{\"network\": {\"ipv4\": [{\"address\": \"203.0.113.10\", \"prefix\": 24},"
                " {\"address\": \"203.0.113.10\", \"prefix\": 32}],"
                " \"dns\": [\"192.0.2.53\", \"192.0.2.53\", \"example.net\", \"224.0.0.251\"]}}", 0, NULL);
        assert_int_equal(proto_vps_network_set_decode(dup, &p, &err), -EINVAL);
        assert_true(has_field(&err, "network.ipv4.1.address"));
        assert_true(has_field(&err, "network.dns")); /* 4 > 3 resolvers */
        na_error_clear(&err);
        _cleanup_json_ json_t *dns = json_loads(
                "{\"network\": {\"ipv4\": [{\"address\": \"203.0.113.10\", \"prefix\": 24}],"
                " \"dns\": [\"192.0.2.53\", \"192.0.2.53\", \"example.net\"]}}", 0, NULL);
        assert_int_equal(proto_vps_network_set_decode(dns, &p, &err), -EINVAL);
        assert_true(has_field(&err, "network.dns.1"));
        assert_true(has_field(&err, "network.dns.2"));
        na_error_clear(&err);
        json_t *many = json_array();
        for (int i = 0; i < PROTO_VPS_NET_V4_MAX + 1; i++)
                json_array_append_new(many, json_pack("{s:s, s:i}", "address", "203.0.113.10", "prefix", 32));
        _cleanup_json_ json_t *big = json_pack("{s:{s:o}}", "network", "ipv4", many);
        assert_int_equal(proto_vps_network_set_decode(big, &p, &err), -EINVAL);
        assert_true(has_field(&err, "network.ipv4"));
        na_error_clear(&err);
}

static void test_create_decode(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_create *p = NULL;
        _cleanup_json_ json_t *ok = create_params();
        json_object_set_new(ok, "sshPublicKeys", json_pack("[s, s]", KEY_ED, KEY_RSA));
        json_object_set_new(ok, "inputs", json_pack("{s:s, s:i, s:b}", "role", "web", "workers", 2, "tls", 1));
        assert_int_equal(proto_vps_create_decode(ok, &p, &err), 0);
        assert_string_equal(p->name, "web");
        assert_string_equal(p->hostname, "web1");
        assert_int_equal(p->plan.cpu_cores, 2);
        assert_int_equal(p->plan.cpu_threads, 2);
        assert_int_equal(p->plan.storage_mb, 20480);
        assert_string_equal(p->tmpl.id, "debian");
        assert_int_equal(p->tmpl.os, PROTO_VPS_OS_LINUX);
        assert_string_equal(p->password, "Secret#123");
        assert_string_equal(p->ssh_keys[1], KEY_RSA);
        assert_null(p->ssh_keys[2]);
        assert_int_equal(json_object_size(p->inputs), 3);
        assert_int_equal(p->network.n_ipv4, 1);
        assert_string_equal(p->network.ipv4[0].text, "203.0.113.10");
        assert_int_equal(p->network.ipv4[0].prefix, 24);
        proto_vps_create_free(p);

        /* Keys only is fine; nothing at all is not. */
        _cleanup_json_ json_t *keys_only = create_params();
        json_object_del(keys_only, "vmPassword");
        json_object_set_new(keys_only, "sshPublicKeys", json_pack("[s]", KEY_ED));
        assert_int_equal(proto_vps_create_decode(keys_only, &p, &err), 0);
        assert_null(p->password);
        proto_vps_create_free(p);
        json_object_set_new(keys_only, "sshPublicKeys", json_array());
        assert_int_equal(proto_vps_create_decode(keys_only, &p, &err), -EINVAL);
        expect_fields(&err, "_", "no credentials");
        na_error_clear(&err);

        /* Every problem at once, each under its own field. */
        _cleanup_json_ json_t *bad = json_pack(
                "{s:s, s:s, s:{s:i, s:s, s:i, s:i, s:i, s:i}, s:{s:s, s:s}, s:s, s:[s], s:s}", "name", "",
                "hostname", "web_1", "plan", "cpuCores", 0, "cpuThreads", "two", "ramMB", 2048, "storageMB", 0,
                "networkSpeedLimitMbps", -1, "bandwidthLimitGb", 10, "template", "id", "debian", "os", "bsd",
                "vmPassword", "password", "sshPublicKeys", "not a key", "inputs", "nope");
        assert_int_equal(proto_vps_create_decode(bad, &p, &err), -EINVAL);
        const char *fields[] = { "name", "hostname", "plan.cpuCores", "plan.cpuThreads", "plan.storageMB",
                                 "plan.networkSpeedLimitMbps", "plan.maxSnapshots", "template.imageSlug",
                                 "template.os", "vmPassword", "sshPublicKeys.0", "inputs" };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                if (!has_field(&err, fields[i]))
                        fail_msg("missing %s in %s", fields[i], json_dumps(err.details, JSON_COMPACT));
        assert_false(has_field(&err, "plan.ramMB"));
        na_error_clear(&err);

        /* Windows: a password, never keys. */
        _cleanup_json_ json_t *win = create_params();
        json_object_set_new(json_object_get(win, "template"), "os", json_string("windows"));
        json_object_set_new(win, "sshPublicKeys", json_pack("[s]", KEY_ED));
        assert_int_equal(proto_vps_create_decode(win, &p, &err), -EINVAL);
        expect_fields(&err, "sshPublicKeys", "windows keys");
        na_error_clear(&err);
        json_object_del(win, "sshPublicKeys");
        json_object_del(win, "vmPassword");
        assert_int_equal(proto_vps_create_decode(win, &p, &err), -EINVAL);
        expect_fields(&err, "vmPassword", "windows password");
        na_error_clear(&err);

        /* Bounds of the plan. */
        _cleanup_json_ json_t *big = create_params();
        json_object_set_new(json_object_get(big, "plan"), "cpuCores", json_integer(256));
        json_object_set_new(json_object_get(big, "plan"), "cpuThreads", json_integer(8));
        assert_int_equal(proto_vps_create_decode(big, &p, &err), -EINVAL);
        expect_fields(&err, "plan.cpuThreads", "vcpu product");
        na_error_clear(&err);
        _cleanup_json_ json_t *empty = json_object();
        assert_int_equal(proto_vps_create_decode(empty, &p, &err), -EINVAL);
        expect_fields(&err, "name,hostname,plan,template,network", "empty");
        na_error_clear(&err);
}

/* ---- power, exec, upgrade, snapshots, backups ---- */

static void test_small_decoders(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_power *pw = NULL;
        _cleanup_json_ json_t *a = json_pack("{s:s}", "action", "stop");
        assert_int_equal(proto_vps_power_decode(a, &pw, &err), 0);
        assert_int_equal(pw->action, PROTO_VPS_POWER_STOP);
        assert_int_equal(pw->grace_sec, 60);
        proto_vps_power_free(pw);
        _cleanup_json_ json_t *b = json_pack("{s:s, s:i}", "action", "force-stop", "graceSec", 0);
        assert_int_equal(proto_vps_power_decode(b, &pw, &err), 0);
        assert_int_equal(pw->action, PROTO_VPS_POWER_FORCE_STOP);
        assert_int_equal(pw->grace_sec, 0);
        proto_vps_power_free(pw);
        _cleanup_json_ json_t *c = json_pack("{s:s, s:i}", "action", "suspend", "graceSec", 4000);
        assert_int_equal(proto_vps_power_decode(c, &pw, &err), -EINVAL);
        expect_fields(&err, "action,graceSec", "power");
        na_error_clear(&err);

        struct proto_vps_exec *ex = NULL;
        _cleanup_json_ json_t *e1 = json_pack("{s:[s, s]}", "command", "/bin/echo", "hi; rm -rf /");
        assert_int_equal(proto_vps_exec_decode(e1, &ex, &err), 0);
        assert_string_equal(ex->argv[1], "hi; rm -rf /"); /* one argument, never a shell line */
        assert_int_equal(ex->timeout_sec, 60);
        proto_vps_exec_free(ex);
        _cleanup_json_ json_t *e2 = json_pack("{s:[], s:i}", "command", "timeoutSec", 0);
        assert_int_equal(proto_vps_exec_decode(e2, &ex, &err), -EINVAL);
        expect_fields(&err, "command,timeoutSec", "exec empty");
        na_error_clear(&err);
        json_t *many = json_array();
        for (int i = 0; i < 101; i++)
                json_array_append_new(many, json_string("x"));
        _cleanup_json_ json_t *e3 = json_pack("{s:o}", "command", many);
        assert_int_equal(proto_vps_exec_decode(e3, &ex, &err), -EINVAL);
        expect_fields(&err, "command", "exec 101");
        na_error_clear(&err);
        char longarg[1002];
        memset(longarg, 'a', 1001);
        longarg[1001] = '\0';
        _cleanup_json_ json_t *e4 = json_pack("{s:[s, s, i]}", "command", "/bin/echo", longarg, 5);
        assert_int_equal(proto_vps_exec_decode(e4, &ex, &err), -EINVAL);
        expect_fields(&err, "command.1,command.2", "exec items");
        na_error_clear(&err);

        struct proto_vps_upgrade *up = NULL;
        _cleanup_json_ json_t *u = json_pack("{s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}}", "plan", "cpuCores", 4,
                                             "cpuThreads", 1, "ramMB", 4096, "storageMB", 40960,
                                             "networkSpeedLimitMbps", 0, "bandwidthLimitGb", 0, "maxSnapshots", 5);
        assert_int_equal(proto_vps_upgrade_decode(u, &up, &err), 0);
        assert_int_equal(up->plan.ram_mb, 4096);
        proto_vps_upgrade_free(up);
        _cleanup_json_ json_t *u2 = json_pack("{s:{s:i}}", "plan", "cpuCores", 4);
        assert_int_equal(proto_vps_upgrade_decode(u2, &up, &err), -EINVAL);
        assert_true(has_field(&err, "plan.ramMB"));
        na_error_clear(&err);

        struct proto_vps_snapshot_create *sc = NULL;
        _cleanup_json_ json_t *s1 = json_pack("{s:s, s:s, s:i}", "snapshotId", "3f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
                                              "name", "before", "maxSnapshots", 3);
        assert_int_equal(proto_vps_snapshot_create_decode(s1, &sc, &err), 0);
        assert_string_equal(sc->name, "before");
        free(sc);
        _cleanup_json_ json_t *s2 = json_pack("{s:s, s:s}", "snapshotId", "../etc", "name", "a\nb");
        assert_int_equal(proto_vps_snapshot_create_decode(s2, &sc, &err), -EINVAL);
        expect_fields(&err, "snapshotId,name,maxSnapshots", "snapshot");
        na_error_clear(&err);
        struct proto_vps_snapshot_ref *sr = NULL;
        _cleanup_json_ json_t *s3 = json_object();
        assert_int_equal(proto_vps_snapshot_ref_decode(s3, &sr, &err), -EINVAL);
        expect_fields(&err, "snapshotId", "snapshot ref");
        na_error_clear(&err);

        struct proto_vps_backup_create *bc = NULL;
        _cleanup_json_ json_t *b1 = json_pack("{s:s, s:{s:i, s:i, s:n}}", "backupId", "b-1", "limits", "maxStorageGB",
                                              50, "maxBackups", 7, "retentionDays");
        assert_int_equal(proto_vps_backup_create_decode(b1, &bc, &err), 0);
        assert_int_equal(bc->limits.max_storage_gb, 50);
        assert_int_equal(bc->limits.max_backups, 7);
        assert_int_equal(bc->limits.retention_days, -1);
        free(bc);
        _cleanup_json_ json_t *b2 = json_pack("{s:s, s:{s:i, s:s}}", "backupId", "a b", "limits", "maxBackups", 0,
                                              "retentionDays", "7");
        assert_int_equal(proto_vps_backup_create_decode(b2, &bc, &err), -EINVAL);
        assert_true(has_field(&err, "backupId"));
        assert_true(has_field(&err, "limits.maxBackups"));
        assert_true(has_field(&err, "limits.retentionDays"));
        na_error_clear(&err);
        struct proto_vps_backup_ref *br = NULL;
        _cleanup_json_ json_t *b3 = json_pack("{s:s}", "backupId", "x/../../y");
        assert_int_equal(proto_vps_backup_ref_decode(b3, &br, &err), -EINVAL);
        na_error_clear(&err);
}

/* ---- vps.reinstall: the rules as a table ---- */

struct reinstall_case {
        const char *name;
        const char *params;    /* JSON */
        bool cur_password;     /* what the server has now */
        int cur_keys;
        enum proto_vps_os os;  /* os of the template the server ends on */
        const char *errors;    /* NULL: succeeds; else the fields that must carry _errors ("_": the payload) */
};

#define UUID_K "\"0c4f2d8e-1b5a-4c3d-9e7f-6a8b9c0d1e2f\""
#define KEY_J "\"" KEY_ED "\""
#define LIN PROTO_VPS_OS_LINUX
#define WIN PROTO_VPS_OS_WINDOWS

static const struct reinstall_case reinstall_cases[] = {
        { "empty keeps all", "{}", true, 0, LIN, NULL },
        { "empty keeps a key", "{}", false, 1, LIN, NULL },
        { "new hostname", "{\"hostname\":\"web-2\"}", true, 0, LIN, NULL },
        { "hostname 63", "{\"hostname\":\"a12345678901234567890123456789012345678901234567890123456789012\"}", true, 0,
          LIN, NULL },
        { "hostname 64", "{\"hostname\":\"a123456789012345678901234567890123456789012345678901234567890123\"}", true,
          0, LIN, "hostname" },
        { "hostname empty", "{\"hostname\":\"\"}", true, 0, LIN, "hostname" },
        { "hostname leading hyphen", "{\"hostname\":\"-web\"}", true, 0, LIN, "hostname" },
        { "hostname trailing hyphen", "{\"hostname\":\"web-\"}", true, 0, LIN, "hostname" },
        { "hostname underscore", "{\"hostname\":\"web_2\"}", true, 0, LIN, "hostname" },
        { "hostname dot", "{\"hostname\":\"web.example\"}", true, 0, LIN, "hostname" },
        { "hostname null", "{\"hostname\":null}", true, 0, LIN, "hostname" },
        { "hostname number", "{\"hostname\":42}", true, 0, LIN, "hostname" },
        { "password 8", "{\"vmPassword\":\"Secret#1\"}", false, 1, LIN, NULL },
        { "password 64", "{\"vmPassword\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaA1!x\"}", false, 1,
          LIN, NULL },
        { "password 7", "{\"vmPassword\":\"Secr#12\"}", true, 0, LIN, "vmPassword" },
        { "password 65", "{\"vmPassword\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaA1!xy\"}", true, 0,
          LIN, "vmPassword" },
        { "password no upper", "{\"vmPassword\":\"secret#123\"}", true, 0, LIN, "vmPassword" },
        { "password no lower", "{\"vmPassword\":\"SECRET#123\"}", true, 0, LIN, "vmPassword" },
        { "password no digit", "{\"vmPassword\":\"Secret#abc\"}", true, 0, LIN, "vmPassword" },
        { "password no symbol", "{\"vmPassword\":\"Secret1234\"}", true, 0, LIN, "vmPassword" },
        { "password control char", "{\"vmPassword\":\"Secret#1\\t\"}", true, 0, LIN, "vmPassword" },
        { "password unicode symbol", "{\"vmPassword\":\"P\\u00e4ssw\\u00f6rd1\"}", true, 0, LIN, NULL },
        { "password not a string", "{\"vmPassword\":12345678}", true, 0, LIN, "vmPassword" },
        { "password cleared, key kept", "{\"vmPassword\":null}", true, 1, LIN, NULL },
        { "password cleared, no key", "{\"vmPassword\":null}", true, 0, LIN, "_" },
        { "key cleared, password kept", "{\"sshKeyId\":null}", true, 1, LIN, NULL },
        { "both cleared", "{\"sshKeyId\":null,\"vmPassword\":null}", true, 1, LIN, "_" },
        { "key cleared, password set", "{\"sshKeyId\":null,\"vmPassword\":\"Secret#123\"}", false, 1, LIN, NULL },
        { "new key", "{\"sshKeyId\":" UUID_K ",\"sshPublicKey\":" KEY_J "}", false, 0, LIN, NULL },
        { "new key, password cleared", "{\"sshKeyId\":" UUID_K ",\"sshPublicKey\":" KEY_J ",\"vmPassword\":null}", true,
          0, LIN, NULL },
        { "key id without key", "{\"sshKeyId\":" UUID_K "}", true, 0, LIN, "sshPublicKey" },
        { "key without key id", "{\"sshPublicKey\":" KEY_J "}", true, 0, LIN, "sshPublicKey" },
        { "key id not a uuid", "{\"sshKeyId\":\"key-1\",\"sshPublicKey\":" KEY_J "}", true, 0, LIN, "sshKeyId" },
        { "key not a key", "{\"sshKeyId\":" UUID_K ",\"sshPublicKey\":\"hello\"}", true, 0, LIN, "sshPublicKey" },
        { "windows keeps password", "{\"templateId\":\"win\"}", true, 0, WIN, NULL },
        { "windows new password", "{\"templateId\":\"win\",\"vmPassword\":\"Secret#123\",\"sshKeyId\":null}", false,
          1, WIN, NULL },
        { "windows refuses a key", "{\"templateId\":\"win\",\"sshKeyId\":" UUID_K ",\"sshPublicKey\":" KEY_J "}",
          true, 0, WIN, "sshKeyId" },
        { "windows refuses a kept key", "{\"templateId\":\"win\"}", true, 1, WIN, "sshKeyId" },
        { "windows needs a password", "{\"templateId\":\"win\",\"sshKeyId\":null}", false, 1, WIN, "vmPassword" },
        { "windows password cleared", "{\"templateId\":\"win\",\"vmPassword\":null}", true, 0, WIN, "vmPassword" },
        { "windows, nothing at all", "{\"templateId\":\"win\"}", false, 0, WIN, "vmPassword" },
        { "template null", "{\"templateId\":null}", true, 0, LIN, "templateId" },
        { "template empty", "{\"templateId\":\"\"}", true, 0, LIN, "templateId" },
        { "image slug too long",
          "{\"templateImageSlug\":\"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
          "123456789012345678901\"}",
          true, 0, LIN, "templateImageSlug" },
        { "image slug null", "{\"templateImageSlug\":null}", true, 0, LIN, "templateImageSlug" },
        { "inputs cleared", "{\"inputs\":null}", true, 0, LIN, NULL },
        { "inputs set", "{\"inputs\":{\"role\":\"db\",\"workers\":4}}", true, 0, LIN, NULL },
        { "inputs not an object", "{\"inputs\":\"role=db\"}", true, 0, LIN, "inputs" },
        { "inputs nested", "{\"inputs\":{\"role\":[\"db\"]}}", true, 0, LIN, "inputs.role" },
        { "many problems at once",
          "{\"hostname\":\"-x-\",\"vmPassword\":\"weak\",\"sshKeyId\":\"nope\",\"inputs\":5,\"templateId\":null}", true,
          0, LIN, "hostname,vmPassword,sshKeyId,inputs,templateId" },
};

static void test_reinstall_table(void **state)
{
        size_t n = sizeof(reinstall_cases) / sizeof(reinstall_cases[0]);
        assert_true(n >= 30);
        _cleanup_json_ json_t *cur_inputs = json_pack("{s:s}", "role", "web");
        for (size_t i = 0; i < n; i++) {
                const struct reinstall_case *c = &reinstall_cases[i];
                json_error_t jerr;
                _cleanup_json_ json_t *params = json_loads(c->params, 0, &jerr);
                if (!params)
                        fail_msg("case '%s': bad JSON: %s", c->name, jerr.text);
                struct na_error err = NA_ERROR_INIT;
                struct proto_vps_reinstall *req = NULL;
                int r = proto_vps_reinstall_decode(params, &req, &err);
                struct proto_vps_install inst;
                if (r == 0) {
                        struct proto_vps_install_state cur = {
                                .hostname = "web1",
                                .template_id = "debian",
                                .image_slug = "12",
                                .inputs = cur_inputs,
                                .has_password = c->cur_password,
                                .n_ssh_keys = (size_t)c->cur_keys,
                                .ssh_key_id = NULL,
                        };
                        r = proto_vps_reinstall_resolve(req, &cur, c->os, &inst, &err);
                        if (r == 0) {
                                /* The outcome keeps what was omitted. */
                                assert_non_null(inst.hostname);
                                if (!json_object_get(params, "hostname"))
                                        assert_string_equal(inst.hostname, "web1");
                                if (!json_object_get(params, "templateId"))
                                        assert_string_equal(inst.template_id, "debian");
                                if (!json_object_get(params, "inputs"))
                                        assert_ptr_equal(inst.inputs, cur_inputs);
                                if (json_is_null(json_object_get(params, "inputs")))
                                        assert_null(inst.inputs);
                        }
                }
                if (c->errors == NULL) {
                        if (r != 0)
                                fail_msg("case '%s': expected success, got %s: %s", c->name, err.code, err.message);
                } else {
                        if (r == 0)
                                fail_msg("case '%s': expected errors on %s, got success", c->name, c->errors);
                        expect_fields(&err, c->errors, c->name);
                        json_t *out = na_error_to_json(&err);
                        assert_int_equal(json_integer_value(json_object_get(out, "httpStatus")), 422);
                        json_decref(out);
                }
                na_error_clear(&err);
                proto_vps_reinstall_free(req);
        }
}

static void test_reinstall_ops(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_reinstall *req = NULL;
        _cleanup_json_ json_t *p = json_pack("{s:s, s:n, s:n}", "vmPassword", "Secret#123", "sshKeyId", "inputs");
        assert_int_equal(proto_vps_reinstall_decode(p, &req, &err), 0);
        assert_int_equal(req->password_op, PROTO_VPS_SET);
        assert_int_equal(req->key_op, PROTO_VPS_CLEAR);
        assert_int_equal(req->inputs_op, PROTO_VPS_CLEAR);
        assert_null(req->hostname);
        proto_vps_reinstall_free(req);
}

/* ---- encoders ---- */

static void test_encoders(void **state)
{
        struct proto_vps_server s = {
                .id = "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
                .state = PROTO_VPS_INSTALLING,
                .hostname = "web1",
                .plan = { 2, 2, 2048, 20480, 100, 1000, 3 },
                .template_id = "debian",
                .image_slug = "12",
                .os = PROTO_VPS_OS_LINUX,
                .mac = "52:54:00:aa:bb:cc",
                .ip_addresses = { "203.0.113.7" },
                .n_ip_addresses = 1,
                .created_at_ms = 1795300000123,
        };
        _cleanup_json_ json_t *j = proto_vps_server_encode(&s);
        _cleanup_json_ json_t *want = json_pack(
                "{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:[s], s:s, s:{s:s, s:s, s:s}, s:s}", "id",
                "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "state", "installing", "hostname", "web1", "cpuCores", 2,
                "cpuThreads", 2, "ramMB", 2048, "storageMB", 20480, "ipAddresses", "203.0.113.7", "macAddress",
                "52:54:00:aa:bb:cc", "template", "id", "debian", "imageSlug", "12", "os", "linux", "createdAt",
                "2026-11-21T22:26:40.123Z");
        if (!json_equal(j, want))
                fail_msg("server: %s", json_dumps(j, JSON_COMPACT));

        struct proto_vps_snapshot snaps[2] = { { "s1", "first", 1795300000000, 0, false },
                                               { "s2", "second", 1795300001000, 4096, true } };
        _cleanup_json_ json_t *sl = proto_vps_snapshot_list_encode(snaps, 2);
        _cleanup_json_ json_t *swant = json_pack(
                "[{s:s, s:s, s:s, s:i, s:b}, {s:s, s:s, s:s, s:i, s:b}]", "snapshotId", "s1", "name", "first",
                "createdAt", "2026-11-21T22:26:40.000Z", "sizeBytes", 0, "current", 0, "snapshotId", "s2", "name",
                "second", "createdAt", "2026-11-21T22:26:41.000Z", "sizeBytes", 4096, "current", 1);
        assert_true(json_equal(sl, swant));

        struct proto_vps_backup b = { "b1", 1795300000000, 123456, "ab" };
        _cleanup_json_ json_t *bj = proto_vps_backup_encode(&b);
        assert_string_equal(json_string_value(json_object_get(bj, "sha256")), "ab");
        assert_int_equal(json_integer_value(json_object_get(bj, "sizeBytes")), 123456);
        _cleanup_json_ json_t *bl = proto_vps_backup_list_encode(NULL, 0);
        assert_int_equal(json_array_size(bl), 0);

        struct proto_vps_status st = { PROTO_VPS_RUNNING, 42, 1234567890123ULL, 1024 };
        _cleanup_json_ json_t *sj = proto_vps_status_encode(&st);
        _cleanup_json_ json_t *stwant = json_pack("{s:s, s:i, s:I, s:i}", "state", "running", "uptimeSec", 42,
                                                  "cpuTimeNs", (json_int_t)1234567890123LL, "memoryMB", 1024);
        assert_true(json_equal(sj, stwant));

        struct proto_vps_exec_result r = { 0 };
        r.exit_code = 3;
        r.out = strdup("ok\xff\xfe\n");
        r.out_len = 5;
        r.err = malloc(4);
        memcpy(r.err, "a\0b", 4);
        r.err_len = 3;
        r.truncated = true;
        _cleanup_json_ json_t *ej = proto_vps_exec_result_encode(&r);
        assert_non_null(ej);
        assert_string_equal(json_string_value(json_object_get(ej, "stdout")), "ok\xef\xbf\xbd\xef\xbf\xbd\n");
        assert_string_equal(json_string_value(json_object_get(ej, "stderr")), "a\xef\xbf\xbd" "b");
        assert_int_equal(json_integer_value(json_object_get(ej, "exitCode")), 3);
        assert_true(json_is_true(json_object_get(ej, "truncated")));
        proto_vps_exec_result_clear(&r);
        assert_string_equal(proto_vps_state_name(PROTO_VPS_CRASHED), "crashed");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hostname_rule),  cmocka_unit_test(test_password_rule),
                cmocka_unit_test(test_ssh_key_rule),   cmocka_unit_test(test_create_decode),
                cmocka_unit_test(test_network_decode),
                cmocka_unit_test(test_small_decoders), cmocka_unit_test(test_reinstall_table),
                cmocka_unit_test(test_reinstall_ops),  cmocka_unit_test(test_encoders),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
