/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libnftnl expression and object helpers (nft/nft.h). */
#include "nft/nft.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>


/* ---- expressions ---- */

struct nftnl_expr *nft_expr_new(struct nft_rb *rb, const char *name)
{
        struct nftnl_expr *e = nftnl_expr_alloc(name);
        if (!e)
                rb->oom = true;
        return e;
}

void nft_expr_add(struct nft_rb *rb, struct nftnl_expr *e)
{
        if (e)
                nftnl_rule_add_expr(rb->r, e);
}

void nft_e_meta(struct nft_rb *rb, uint32_t key)
{
        struct nftnl_expr *e = nft_expr_new(rb, "meta");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
        nft_expr_add(rb, e);
}

void nft_e_cmp(struct nft_rb *rb, uint32_t op, const void *data, uint32_t len)
{
        struct nftnl_expr *e = nft_expr_new(rb, "cmp");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        if (nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len) < 0)
                rb->oom = true;
        nft_expr_add(rb, e);
}

void nft_e_cmp_u8(struct nft_rb *rb, uint8_t v)
{
        nft_e_cmp(rb, NFT_CMP_EQ, &v, 1);
}

void nft_e_payload(struct nft_rb *rb, uint32_t base, uint32_t off, uint32_t len)
{
        struct nftnl_expr *e = nft_expr_new(rb, "payload");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
        nft_expr_add(rb, e);
}

void nft_e_bitwise(struct nft_rb *rb, const uint8_t *mask, uint32_t len)
{
        static const uint8_t zero[16];
        struct nftnl_expr *e = nft_expr_new(rb, "bitwise");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
        if (nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len) < 0 ||
            nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len) < 0)
                rb->oom = true;
        nft_expr_add(rb, e);
}

void nft_e_lookup(struct nft_rb *rb, const char *set, uint32_t set_id, bool verdict_map)
{
        struct nftnl_expr *e = nft_expr_new(rb, "lookup");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
        if (verdict_map)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
        if (nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set) < 0)
                rb->oom = true;
        if (set_id)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
        nft_expr_add(rb, e);
}

void nft_e_counter(struct nft_rb *rb)
{
        nft_expr_add(rb, nft_expr_new(rb, "counter"));
}

void nft_e_verdict(struct nft_rb *rb, int verdict)
{
        struct nftnl_expr *e = nft_expr_new(rb, "immediate");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
        nft_expr_add(rb, e);
}

void nft_e_reject(struct nft_rb *rb, bool tcp)
{
        struct nftnl_expr *e = nft_expr_new(rb, "reject");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, tcp ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH);
        nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, tcp ? 0 : NFT_REJECT_ICMPX_PORT_UNREACH);
        nft_expr_add(rb, e);
}

void nft_e_ct_established(struct nft_rb *rb)
{
        struct nftnl_expr *e = nft_expr_new(rb, "ct");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
                nft_expr_add(rb, e);
        }
        /* host byte order, as the kernel stores the state bits */
        uint32_t mask = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED), zero = 0;
        nft_e_bitwise(rb, (const uint8_t *)&mask, sizeof(mask));
        nft_e_cmp(rb, NFT_CMP_NEQ, &zero, sizeof(zero));
}

/* ---- objects ---- */

struct nftnl_rule *nft_rule_new(const char *table, const char *chain)
{
        struct nftnl_rule *r = nftnl_rule_alloc();
        if (!r)
                return NULL;
        nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
        if (nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table) < 0 || nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) < 0) {
                nftnl_rule_free(r);
                return NULL;
        }
        return r;
}

struct nftnl_chain *nft_chain_new(const char *table, const char *name)
{
        struct nftnl_chain *c = nftnl_chain_alloc();
        if (!c)
                return NULL;
        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
        if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table) < 0 || nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0) {
                nftnl_chain_free(c);
                return NULL;
        }
        return c;
}

struct nftnl_set *nft_set_new(const char *table, const char *name)
{
        struct nftnl_set *s = nftnl_set_alloc();
        if (!s)
                return NULL;
        nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
        if (nftnl_set_set_str(s, NFTNL_SET_TABLE, table) < 0 || nftnl_set_set_str(s, NFTNL_SET_NAME, name) < 0) {
                nftnl_set_free(s);
                return NULL;
        }
        return s;
}

int nft_set_udata_byteorder(struct nftnl_set *s, uint32_t byteorder)
{
        _cleanup_(nftnl_udata_buf_freep) struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(64);
        if (!u || !nftnl_udata_put_u32(u, NFTNL_UDATA_SET_KEYBYTEORDER, byteorder))
                return -ENOMEM;
        return nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(u), nftnl_udata_buf_len(u));
}

void nft_e_ct_status_dnat(struct nft_rb *rb)
{
        struct nftnl_expr *e = nft_expr_new(rb, "ct");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATUS);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
                nft_expr_add(rb, e);
        }
        uint32_t mask = IPS_DST_NAT, zero = 0;
        nft_e_bitwise(rb, (const uint8_t *)&mask, sizeof(mask));
        nft_e_cmp(rb, NFT_CMP_NEQ, &zero, sizeof(zero));
}

void nft_e_fib_daddr_local(struct nft_rb *rb)
{
        struct nftnl_expr *e = nft_expr_new(rb, "fib");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
                nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
                nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
                nft_expr_add(rb, e);
        }
        uint32_t local = RTN_LOCAL;
        nft_e_cmp(rb, NFT_CMP_EQ, &local, sizeof(local));
}

void nft_e_imm_data(struct nft_rb *rb, uint32_t reg, const void *data, uint32_t len)
{
        struct nftnl_expr *e = nft_expr_new(rb, "immediate");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, reg);
        if (nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len) < 0)
                rb->oom = true;
        nft_expr_add(rb, e);
}

void nft_e_nat(struct nft_rb *rb, uint32_t type, uint32_t reg_addr, uint32_t reg_port)
{
        struct nftnl_expr *e = nft_expr_new(rb, "nat");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, type);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, NFPROTO_IPV4);
        nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, reg_addr);
        if (reg_port)
                nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, reg_port);
        nft_expr_add(rb, e);
}

void nft_e_masq(struct nft_rb *rb)
{
        nft_expr_add(rb, nft_expr_new(rb, "masq"));
}
