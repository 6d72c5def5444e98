/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The firewall library against the real kernel, inside a private network namespace
 * (this process unshares one at start; the host's ruleset is never touched): apply,
 * read back, compare with what was set and with `nft list`; disabled servers; rule
 * ids; atomicity when the kernel refuses part of a batch; drift after hand edits;
 * reconcile; remove; concurrent changes; rules written by hand with nft.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/gen.h>
#include <linux/netfilter/nf_tables.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "firewall/fw-internal.h"
#include "firewall/fw.h"
#include "fw-test.h"

#define VPS1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define IF1 "nav6f1c2a3b4c5d"
#define VPS2 "0a1b2c3d-0000-4000-8000-00000000beef"
#define IF2 "nav0a1b2c3d0000"
#define VPS3 "11111111-2222-4333-8444-555555555555"
#define VPS4 "99999999-aaaa-4bbb-8ccc-dddddddddddd"
#define IF4 "nav99999999aaaa"
/* the shard tables (FNV-1a of the tap name % 16): VPS1, VPS2 and VPS4 in 06, VPS3 in 02 */
#define T1 "nodeagent-06"
#define T3 "nodeagent-02"

struct env {
        char dir[64];
        struct fw *fw;
};

static int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        snprintf(e->dir, sizeof(e->dir), "/tmp/fw-netns.XXXXXX");
        if (!mkdtemp(e->dir))
                return -1;
        /* every test starts from an empty ruleset (of this namespace) */
        if (fwt_nft(NULL, "flush ruleset") != 0)
                return -1;
        struct fw_options opt = { .state_dir = e->dir, .netns_fd = -1 };
        struct na_error err = NA_ERROR_INIT;
        if (fw_open(&opt, &e->fw, &err) < 0) {
                print_error("fw_open: %s\n", err.message);
                return -1;
        }
        *state = e;
        return 0;
}

static void rm_state(const char *dir)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/firewall", dir);
        const char *ids[] = { VPS1, VPS2, VPS3, VPS4 };
        for (size_t i = 0; i < 4; i++) {
                char file[600];
                snprintf(file, sizeof(file), "%s/%s.json", path, ids[i]);
                unlink(file);
                snprintf(file, sizeof(file), "%s/%s.nl", path, ids[i]);
                unlink(file);
        }
        rmdir(path);
        rmdir(dir);
}

static int teardown(void **state)
{
        struct env *e = *state;
        fw_close(e->fw);
        rm_state(e->dir);
        free(e);
        return 0;
}

static void load(const char *name, struct fw_config *cfg)
{
        char rel[256];
        snprintf(rel, sizeof(rel), "tests/firewall/golden/%s.json", name);
        char *text = fwt_read_source(rel);
        assert_non_null(text);
        fwt_config(text, cfg);
        free(text);
}

static void assert_same(const struct fw_config *got, const struct fw_config *want)
{
        if (proto_fw_equal(got, want))
                return;
        _cleanup_json_ json_t *g = proto_fw_encode(got), *w = proto_fw_encode(want);
        char *gs = json_dumps(g, JSON_INDENT(1)), *ws = json_dumps(w, JSON_INDENT(1));
        print_error("got:\n%s\nwanted:\n%s\n", gs, ws);
        free(gs);
        free(ws);
        fail();
}

static void set_ok(struct fw *fw, const char *id, const struct fw_config *cfg, struct fw_config *live)
{
        struct na_error err = NA_ERROR_INIT;
        if (fw_set(fw, id, cfg, live, &err) < 0) {
                print_error("fw_set: %s\n", err.message);
                fail();
        }
}

static int drift(struct fw *fw, const char *id, json_t **reasons)
{
        struct na_error err = NA_ERROR_INIT;
        int n = fw_check_drift(fw, id, NULL, reasons, &err);
        if (n < 0) {
                print_error("fw_check_drift: %s\n", err.message);
                fail();
        }
        return n;
}

static bool has_reason(json_t *reasons, const char *fragment)
{
        size_t i;
        json_t *v;
        json_array_foreach(reasons, i, v)
                if (strstr(json_string_value(v), fragment))
                        return true;
        char *d = json_dumps(reasons, 0);
        print_error("no reason with \"%s\" in %s\n", fragment, d);
        free(d);
        return false;
}

/* What fw_set does with ids: kept, or the next free one. */
static void with_ids(const struct fw_config *in, uint32_t next, struct fw_config *out)
{
        assert_int_equal(proto_fw_copy(out, in, NULL), 0);
        for (size_t i = 0; i < out->n_rules; i++)
                if (out->rules[i].id >= next)
                        next = out->rules[i].id + 1;
        for (size_t i = 0; i < out->n_rules; i++)
                if (!out->rules[i].id)
                        out->rules[i].id = next++;
}

static void golden_listing(const char *name)
{
        char *listing = NULL;
        assert_int_equal(fwt_nft(&listing, "-s list table inet " T1), 0);
        char rel[256];
        snprintf(rel, sizeof(rel), "tests/firewall/golden/%s.nft", name);
        fwt_golden(rel, listing);
        free(listing);
}

