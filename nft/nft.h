/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nft/: nf_tables through libnftnl and libmnl, shared by the server firewall
 * (firewall/) and the apps' network ruleset (drivers/app/net/app-net-nft.c): building
 * rules, chains and sets (nft-expr.c), a batch of operations and its nfnetlink
 * serialization (nft-batch.c), the netlink socket that applies it and the few reads
 * the users need (nft-netlink.c), and the batch as stable text for golden tests
 * (nft-render.c). No names of any user's tables or chains here.
 *
 * Each expression helper appends one expression to a rule under construction; a
 * failed allocation sets rb->oom and the caller drops the rule:
 *
 *      struct nft_rb rb = { .r = nft_rule_new(table, "forward") };
 *      nft_e_meta(&rb, NFT_META_IIFNAME);
 *      nft_e_cmp(&rb, NFT_CMP_EQ, name, len);
 *      nft_e_verdict(&rb, NF_DROP);
 *      if (rb.oom) { nftnl_rule_free(rb.r); rb.r = NULL; }
 *      nft_batch_add(b, NFT_OP_RULE_ADD, rb.r, err, "...");   (NULL obj: out of memory)
 *
 * Every object is of family inet unless the batch says otherwise (nft_batch.family: the
 * netdev guard of firewall/fw-guard.c); registers are NFT_REG_1 unless a helper says.
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

#include "common/error.h"
#include "common/names.h" /* NA_IFNAME_LEN: map keys are interface names */
#include "common/macro.h"

struct mnl_socket;
struct nlmsghdr;

/* The longest table name a batch carries, with its NUL (the firewall's "<table>-NN" fits). */
#define NFT_TABLE_NAME_MAX 40
/* The longest chain name nft_nl_map_has answers, with its NUL. */
#define NFT_NAME_MAX 64

DEFINE_TRIVIAL_CLEANUP_FUNC(struct nftnl_rule *, nftnl_rule_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nftnl_udata_buf *, nftnl_udata_buf_free)

struct nft_rb {
        struct nftnl_rule *r;
        bool oom;
};

struct nftnl_expr *nft_expr_new(struct nft_rb *rb, const char *name);
void nft_expr_add(struct nft_rb *rb, struct nftnl_expr *e);
void nft_e_meta(struct nft_rb *rb, uint32_t key);                            /* meta key => reg 1 */
void nft_e_cmp(struct nft_rb *rb, uint32_t op, const void *data, uint32_t len); /* reg 1 op data */
void nft_e_cmp_u8(struct nft_rb *rb, uint8_t v);
void nft_e_payload(struct nft_rb *rb, uint32_t base, uint32_t off, uint32_t len);
void nft_e_bitwise(struct nft_rb *rb, const uint8_t *mask, uint32_t len);
void nft_e_lookup(struct nft_rb *rb, const char *set, uint32_t set_id, bool verdict_map);
void nft_e_counter(struct nft_rb *rb);
void nft_e_verdict(struct nft_rb *rb, int verdict);
void nft_e_reject(struct nft_rb *rb, bool tcp);
void nft_e_ct_established(struct nft_rb *rb); /* ct state established,related (two expressions and a cmp) */
/* Added for the apps' ruleset. */
void nft_e_ct_status_dnat(struct nft_rb *rb);                                 /* ct status dnat */
void nft_e_fib_daddr_local(struct nft_rb *rb);                                /* fib daddr type local */
void nft_e_imm_data(struct nft_rb *rb, uint32_t reg, const void *data, uint32_t len);
/* nat: type NFT_NAT_DNAT or NFT_NAT_SNAT, IPv4 address in reg_addr, port in reg_port (0: none). */
void nft_e_nat(struct nft_rb *rb, uint32_t type, uint32_t reg_addr, uint32_t reg_port);
void nft_e_masq(struct nft_rb *rb);

struct nftnl_rule *nft_rule_new(const char *table, const char *chain);
struct nftnl_chain *nft_chain_new(const char *table, const char *name);
struct nftnl_set *nft_set_new(const char *table, const char *name);
int nft_set_udata_byteorder(struct nftnl_set *s, uint32_t byteorder);

/* ---- the batch ---- */

enum nft_op_kind {
        NFT_OP_TABLE_ADD,
        NFT_OP_CHAIN_ADD,
        NFT_OP_CHAIN_FLUSH,
        NFT_OP_CHAIN_DEL,
        NFT_OP_SET_ADD,
        NFT_OP_ELEM_ADD,
        NFT_OP_ELEM_DEL,
        NFT_OP_RULE_ADD,
        NFT_OP_TABLE_DEL, /* obj: nftnl_table */
        NFT_OP_SET_DEL,   /* obj: nftnl_set */
        NFT_OP_RAW,       /* obj: struct nft_raw, messages encoded earlier (nft_batch_encode_range) */
};

