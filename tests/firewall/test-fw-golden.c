/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Golden tests (no kernel): each tests/firewall/golden/<name>.json configuration is
 * rendered as the batch fw_set would send for it and compared with <name>.txt
 * (NA_UPDATE_GOLDEN=1 rewrites the .txt files). The same batch's rules are then
 * parsed back with the reader used on the kernel's rules, which must give the
 * configuration again: what is written can be read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libnftnl/rule.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "firewall/fw-internal.h"
#include "firewall/fw.h"
#include "fw-test.h"

#define VPS "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define TABLE "nodeagent-06" /* VPS's shard table (test_shards checks it) */

static void load(const char *name, struct fw_config *cfg)
{
        char rel[256];
        snprintf(rel, sizeof(rel), "tests/firewall/golden/%s.json", name);
        char *text = fwt_read_source(rel);
        if (!text)
                fail_msg("%s is missing", rel);
        fwt_config(text, cfg);
        free(text);
}

/* The ids fw_set would give (the render does the same on an empty table). */
static void assign_ids(struct fw_config *cfg)
{
        uint32_t next = 1;
        for (size_t i = 0; i < cfg->n_rules; i++)
                if (cfg->rules[i].id >= next)
                        next = cfg->rules[i].id + 1;
        for (size_t i = 0; i < cfg->n_rules; i++)
                if (!cfg->rules[i].id)
                        cfg->rules[i].id = next++;
}

static void check_parse_back(const struct fw_config *cfg)
{
        struct nft_batch b;
        struct na_error err = NA_ERROR_INIT;
        nft_batch_init(&b, TABLE);
        assert_int_equal(fw_build_server(&b, TABLE, VPS, cfg, &err), 0);
        struct nftnl_rule *in[4096], *out[4096];
        size_t n_in = 0, n_out = 0;
        bool elem_added = false, elem_deleted = false;
        for (size_t i = 0; i < b.n; i++) {
                if (b.ops[i].kind == NFT_OP_ELEM_ADD)
                        elem_added = true;
                if (b.ops[i].kind == NFT_OP_ELEM_DEL)
                        elem_deleted = true;
                if (b.ops[i].kind != NFT_OP_RULE_ADD)
                        continue;
                const char *chain = nftnl_rule_get_str(b.ops[i].obj, NFTNL_RULE_CHAIN);
                if (strstr(chain, "-in"))
                        in[n_in++] = b.ops[i].obj;
                else
                        out[n_out++] = b.ops[i].obj;
        }
        struct fw_live live;
        fw_live_init(&live);
        live.chain[0] = live.chain[1] = true;
        live.elem[0] = live.elem[1] = elem_added && !elem_deleted;
        struct fw_fetch none = { 0 };
        assert_int_equal(fw_parse_server(in, n_in, out, n_out, &none, &live, &err), 0);
        if (!proto_fw_equal(&live.cfg, cfg) || live.anomalies) {
                _cleanup_json_ json_t *a = proto_fw_encode(&live.cfg), *e = proto_fw_encode(cfg);
                char *as = json_dumps(a, JSON_INDENT(1)), *es = json_dumps(e, JSON_INDENT(1)),
                     *an = live.anomalies ? json_dumps(live.anomalies, 0) : NULL;
                print_error("parsed back:\n%s\nexpected:\n%s\nanomalies: %s\n", as, es, an ? an : "none");
                free(as);
                free(es);
                free(an);
                fail();
        }
        fw_live_clear(&live);
        nft_batch_clear(&b);
}

static void golden(const char *name)
{
        struct fw_config cfg;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        load(name, &cfg);
        char *text = NULL;
        assert_int_equal(fw_render_set(NULL, VPS, &cfg, &text, &err), 0);
        char rel[256];
        snprintf(rel, sizeof(rel), "tests/firewall/golden/%s.txt", name);
        fwt_golden(rel, text);
        free(text);
        assign_ids(&cfg);
        check_parse_back(&cfg);
        proto_fw_clear(&cfg);
}

static void test_basic(void **state)
{
        (void)state;
        golden("basic");
}

static void test_all_fields(void **state)
{
        (void)state;
        golden("all-fields");
}

static void test_disabled(void **state)
{
        (void)state;
        golden("disabled");
}

static void test_empty(void **state)
{
        (void)state;
        golden("empty");
}

static void test_remove(void **state)
{
        (void)state;
        struct nft_batch b;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        nft_batch_init(&b, "agent_fw-03");
        assert_int_equal(fw_build_remove(&b, "agent_fw-03", "nav6f1c2a3b4c5d", &err), 0);
        char *text = NULL;
        assert_int_equal(nft_batch_render(&b, fw_udata_render, &text, &err), 0);
        fwt_golden("tests/firewall/golden/remove.txt", text);
        free(text);
        nft_batch_clear(&b);
}

