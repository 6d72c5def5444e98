/*
 * Building nf_tables rules, chains and sets with libnftnl, shared by the server
 * firewall (fw-build.c) and the apps' network ruleset (drivers/app/net/app-net-nft.c).
 * Each expression helper appends one expression to a rule under construction; a
 * failed allocation sets rb->oom and the caller drops the rule:
 *
 *      struct fw_rb rb = { .r = fw_rule_new(table, "forward") };
 *      fw_e_meta(&rb, NFT_META_IIFNAME);
 *      fw_e_cmp(&rb, NFT_CMP_EQ, name, len);
 *      fw_e_verdict(&rb, NF_DROP);
 *      if (rb.oom) { nftnl_rule_free(rb.r); rb.r = NULL; }
 *      fw_batch_add(b, FW_OP_RULE_ADD, rb.r, err, "...");   (NULL obj: out of memory)
 *
 * Every object is of family inet; registers are NFT_REG_1 unless a helper says.
 */
#pragma once

#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <stdbool.h>
#include <stdint.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>

#include "common/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct nftnl_rule *, nftnl_rule_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nftnl_udata_buf *, nftnl_udata_buf_free)

struct fw_rb {
        struct nftnl_rule *r;
        bool oom;
};

struct nftnl_expr *fw_expr_new(struct fw_rb *rb, const char *name);
void fw_expr_add(struct fw_rb *rb, struct nftnl_expr *e);
void fw_e_meta(struct fw_rb *rb, uint32_t key);                            /* meta key => reg 1 */
void fw_e_cmp(struct fw_rb *rb, uint32_t op, const void *data, uint32_t len); /* reg 1 op data */
void fw_e_cmp_u8(struct fw_rb *rb, uint8_t v);
void fw_e_payload(struct fw_rb *rb, uint32_t base, uint32_t off, uint32_t len);
void fw_e_bitwise(struct fw_rb *rb, const uint8_t *mask, uint32_t len);
void fw_e_lookup(struct fw_rb *rb, const char *set, uint32_t set_id, bool verdict_map);
void fw_e_counter(struct fw_rb *rb);
void fw_e_verdict(struct fw_rb *rb, int verdict);
void fw_e_reject(struct fw_rb *rb, bool tcp);
void fw_e_ct_established(struct fw_rb *rb); /* ct state established,related (two expressions and a cmp) */
/* Added for the apps' ruleset. */
void fw_e_ct_status_dnat(struct fw_rb *rb);                                 /* ct status dnat */
void fw_e_fib_daddr_local(struct fw_rb *rb);                                /* fib daddr type local */
void fw_e_imm_data(struct fw_rb *rb, uint32_t reg, const void *data, uint32_t len);
/* nat: type NFT_NAT_DNAT or NFT_NAT_SNAT, IPv4 address in reg_addr, port in reg_port (0: none). */
void fw_e_nat(struct fw_rb *rb, uint32_t type, uint32_t reg_addr, uint32_t reg_port);
void fw_e_masq(struct fw_rb *rb);

struct nftnl_rule *fw_rule_new(const char *table, const char *chain);
struct nftnl_chain *fw_chain_new(const char *table, const char *name);
struct nftnl_set *fw_set_new(const char *table, const char *name);
int fw_set_udata_byteorder(struct nftnl_set *s, uint32_t byteorder);