/* ---- tests ---- */

static void test_round_trip(void **state)
{
        struct env *e = *state;
        const char *names[] = { "basic", "all-fields" };
        for (size_t k = 0; k < 2; k++) {
                struct fw_config cfg, want, live, got;
                load(names[k], &cfg);
                with_ids(&cfg, 1, &want);
                set_ok(e->fw, VPS1, &cfg, &live);
                assert_same(&live, &want);
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
                assert_same(&got, &want);
                _cleanup_json_ json_t *reasons = NULL;
                assert_int_equal(drift(e->fw, VPS1, &reasons), 0);
                /* the kernel's own view, through nft */
                golden_listing(names[k]);
                /* the same configuration again changes nothing */
                proto_fw_clear(&live);
                set_ok(e->fw, VPS1, &want, &live);
                assert_same(&live, &want);
                proto_fw_clear(&cfg);
                proto_fw_clear(&want);
                proto_fw_clear(&live);
                proto_fw_clear(&got);
                assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
                _cleanup_na_error_ struct na_error rerr = NA_ERROR_INIT;
                assert_int_equal(fw_remove(e->fw, VPS1, &rerr), 0);
        }
}

static void test_unknown_server_reads_off(void **state)
{
        struct env *e = *state;
        struct fw_config got;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_get(e->fw, VPS2, &got, &err), 0);
        assert_false(got.enabled);
        assert_int_equal(got.inbound_policy, FW_ACTION_ALLOW);
        assert_int_equal(got.outbound_policy, FW_ACTION_ALLOW);
        assert_int_equal(got.n_rules, 0);
        proto_fw_clear(&got);
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(e->fw, VPS2, &reasons), 0);
        assert_int_equal(fw_get(e->fw, "not-a-uuid", &got, &err), -EINVAL);
}

static void test_disabled(void **state)
{
        struct env *e = *state;
        struct fw_config cfg, live;
        load("disabled", &cfg);
        set_ok(e->fw, VPS1, &cfg, &live);
        assert_same(&live, &cfg);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list map inet " T1 " vps-in-map"), 0);
        assert_null(strstr(out, IF1));
        free(out);
        assert_int_equal(fwt_nft(&out, "list chain inet " T1 " " IF1 "-in"), 0);
        assert_non_null(strstr(out, "tcp dport 22"));
        free(out);
        /* on again: dispatched */
        cfg.enabled = true;
        proto_fw_clear(&live);
        set_ok(e->fw, VPS1, &cfg, &live);
        assert_true(live.enabled);
        assert_int_equal(fwt_nft(&out, "list map inet " T1 " vps-in-map"), 0);
        assert_non_null(strstr(out, "\"" IF1 "\" : jump " IF1 "-in"));
        free(out);
        proto_fw_clear(&cfg);
        proto_fw_clear(&live);
}