/* The anti-spoofing guard of a server with two IPv4 and one IPv6 address (fw-guard.c). */
static void test_guard(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        const char *const addrs[] = { "203.0.113.10", "198.51.100.7", "2001:db8:1::10" };
        char *text = NULL;
        assert_int_equal(fw_guard_render("agent_fw", "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "52:54:00:aa:bb:cc", addrs, 3,
                                         &text, &err),
                         0);
        fwt_golden("tests/firewall/golden/guard.txt", text);
        free(text);
        /* A bad MAC or address is refused, naming it. */
        const char *const bad[] = { "203.0.113.999" };
        assert_true(fw_guard_render(NULL, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "52:54:00:aa:bb:cc", bad, 1, &text,
                                    &err) < 0);
        assert_non_null(strstr(err.message, "203.0.113.999"));
        na_error_clear(&err);
        assert_true(fw_guard_render(NULL, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "52:54:00", addrs, 3, &text, &err) < 0);
}

/* The batch is what the kernel gets: the render and the wire encoding see the same operations. */
static void test_serialize(void **state)
{
        (void)state;
        struct fw_config cfg;
        load("basic", &cfg);
        assign_ids(&cfg);
        struct nft_batch b;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        nft_batch_init(&b, TABLE);
        assert_int_equal(fw_build_infra(&b, TABLE, &err), 0);
        assert_int_equal(fw_build_server(&b, TABLE, VPS, &cfg, &err), 0);
        char *wire = NULL;
        size_t len = 0;
        assert_int_equal(nft_batch_serialize(&b, 100, &wire, &len, &err), 0);
        /* begin, one message per operation, end; sequence numbers follow each other; only the last asks for an ack */
        size_t count = 0;
        for (size_t off = 0; off < len;) {
                const struct nlmsghdr *nlh = (const struct nlmsghdr *)(const void *)(wire + off);
                assert_int_equal(nlh->nlmsg_seq, 100 + count);
                bool ack = nlh->nlmsg_flags & NLM_F_ACK;
                assert_int_equal(ack, count == b.n);
                off += NLMSG_ALIGN(nlh->nlmsg_len);
                count++;
        }
        assert_int_equal(count, b.n + 2);
        free(wire);
        nft_batch_clear(&b);
        proto_fw_clear(&cfg);
}

/* The shard of a server is a fixed function of its tap name: operators and tests can compute it. */
static void test_shards(void **state)
{
        (void)state;
        char table[FW_TABLE_NAME_MAX];
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(fw_server_table(NULL, 0, VPS, table, &err), 0);
        assert_string_equal(table, TABLE);
        assert_int_equal(fw_server_table("fw", 4, "11111111-2222-4333-8444-555555555555", table, &err), 0);
        assert_string_equal(table, "fw-02"); /* FNV-1a("nav111111112222") % 16 = 2, % 4 = 2 */
        assert_int_equal(fw_server_table(NULL, 1, VPS, table, &err), 0);
        assert_string_equal(table, "nodeagent-00");
        assert_int_equal(fw_server_table(NULL, 0, "not-an-id", table, &err), -EINVAL);
        assert_int_equal(fw_server_table("no spaces", 0, VPS, table, &err), -EINVAL);
        /* ids as the controller makes them (random v4) spread evenly: 1,600 servers, 100 a shard on average */
        unsigned count[FW_DEFAULT_SHARDS] = { 0 };
        for (unsigned i = 0; i < 1600; i++) {
                char id[40], ifname[NA_IFNAME_LEN];
                uint32_t x = i * 2654435761u;
                snprintf(id, sizeof(id), "%08x-%04x-4000-8000-000000000000", x, i);
                assert_int_equal(na_vps_ifname(id, ifname), 0);
                count[fw_shard_of(ifname, FW_DEFAULT_SHARDS)]++;
        }
        for (unsigned s = 0; s < FW_DEFAULT_SHARDS; s++)
                assert_in_range(count[s], 60, 140);
        unsigned shard = 99;
        assert_true(fw_shard_parse("nodeagent", "nodeagent-15", &shard));
        assert_int_equal(shard, 15);
        assert_false(fw_shard_parse("nodeagent", "nodeagent", &shard));
        assert_false(fw_shard_parse("nodeagent", "nodeagent_apps", &shard));
        assert_false(fw_shard_parse("nodeagent", "nodeagent-1", &shard));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_basic),  cmocka_unit_test(test_all_fields), cmocka_unit_test(test_disabled),
                cmocka_unit_test(test_empty),  cmocka_unit_test(test_remove),     cmocka_unit_test(test_serialize),
                cmocka_unit_test(test_shards), cmocka_unit_test(test_guard),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
