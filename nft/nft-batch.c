/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The batch: an ordered list of nf_tables operations, and its nfnetlink serialization. */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <ctype.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdarg.h>

#include "nft/nft.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the batch ---- */

static void op_free(enum nft_op_kind kind, void *obj)
{
        if (!obj)
                return;
        switch (kind) {
        case NFT_OP_TABLE_ADD:
        case NFT_OP_TABLE_DEL:
                nftnl_table_free(obj);
                break;
        case NFT_OP_CHAIN_ADD:
        case NFT_OP_CHAIN_DEL:
                nftnl_chain_free(obj);
                break;
        case NFT_OP_SET_ADD:
        case NFT_OP_SET_DEL:
        case NFT_OP_ELEM_ADD:
        case NFT_OP_ELEM_DEL:
                nftnl_set_free(obj);
                break;
        case NFT_OP_CHAIN_FLUSH:
        case NFT_OP_RULE_ADD:
                nftnl_rule_free(obj);
                break;
        case NFT_OP_RAW:
                free(obj);
                break;
        }
}

void nft_batch_init(struct nft_batch *b, const char *table)
{
        memset(b, 0, sizeof(*b));
        b->next_set_id = 1;
        snprintf(b->table, sizeof(b->table), "%s", table);
}

void nft_batch_clear(struct nft_batch *b)
{
        for (size_t i = 0; i < b->n; i++)
                op_free(b->ops[i].kind, b->ops[i].obj);
        free(b->ops);
        b->ops = NULL;
        b->n = b->cap = 0;
}

int nft_batch_add(struct nft_batch *b, enum nft_op_kind kind, void *obj, struct na_error *err, const char *fmt, ...)
{
        if (!obj)
                return na_error_sys(err, ENOMEM, "firewall batch");
        if (b->n == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 64;
                struct nft_op *ops = realloc(b->ops, cap * sizeof(*ops));
                if (!ops) {
                        op_free(kind, obj);
                        return na_error_sys(err, ENOMEM, "firewall batch");
                }
                b->ops = ops;
                b->cap = cap;
        }
        struct nft_op *op = &b->ops[b->n++];
        op->kind = kind;
        op->obj = obj;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(op->what, sizeof(op->what), fmt, ap);
        va_end(ap);
        return 0;
}

/* Room kept free before each message is built: libnftnl does not bound its writes. */
#define MSG_HEADROOM (64u * 1024u)

static int reserve(char **buf, size_t *cap, size_t used, struct na_error *err)
{
        if (*cap - used >= MSG_HEADROOM)
                return 0;
        size_t ncap = *cap ? *cap * 2 : 4 * MSG_HEADROOM;
        while (ncap - used < MSG_HEADROOM)
                ncap *= 2;
        char *n = realloc(*buf, ncap);
        if (!n)
                return na_error_sys(err, ENOMEM, "firewall batch of %zu bytes", ncap);
        memset(n + *cap, 0, ncap - *cap);
        *buf = n;
        *cap = ncap;
        return 0;
}

static void op_message(const struct nft_op *op, uint16_t family, char *at, uint32_t seq, uint16_t ack)
{
        struct nlmsghdr *nlh;
        switch (op->kind) {
        case NFT_OP_TABLE_ADD:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_NEWTABLE, family, (uint16_t)(NLM_F_CREATE | ack), seq);
                nftnl_table_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_CHAIN_ADD:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_NEWCHAIN, family, (uint16_t)(NLM_F_CREATE | ack), seq);
                nftnl_chain_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_CHAIN_DEL:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_DELCHAIN, family, ack, seq);
                nftnl_chain_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_CHAIN_FLUSH:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_DELRULE, family, ack, seq);
                nftnl_rule_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_SET_ADD:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_NEWSET, family, (uint16_t)(NLM_F_CREATE | ack), seq);
                nftnl_set_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_ELEM_ADD:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_NEWSETELEM, family, (uint16_t)(NLM_F_CREATE | ack), seq);
                nftnl_set_elems_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_ELEM_DEL:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_DELSETELEM, family, ack, seq);
                nftnl_set_elems_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_TABLE_DEL:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_DELTABLE, family, ack, seq);
                nftnl_table_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_SET_DEL:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_DELSET, family, ack, seq);
                nftnl_set_nlmsg_build_payload(nlh, op->obj);
                break;
        case NFT_OP_RAW: /* copied by the caller */
        case NFT_OP_RULE_ADD:
        default:
                nlh = nftnl_nlmsg_build_hdr(at, NFT_MSG_NEWRULE, family, (uint16_t)(NLM_F_CREATE | NLM_F_APPEND | ack),
                                            seq);
                nftnl_rule_nlmsg_build_payload(nlh, op->obj);
                break;
        }
}