static void test_ids(void **state)
{
        struct env *e = *state;
        struct fw_config cfg, live;
        fwt_config("{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                   "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"22\", \"action\": \"allow\"},"
                   "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"80\", \"action\": \"allow\"},"
                   "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"443\", \"action\": \"allow\"}]}",
                   &cfg);
        set_ok(e->fw, VPS1, &cfg, &live);
        assert_int_equal(live.rules[0].id, 1);
        assert_int_equal(live.rules[1].id, 2);
        assert_int_equal(live.rules[2].id, 3);
        proto_fw_clear(&cfg);
        proto_fw_clear(&live);
        /* keep 1, drop 2 and 3, add two new ones: they get 4 and 5 (3 was handed out before) */
        fwt_config("{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                   "{\"type\": \"outbound\", \"protocol\": \"udp\", \"port\": \"53\", \"action\": \"deny\"},"
                   "{\"id\": 1, \"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"22\", \"action\": \"allow\"},"
                   "{\"type\": \"inbound\", \"protocol\": \"icmp\", \"action\": \"allow\"}]}",
                   &cfg);
        set_ok(e->fw, VPS1, &cfg, &live);
        assert_int_equal(live.n_rules, 3);
        assert_int_equal(live.rules[0].id, 4);
        assert_int_equal(live.rules[1].id, 1);
        assert_int_equal(live.rules[2].id, 5);
        proto_fw_clear(&cfg);
        proto_fw_clear(&live);
        /* drop the highest id and add one: 5 is not handed out again */
        fwt_config("{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                   "{\"id\": 1, \"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"22\", \"action\": \"allow\"},"
                   "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"8080\", \"action\": \"allow\"}]}",
                   &cfg);
        set_ok(e->fw, VPS1, &cfg, &live);
        assert_int_equal(live.rules[1].id, 6);
        proto_fw_clear(&cfg);
        proto_fw_clear(&live);

        /* without a state directory the kernel's ids are the reference */
        struct fw *bare = NULL;
        struct fw_options opt = { .netns_fd = -1 };
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_open(&opt, &bare, &err), 0);
        fwt_config("{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                   "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"25\", \"action\": \"deny\"}]}",
                   &cfg);
        set_ok(bare, VPS1, &cfg, &live);
        assert_int_equal(live.rules[0].id, 7);
        proto_fw_clear(&cfg);
        proto_fw_clear(&live);
        fw_close(bare);
}

/* The kernel refuses the last element of the batch: nothing of it stays. */
static void test_atomic_conflict(void **state)
{
        struct env *e = *state;
        struct fw_config a, b, live, got;
        load("disabled", &a);
        set_ok(e->fw, VPS1, &a, &live);
        proto_fw_clear(&live);
        /* by hand: the server's interface already dispatched elsewhere */
        assert_int_equal(fwt_nft(NULL, "add chain inet " T1 " elsewhere"), 0);
        assert_int_equal(fwt_nft(NULL, "add element inet " T1 " vps-in-map { " IF1 " : jump elsewhere }"), 0);

        load("basic", &b);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_true(fw_set(e->fw, VPS1, &b, &live, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_int_equal(err.http_status, 502);
        assert_non_null(strstr(err.message, "vps " VPS1 ": firewall: the kernel refused element " IF1 " of map vps-in-map"));
        assert_non_null(json_object_get(err.details, "reason"));

        /* the old rules are in force, the stored configuration is the old one */
        _cleanup_na_error_ struct na_error gerr = NA_ERROR_INIT;
        assert_int_equal(fw_get(e->fw, VPS1, &got, &gerr), 0);
        assert_int_equal(got.n_rules, 1);
        assert_same(&got, &a);
        proto_fw_clear(&got);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list chain inet " T1 " " IF1 "-in"), 0);
        assert_null(strstr(out, "dport 80"));
        assert_null(strstr(out, "icmp"));
        free(out);
        char path[512], *text = NULL;
        snprintf(path, sizeof(path), "%s/firewall/%s.json", e->dir, VPS1);
        assert_int_equal(na_read_file(path, 1 << 20, &text, NULL, &gerr), 0);
        _cleanup_json_ json_t *stored = fwt_json(text);
        free(text);
        struct fw_config sc;
        assert_int_equal(proto_fw_decode(stored, &sc, &gerr), 0);
        assert_same(&sc, &a);
        proto_fw_clear(&sc);
        proto_fw_clear(&a);
        proto_fw_clear(&b);
}

/* The kernel refuses an operation in the middle of the batch (after the flushes): all is rolled back. */
static void test_atomic_middle(void **state)
{
        struct env *e = *state;
        struct fw_config a, live, got;
        load("basic", &a);
        set_ok(e->fw, VPS1, &a, &live);
        /* by hand: another chain jumps to the server's inbound chain, so it cannot be deleted */
        assert_int_equal(fwt_nft(NULL, "add chain inet " T1 " other"), 0);
        assert_int_equal(fwt_nft(NULL, "add rule inet " T1 " other jump " IF1 "-in"), 0);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_true(fw_remove(e->fw, VPS1, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "deletion of chain " IF1 "-in"));

        _cleanup_na_error_ struct na_error gerr = NA_ERROR_INIT;
        assert_int_equal(fw_get(e->fw, VPS1, &got, &gerr), 0);
        assert_same(&got, &live);
        assert_true(got.enabled);
        proto_fw_clear(&got);
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 0); /* stored configuration kept too */

        assert_int_equal(fwt_nft(NULL, "flush chain inet " T1 " other"), 0);
        assert_int_equal(fwt_nft(NULL, "delete chain inet " T1 " other"), 0);
        _cleanup_na_error_ struct na_error rerr = NA_ERROR_INIT;
        assert_int_equal(fw_remove(e->fw, VPS1, &rerr), 0);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_null(strstr(out, IF1));
        free(out);
        proto_fw_clear(&a);
        proto_fw_clear(&live);
}

static void test_drift(void **state)
{
        struct env *e = *state;
        struct fw_config a, live, got;
        load("basic", &a);
        set_ok(e->fw, VPS1, &a, &live);
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 0);

        /* by hand: a rule inserted at the top, and the outbound chain emptied */
        assert_int_equal(fwt_nft(NULL, "insert rule inet " T1 " " IF1 "-in tcp dport 23 accept"), 0);
        assert_int_equal(fwt_nft(NULL, "flush chain inet " T1 " " IF1 "-out"), 0);
        json_decref(reasons);
        reasons = NULL;
        assert_true(drift(e->fw, VPS1, &reasons) >= 4);
        assert_true(has_reason(reasons, "rule 5: only in the kernel"));
        assert_true(has_reason(reasons, "rule 4: only in the stored configuration"));
        assert_true(has_reason(reasons, "inbound rule (handle"));
        assert_true(has_reason(reasons, "was added by hand"));
        assert_true(has_reason(reasons, "outbound chain has no policy rule"));

        /* get shows what the kernel does: the hand-made rule first, with a new id */
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
        assert_int_equal(got.rules[0].id, 5);
        assert_int_equal(got.rules[0].port.v[0], 23);
        assert_int_equal(got.outbound_policy, FW_ACTION_ALLOW);
        /* applying what get answered makes it the stored configuration: no drift left */
        proto_fw_clear(&live);
        set_ok(e->fw, VPS1, &got, &live);
        assert_same(&live, &got);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 0);

        /* a rule the configuration cannot express is left out and reported */
        assert_int_equal(fwt_nft(NULL, "add rule inet " T1 " " IF1 "-in meta mark 42 accept"), 0);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 2);
        assert_true(has_reason(reasons, "cannot be expressed as a configuration rule: a meta match"));
        assert_true(has_reason(reasons, "inbound chain has rules after its policy rule"));
        proto_fw_clear(&a);
        proto_fw_clear(&live);
        proto_fw_clear(&got);
}

