/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The servers' anti-spoofing guard (AGENT-API 4.1: a server sends only from its own
 * addresses and its own MAC address, whatever its firewall rules say).
 *
 * Why a netdev table and not the shard tables: the inet family sees neither ARP nor
 * a bridged server's traffic (bridged frames do not cross the inet hooks without
 * br_netfilter) nor what a server sends to the node itself (the input hook), and its
 * forward hook runs after routing. The netdev ingress hook of the tap sees every
 * frame the guest sends, first, in both network modes: nothing of the server's own
 * rules (forward hook) or of the node's can come before it. Since Linux 6.16 a netdev
 * base chain may name a device that does not exist yet and binds to it whenever it
 * appears, so the guard set at vps.create and vps.network.set holds across the tap's
 * destruction and re-creation at every stop and start; the agent sets it again at each
 * start too, for older kernels (they refuse a missing device: -ENOENT).
 *
 *   table netdev nodeagent-guard {
 *     chain nav6f1c2a3b4c5d { type filter hook ingress device "nav6f1c2a3b4c5d" priority -500; policy drop;
 *       ether saddr != 52:54:00:.. counter drop
 *       meta protocol arp jump nav…-arp ; meta protocol ip jump nav…-ip ; meta protocol ip6 jump nav…-ip6 }
 *     chain nav…-arp  { arp htype/ptype/hlen/plen != ethernet/ip/6/4 drop; arp saddr ether != MAC drop;
 *                       arp saddr ip A accept ...; arp saddr ip 0.0.0.0 accept (probes); counter drop }
 *     chain nav…-ip   { ip saddr A accept ...; counter drop }
 *     chain nav…-ip6  { icmpv6 type nd-router-advert, nd-redirect drop;
 *                       icmpv6 type nd-neighbor-advert jump nav…-na;
 *                       ip6 saddr A6 | its EUI-64 link-local | :: accept ...; counter drop }
 *     chain nav…-na   { nd target A6 | its link-local return ...; counter drop }
 *   }
 *
 * The link-local address allowed is the EUI-64 one of the server's MAC (the kernel's
 * default, addr_gen_mode 0); other ethertypes (VLAN tags among them) are dropped.
 * One batch replaces a server's guard: the kernel takes all of it or none.
 */
#include "firewall/fw-handle.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/if_ether.h>
#include <libnftnl/table.h>
#include <stdio.h>
#include <string.h>

#define GUARD_PRIO (-500)
static const char *const suffixes[] = { "", "-arp", "-ip", "-ip6", "-na" };
enum { C_BASE, C_ARP, C_IP, C_IP6, C_NA, C_N };

struct guard_addrs {
        unsigned char v4[FW_GUARD_ADDRS_MAX][4];
        size_t n4;
        unsigned char v6[FW_GUARD_ADDRS_MAX + 2][16]; /* its addresses, its link-local, :: (sources only) */
        size_t n6;
        unsigned char mac[6];
};

static int parse(const char *vps_id, const char *mac, const char *const *addrs, size_t n, struct guard_addrs *g,
                 struct na_error *err)
{
        memset(g, 0, sizeof(*g));
        unsigned m[6];
        char extra;
        if (!mac || sscanf(mac, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], &extra) != 6)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vps %s: guard: bad MAC address %s", vps_id,
                                    mac ? mac : "(none)");
        for (int i = 0; i < 6; i++)
                g->mac[i] = (unsigned char)m[i];
        if (n > FW_GUARD_ADDRS_MAX)
                return na_error_set(err, E2BIG, NA_E_INTERNAL, "vps %s: guard: %zu addresses (at most %d)", vps_id, n,
                                    FW_GUARD_ADDRS_MAX);
        for (size_t i = 0; i < n; i++) {
                if (inet_pton(AF_INET, addrs[i], g->v4[g->n4]) == 1)
                        g->n4++;
                else if (inet_pton(AF_INET6, addrs[i], g->v6[g->n6]) == 1)
                        g->n6++;
                else
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "vps %s: guard: bad address %s", vps_id,
                                            addrs[i]);
        }
        /* fe80::<EUI-64 of the MAC>: the U/L bit flipped, ff:fe in the middle. */
        unsigned char *ll = g->v6[g->n6++];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[8] = g->mac[0] ^ 0x02;
        ll[9] = g->mac[1];
        ll[10] = g->mac[2];
        ll[11] = 0xff;
        ll[12] = 0xfe;
        ll[13] = g->mac[3];
        ll[14] = g->mac[4];
        ll[15] = g->mac[5];
        return 0;
}