/* Copy raw messages to at, numbered from *seq; the last one asks for an ack when last is set. */
static void raw_copy(const struct nft_raw *raw, char *at, uint32_t *seq, bool last)
{
        memcpy(at, raw->data, raw->len);
        size_t off = 0;
        for (uint32_t i = 0; i < raw->n; i++) {
                struct nlmsghdr *nlh = (struct nlmsghdr *)(void *)(at + off);
                NA_ANALYZER_FP("-Wanalyzer-null-dereference") /* at points into the batch buffer reserve_raw() made: never NULL */
                nlh->nlmsg_seq = (*seq)++;
                NA_ANALYZER_FP_END
                nlh->nlmsg_flags = (uint16_t)(nlh->nlmsg_flags & ~NLM_F_ACK);
                if (last && i + 1 == raw->n)
                        nlh->nlmsg_flags |= NLM_F_ACK;
                off += NLMSG_ALIGN(nlh->nlmsg_len);
        }
}

/* Room for a raw operation: its own length beyond the usual headroom. */
static int reserve_raw(char **buf, size_t *cap, size_t used, size_t len, struct na_error *err)
{
        while (*cap - used < len + MSG_HEADROOM) {
                int r = reserve(buf, cap, *cap, err); /* grows by doubling */
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ops [from, to) without begin and end; ack on the last when ack_last. */
static int encode_ops(const struct nft_batch *b, size_t from, size_t to, uint32_t *seq, bool ack_last, char **buf,
                      size_t *cap, size_t *len, struct na_error *err)
{
        for (size_t i = from; i < to; i++) {
                const struct nft_op *op = &b->ops[i];
                bool last = ack_last && i + 1 == to;
                int r = op->kind == NFT_OP_RAW ? reserve_raw(buf, cap, *len, ((struct nft_raw *)op->obj)->len, err)
                                              : reserve(buf, cap, *len, err);
                if (r < 0)
                        return r;
                if (op->kind == NFT_OP_RAW) {
                        raw_copy(op->obj, *buf + *len, seq, last);
                        *len += ((struct nft_raw *)op->obj)->len;
                        continue;
                }
                /* the last operation asks for an ack: the positive answer that the batch was committed */
                op_message(op, b->family ? b->family : NFPROTO_INET, *buf + *len, (*seq)++, last ? NLM_F_ACK : 0);
                struct nlmsghdr *nlh = (struct nlmsghdr *)(void *)(*buf + *len);
                NA_ANALYZER_FP("-Wanalyzer-null-dereference") /* reserve() made *buf hold the message: it is never NULL here */
                if (nlh->nlmsg_len > MSG_HEADROOM)
                        return na_error_set(err, EMSGSIZE, NA_E_INTERNAL, "firewall: %s: message too large", op->what);
                NA_ANALYZER_FP_END
                *len += NLMSG_ALIGN(nlh->nlmsg_len);
        }
        return 0;
}

int nft_batch_serialize(const struct nft_batch *b, uint32_t seq, char **ret_buf, size_t *ret_len, struct na_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t cap = 0, len = 0;
        int r = reserve(&buf, &cap, len, err);
        if (r < 0)
                return r;
        struct nlmsghdr *nlh = nftnl_batch_begin(buf, seq++);
        len += NLMSG_ALIGN(nlh->nlmsg_len);
        if ((r = encode_ops(b, 0, b->n, &seq, true, &buf, &cap, &len, err)) < 0)
                return r;
        r = reserve(&buf, &cap, len, err);
        if (r < 0)
                return r;
        nlh = nftnl_batch_end(buf + len, seq);
        len += NLMSG_ALIGN(nlh->nlmsg_len);
        *ret_len = len;
        *ret_buf = TAKE_PTR(buf);
        return 0;
}

int nft_batch_encode_range(const struct nft_batch *b, size_t from, size_t to, struct nft_raw **ret,
                          struct na_error *err)
{
        _cleanup_free_ char *buf = NULL;
        size_t cap = 0, len = 0;
        uint32_t seq = 0;
        int r = encode_ops(b, from, to, &seq, false, &buf, &cap, &len, err);
        if (r < 0)
                return r;
        struct nft_raw *raw = malloc(sizeof(*raw) + len);
        if (!raw)
                return na_error_sys(err, ENOMEM, "firewall: encode");
        raw->len = len;
        raw->n = seq;
        if (len)
                memcpy(raw->data, buf, len);
        *ret = raw;
        return 0;
}

size_t nft_batch_messages(const struct nft_batch *b)
{
        size_t n = 0;
        for (size_t i = 0; i < b->n; i++)
                n += b->ops[i].kind == NFT_OP_RAW ? ((const struct nft_raw *)b->ops[i].obj)->n : 1;
        return n;
}

const char *nft_batch_what(const struct nft_batch *b, size_t i)
{
        for (size_t k = 0; k < b->n; k++) {
                size_t n = b->ops[k].kind == NFT_OP_RAW ? ((const struct nft_raw *)b->ops[k].obj)->n : 1;
                if (i < n)
                        return b->ops[k].what;
                i -= n;
        }
        return "the batch";
}
