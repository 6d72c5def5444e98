/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * From a configuration to nf_tables operations. The expressions are the ones nft
 * itself generates for the same rule (so `nft list` prints them as nft syntax and
 * a hand-written equivalent parses back the same way):
 *
 *   [meta nfproto == ipv4|ipv6]           when an address is given
 *   [payload network+off (& mask)] == net  source, then destination
 *   [meta l4proto == tcp|udp|icmp|icmpv6]  unless protocol all
 *   [payload transport+2] == port | >= lo, <= hi
 *   counter
 *   accept | drop | reject (tcp reset for tcp rules, icmpx port-unreachable else)
 *
 * A port list is one kernel rule per port, all with the rule's id (FW_META_LIST):
 * an anonymous set per list would do one lookup instead, but the kernel keeps a
 * table's sets in a list it walks by name on every set operation, which made a
 * server's change cost grow with the node (2,000 sets at 1,000 servers).
 * A disabled rule keeps its matches and counter but has no verdict: it counts what
 * it would match and changes nothing; its action lives in the rule userdata.
 */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <arpa/inet.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <sys/socket.h>

#include "firewall/fw-internal.h"

#define TYPE_IFNAME 41       /* nft datatype ids, for `nft list` */
#define BYTEORDER_HOST 1

#include "nft/nft.h"

/* A dispatch element: ifname (NUL-padded to IFNAMSIZ) -> jump chain. */
static struct nftnl_set *map_elem(const char *table, const char *map, const char *ifname, const char *chain)
{
        struct nftnl_set *s = nft_set_new(table, map);
        struct nftnl_set_elem *e = s ? nftnl_set_elem_alloc() : NULL;
        if (!e) {
                if (s)
                        nftnl_set_free(s);
                return NULL;
        }
        char key[NA_IFNAME_LEN] = { 0 };
        snprintf(key, sizeof(key), "%s", ifname);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, sizeof(key));
        nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
        nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
        nftnl_set_elem_add(s, e);
        return s;
}

/* ---- the infrastructure ---- */

static int add_map(struct nft_batch *b, const char *name, struct na_error *err)
{
        struct nftnl_set *s = nft_set_new(b->table, name);
        if (s) {
                nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_MAP);
                nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, TYPE_IFNAME);
                nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, NA_IFNAME_LEN);
                nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
                nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 0);
                nftnl_set_set_u32(s, NFTNL_SET_ID, b->next_set_id++);
                if (nft_set_udata_byteorder(s, BYTEORDER_HOST) < 0) {
                        nftnl_set_free(s);
                        s = NULL;
                }
        }
        return nft_batch_add(b, NFT_OP_SET_ADD, s, err, "map %s", name);
}

static int add_base_chain(struct nft_batch *b, const char *name, int prio, const char *map, uint32_t meta_key,
                          struct na_error *err)
{
        struct nftnl_chain *c = nft_chain_new(b->table, name);
        if (c) {
                nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_FORWARD);
                nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
                nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
                if (nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter") < 0) {
                        nftnl_chain_free(c);
                        c = NULL;
                }
        }
        int r = nft_batch_add(b, NFT_OP_CHAIN_ADD, c, err, "chain %s", name);
        if (r < 0)
                return r;
        r = nft_batch_add(b, NFT_OP_CHAIN_FLUSH, nft_rule_new(b->table, name), err, "flush of chain %s", name);
        if (r < 0)
                return r;

        /* ct state established,related accept */
        struct nft_rb rb = { .r = nft_rule_new(b->table, name) };
        if (rb.r) {
                nft_e_ct_established(&rb);
                nft_e_verdict(&rb, NF_ACCEPT);
                if (rb.oom) {
                        nftnl_rule_free(rb.r);
                        rb.r = NULL;
                }
        }
        r = nft_batch_add(b, NFT_OP_RULE_ADD, rb.r, err, "chain %s: established rule", name);
        if (r < 0)
                return r;

        /* iifname/oifname vmap @map */
        rb = (struct nft_rb){ .r = nft_rule_new(b->table, name) };
        if (rb.r) {
                nft_e_meta(&rb, meta_key);
                nft_e_lookup(&rb, map, 0, true);
                if (rb.oom) {
                        nftnl_rule_free(rb.r);
                        rb.r = NULL;
                }
        }
        return nft_batch_add(b, NFT_OP_RULE_ADD, rb.r, err, "chain %s: dispatch rule", name);
}

static void use_table(struct nft_batch *b, const char *table)
{
        if (b->table != table)
                snprintf(b->table, sizeof(b->table), "%s", table);
}