static void test_hand_written_set(void **state)
{
        struct env *e = *state;
        struct fw_config a, live, got;
        load("disabled", &a);
        set_ok(e->fw, VPS1, &a, &live);
        assert_int_equal(fwt_nft(NULL, "add rule inet " T1 " " IF1 "-in ip6 saddr 2001:db8::/48 udp dport { 5353, 53 } "
                                       "counter drop comment \"dns\""),
                         0);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
        /* after the policy rule: it is read, but the chain is reported as changed */
        assert_int_equal(got.n_rules, 2);
        char buf[128];
        assert_string_equal(proto_fw_ports_format(&got.rules[1].port, buf, sizeof(buf)), "53,5353");
        assert_string_equal(proto_fw_addr_format(&got.rules[1].source, buf, sizeof(buf)), "2001:db8::/48");
        assert_int_equal(got.rules[1].protocol, FW_PROTO_UDP);
        assert_int_equal(got.rules[1].action, FW_ACTION_DENY);
        assert_string_equal(got.rules[1].comment, "dns");
        assert_int_equal(got.rules[1].id, 2);
        _cleanup_json_ json_t *reasons = NULL;
        assert_true(drift(e->fw, VPS1, &reasons) > 0);
        assert_true(has_reason(reasons, "inbound chain has rules after its policy rule"));
        proto_fw_clear(&a);
        proto_fw_clear(&live);
        proto_fw_clear(&got);
}

static void test_reconcile(void **state)
{
        struct env *e = *state;
        struct fw_config a, b, live;
        load("basic", &a);
        load("all-fields", &b);
        /* stored and applied: 1, 2 and 3; then the kernel loses everything (a reboot) */
        set_ok(e->fw, VPS1, &a, &live);
        proto_fw_clear(&live);
        set_ok(e->fw, VPS2, &b, &live);
        proto_fw_clear(&live);
        set_ok(e->fw, VPS3, &a, &live);
        proto_fw_clear(&live);
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        /* and the kernel has chains of a server the agent does not know, made by an old run */
        struct fw_options opt = { .netns_fd = -1 };
        struct fw *other = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_open(&opt, &other, &err), 0);
        set_ok(other, VPS4, &a, &live);
        proto_fw_clear(&live);
        fw_close(other);

        /* NULL: keep everything, apply every stored configuration */
        struct fw_reconcile_stats st;
        assert_int_equal(fw_reconcile(e->fw, NULL, &st, &err), 0);
        assert_int_equal(st.applied, 3);
        assert_int_equal(st.removed, 0);
        const char *ids[] = { VPS1, VPS2, VPS3 };
        for (size_t i = 0; i < 3; i++) {
                _cleanup_json_ json_t *reasons = NULL;
                assert_int_equal(drift(e->fw, ids[i], &reasons), 0);
        }
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_non_null(strstr(out, IF4 "-in"));
        free(out);

        /* the agent knows 1 and 2 (upper case ids work too): 3 (stored) and 4 (chains only) go */
        const char *known[] = { VPS1, "0A1B2C3D-0000-4000-8000-00000000BEEF", NULL };
        assert_int_equal(fw_reconcile(e->fw, known, &st, &err), 0);
        assert_int_equal(st.applied, 2);
        assert_int_equal(st.removed, 2);
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_null(strstr(out, IF4));
        assert_null(strstr(out, "nav111111112222"));
        assert_non_null(strstr(out, IF1 "-in"));
        assert_non_null(strstr(out, IF2 "-out"));
        free(out);
        char path[512];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/firewall/%s.json", e->dir, VPS3);
        assert_int_equal(stat(path, &sb), -1);
        snprintf(path, sizeof(path), "%s/firewall/%s.json", e->dir, VPS1);
        assert_int_equal(stat(path, &sb), 0);

        /* an empty list: everything goes */
        const char *none[] = { NULL };
        assert_int_equal(fw_reconcile(e->fw, none, &st, &err), 0);
        assert_int_equal(st.removed, 2);
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_null(strstr(out, "nav"));
        free(out);
        proto_fw_clear(&a);
        proto_fw_clear(&b);
}

