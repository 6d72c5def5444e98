/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The apps' nftables table (its own inet table, [apps] nft table name; the agent
 * never touches another): what apps may reach, groups, port exposures, NAT.
 *
 *   chain forward { type filter hook forward priority filter; policy accept;
 *       iifname "nap*" jump from-app; oifname "nap*" jump to-app }
 *   chain from-app { ct state established,related accept; ct status dnat accept;
 *       jump groups; oifname "nap*" drop; oifname "nav*" drop (servers);
 *       ip daddr 169.254.0.0/16 drop; ip daddr <network> drop; meta nfproto ipv6 drop }
 *   chain groups { ip saddr @g<id> ip daddr @g<id> accept   (one rule per group) }
 *   chain to-app { ct state established,related accept; ct status dnat accept; drop }
 *   chain input { type filter hook input priority filter; policy accept;
 *       iifname "nap*" ct state established,related accept; iifname "nap*" drop }
 *   chain prerouting { type nat hook prerouting priority dstnat; jump exposures }
 *   chain output { type nat hook output priority dstnat; jump exposures }
 *   chain exposures { meta nfproto ipv4 (ip daddr <public> | fib daddr type local)
 *       meta l4proto tcp th dport 20000 dnat ip to 10.88.0.2:8080   (one rule per port) }
 *   chain postrouting { type nat hook postrouting priority srcnat;
 *       ip saddr <network> ip daddr != <network> masquerade }
 *   set g<id> { type ipv4_addr }   (one per group with members)
 *
 * Whatever leaves an app for the outside is accepted (then masqueraded); a group's
 * members reach each other through their set (a join is one element added, one
 * removed: O(1) in the kernel); everything else between apps falls to the drop.
 */
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>
#include <string.h>

#include "drivers/app/net/app-net-internal.h"
#include "nft/nft.h"
#include <libnftnl/table.h>

#define TYPE_IPADDR 7 /* nft's ipv4_addr datatype */
#define PRIO_FILTER 0
#define PRIO_DSTNAT (-100)
#define PRIO_SRCNAT 100

static int add_rule(struct nft_batch *b, struct nft_rb *rb, struct na_error *err, const char *what)
{
        if (rb->r && rb->oom) {
                nftnl_rule_free(rb->r);
                rb->r = NULL;
        }
        return nft_batch_add(b, NFT_OP_RULE_ADD, rb->r, err, "%s", what);
}

static void e_jump(struct nft_rb *rb, const char *chain)
{
        struct nftnl_expr *e = nft_expr_new(rb, "immediate");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_JUMP);
        if (nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain) < 0)
                rb->oom = true;
        nft_expr_add(rb, e);
}

static void e_ifprefix(struct nft_rb *rb, uint32_t key, const char *prefix)
{
        nft_e_meta(rb, key);
        nft_e_cmp(rb, NFT_CMP_EQ, prefix, (uint32_t)strlen(prefix));
}

static void e_ipv4(struct nft_rb *rb)
{
        nft_e_meta(rb, NFT_META_NFPROTO);
        nft_e_cmp_u8(rb, NFPROTO_IPV4);
}

/* ip saddr/daddr (offset 12/16) op net/prefix */
static void e_net(struct nft_rb *rb, uint32_t off, uint32_t op, uint32_t base, uint8_t prefix)
{
        nft_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, off, 4);
        uint32_t mask = htonl(prefix ? ~0u << (32 - prefix) : 0), net = htonl(base);
        if (prefix < 32)
                nft_e_bitwise(rb, (const uint8_t *)&mask, 4);
        nft_e_cmp(rb, op, &net, 4);
}

static int add_chain(struct nft_batch *b, const char *name, const char *type, int hook, int prio,
                     struct na_error *err)
{
        struct nftnl_chain *c = nft_chain_new(b->table, name);
        if (c && type) {
                nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
                nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
                nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
                if (nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type) < 0) {
                        nftnl_chain_free(c);
                        c = NULL;
                }
        }
        return nft_batch_add(b, NFT_OP_CHAIN_ADD, c, err, "chain %s", name);
}