static struct nftnl_table *table_new(const char *name, bool comment)
{
        struct nftnl_table *t = nftnl_table_alloc();
        if (!t)
                return NULL;
        nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
        _cleanup_(nftnl_udata_buf_freep) struct nftnl_udata_buf *u = comment ? nftnl_udata_buf_alloc(128) : NULL;
        if (nftnl_table_set_str(t, NFTNL_TABLE_NAME, name) < 0 ||
            (comment && (!u || !nftnl_udata_put_strz(u, NFTNL_UDATA_TABLE_COMMENT,
                                                     "nodeagent firewall: the servers whose tap name hashes to this shard (FNV-1a)") ||
                         nftnl_table_set_data(t, NFTNL_TABLE_USERDATA, nftnl_udata_buf_data(u),
                                              nftnl_udata_buf_len(u)) < 0))) {
                nftnl_table_free(t);
                return NULL;
        }
        return t;
}

int fw_build_drop_table(struct nft_batch *b, const char *table, struct na_error *err)
{
        use_table(b, table);
        return nft_batch_add(b, NFT_OP_TABLE_DEL, table_new(table, false), err, "deletion of table inet %s", table);
}

int fw_build_infra(struct nft_batch *b, const char *table, struct na_error *err)
{
        use_table(b, table);
        int r = nft_batch_add(b, NFT_OP_TABLE_ADD, table_new(table, true), err, "table inet %s", b->table);
        if (r < 0)
                return r;
        if ((r = add_map(b, FW_MAP_OUT, err)) < 0 || (r = add_map(b, FW_MAP_IN, err)) < 0)
                return r;
        r = add_base_chain(b, FW_BASE_OUT, FW_PRIO_OUT, FW_MAP_OUT, NFT_META_IIFNAME, err);
        if (r < 0)
                return r;
        return add_base_chain(b, FW_BASE_IN, FW_PRIO_IN, FW_MAP_IN, NFT_META_OIFNAME, err);
}

/* ---- a server ---- */

static const uint8_t addr_offsets[2][2] = { { 12, 16 }, { 8, 24 } }; /* [v4|v6][source|destination] */

/* As nft: a byte-aligned prefix loads just its bytes; any other loads the whole address and masks it. */
static void match_addr(struct nft_rb *rb, const struct fw_addr *a, int which)
{
        if (!a->family || a->prefix == 0)
                return;
        uint32_t alen = a->family == AF_INET ? 4 : 16;
        uint32_t nbytes = a->prefix % 8 ? alen : a->prefix / 8u;
        nft_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, addr_offsets[a->family == AF_INET6][which], nbytes);
        if (a->prefix % 8) {
                uint8_t mask[16] = { 0 };
                memset(mask, 0xff, a->prefix / 8u);
                mask[a->prefix / 8u] = (uint8_t)(0xff << (8 - a->prefix % 8));
                nft_e_bitwise(rb, mask, nbytes);
        }
        nft_e_cmp(rb, NFT_CMP_EQ, a->bytes, nbytes);
}

static int rule_udata(struct nftnl_rule *r, const struct fw_meta *m, const char *comment, size_t comment_len)
{
        _cleanup_(nftnl_udata_buf_freep) struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN);
        if (!u)
                return -ENOMEM;
        if (comment_len > 0) {
                char text[FW_COMMENT_MAX + 1];
                memcpy(text, comment, comment_len);
                text[comment_len] = '\0';
                if (!nftnl_udata_put(u, NFTNL_UDATA_RULE_COMMENT, (uint32_t)comment_len + 1, text))
                        return -ENOBUFS;
        }
        uint8_t v[10] = { FW_META_VERSION, (uint8_t)m->kind, m->flags, (uint8_t)m->action };
        uint32_t id = htonl(m->id);
        uint16_t pos = htons(m->position);
        memcpy(v + 4, &id, 4);
        memcpy(v + 8, &pos, 2);
        if (!nftnl_udata_put(u, FW_UDATA_META, sizeof(v), v))
                return -ENOBUFS;
        return nftnl_rule_set_data(r, NFTNL_RULE_USERDATA, nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
}