static void test_remove(void **state)
{
        struct env *e = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        /* nothing there: fine, twice */
        assert_int_equal(fw_remove(e->fw, VPS1, &err), 0);
        assert_int_equal(fw_remove(e->fw, VPS1, &err), 0);
        struct fw_config a, live;
        load("all-fields", &a);
        set_ok(e->fw, VPS1, &a, &live);
        proto_fw_clear(&live);
        set_ok(e->fw, VPS2, &a, &live);
        proto_fw_clear(&live);
        assert_int_equal(fw_remove(e->fw, VPS1, &err), 0);
        assert_int_equal(fw_remove(e->fw, VPS1, &err), 0);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_null(strstr(out, IF1));
        assert_non_null(strstr(out, IF2)); /* the other server is untouched */
        free(out);
        struct fw_config got;
        assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
        assert_false(got.enabled);
        assert_int_equal(got.n_rules, 0);
        proto_fw_clear(&got);
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 0);
        proto_fw_clear(&a);
}

/* A configuration of the maximum size, and a table flushed by hand that heals at the next change. */
static void test_max_and_heal(void **state)
{
        struct env *e = *state;
        json_t *rules = json_array();
        for (int i = 0; i < FW_RULES_MAX; i++) {
                char port[16], src[32];
                snprintf(port, sizeof(port), "%d", 1 + i);
                snprintf(src, sizeof(src), "10.%d.%d.0/24", i / 256, i % 256);
                json_array_append_new(rules, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", i % 2 ? "inbound" : "outbound",
                                                       "protocol", "tcp", "action", "allow", "port", port,
                                                       i % 2 ? "source" : "destination", src));
        }
        _cleanup_json_ json_t *j = json_pack("{s:b, s:s, s:s, s:o}", "enabled", 1, "inboundPolicy", "deny",
                                             "outboundPolicy", "deny", "rules", rules);
        struct fw_config cfg, want, live;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_fw_decode(j, &cfg, &err), 0);
        with_ids(&cfg, 1, &want);
        set_ok(e->fw, VPS1, &cfg, &live);
        assert_same(&live, &want);
        proto_fw_clear(&live);

        assert_int_equal(fwt_nft(NULL, "flush chain inet " T1 " vps-in"), 0);
        assert_int_not_equal(fwt_nft(NULL, "delete map inet " T1 " vps-out-map"), 0); /* in use */
        set_ok(e->fw, VPS1, &want, &live);
        assert_same(&live, &want);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list chain inet " T1 " vps-in"), 0);
        assert_non_null(strstr(out, "oifname vmap @vps-in-map"));
        free(out);
        proto_fw_clear(&cfg);
        proto_fw_clear(&want);
        proto_fw_clear(&live);
}

/* A stored configuration that cannot be read blocks nothing but itself. */
static void test_corrupt_state(void **state)
{
        struct env *e = *state;
        struct fw_config a, live, got;
        load("basic", &a);
        set_ok(e->fw, VPS1, &a, &live);
        proto_fw_clear(&live);
        set_ok(e->fw, VPS2, &a, &live);
        proto_fw_clear(&live);
        char path[512];
        snprintf(path, sizeof(path), "%s/firewall/%s.json", e->dir, VPS1);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_atomic_write(path, "{\"enabled\": tru", 15, 0600, &err), 0);

        /* get still reads the kernel; drift says why it cannot compare */
        assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
        assert_int_equal(got.n_rules, a.n_rules);
        proto_fw_clear(&got);
        _cleanup_json_ json_t *reasons = NULL;
        assert_true(drift(e->fw, VPS1, &reasons) > 0);
        assert_true(has_reason(reasons, "not a valid stored configuration"));

        /* reconcile after a reboot: the readable one is applied, the other reported */
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        struct fw_reconcile_stats st;
        assert_true(fw_reconcile(e->fw, NULL, &st, &err) < 0);
        assert_non_null(strstr(err.message, "reconcile: 1 stored configurations unreadable, first: vps " VPS1));
        assert_int_equal(st.applied, 1);
        assert_int_equal(st.failed, 1);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(e->fw, VPS2, &reasons), 0);

        /* set replaces it */
        na_error_clear(&err);
        set_ok(e->fw, VPS1, &a, &live);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 0);
        proto_fw_clear(&live);
        proto_fw_clear(&a);
}

/* Another table name, and a network namespace given by fd: the library works where it is told. */
static void test_table_and_netns(void **state)
{
        (void)state;
        int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        assert_true(home >= 0);
        assert_int_equal(unshare(CLONE_NEWNET), 0); /* this thread is now elsewhere */
        struct fw_options opt = { .table = "custom-T_1", .netns_fd = home };
        struct fw *fw = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_open(&opt, &fw, &err), 0);
        struct fw_config a, live;
        load("basic", &a);
        set_ok(fw, VPS1, &a, &live);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_null(strstr(out, "custom-T_1")); /* not here */
        free(out);
        assert_int_equal(setns(home, CLONE_NEWNET), 0);
        assert_int_equal(fwt_nft(&out, "list chain inet custom-T_1-06 " IF1 "-in"), 0);
        assert_non_null(strstr(out, "tcp dport 22"));
        free(out);
        fw_close(fw);
        close(home);
        opt.table = "no spaces";
        assert_int_equal(fw_open(&opt, &fw, &err), -EINVAL);
        proto_fw_clear(&a);
        proto_fw_clear(&live);
}

struct worker {
        struct fw *fw;
        char id[40];
        int failures;
};