struct nft_op {
        enum nft_op_kind kind;
        void *obj;       /* nftnl_table, _chain, _set (with elements) or _rule; owned */
        char what[112];  /* what the operation is about, for error messages */
};

struct nft_batch {
        struct nft_op *ops;
        size_t n, cap;
        uint32_t next_set_id;
        char table[NFT_TABLE_NAME_MAX];
        uint16_t family; /* of every operation; 0: NFPROTO_INET (set it after nft_batch_init) */
};

void nft_batch_init(struct nft_batch *b, const char *table);
void nft_batch_clear(struct nft_batch *b);
/* Append an operation; takes obj (freed on failure too). */
int nft_batch_add(struct nft_batch *b, enum nft_op_kind kind, void *obj, struct na_error *err, const char *fmt, ...)
        _printf_(5, 6);
/* Serialize to one nfnetlink batch (begin ... end); sequence numbers from seq on. */
int nft_batch_serialize(const struct nft_batch *b, uint32_t seq, char **ret_buf, size_t *ret_len, struct na_error *err);
/*
 * A stable text of the batch (one operation per line, expressions indented), for
 * golden tests. A rule's userdata TLVs are shown as comments (type 0) and hex; a user
 * of the batch with TLVs of its own passes udata to show them (it answers whether it
 * did; NULL: none).
 */
typedef bool (*nft_udata_render_fn)(FILE *f, uint8_t type, const uint8_t *value, uint8_t len);
int nft_batch_render(const struct nft_batch *b, nft_udata_render_fn udata, char **ret_text, struct na_error *err);

/*
 * Operations already encoded: n nfnetlink messages back to back, as
 * nft_batch_encode_range wrote them. Serializing a batch renumbers them and sets the
 * ack flag where it belongs, so they can be kept and sent again later (fw-state.c
 * keeps each server's with its stored configuration, for the start).
 */
struct nft_raw {
        size_t len;
        uint32_t n;
        char data[];
};
/* Encode operations [from, to) of b as a struct nft_raw (malloc'ed). */
int nft_batch_encode_range(const struct nft_batch *b, size_t from, size_t to, struct nft_raw **ret,
                          struct na_error *err);
/* Messages a batch sends between begin and end (an NFT_OP_RAW counts its messages). */
size_t nft_batch_messages(const struct nft_batch *b);
/* What the i-th message of a batch is about, for error messages. */
const char *nft_batch_what(const struct nft_batch *b, size_t i);

/* ---- the netlink socket ---- */

struct nft_nl {
        struct mnl_socket *sock;
        uint32_t portid;
        uint32_t seq;
        size_t sndbuf; /* current SO_SNDBUF(FORCE) value */
};

int nft_nl_open(struct nft_nl *nl, int netns_fd, struct na_error *err);
void nft_nl_close(struct nft_nl *nl);
/* Send a batch; 0 when the kernel committed it, else err names the refused operation. */
int nft_nl_apply(struct nft_nl *nl, const struct nft_batch *b, struct na_error *err);
/* nft_nl_apply of a batch already serialized (nft_batch_serialize from seq): buf, len. */
int nft_nl_send(struct nft_nl *nl, const struct nft_batch *b, const char *buf, size_t len, uint32_t seq,
               struct na_error *err);

/*
 * Send one request (req: a NLM_F_DUMP or get message built on nl->seq) and run cb over
 * its answers; -errno of a kernel error, err untouched for ENOENT. what names the
 * object for messages.
 */
int nft_nl_dump(struct nft_nl *nl, char *req, int (*cb)(const struct nlmsghdr *nlh, void *data), void *data,
                const char *what, struct na_error *err);

struct nft_rule_list {
        struct nftnl_rule **v;
        size_t n, cap;
};
void nft_rule_list_clear(struct nft_rule_list *l);

/* The rules of one chain; -ENOENT (err untouched) when the table or the chain does not exist. */
int nft_nl_chain_rules(struct nft_nl *nl, const char *table, const char *chain, struct nft_rule_list *out,
                      struct na_error *err);
/* Whether map holds key ifname; *ret_chain (optional, NFT_NAME_MAX) gets the jump target. */
int nft_nl_map_has(struct nft_nl *nl, const char *table, const char *map, const char *ifname, bool *ret,
                  char *ret_chain, struct na_error *err);
/*
 * Names of every chain of the table (NULL: of every inet table), and of the table
 * each is in (*ret_tables, optional); -ENOENT when there is no such table.
 */
int nft_nl_chain_names(struct nft_nl *nl, const char *table, char ***ret, char ***ret_tables, size_t *ret_n,
                      struct na_error *err);
/* Names of every inet table. */
int nft_nl_table_names(struct nft_nl *nl, char ***ret, size_t *ret_n, struct na_error *err);
void nft_strv_free(char **v, size_t n);