/* One kernel rule of a configuration rule: for a port list, the one for port. */
static int add_kernel_rule(struct nft_batch *b, const char *chain, const struct fw_rule *fr, int port, uint16_t position,
                           const char *what, struct na_error *err)
{
        _cleanup_(nftnl_rule_freep) struct nftnl_rule *nr = nft_rule_new(b->table, chain);
        if (!nr)
                return na_error_sys(err, ENOMEM, "firewall: %s", what);
        struct nft_rb rb = { .r = nr };
        uint8_t family = fr->source.family ? fr->source.family : fr->destination.family;
        if (family) {
                nft_e_meta(&rb, NFT_META_NFPROTO);
                nft_e_cmp_u8(&rb, family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
        }
        match_addr(&rb, &fr->source, 0);
        match_addr(&rb, &fr->destination, 1);
        static const uint8_t l4[] = { [FW_PROTO_TCP] = IPPROTO_TCP, [FW_PROTO_UDP] = IPPROTO_UDP,
                                      [FW_PROTO_ICMP] = IPPROTO_ICMP, [FW_PROTO_ICMPV6] = IPPROTO_ICMPV6 };
        if (fr->protocol != FW_PROTO_ALL) {
                nft_e_meta(&rb, NFT_META_L4PROTO);
                nft_e_cmp_u8(&rb, l4[fr->protocol]);
        }
        uint16_t lo = htons(port >= 0 ? (uint16_t)port : fr->port.v[0]), hi = htons(fr->port.v[1]);
        if (fr->port.kind != FW_PORT_ANY)
                nft_e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
        if (fr->port.kind == FW_PORT_RANGE) {
                nft_e_cmp(&rb, NFT_CMP_GTE, &lo, 2);
                nft_e_cmp(&rb, NFT_CMP_LTE, &hi, 2);
        } else if (fr->port.kind != FW_PORT_ANY)
                nft_e_cmp(&rb, NFT_CMP_EQ, &lo, 2);
        nft_e_counter(&rb);
        if (fr->enabled) {
                if (fr->action == FW_ACTION_REJECT)
                        nft_e_reject(&rb, fr->protocol == FW_PROTO_TCP);
                else
                        nft_e_verdict(&rb, fr->action == FW_ACTION_ALLOW ? NF_ACCEPT : NF_DROP);
        }
        size_t head = fw_comment_head_len(fr->comment);
        struct fw_meta m = { .kind = FW_META_RULE, .action = fr->action, .id = fr->id, .position = position };
        m.flags = (uint8_t)((fr->enabled ? FW_META_ENABLED : 0) | (fr->comment[head] ? FW_META_CONTINUED : 0) |
                            (fr->port.kind == FW_PORT_LIST ? FW_META_LIST : 0));
        if (rb.oom || rule_udata(nr, &m, fr->comment, head) < 0)
                return na_error_sys(err, ENOMEM, "firewall: %s", what);
        return nft_batch_add(b, NFT_OP_RULE_ADD, TAKE_PTR(nr), err, "%s", what);
}

static int add_rule(struct nft_batch *b, const char *ifname, const struct fw_rule *fr, uint16_t position,
                    struct na_error *err)
{
        char chain[FW_NAME_MAX], what[96];
        fw_chain_name(ifname, fr->type, chain);
        snprintf(what, sizeof(what), "rule %u (%s)", fr->id, proto_fw_directions[fr->type]);
        int r;
        if (fr->port.kind == FW_PORT_LIST) {
                for (size_t i = 0; i < fr->port.n; i++)
                        if ((r = add_kernel_rule(b, chain, fr, fr->port.v[i], position, what, err)) < 0)
                                return r;
        } else if ((r = add_kernel_rule(b, chain, fr, -1, position, what, err)) < 0)
                return r;

        size_t head = fw_comment_head_len(fr->comment);
        if (!fr->comment[head])
                return 0;
        /* the comment's end: a rule without expressions right after (nft shows it as a lone comment) */
        _cleanup_(nftnl_rule_freep) struct nftnl_rule *nr = nft_rule_new(b->table, chain);
        struct fw_meta m = { .kind = FW_META_TAIL, .action = fr->action, .id = fr->id, .position = position };
        if (!nr || rule_udata(nr, &m, fr->comment + head, strlen(fr->comment + head)) < 0)
                return na_error_sys(err, ENOMEM, "firewall: %s", what);
        return nft_batch_add(b, NFT_OP_RULE_ADD, TAKE_PTR(nr), err, "%s: end of its comment", what);
}

static int add_policy(struct nft_batch *b, const char *ifname, enum fw_direction dir, enum fw_action policy,
                      struct na_error *err)
{
        char chain[FW_NAME_MAX];
        fw_chain_name(ifname, dir, chain);
        _cleanup_(nftnl_rule_freep) struct nftnl_rule *nr = nft_rule_new(b->table, chain);
        if (!nr)
                return na_error_sys(err, ENOMEM, "firewall: %s policy", proto_fw_directions[dir]);
        struct nft_rb rb = { .r = nr };
        nft_e_counter(&rb);
        if (policy == FW_ACTION_REJECT)
                nft_e_reject(&rb, false);
        else
                nft_e_verdict(&rb, policy == FW_ACTION_ALLOW ? NF_ACCEPT : NF_DROP);
        struct fw_meta m = { .kind = FW_META_POLICY, .flags = FW_META_ENABLED, .action = policy };
        if (rb.oom || rule_udata(nr, &m, "", 0) < 0)
                return na_error_sys(err, ENOMEM, "firewall: %s policy", proto_fw_directions[dir]);
        return nft_batch_add(b, NFT_OP_RULE_ADD, TAKE_PTR(nr), err, "%s policy", proto_fw_directions[dir]);
}

static int add_elems(struct nft_batch *b, const char *ifname, bool add_only, struct na_error *err)
{
        static const char *const maps[2] = { FW_MAP_IN, FW_MAP_OUT };
        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                char chain[FW_NAME_MAX];
                fw_chain_name(ifname, (enum fw_direction)dir, chain);
                int r = nft_batch_add(b, NFT_OP_ELEM_ADD, map_elem(b->table, maps[dir], ifname, chain), err,
                                     "element %s of map %s", ifname, maps[dir]);
                if (r < 0)
                        return r;
                if (add_only)
                        continue;
                /* added then deleted: deletes it whether or not it was there */
                r = nft_batch_add(b, NFT_OP_ELEM_DEL, map_elem(b->table, maps[dir], ifname, chain), err,
                                 "deletion of element %s of map %s", ifname, maps[dir]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int chain_comment(struct nftnl_chain *c, const char *vps_id)
{
        char text[64];
        snprintf(text, sizeof(text), "vps %s", vps_id);
        _cleanup_(nftnl_udata_buf_freep) struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(128);
        if (!u || !nftnl_udata_put_strz(u, NFTNL_UDATA_CHAIN_COMMENT, text))
                return -ENOMEM;
        return nftnl_chain_set_data(c, NFTNL_CHAIN_USERDATA, nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
}

/* Create the server's chains when missing (with the full id as comment) and empty them. */
static int add_server_chains(struct nft_batch *b, const char *ifname, const char *vps_id, struct na_error *err)
{
        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                char chain[FW_NAME_MAX];
                fw_chain_name(ifname, (enum fw_direction)dir, chain);
                struct nftnl_chain *c = nft_chain_new(b->table, chain);
                if (c && vps_id && chain_comment(c, vps_id) < 0) {
                        nftnl_chain_free(c);
                        c = NULL;
                }
                int r = nft_batch_add(b, NFT_OP_CHAIN_ADD, c, err, "chain %s", chain);
                if (r < 0)
                        return r;
                r = nft_batch_add(b, NFT_OP_CHAIN_FLUSH, nft_rule_new(b->table, chain), err, "flush of chain %s", chain);
                if (r < 0)
                        return r;
        }
        return 0;
}

int fw_build_server(struct nft_batch *b, const char *table, const char *vps_id, const struct fw_config *cfg,
                    struct na_error *err)
{
        char ifname[NA_IFNAME_LEN];
        if (na_vps_ifname(vps_id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "firewall: %s is not a server id", vps_id);
        return fw_build_server_if(b, table, ifname, vps_id, cfg, err);
}

int fw_build_server_if(struct nft_batch *b, const char *table, const char *ifname, const char *vps_id,
                       const struct fw_config *cfg, struct na_error *err)
{
        use_table(b, table);
        if (cfg->n_rules > FW_RULES_MAX)
                return na_error_set(err, E2BIG, NA_E_INTERNAL, "firewall: %zu rules", cfg->n_rules);
        int r = add_server_chains(b, ifname, vps_id, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < cfg->n_rules; i++) {
                if (cfg->rules[i].id == 0)
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "firewall: rule %zu has no id", i);
                if ((r = add_rule(b, ifname, &cfg->rules[i], (uint16_t)i, err)) < 0)
                        return r;
        }
        if ((r = add_policy(b, ifname, FW_INBOUND, cfg->inbound_policy, err)) < 0 ||
            (r = add_policy(b, ifname, FW_OUTBOUND, cfg->outbound_policy, err)) < 0)
                return r;
        return add_elems(b, ifname, cfg->enabled, err);
}

int fw_build_remove(struct nft_batch *b, const char *table, const char *ifname, struct na_error *err)
{
        char name[FW_NAME_MAX];
        use_table(b, table);
        int r = add_server_chains(b, ifname, NULL, err);
        if (r < 0)
                return r;
        if ((r = add_elems(b, ifname, false, err)) < 0)
                return r;
        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                fw_chain_name(ifname, (enum fw_direction)dir, name);
                r = nft_batch_add(b, NFT_OP_CHAIN_DEL, nft_chain_new(b->table, name), err, "deletion of chain %s", name);
                if (r < 0)
                        return r;
        }
        return 0;
}
