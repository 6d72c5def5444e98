/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/base/config.h: defaults, a clean file, and every error path, each reported as
 * exactly "FILE:LINE: key: reason".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "agent/base/config.h"
#include "agent/base/log.h"
#include "common/unit.h"

#define NODE_ID "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

struct fixture {
        char *dir;
        char *token;    /* a good token file */
        char *conf;     /* path of the file under test */
        char *report;   /* what config_load wrote */
        unsigned problems;
        struct agent_config *cfg;
};

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("config");
        f->token = unit_write_str(f->dir, "token", "s3cr3t-token\n", 0600);
        if (asprintf(&f->conf, "%s/nodeagent.conf", f->dir) < 0)
                abort();
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        config_free(f->cfg);
        free(f->report);
        free(f->conf);
        free(f->token);
        unit_rmrf_free(f->dir);
        free(f);
        return 0;
}

/* Load text as the config file; the report and the problem count land in f. */
static void load(struct fixture *f, const char *text)
{
        free(unit_write_str(NULL, f->conf, text, 0644));
        config_free(f->cfg);
        f->cfg = NULL;
        free(f->report);
        f->report = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&f->report, &len);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int r = config_load(f->conf, out, &f->problems, &f->cfg, &err);
        fclose(out);
        if (r < 0)
                fail_msg("config_load failed: %s", err.message);
        assert_non_null(f->cfg);
}

/* The three required keys (lines 1..5), then extra (from line 6 on). */
static void load_with(struct fixture *f, const char *extra_controller, const char *extra)
{
        char *text;
        if (asprintf(&text,
                     "[agent]\n"                          /* 1 */
                     "node_id = " NODE_ID "\n"           /* 2 */
                     "[controller]\n"                     /* 3 */
                     "url = https://api.example.net/agent/v1\n" /* 4 */
                     "token_file = %s\n"                  /* 5 */
                     "%s"                                 /* 6.. in [controller] */
                     "%s",
                     f->token, extra_controller ? extra_controller : "", extra ? extra : "") < 0)
                abort();
        load(f, text);
        free(text);
}

/* The report is exactly these lines ("LINE: key: reason", the file name is added). */
static void expect_report(const struct fixture *f, unsigned n, ...)
{
        char want[4096] = "";
        size_t used = 0;
        va_list ap;
        va_start(ap, n);
        for (unsigned i = 0; i < n; i++)
                used += (size_t)snprintf(want + used, sizeof(want) - used, "%s:%s\n", f->conf, va_arg(ap, const char *));
        va_end(ap);
        if (strcmp(f->report, want) != 0 || f->problems != n)
                fail_msg("report (%u problems):\n%s\nwanted (%u):\n%s", f->problems, f->report, n, want);
}

static void test_defaults(void **state)
{
        (void)state;
        struct agent_config *cfg = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(config_defaults(&cfg, &err), 0);
        assert_null(cfg->node_id);
        assert_null(cfg->url);
        assert_null(cfg->token_file);
        assert_string_equal(cfg->state_dir, "/var/lib/nodeagent");
        assert_int_equal(cfg->log_level, LOG_LEVEL_INFO);
        assert_int_equal(cfg->max_parallel_jobs, 4);
        assert_string_equal(cfg->control_socket, "/run/nodeagent/control.sock");
        assert_int_equal(cfg->drain_timeout_sec, 30);
        assert_true(cfg->seccomp);
        assert_null(cfg->sandbox);
        assert_int_equal(config_sandbox(cfg), AGENT_SANDBOX_STRICT); /* seccomp = true: the default filter */
        assert_false(cfg->allow_insecure_http);
        assert_int_equal(cfg->poll_wait_sec, 30);
        assert_null(cfg->ca_file);
        assert_null(cfg->pinned_pubkey);
        assert_null(cfg->client_cert);
        assert_null(cfg->client_key);
        assert_string_equal(cfg->vm_uri, "qemu:///system");
        assert_string_equal(cfg->templates_file, "/etc/nodeagent/templates.json");
        assert_string_equal(cfg->images_dir, "/var/lib/nodeagent/images");
        assert_true(cfg->fw_enabled);
        assert_string_equal(cfg->fw_table, "nodeagent");
        assert_int_equal(cfg->fw_shards, 16);
        assert_int_equal(cfg->metrics_interval_sec, 10);
        assert_null(cfg->prometheus_listen);
        config_free(cfg);
        config_free(NULL);
}