static int add_group_set(struct nft_batch *b, const char *group_id, struct na_error *err)
{
        char name[APP_NET_SET_NAME_LEN];
        app_net_group_set_name(group_id, name);
        struct nftnl_set *s = nft_set_new(b->table, name);
        if (s) {
                nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, TYPE_IPADDR);
                nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 4);
                nftnl_set_set_u32(s, NFTNL_SET_ID, b->next_set_id++);
        }
        return nft_batch_add(b, NFT_OP_SET_ADD, s, err, "set %s (group %s)", name, group_id);
}

static int del_group_set(struct nft_batch *b, const char *group_id, struct na_error *err)
{
        char name[APP_NET_SET_NAME_LEN];
        app_net_group_set_name(group_id, name);
        return nft_batch_add(b, NFT_OP_SET_DEL, nft_set_new(b->table, name), err, "set %s (group %s)", name, group_id);
}

int app_net_nft_member(struct nft_batch *b, const char *group_id, uint32_t addr, bool add, struct na_error *err)
{
        char name[APP_NET_SET_NAME_LEN];
        app_net_group_set_name(group_id, name);
        struct nftnl_set *s = nft_set_new(b->table, name);
        struct nftnl_set_elem *e = s ? nftnl_set_elem_alloc() : NULL;
        if (s && !e) {
                nftnl_set_free(s);
                s = NULL;
        }
        if (e) {
                uint32_t key = htonl(addr);
                nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &key, 4);
                nftnl_set_elem_add(s, e);
        }
        char a[16];
        app_net_addr_str(addr, a);
        return nft_batch_add(b, add ? NFT_OP_ELEM_ADD : NFT_OP_ELEM_DEL, s, err, "%s of group %s: %s",
                            add ? "member" : "former member", group_id, a);
}

static int groups_rules(struct nft_batch *b, const struct app_net_rules *rs, const char *added, const char *removed,
                        struct na_error *err)
{
        int r = nft_batch_add(b, NFT_OP_CHAIN_FLUSH, nft_rule_new(b->table, "groups"), err, "flush of chain groups");
        for (size_t i = 0; r >= 0 && i <= rs->n_groups; i++) {
                const char *g = i < rs->n_groups ? rs->groups[i] : added;
                if (!g || (i == rs->n_groups && !added) || (removed && strcmp(g, removed) == 0))
                        continue;
                if (i < rs->n_groups && added && strcmp(g, added) == 0)
                        continue; /* listed already: once is enough */
                char name[APP_NET_SET_NAME_LEN], what[80];
                app_net_group_set_name(g, name);
                struct nft_rb rb = { .r = nft_rule_new(b->table, "groups") };
                e_ipv4(&rb);
                nft_e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 12, 4);
                nft_e_lookup(&rb, name, 0, false);
                nft_e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4);
                nft_e_lookup(&rb, name, 0, false);
                nft_e_verdict(&rb, NF_ACCEPT);
                snprintf(what, sizeof(what), "group %s rule", g);
                r = add_rule(b, &rb, err, what);
        }
        return r;
}

int app_net_nft_groups(struct nft_batch *b, const struct app_net_rules *rs, const char *added, const char *removed,
                       struct na_error *err)
{
        int r = 0;
        if (added)
                r = add_group_set(b, added, err);
        if (r >= 0)
                r = groups_rules(b, rs, added, removed, err);
        if (r >= 0 && removed)
                r = del_group_set(b, removed, err); /* after the rule that used it went */
        return r;
}