static void chain_name(const char *ifname, int which, char buf[FW_NAME_MAX])
{
        snprintf(buf, FW_NAME_MAX, "%s%s", ifname, suffixes[which]);
}

static void verdict_jump(struct nft_rb *rb, int verdict, const char *chain)
{
        struct nftnl_expr *e = nft_expr_new(rb, "immediate");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
        if (chain)
                nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
        nft_expr_add(rb, e);
}

/* A rule: [payload base/off/len op value] ... then verdict (counter first when counted). */
struct match {
        uint32_t base, off, len, op;
        const void *value;
};

static int add_rule(struct nft_batch *b, const char *chain, const struct match *m, size_t n, bool counter,
                    int verdict, const char *target, struct na_error *err)
{
        struct nft_rb rb = { .r = nft_rule_new(b->table, chain) };
        if (rb.r)
                nftnl_rule_set_u32(rb.r, NFTNL_RULE_FAMILY, NFPROTO_NETDEV);
        for (size_t i = 0; i < n && rb.r; i++) {
                if (m[i].base == UINT32_MAX)
                        nft_e_meta(&rb, m[i].off); /* a meta key */
                else
                        nft_e_payload(&rb, m[i].base, m[i].off, m[i].len);
                nft_e_cmp(&rb, m[i].op, m[i].value, m[i].len);
        }
        if (counter)
                nft_e_counter(&rb);
        verdict_jump(&rb, verdict, target);
        if (rb.oom) {
                nftnl_rule_free(rb.r);
                rb.r = NULL;
        }
        return nft_batch_add(b, NFT_OP_RULE_ADD, rb.r, err, "guard rule in %s", chain);
}

#define META(key, v, l) { UINT32_MAX, key, l, NFT_CMP_EQ, v }
#define PL(base, off, l, op, v) { base, off, l, op, v }