static void test_clean_minimal(void **state)
{
        struct fixture *f = *state;
        load_with(f, NULL, NULL);
        expect_report(f, 0);
        assert_string_equal(f->cfg->node_id, NODE_ID);
        assert_string_equal(f->cfg->url, "https://api.example.net/agent/v1");
        assert_string_equal(f->cfg->token_file, f->token);
        assert_string_equal(f->cfg->path, f->conf);
        /* Everything else at its default. */
        assert_string_equal(f->cfg->state_dir, "/var/lib/nodeagent");
        assert_int_equal(f->cfg->max_parallel_jobs, 4);
        assert_int_equal(f->cfg->poll_wait_sec, 30);
        assert_true(f->cfg->fw_enabled);
}

static void test_clean_full(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *ca = unit_write_str(f->dir, "ca.pem", "x", 0644);
        char *text;
        if (asprintf(&text,
                     "# nodeagent configuration\r\n"
                     "; another comment style\n"
                     "\n"
                     "  [ agent ]  \n"
                     "node_id=" NODE_ID "\n"
                     "state_dir = \"/srv/nodeagent state\"\n"
                     "log_level = debug\n"
                     "max_parallel_jobs = 256\n"
                     "control_socket = /run/na/ctl.sock\r\n"
                     "drain_timeout_sec = 0\n"
                     "seccomp = no\n"
                     "[controller]\n"
                     "url = http://127.0.0.1:8443/agent/v1\n"
                     "allow_insecure_http = yes\n"
                     "token_file = %s\n"
                     "ca_file = %s\n"
                     "pinned_pubkey = sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
                     "client_cert = /etc/nodeagent/client.pem\n"
                     "client_key = /etc/nodeagent/client.key\n"
                     "poll_wait_sec = 60\n"
                     "[vm]\n"
                     "uri = test:///default\n"
                     "templates_file = /etc/t.json\n"
                     "images_dir = /srv/images\n"
                     "[firewall]\n"
                     "enabled = 0\n"
                     "table = na_test-1\n"
                     "shards = 8\n"
                     "[metrics]\n"
                     "interval_sec = 3600\n"
                     "prometheus_listen = [::1]:9464\n"
                     "[agent]\n" /* a section may come back */
                     "\t\n",
                     f->token, ca) < 0)
                abort();
        load(f, text);
        free(text);
        expect_report(f, 0);
        struct agent_config *c = f->cfg;
        assert_string_equal(c->state_dir, "/srv/nodeagent state");
        assert_int_equal(c->log_level, LOG_LEVEL_DEBUG);
        assert_int_equal(c->max_parallel_jobs, 256);
        assert_string_equal(c->control_socket, "/run/na/ctl.sock");
        assert_int_equal(c->drain_timeout_sec, 0);
        assert_false(c->seccomp);
        assert_int_equal(config_sandbox(c), AGENT_SANDBOX_OFF); /* an old configuration's seccomp = no */
        assert_string_equal(c->url, "http://127.0.0.1:8443/agent/v1");
        assert_true(c->allow_insecure_http);
        assert_string_equal(c->ca_file, ca);
        assert_string_equal(c->pinned_pubkey, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
        assert_string_equal(c->client_cert, "/etc/nodeagent/client.pem");
        assert_string_equal(c->client_key, "/etc/nodeagent/client.key");
        assert_int_equal(c->poll_wait_sec, 60);
        assert_string_equal(c->vm_uri, "test:///default");
        assert_string_equal(c->templates_file, "/etc/t.json");
        assert_string_equal(c->images_dir, "/srv/images");
        assert_false(c->fw_enabled);
        assert_string_equal(c->fw_table, "na_test-1");
        assert_int_equal(c->fw_shards, 8);
        assert_int_equal(c->metrics_interval_sec, 3600);
        assert_string_equal(c->prometheus_listen, "[::1]:9464");
}

static void test_structure_errors(void **state)
{
        struct fixture *f = *state;

        load_with(f, "node_idd = 1\n", NULL);
        expect_report(f, 1, "6: node_idd: unknown key in [controller]");

        load_with(f, NULL, "[agent]\nnodeid = " NODE_ID "\n");
        expect_report(f, 1, "7: nodeid: unknown key in [agent]");

        /* One problem, one line: the keys of an unknown section are not listed again. */
        load_with(f, NULL, "[nope]\nkey = 1\n");
        expect_report(f, 1, "6: nope: unknown section (known: agent, controller, vm, firewall, metrics)");

        load_with(f, NULL, "just some words\n");
        expect_report(f, 1, "6: just some words: expected key = value");

        load_with(f, NULL, "[agent\nlog_level = debug\n");
        expect_report(f, 1, "6: [agent: malformed section header (expected [name])");

        load_with(f, NULL, "[agent] trailing\n");
        expect_report(f, 1, "6: [agent] trailing: malformed section header (expected [name])");

        load_with(f, "url = https://other.example.net\n", NULL);
        expect_report(f, 1, "6: url: set twice (first on line 4)");

        load_with(f, NULL, "[agent]\nlog_level = info\n[vm]\n[agent]\nlog_level = debug\n");
        expect_report(f, 1, "10: log_level: set twice (first on line 7)");
        assert_int_equal(f->cfg->log_level, LOG_LEVEL_INFO); /* the first one stands */

        /* A key before any section. */
        char *text;
        if (asprintf(&text, "log_level = debug\n[agent]\nnode_id = " NODE_ID "\n[controller]\nurl = https://x\ntoken_file = %s\n",
                     f->token) < 0)
                abort();
        load(f, text);
        free(text);
        expect_report(f, 1, "1: log_level: key outside of a section");

        load_with(f, NULL, "= value\n");
        expect_report(f, 1, "6: : unknown key in [controller]");
}

static void test_value_errors(void **state)
{
        struct fixture *f = *state;
        static const struct {
                const char *section, *line, *report;
        } cases[] = {
                { "agent", "seccomp = maybe", "seccomp: must be true or false" },
                { "agent", "seccomp = TRUE", "seccomp: must be true or false" },
                { "agent", "sandbox = paranoid", "sandbox: must be strict (allow-list), denylist or off" },
                { "agent", "sandbox = Strict", "sandbox: must be strict (allow-list), denylist or off" },
                { "agent", "sandbox =", "sandbox: must be strict (allow-list), denylist or off" },
                { "agent", "max_parallel_jobs = four", "max_parallel_jobs: must be a whole number" },
                { "agent", "max_parallel_jobs = 4x", "max_parallel_jobs: must be a whole number" },
                { "agent", "max_parallel_jobs = -1", "max_parallel_jobs: must be a whole number" },
                { "agent", "max_parallel_jobs = +4", "max_parallel_jobs: must be a whole number" },
                { "agent", "max_parallel_jobs =", "max_parallel_jobs: must be a whole number" },
                { "agent", "max_parallel_jobs = 99999999999999999999", "max_parallel_jobs: must be a whole number" },
                { "agent", "max_parallel_jobs = 0", "max_parallel_jobs: must be between 1 and 256" },
                { "agent", "max_parallel_jobs = 257", "max_parallel_jobs: must be between 1 and 256" },
                { "agent", "drain_timeout_sec = 3601", "drain_timeout_sec: must be between 0 and 3600" },
                { "agent", "log_level = verbose", "log_level: must be one of error, warn, info, debug" },
                { "agent", "state_dir = var/lib/nodeagent", "state_dir: must be an absolute path" },
                { "agent", "control_socket = ", "control_socket: must be an absolute path" },
                { "controller", "poll_wait_sec = 61", "poll_wait_sec: must be between 1 and 60" },
                { "controller", "poll_wait_sec = 0", "poll_wait_sec: must be between 1 and 60" },
                { "controller", "ca_file = ca.pem", "ca_file: must be an absolute path" },
                { "controller", "pinned_pubkey = abc", "pinned_pubkey: must be sha256//<base64 of the public key's SHA-256>" },
                { "controller", "pinned_pubkey = sha256//", "pinned_pubkey: must be sha256//<base64 of the public key's SHA-256>" },
                { "controller", "allow_insecure_http = sometimes", "allow_insecure_http: must be true or false" },
                { "vm", "uri = ", "uri: must not be empty" },
                { "vm", "restart_stagger_sec = 3601", "restart_stagger_sec: must be between 0 and 3600" },
                { "firewall", "enabled = on", "enabled: must be true or false" },
                { "firewall", "table = bad table!", "table: must be 1..32 letters, digits, '_' or '-'" },
                { "firewall", "table = t23456789012345678901234567890123", "table: must be 1..32 letters, digits, '_' or '-'" },
                { "firewall", "shards = 0", "shards: must be between 1 and 64" },
                { "firewall", "shards = 65", "shards: must be between 1 and 64" },
                { "metrics", "interval_sec = 0", "interval_sec: must be between 1 and 3600" },
                { "metrics", "prometheus_listen = 0.0.0.0:9464", "prometheus_listen: must be a loopback address (127.0.0.0/8, [::1] or localhost)" },
                { "metrics", "prometheus_listen = 10.0.0.1:9464", "prometheus_listen: must be a loopback address (127.0.0.0/8, [::1] or localhost)" },
                { "metrics", "prometheus_listen = 127.evil.example:9464", "prometheus_listen: must be a loopback address (127.0.0.0/8, [::1] or localhost)" },
                { "metrics", "prometheus_listen = localhost.evil.example:9464", "prometheus_listen: must be a loopback address (127.0.0.0/8, [::1] or localhost)" },
                { "metrics", "prometheus_listen = 127.0.0.1", "prometheus_listen: must be ADDRESS:PORT on a loopback address, e.g. 127.0.0.1:9464" },
                { "metrics", "prometheus_listen = :9464", "prometheus_listen: must be ADDRESS:PORT on a loopback address, e.g. 127.0.0.1:9464" },
                { "metrics", "prometheus_listen = 127.0.0.1:0", "prometheus_listen: port must be 1..65535" },
                { "metrics", "prometheus_listen = 127.0.0.1:65536", "prometheus_listen: port must be 1..65535" },
                { "metrics", "prometheus_listen = 127.0.0.1:http", "prometheus_listen: port must be 1..65535" },
                { "apps", "sftp_listen = 2022", "sftp_listen: must be ADDRESS:PORT (e.g. 0.0.0.0:2022), or empty for off" },
                { "apps", "sftp_listen = 0.0.0.0:0", "sftp_listen: port must be 1..65535" },
                { "apps", "transfer_part_size_mb = 4", "transfer_part_size_mb: must be between 5 and 5120" },
                { "apps", "backups_dir = backups", "backups_dir: must be an absolute path" },
                { "apps", "network = 10.88.0.0", "network: must be an IPv4 range ADDRESS/BITS with 8..24 bits, e.g. 10.88.0.0/16" },
                { "apps", "network = 10.88.0.1/16", "network: must be an IPv4 range ADDRESS/BITS whose address has no host bits, e.g. 10.88.0.0/16" },
                { "apps", "network = 10.88.0.0/30", "network: must be an IPv4 range ADDRESS/BITS with 8..24 bits, e.g. 10.88.0.0/16" },
                { "apps", "public_address = example.com", "public_address: must be an IPv4 or IPv6 address" },
                { "apps", "ports = 40000-20000", "ports: must be a port range LOW-HIGH within 1..65535, e.g. 20000-40000" },
                { "apps", "ports = 0-10", "ports: must be a port range LOW-HIGH within 1..65535, e.g. 20000-40000" },
                /* the firewall owns "nodeagent" (the layout before shards) and "nodeagent-00"... */
                { "apps", "nft_table = nodeagent", "nft_table: must differ from [firewall] table and its shard tables (<table>-00 ...)" },
                { "apps", "nft_table = nodeagent-07", "nft_table: must differ from [firewall] table and its shard tables (<table>-00 ...)" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char extra[256], want[256];
                snprintf(extra, sizeof(extra), "[%s]\n%s\n", cases[i].section, cases[i].line);
                snprintf(want, sizeof(want), "7: %s", cases[i].report);
                load_with(f, NULL, extra);
                expect_report(f, 1, want);
        }

        /* Values that are fine at the edges. */
        static const struct {
                const char *section, *line;
        } fine[] = {
                { "agent", "max_parallel_jobs = 1" }, { "agent", "max_parallel_jobs = 256" },
                { "agent", "drain_timeout_sec = 3600" }, { "agent", "log_level = error" }, { "agent", "log_level = warn" },
                { "agent", "seccomp = 1" }, { "agent", "sandbox = strict" }, { "agent", "sandbox = off" },
                { "agent", "sandbox = denylist" }, { "agent", "node_id = 6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B" },
                { "metrics", "prometheus_listen = 127.0.0.1:9464" }, { "metrics", "prometheus_listen = 127.1.2.3:1" },
                { "metrics", "prometheus_listen = localhost:65535" }, { "firewall", "table = t2345678901234567890123456789012" },
                { "firewall", "shards = 1" }, { "firewall", "shards = 64" },
                { "apps", "sftp_listen = " }, { "apps", "sftp_listen = [::]:2022" }, { "apps", "sftp_listen = 10.0.0.1:22" },
                { "apps", "transfer_part_size_mb = 5120" }, { "apps", "network = 172.16.0.0/12" },
                { "apps", "public_address = 2001:db8::1" }, { "apps", "ports = 1-65535" }, { "apps", "haproxy = " },
                { "apps", "nft_table = nodeagent-7" }, { "apps", "nft_table = nodeagent-apps" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(fine); i++) {
                char extra[256];
                /* node_id in [agent] is set twice otherwise: use a file without it for that case. */
                if (strstr(fine[i].line, "node_id")) {
                        char *text;
                        if (asprintf(&text, "[agent]\n%s\n[controller]\nurl = https://x\ntoken_file = %s\n", fine[i].line, f->token) < 0)
                                abort();
                        load(f, text);
                        free(text);
                } else {
                        snprintf(extra, sizeof(extra), "[%s]\n%s\n", fine[i].section, fine[i].line);
                        load_with(f, NULL, extra);
                }
                if (f->problems)
                        fail_msg("%s refused: %s", fine[i].line, f->report);
        }
}

static void test_missing_required(void **state)
{
        struct fixture *f = *state;
        /* No sections at all: line 0, the file as a whole. */
        load(f, "# nothing here\n");
        expect_report(f, 3, "0: node_id: is required in [agent]", "0: url: is required in [controller]",
                      "0: token_file: is required in [controller]");

        /* The section is there: the problem points at its header. */
        load(f, "\n[agent]\nlog_level = info\n\n[controller]\nurl = https://x\n");
        expect_report(f, 2, "2: node_id: is required in [agent]", "5: token_file: is required in [controller]");

        /* A required key with a bad value is reported for its value, not as missing. */
        char *text;
        if (asprintf(&text, "[agent]\nnode_id = x\n[controller]\nurl = https://x\ntoken_file = %s\n", f->token) < 0)
                abort();
        load(f, text);
        free(text);
        expect_report(f, 1, "2: node_id: must be a UUID (8-4-4-4-12 hexadecimal digits)");
}

static void test_token_file(void **state)
{
        struct fixture *f = *state;
        char line[512], want[600];

        snprintf(line, sizeof(line), "token_file = %s/absent\n", f->dir);
        char *text;
        if (asprintf(&text, "[agent]\nnode_id = " NODE_ID "\n[controller]\nurl = https://x\n%s", line) < 0)
                abort();
        load(f, text);
        free(text);
        snprintf(want, sizeof(want), "5: token_file: token file %s/absent: No such file or directory", f->dir);
        expect_report(f, 1, want);

        _cleanup_free_ char *open_token = unit_write_str(f->dir, "token-0644", "secret", 0644);
        if (asprintf(&text, "[agent]\nnode_id = " NODE_ID "\n[controller]\nurl = https://x\ntoken_file = %s\n", open_token) < 0)
                abort();
        load(f, text);
        free(text);
        snprintf(want, sizeof(want), "5: token_file: token file %s is readable by group or others (mode 0644); chmod 600 it",
                 open_token);
        expect_report(f, 1, want);

        _cleanup_free_ char *group_token = unit_write_str(f->dir, "token-0640", "secret", 0640);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(config_check_token_file(group_token, &err), -EPERM);
        assert_non_null(strstr(err.message, "(mode 0640)"));
        na_error_clear(&err);

        _cleanup_free_ char *empty = unit_write_str(f->dir, "token-empty", "", 0600);
        if (asprintf(&text, "[agent]\nnode_id = " NODE_ID "\n[controller]\nurl = https://x\ntoken_file = %s\n", empty) < 0)
                abort();
        load(f, text);
        free(text);
        snprintf(want, sizeof(want), "5: token_file: token file %s is empty", empty);
        expect_report(f, 1, want);

        assert_int_equal(config_check_token_file(f->dir, &err), -EINVAL);
        assert_non_null(strstr(err.message, "is not a regular file"));
        na_error_clear(&err);
        assert_int_equal(config_check_token_file(f->token, &err), 0);
}

static void test_insecure_http(void **state)
{
        struct fixture *f = *state;
        char *text;
#define WITH_URL(url, extra)                                                                                        \
        do {                                                                                                        \
                if (asprintf(&text, "[agent]\nnode_id = " NODE_ID "\n[controller]\nurl = %s\ntoken_file = %s\n%s", url, \
                             f->token, extra) < 0)                                                                  \
                        abort();                                                                                    \
                load(f, text);                                                                                      \
                free(text);                                                                                         \
        } while (0)

        WITH_URL("http://127.0.0.1:8080/agent/v1", "");
        expect_report(f, 1, "4: url: plain http:// needs allow_insecure_http = true (loopback only)");

        static const char *const loopback[] = {
                "http://127.0.0.1:8080/agent/v1", "http://127.0.0.1/", "http://127.0.0.1", "http://127.9.9.9:1/x",
                "http://localhost:8080/agent/v1", "http://LOCALHOST/", "http://[::1]:8080/agent/v1", "http://[::1]/",
                "http://localhost?x=1",
        };
        for (size_t i = 0; i < ARRAY_SIZE(loopback); i++) {
                WITH_URL(loopback[i], "allow_insecure_http = true\n");
                if (f->problems)
                        fail_msg("%s refused: %s", loopback[i], f->report);
        }

        static const char *const elsewhere[] = {
                "http://api.example.net/agent/v1",
                "http://10.0.0.1:8080/",
                "http://127.0.0.1.nip.example/agent/v1",   /* a name that starts like a loopback address */
                "http://localhost.evil.example/agent/v1",
                "http://localhost@evil.example/agent/v1",  /* userinfo: the host is evil.example */
                "http://127.0.0.1:80@evil.example/",
                "http://[::1].evil.example/",
                "http://[::2]:80/",
                "http://127.0.0.1:0/",
                "http://127.0.0.1:99999/",
                "http:///agent/v1",
        };
        for (size_t i = 0; i < ARRAY_SIZE(elsewhere); i++) {
                WITH_URL(elsewhere[i], "allow_insecure_http = true\n");
                if (f->problems != 1 || !strstr(f->report, ":4: url: plain http:// is allowed only to a loopback address\n"))
                        fail_msg("%s: %s", elsewhere[i], f->report);
        }

        /* https is never checked for loopback; other schemes are refused. */
        WITH_URL("https://api.example.net/agent/v1", "");
        expect_report(f, 0);
        WITH_URL("ftp://api.example.net/", "");
        expect_report(f, 1, "4: url: must be an https:// URL");
        WITH_URL("https://api.example.net/a b", "");
        expect_report(f, 1, "4: url: must not contain spaces");
#undef WITH_URL
}

static void test_client_cert_pair(void **state)
{
        struct fixture *f = *state;
        load_with(f, "client_cert = /etc/nodeagent/client.pem\n", NULL);
        expect_report(f, 1, "6: client_cert: client_cert and client_key go together");
        load_with(f, "client_key = /etc/nodeagent/client.key\n", NULL);
        expect_report(f, 1, "6: client_key: client_cert and client_key go together");
        load_with(f, "client_key = /k\nclient_cert = /c\n", NULL);
        expect_report(f, 0);
}

/* [vm] network_mode and the keys of each mode. */
static void test_vm_network(void **state)
{
        struct fixture *f = *state;
        load_with(f, NULL, NULL);
        expect_report(f, 0);
        assert_string_equal(f->cfg->vm_network_mode, "routed");
        assert_null(f->cfg->vm_uplink);
        load_with(f, NULL, "[vm]\nuplink = eth0\n");
        expect_report(f, 0);
        assert_string_equal(f->cfg->vm_uplink, "eth0");
        load_with(f, NULL, "[vm]\nnetwork_mode = bridged\nbridge = br-public\ngateway4 = 203.0.113.1\ngateway6 = fe80::1\n");
        expect_report(f, 0);
        assert_string_equal(f->cfg->vm_network_mode, "bridged");
        assert_string_equal(f->cfg->vm_bridge, "br-public");
        assert_string_equal(f->cfg->vm_gateway4, "203.0.113.1");
        assert_string_equal(f->cfg->vm_gateway6, "fe80::1");
        load_with(f, NULL, "[vm]\nnetwork_mode = bridged\n");
        expect_report(f, 1, "7: bridge: is required with network_mode = bridged");
        load_with(f, NULL, "[vm]\nnetwork_mode = switched\nbridge = a/b\ngateway4 = 2001:db8::1\ngateway6 = 10.0.0.1\n"
                           "uplink = this-name-is-too-long\n");
        expect_report(f, 5, "7: network_mode: must be routed (addresses routed to each tap) or bridged (taps in [vm] bridge)",
                      "8: bridge: must be a network interface name (1..15 characters, no '/', ':' or spaces)",
                      "9: gateway4: must be an IPv4 address", "10: gateway6: must be an IPv6 address",
                      "11: uplink: must be a network interface name (1..15 characters, no '/', ':' or spaces)");
        /* The keys of the other mode are ignored: a sample file may hold them all. */
        load_with(f, NULL, "[vm]\nnetwork_mode = bridged\nbridge = br0\nuplink = eth0\n");
        expect_report(f, 0);
}

static void test_many_problems_counted(void **state)
{
        struct fixture *f = *state;
        load(f, "[agent]\nnode_id = x\nmax_parallel_jobs = 0\nbogus = 1\n[controller]\nurl = http://example.net\n"
                "poll_wait_sec = 99\n[firewall]\ntable = a b\n");
        expect_report(f, 7, "2: node_id: must be a UUID (8-4-4-4-12 hexadecimal digits)",
                      "3: max_parallel_jobs: must be between 1 and 256", "4: bogus: unknown key in [agent]",
                      "7: poll_wait_sec: must be between 1 and 60", "5: token_file: is required in [controller]",
                      "6: url: plain http:// needs allow_insecure_http = true (loopback only)",
                      "9: table: must be 1..32 letters, digits, '_' or '-'");
}

static void test_unreadable_file(void **state)
{
        struct fixture *f = *state;
        struct agent_config *cfg = NULL;
        unsigned problems = 99;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_free_ char *missing = NULL;
        if (asprintf(&missing, "%s/absent.conf", f->dir) < 0)
                abort();
        assert_int_equal(config_load(missing, stderr, &problems, &cfg, &err), -ENOENT);
        assert_null(cfg);
        assert_non_null(strstr(err.message, missing));
        na_error_clear(&err);

        /* Over 1 MiB: refused as a whole. */
        size_t big = (1u << 20) + 1;
        char *text = malloc(big);
        memset(text, '#', big);
        free(unit_write(NULL, f->conf, text, big, 0600));
        free(text);
        assert_int_equal(config_load(f->conf, stderr, &problems, &cfg, &err), -EFBIG);
        assert_null(cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test_setup_teardown(test_clean_minimal, setup, teardown),
                cmocka_unit_test_setup_teardown(test_clean_full, setup, teardown),
                cmocka_unit_test_setup_teardown(test_structure_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_value_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_missing_required, setup, teardown),
                cmocka_unit_test_setup_teardown(test_token_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_insecure_http, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_cert_pair, setup, teardown),
                cmocka_unit_test_setup_teardown(test_vm_network, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_problems_counted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreadable_file, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