int app_net_nft_ports(struct nft_batch *b, const struct app_net_rules *rs, struct na_error *err)
{
        int r = nft_batch_add(b, NFT_OP_CHAIN_FLUSH, nft_rule_new(b->table, "exposures"), err,
                             "flush of chain exposures");
        for (size_t i = 0; r >= 0 && i < rs->n_ports; i++) {
                const struct app_net_port *p = &rs->ports[i];
                struct nft_rb rb = { .r = nft_rule_new(b->table, "exposures") };
                e_ipv4(&rb);
                if (rs->public_addr)
                        e_net(&rb, 16, NFT_CMP_EQ, rs->public_addr, 32);
                else
                        nft_e_fib_daddr_local(&rb);
                nft_e_meta(&rb, NFT_META_L4PROTO);
                nft_e_cmp_u8(&rb, p->l4proto);
                uint16_t ext = htons(p->external), cport = htons(p->container);
                uint32_t addr = htonl(p->addr);
                nft_e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
                nft_e_cmp(&rb, NFT_CMP_EQ, &ext, 2);
                nft_e_imm_data(&rb, NFT_REG_1, &addr, 4);
                nft_e_imm_data(&rb, NFT_REG_2, &cport, 2);
                nft_e_nat(&rb, NFT_NAT_DNAT, NFT_REG_1, NFT_REG_2);
                char what[64], a[16];
                app_net_addr_str(p->addr, a);
                snprintf(what, sizeof(what), "port %s/%u to %s:%u", p->l4proto == IPPROTO_UDP ? "udp" : "tcp",
                         p->external, a, p->container);
                r = add_rule(b, &rb, err, what);
        }
        return r;
}

static int infra(struct nft_batch *b, const struct app_net_rules *rs, struct na_error *err)
{
        struct nftnl_table *t = nftnl_table_alloc();
        struct nftnl_table *t2 = nftnl_table_alloc();
        struct nftnl_table *t3 = nftnl_table_alloc();
        struct nftnl_table *ts[3] = { t, t2, t3 };
        for (int i = 0; i < 3; i++)
                if (ts[i]) {
                        nftnl_table_set_u32(ts[i], NFTNL_TABLE_FAMILY, NFPROTO_INET);
                        nftnl_table_set_str(ts[i], NFTNL_TABLE_NAME, b->table);
                }
        int r = nft_batch_add(b, NFT_OP_TABLE_ADD, t, err, "table %s", b->table);
        if (r >= 0)
                r = nft_batch_add(b, NFT_OP_TABLE_DEL, t2, err, "table %s (the old one)", b->table);
        else
                nftnl_table_free(t2);
        if (r >= 0)
                r = nft_batch_add(b, NFT_OP_TABLE_ADD, t3, err, "table %s", b->table);
        else
                nftnl_table_free(t3);
        static const struct {
                const char *name, *type;
                int hook, prio;
        } chains[] = {
                { "forward", "filter", NF_INET_FORWARD, PRIO_FILTER },
                { "input", "filter", NF_INET_LOCAL_IN, PRIO_FILTER },
                { "prerouting", "nat", NF_INET_PRE_ROUTING, PRIO_DSTNAT },
                { "output", "nat", NF_INET_LOCAL_OUT, PRIO_DSTNAT },
                { "postrouting", "nat", NF_INET_POST_ROUTING, PRIO_SRCNAT },
                { "from-app", NULL, 0, 0 },
                { "groups", NULL, 0, 0 },
                { "to-app", NULL, 0, 0 },
                { "exposures", NULL, 0, 0 },
        };
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(chains); i++)
                r = add_chain(b, chains[i].name, chains[i].type, chains[i].hook, chains[i].prio, err);
        if (r < 0)
                return r;

        struct nft_rb rb;