static int build(struct nft_batch *b, const char *ifname, const struct guard_addrs *g, struct na_error *err)
{
        char names[C_N][FW_NAME_MAX];
        for (int i = 0; i < C_N; i++)
                chain_name(ifname, i, names[i]);
        struct nftnl_table *t = nftnl_table_alloc();
        if (t) {
                nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_NETDEV);
                if (nftnl_table_set_str(t, NFTNL_TABLE_NAME, b->table) < 0) {
                        nftnl_table_free(t);
                        t = NULL;
                }
        }
        int r = nft_batch_add(b, NFT_OP_TABLE_ADD, t, err, "table netdev %s", b->table);
        for (int i = 0; r == 0 && i < C_N; i++) {
                struct nftnl_chain *c = nft_chain_new(b->table, names[i]);
                if (c) {
                        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_NETDEV);
                        if (i == C_BASE) {
                                nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_NETDEV_INGRESS);
                                nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, GUARD_PRIO);
                                nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_DROP);
                                if (nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter") < 0 ||
                                    nftnl_chain_set_str(c, NFTNL_CHAIN_DEV, ifname) < 0) {
                                        nftnl_chain_free(c);
                                        c = NULL;
                                }
                        }
                }
                r = nft_batch_add(b, NFT_OP_CHAIN_ADD, c, err, "chain %s", names[i]);
                if (r == 0)
                        r = nft_batch_add(b, NFT_OP_CHAIN_FLUSH, nft_rule_new(b->table, names[i]), err,
                                          "flush of chain %s", names[i]);
        }
        if (r < 0)
                return r;

        const uint16_t p_arp = htons(ETH_P_ARP), p_ip = htons(ETH_P_IP), p_ip6 = htons(ETH_P_IPV6);
        static const unsigned char arp_eth_ip[6] = { 0, 1, 8, 0, 6, 4 }, zero4[4] = { 0 };
        static const uint8_t icmp6 = IPPROTO_ICMPV6, ra = 134, na = 136, redirect = 137;

        /* The base chain: the MAC, then each protocol to its chain; anything else meets the drop policy. */
        const struct match mac_wrong[] = { PL(NFT_PAYLOAD_LL_HEADER, 6, 6, NFT_CMP_NEQ, g->mac) };
        const struct match is_arp[] = { META(NFT_META_PROTOCOL, &p_arp, 2) };
        const struct match is_ip[] = { META(NFT_META_PROTOCOL, &p_ip, 2) };
        const struct match is_ip6[] = { META(NFT_META_PROTOCOL, &p_ip6, 2) };
        if ((r = add_rule(b, names[C_BASE], mac_wrong, 1, true, NF_DROP, NULL, err)) < 0 ||
            (r = add_rule(b, names[C_BASE], is_arp, 1, false, NFT_JUMP, names[C_ARP], err)) < 0 ||
            (r = add_rule(b, names[C_BASE], is_ip, 1, false, NFT_JUMP, names[C_IP], err)) < 0 ||
            (r = add_rule(b, names[C_BASE], is_ip6, 1, false, NFT_JUMP, names[C_IP6], err)) < 0)
                return r;

        /* ARP over Ethernet for IPv4, its MAC as sender, one of its addresses (or 0.0.0.0: a probe). */
        const struct match arp_shape[] = { PL(NFT_PAYLOAD_NETWORK_HEADER, 0, 6, NFT_CMP_NEQ, arp_eth_ip) };
        const struct match arp_sha[] = { PL(NFT_PAYLOAD_NETWORK_HEADER, 8, 6, NFT_CMP_NEQ, g->mac) };
        if ((r = add_rule(b, names[C_ARP], arp_shape, 1, true, NF_DROP, NULL, err)) < 0 ||
            (r = add_rule(b, names[C_ARP], arp_sha, 1, true, NF_DROP, NULL, err)) < 0)
                return r;
        for (size_t i = 0; i <= g->n4; i++) {
                const struct match spa[] = { PL(NFT_PAYLOAD_NETWORK_HEADER, 14, 4, NFT_CMP_EQ,
                                                i < g->n4 ? g->v4[i] : zero4) };
                if ((r = add_rule(b, names[C_ARP], spa, 1, false, NF_ACCEPT, NULL, err)) < 0)
                        return r;
        }
        if ((r = add_rule(b, names[C_ARP], NULL, 0, true, NF_DROP, NULL, err)) < 0)
                return r;

        /* IPv4: its addresses as source. */
        for (size_t i = 0; i < g->n4; i++) {
                const struct match src[] = { PL(NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_CMP_EQ, g->v4[i]) };
                if ((r = add_rule(b, names[C_IP], src, 1, false, NF_ACCEPT, NULL, err)) < 0)
                        return r;
        }
        if ((r = add_rule(b, names[C_IP], NULL, 0, true, NF_DROP, NULL, err)) < 0)
                return r;

        /* IPv6: no router advertisements or redirects, advertisements only of its own addresses, its sources. */
        const struct match m_ra[] = { META(NFT_META_L4PROTO, &icmp6, 1),
                                      PL(NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, NFT_CMP_EQ, &ra) };
        const struct match m_redirect[] = { META(NFT_META_L4PROTO, &icmp6, 1),
                                            PL(NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, NFT_CMP_EQ, &redirect) };
        const struct match m_na[] = { META(NFT_META_L4PROTO, &icmp6, 1),
                                      PL(NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, NFT_CMP_EQ, &na) };
        if ((r = add_rule(b, names[C_IP6], m_ra, 2, true, NF_DROP, NULL, err)) < 0 ||
            (r = add_rule(b, names[C_IP6], m_redirect, 2, true, NF_DROP, NULL, err)) < 0 ||
            (r = add_rule(b, names[C_IP6], m_na, 2, false, NFT_JUMP, names[C_NA], err)) < 0)
                return r;
        static const unsigned char unspecified[16] = { 0 };
        for (size_t i = 0; i <= g->n6; i++) { /* its addresses, its link-local, then :: (duplicate address detection) */
                const struct match src[] = { PL(NFT_PAYLOAD_NETWORK_HEADER, 8, 16, NFT_CMP_EQ,
                                                i < g->n6 ? g->v6[i] : unspecified) };
                if ((r = add_rule(b, names[C_IP6], src, 1, false, NF_ACCEPT, NULL, err)) < 0)
                        return r;
        }
        if ((r = add_rule(b, names[C_IP6], NULL, 0, true, NF_DROP, NULL, err)) < 0)
                return r;
        for (size_t i = 0; i < g->n6; i++) { /* the target of a neighbour advertisement: 8 bytes into ICMPv6 */
                const struct match target[] = { PL(NFT_PAYLOAD_TRANSPORT_HEADER, 8, 16, NFT_CMP_EQ, g->v6[i]) };
                if ((r = add_rule(b, names[C_NA], target, 1, false, NFT_RETURN, NULL, err)) < 0)
                        return r;
        }
        return add_rule(b, names[C_NA], NULL, 0, true, NF_DROP, NULL, err);
}