static void *concurrent_worker(void *arg)
{
        struct worker *w = arg;
        for (int i = 0; i < 15; i++) {
                char text[512];
                snprintf(text, sizeof(text),
                         "{\"enabled\": %s, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                         "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"%d\", \"action\": \"allow\"},"
                         "{\"type\": \"outbound\", \"protocol\": \"udp\", \"port\": \"%d,%d\", \"action\": \"deny\"}]}",
                         i % 3 ? "true" : "false", 1000 + i, 2000 + i, 3000 + i);
                json_error_t jerr;
                json_t *j = json_loads(text, 0, &jerr);
                struct fw_config cfg, live;
                struct na_error err = NA_ERROR_INIT;
                if (!j || proto_fw_decode(j, &cfg, &err) < 0 || fw_set(w->fw, w->id, &cfg, &live, &err) < 0) {
                        w->failures++;
                        na_error_clear(&err);
                        json_decref(j);
                        continue;
                }
                if (live.n_rules != 2 || live.rules[0].port.v[0] != 1000 + i || live.enabled != (i % 3 != 0))
                        w->failures++;
                proto_fw_clear(&cfg);
                proto_fw_clear(&live);
                json_decref(j);
                struct fw_config got;
                if (fw_get(w->fw, w->id, &got, &err) < 0 || got.n_rules != 2)
                        w->failures++;
                proto_fw_clear(&got);
                na_error_clear(&err);
        }
        return NULL;
}