#define RULE(chain, what, ...)                                          \
        do {                                                            \
                rb = (struct nft_rb){ .r = nft_rule_new(b->table, chain) }; \
                __VA_ARGS__;                                            \
                if ((r = add_rule(b, &rb, err, chain ": " what)) < 0)  \
                        return r;                                       \
        } while (0)

        /* The base chains of the groups go first: regular chains exist before a jump to them. */
        RULE("from-app", "established", nft_e_ct_established(&rb); nft_e_verdict(&rb, NF_ACCEPT));
        RULE("from-app", "exposures", nft_e_ct_status_dnat(&rb); nft_e_verdict(&rb, NF_ACCEPT));
        RULE("from-app", "groups", e_jump(&rb, "groups"));
        RULE("from-app", "other apps", e_ifprefix(&rb, NFT_META_OIFNAME, APP_NET_IF_PREFIX); nft_e_counter(&rb);
             nft_e_verdict(&rb, NF_DROP));
        RULE("from-app", "servers", e_ifprefix(&rb, NFT_META_OIFNAME, "nav"); nft_e_counter(&rb);
             nft_e_verdict(&rb, NF_DROP));
        RULE("from-app", "link-local", e_ipv4(&rb); e_net(&rb, 16, NFT_CMP_EQ, 0xa9fe0000u, 16); nft_e_counter(&rb);
             nft_e_verdict(&rb, NF_DROP));
        RULE("from-app", "app network", e_ipv4(&rb); e_net(&rb, 16, NFT_CMP_EQ, rs->range.base, rs->range.prefix);
             nft_e_counter(&rb); nft_e_verdict(&rb, NF_DROP));
        RULE("from-app", "ipv6", nft_e_meta(&rb, NFT_META_NFPROTO); nft_e_cmp_u8(&rb, NFPROTO_IPV6);
             nft_e_verdict(&rb, NF_DROP));
        RULE("to-app", "established", nft_e_ct_established(&rb); nft_e_verdict(&rb, NF_ACCEPT));
        RULE("to-app", "exposures", nft_e_ct_status_dnat(&rb); nft_e_verdict(&rb, NF_ACCEPT));
        RULE("to-app", "the rest", nft_e_counter(&rb); nft_e_verdict(&rb, NF_DROP));
        RULE("forward", "from apps", e_ifprefix(&rb, NFT_META_IIFNAME, APP_NET_IF_PREFIX); e_jump(&rb, "from-app"));
        RULE("forward", "to apps", e_ifprefix(&rb, NFT_META_OIFNAME, APP_NET_IF_PREFIX); e_jump(&rb, "to-app"));
        RULE("input", "replies", e_ifprefix(&rb, NFT_META_IIFNAME, APP_NET_IF_PREFIX); nft_e_ct_established(&rb);
             nft_e_verdict(&rb, NF_ACCEPT));
        RULE("input", "the node", e_ifprefix(&rb, NFT_META_IIFNAME, APP_NET_IF_PREFIX); nft_e_counter(&rb);
             nft_e_verdict(&rb, NF_DROP));
        RULE("prerouting", "exposures", e_jump(&rb, "exposures"));
        RULE("output", "exposures", e_jump(&rb, "exposures"));
        RULE("postrouting", "masquerade", e_ipv4(&rb); e_net(&rb, 12, NFT_CMP_EQ, rs->range.base, rs->range.prefix);
             e_net(&rb, 16, NFT_CMP_NEQ, rs->range.base, rs->range.prefix); nft_e_masq(&rb));
#undef RULE
        return 0;
}

int app_net_nft_full(struct nft_batch *b, const struct app_net_rules *rs, const char *const *members_of_groups,
                     const uint32_t *member_addrs, size_t n_members, struct na_error *err)
{
        int r = infra(b, rs, err);
        for (size_t i = 0; r >= 0 && i < rs->n_groups; i++)
                r = add_group_set(b, rs->groups[i], err);
        if (r >= 0)
                r = groups_rules(b, rs, NULL, NULL, err);
        for (size_t i = 0; r >= 0 && i < n_members; i++)
                if (members_of_groups[i])
                        r = app_net_nft_member(b, members_of_groups[i], member_addrs[i], true, err);
        if (r >= 0)
                r = app_net_nft_ports(b, rs, err);
        return r;
}