static void guard_table(const char *prefix, char buf[FW_TABLE_NAME_MAX])
{
        snprintf(buf, FW_TABLE_NAME_MAX, "%s-guard", prefix ? prefix : FW_DEFAULT_TABLE);
}

static int begin(const char *prefix, const char *vps_id, const char *mac, const char *const *addrs, size_t n,
                 struct nft_batch *b, struct na_error *err)
{
        char ifname[NA_IFNAME_LEN], table[FW_TABLE_NAME_MAX];
        if (na_vps_ifname(vps_id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "guard: not a server id: %s", vps_id);
        struct guard_addrs g;
        int r = parse(vps_id, mac, addrs, n, &g, err);
        if (r < 0)
                return r;
        guard_table(prefix, table);
        nft_batch_init(b, table);
        b->family = NFPROTO_NETDEV;
        if ((r = build(b, ifname, &g, err)) < 0) {
                nft_batch_clear(b);
                return r;
        }
        return 0;
}

int fw_guard_set(struct fw *fw, const char *vps_id, const char *mac, const char *const *addrs, size_t n,
                 struct na_error *err)
{
        struct nft_batch b;
        int r = begin(fw->prefix, vps_id, mac, addrs, n, &b, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&fw->lock);
        r = nft_nl_apply(&fw->nl, &b, err);
        pthread_mutex_unlock(&fw->lock);
        nft_batch_clear(&b);
        return r < 0 ? na_error_prefix(err, "vps %s: guard", vps_id) : 0;
}

int fw_guard_remove(struct fw *fw, const char *vps_id, struct na_error *err)
{
        char ifname[NA_IFNAME_LEN], table[FW_TABLE_NAME_MAX], name[FW_NAME_MAX];
        if (na_vps_ifname(vps_id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "guard: not a server id: %s", vps_id);
        guard_table(fw->prefix, table);
        struct nft_batch b;
        nft_batch_init(&b, table);
        b.family = NFPROTO_NETDEV;
        int r = 0;
        /* The base chain first (it jumps to the others), each flushed before it goes. */
        for (int i = 0; r == 0 && i < C_N; i++) {
                chain_name(ifname, i, name);
                r = nft_batch_add(&b, NFT_OP_CHAIN_FLUSH, nft_rule_new(table, name), err, "flush of chain %s", name);
        }
        for (int i = 0; r == 0 && i < C_N; i++) {
                chain_name(ifname, i, name);
                struct nftnl_chain *c = nft_chain_new(table, name);
                if (c)
                        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_NETDEV);
                r = nft_batch_add(&b, NFT_OP_CHAIN_DEL, c, err, "deletion of chain %s", name);
        }
        if (r == 0) {
                pthread_mutex_lock(&fw->lock);
                r = nft_nl_apply(&fw->nl, &b, err);
                pthread_mutex_unlock(&fw->lock);
                if (r == -ENOENT) { /* no guard (a server made before servers had a network): nothing to remove */
                        na_error_clear(err);
                        r = 0;
                }
        }
        nft_batch_clear(&b);
        return r < 0 ? na_error_prefix(err, "vps %s: guard", vps_id) : 0;
}

int fw_guard_render(const char *prefix, const char *vps_id, const char *mac, const char *const *addrs, size_t n,
                    char **ret_text, struct na_error *err)
{
        struct nft_batch b;
        int r = begin(prefix, vps_id, mac, addrs, n, &b, err);
        if (r < 0)
                return r;
        r = nft_batch_render(&b, NULL, ret_text, err);
        nft_batch_clear(&b);
        return r;
}