static void test_concurrent(void **state)
{
        struct env *e = *state;
        struct worker w[4] = { { .fw = e->fw }, { .fw = e->fw }, { .fw = e->fw }, { .fw = e->fw } };
        const char *ids[] = { VPS1, VPS2, VPS3, VPS4 };
        pthread_t t[4];
        for (int i = 0; i < 4; i++) {
                snprintf(w[i].id, sizeof(w[i].id), "%s", ids[i]);
                assert_int_equal(pthread_create(&t[i], NULL, concurrent_worker, &w[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                pthread_join(t[i], NULL);
                assert_int_equal(w[i].failures, 0);
                _cleanup_json_ json_t *reasons = NULL;
                assert_int_equal(drift(e->fw, ids[i], &reasons), 0);
        }
}

/* The ruleset's generation: the kernel adds one per committed batch. */
static uint32_t genid(void)
{
        struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
        assert_non_null(nl);
        assert_int_equal(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
        char buf[8192];
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, AF_UNSPEC, NLM_F_ACK, 1);
        assert_true(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) >= 0);
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        assert_true(n > 0);
        struct nftnl_gen *g = nftnl_gen_alloc();
        assert_int_equal(nftnl_gen_nlmsg_parse((struct nlmsghdr *)(void *)buf, g), 0);
        uint32_t id = nftnl_gen_get_u32(g, NFTNL_GEN_ID);
        nftnl_gen_free(g);
        mnl_socket_close(nl);
        return id;
}

/* The layout before shards, as an older agent left it: one table "nodeagent", the same objects. */
static void old_layout(void)
{
        static const struct {
                const char *id, *cfg;
        } servers[] = {
                /* VPS1: has a stored configuration (the agent re-applies that) */
                { VPS1, "{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                        "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"9999\", \"action\": \"allow\"}]}" },
                /* VPS4: known, nothing stored: carried over as it is */
                { VPS4, "{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                        "{\"id\": 7, \"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"4444\", \"action\": \"allow\"}]}" },
                /* VPS3: unknown: goes with the old table */
                { VPS3, "{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": []}" },
        };
        struct nft_batch b;
        struct nft_nl nl;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        nft_batch_init(&b, "nodeagent");
        assert_int_equal(fw_build_infra(&b, "nodeagent", &err), 0);
        for (size_t i = 0; i < ARRAY_SIZE(servers); i++) {
                struct fw_config cfg;
                fwt_config(servers[i].cfg, &cfg);
                for (size_t k = 0; k < cfg.n_rules; k++)
                        cfg.rules[k].id = cfg.rules[k].id ? cfg.rules[k].id : 1;
                assert_int_equal(fw_build_server(&b, "nodeagent", servers[i].id, &cfg, &err), 0);
                proto_fw_clear(&cfg);
        }
        assert_int_equal(nft_nl_open(&nl, -1, &err), 0);
        if (nft_nl_apply(&nl, &b, &err) < 0)
                fail_msg("old layout: %s", err.message);
        nft_nl_close(&nl);
        nft_batch_clear(&b);
}

/* The single table of the layout before shards is taken over in ONE batch: never both layouts, never neither. */
static void test_migration(void **state)
{
        struct env *e = *state;
        struct fw_config a, live, got;
        load("basic", &a);
        set_ok(e->fw, VPS1, &a, &live); /* stored (and applied in its shard: removed again below) */
        proto_fw_clear(&live);
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        old_layout();

        /* until the agent's start, the old table is read (and fw_get says what it enforces) */
        struct fw *fw = NULL;
        struct fw_options opt = { .state_dir = e->dir, .netns_fd = -1 };
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_open(&opt, &fw, &err), 0);
        assert_int_equal(fw_get(fw, VPS4, &got, &err), 0);
        assert_int_equal(got.n_rules, 1);
        assert_int_equal(got.rules[0].port.v[0], 4444);
        assert_int_equal(got.rules[0].id, 7);
        proto_fw_clear(&got);

        uint32_t before = genid();
        const char *known[] = { VPS1, VPS4, NULL };
        struct fw_reconcile_stats st;
        assert_int_equal(fw_reconcile(fw, known, &st, &err), 0);
        assert_int_equal(genid(), before + 1); /* one commit */
        assert_int_equal(st.applied, 2);
        char *out = NULL;
        assert_int_equal(fwt_nft(&out, "list tables"), 0);
        assert_null(strstr(out, "table inet nodeagent\n"));
        assert_non_null(strstr(out, "table inet nodeagent-00\n"));
        assert_non_null(strstr(out, "table inet nodeagent-15\n"));
        free(out);
        assert_int_equal(fwt_nft(&out, "list ruleset"), 0);
        assert_null(strstr(out, "nav111111112222")); /* unknown: gone with the old table */
        assert_null(strstr(out, "dport 9999")); /* VPS1: its stored configuration, not the old rules */
        free(out);
        /* VPS1 from its stored configuration, VPS4 carried over, both dispatched in their shard */
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(fw, VPS1, &reasons), 0);
        assert_int_equal(fw_get(fw, VPS4, &got, &err), 0);
        assert_true(got.enabled);
        assert_int_equal(got.n_rules, 1);
        assert_int_equal(got.rules[0].port.v[0], 4444);
        assert_int_equal(got.rules[0].id, 7);
        assert_int_equal(got.inbound_policy, FW_ACTION_DENY);
        proto_fw_clear(&got);
        assert_int_equal(fwt_nft(&out, "list map inet " T1 " vps-in-map"), 0);
        assert_non_null(strstr(out, IF1));
        assert_non_null(strstr(out, IF4));
        free(out);

        /* fewer shards: the tables beyond go, their servers move, in one batch again */
        fw_close(fw);
        opt.shards = 4;
        assert_int_equal(fw_open(&opt, &fw, &err), 0);
        before = genid();
        assert_int_equal(fw_reconcile(fw, known, &st, &err), 0);
        assert_int_equal(genid(), before + 1);
        assert_int_equal(fwt_nft(&out, "list tables"), 0);
        assert_non_null(strstr(out, "table inet nodeagent-03\n"));
        assert_null(strstr(out, "table inet nodeagent-04\n"));
        free(out);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(fw, VPS1, &reasons), 0);
        assert_int_equal(fwt_nft(&out, "list chain inet nodeagent-02 " IF1 "-in"), 0); /* 6 % 4 */
        free(out);

        /* the usual start: one commit per shard table */
        before = genid();
        assert_int_equal(fw_reconcile(fw, known, &st, &err), 0);
        assert_int_equal(genid(), before + 4);

        /* 5 shards: tables 00..03 stay, but VPS1 (stored) and VPS4 (carried) belong elsewhere now: one batch */
        fw_close(fw);
        opt.shards = 5;
        assert_int_equal(fw_open(&opt, &fw, &err), 0);
        before = genid();
        assert_int_equal(fw_reconcile(fw, known, &st, &err), 0);
        assert_int_equal(genid(), before + 1);
        assert_int_equal(st.applied, 2);
        assert_int_equal(st.removed, 0);
        assert_int_equal(fwt_nft(&out, "list table inet nodeagent-02"), 0); /* theirs with 4 shards */
        assert_null(strstr(out, IF1));
        assert_null(strstr(out, IF4));
        free(out);
        assert_int_equal(fwt_nft(&out, "list chain inet nodeagent-00 " IF1 "-in"), 0); /* FNV-1a % 5 */
        free(out);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(fw, VPS1, &reasons), 0);
        assert_int_equal(fw_get(fw, VPS4, &got, &err), 0);
        assert_int_equal(got.n_rules, 1);
        assert_int_equal(got.rules[0].port.v[0], 4444);
        proto_fw_clear(&got);
        char path[512];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/firewall/%s.json", e->dir, VPS1);
        assert_int_equal(stat(path, &sb), 0); /* moved, not removed */
        fw_close(fw);
        proto_fw_clear(&a);
}

/* The kernel refuses one server while migrating: the others move, it stays filtered by the old table. */
static void test_migration_refused(void **state)
{
        struct env *e = *state;
        struct fw_config a, live, got;
        load("basic", &a);
        set_ok(e->fw, VPS1, &a, &live);
        proto_fw_clear(&live);
        set_ok(e->fw, VPS3, &a, &live);
        proto_fw_clear(&live);
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        old_layout();
        /* VPS3's shard already dispatches its interface elsewhere (by hand): its batch is refused */
        assert_int_equal(fwt_nft(NULL, "add table inet " T3), 0);
        assert_int_equal(fwt_nft(NULL, "add map inet " T3 " vps-in-map { type ifname : verdict ; }"), 0);
        assert_int_equal(fwt_nft(NULL, "add chain inet " T3 " elsewhere"), 0);
        assert_int_equal(fwt_nft(NULL, "add element inet " T3 " vps-in-map { nav111111112222 : jump elsewhere }"), 0);

        struct fw *fw = NULL;
        struct fw_options opt = { .state_dir = e->dir, .netns_fd = -1 };
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_open(&opt, &fw, &err), 0);
        const char *known[] = { VPS1, VPS3, VPS4, NULL };
        struct fw_reconcile_stats st;
        assert_true(fw_reconcile(fw, known, &st, &err) < 0);
        assert_non_null(strstr(err.message, "vps " VPS3));
        assert_int_equal(st.failed, 1);
        assert_int_equal(st.applied, 2); /* VPS1 and VPS4 moved */
        char *out = NULL;
        /* the old table stays for VPS3 alone; VPS1 and VPS4 left it in their own batch */
        assert_int_equal(fwt_nft(&out, "list table inet nodeagent"), 0);
        assert_non_null(strstr(out, "nav111111112222-in"));
        assert_null(strstr(out, IF1));
        assert_null(strstr(out, IF4));
        free(out);
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(fw, VPS1, &reasons), 0);
        /* VPS3 reads from the old table; a change once the conflict is gone moves it out of it */
        assert_int_equal(fw_get(fw, VPS3, &got, &err), 0);
        assert_true(got.enabled);
        proto_fw_clear(&got);
        assert_int_equal(fwt_nft(NULL, "delete element inet " T3 " vps-in-map { nav111111112222 }"), 0);
        set_ok(fw, VPS3, &a, &live);
        proto_fw_clear(&live);
        assert_int_equal(fwt_nft(&out, "list table inet nodeagent"), 0);
        assert_null(strstr(out, "nav111111112222"));
        free(out);
        json_decref(reasons);
        reasons = NULL;
        assert_int_equal(drift(fw, VPS3, &reasons), 0);
        /* the next start deletes the old table */
        assert_int_equal(fw_reconcile(fw, known, &st, &err), 0);
        assert_int_not_equal(fwt_nft(NULL, "list table inet nodeagent"), 0);
        fw_close(fw);
        proto_fw_clear(&a);
}

/* The operations kept beside a stored configuration are used only while they match it. */
static void test_wire_cache(void **state)
{
        struct env *e = *state;
        struct fw_config a, b, live, got;
        load("basic", &a);
        load("all-fields", &b);
        set_ok(e->fw, VPS1, &a, &live);
        proto_fw_clear(&live);
        char json[512], nl[512];
        snprintf(json, sizeof(json), "%s/firewall/%s.json", e->dir, VPS1);
        snprintf(nl, sizeof(nl), "%s/firewall/%s.nl", e->dir, VPS1);
        struct stat sb;
        assert_int_equal(stat(nl, &sb), 0);

        /* after a reboot: the start sends what is kept */
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        struct fw_reconcile_stats st;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_reconcile(e->fw, NULL, &st, &err), 0);
        _cleanup_json_ json_t *reasons = NULL;
        assert_int_equal(drift(e->fw, VPS1, &reasons), 0);

        /* the .json replaced behind its back (another configuration): the kept operations are not used */
        struct fw_config bi;
        with_ids(&b, 1, &bi);
        _cleanup_json_ json_t *j = proto_fw_encode(&bi);
        json_object_set_new(j, "nextRuleId", json_integer(100));
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        assert_int_equal(na_atomic_write(json, text, strlen(text), 0600, &err), 0);
        free(text);
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        assert_int_equal(fw_reconcile(e->fw, NULL, &st, &err), 0);
        assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
        assert_same(&got, &bi);
        proto_fw_clear(&got);

        /* kept operations that are damaged are not used either */
        set_ok(e->fw, VPS1, &a, &live);
        int fd = open(nl, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "\xff\xff\xff\xff", 4, sb.st_size - 8), 4);
        close(fd);
        assert_int_equal(fwt_nft(NULL, "flush ruleset"), 0);
        assert_int_equal(fw_reconcile(e->fw, NULL, &st, &err), 0);
        assert_int_equal(fw_get(e->fw, VPS1, &got, &err), 0);
        assert_same(&got, &live);
        proto_fw_clear(&got);

        /* removed with the server */
        assert_int_equal(fw_remove(e->fw, VPS1, &err), 0);
        assert_int_equal(stat(nl, &sb), -1);
        proto_fw_clear(&live);
        proto_fw_clear(&bi);
        proto_fw_clear(&a);
        proto_fw_clear(&b);
}

int main(void)
{
        if (!fwt_private_netns()) {
                fprintf(stderr, "test-fw-netns: needs root for a private network namespace: skipped\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_server_reads_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disabled, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ids, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_conflict, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_middle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drift, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hand_written_set, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reconcile, setup, teardown),
                cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
                cmocka_unit_test_setup_teardown(test_max_and_heal, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_state, setup, teardown),
                cmocka_unit_test_setup_teardown(test_table_and_netns, setup, teardown),
                cmocka_unit_test_setup_teardown(test_migration, setup, teardown),
                cmocka_unit_test_setup_teardown(test_migration_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wire_cache, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
