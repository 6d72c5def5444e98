/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A batch as stable text, for golden tests: one operation a line, a rule's
 * expressions indented below it, byte strings in hex as the kernel receives them.
 * The format is ours (not libnftnl's snprintf), so a libnftnl upgrade does not move
 * the golden files; it reads the same libnftnl objects the serializer sends.
 */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <arpa/inet.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include "nft/nft.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct out {
        FILE *f;
};

static uint32_t eu32(const struct nftnl_expr *e, uint16_t attr)
{
        return nftnl_expr_is_set(e, attr) ? nftnl_expr_get_u32(e, attr) : 0;
}

static void hex(FILE *f, const void *data, uint32_t len)
{
        const uint8_t *p = data;
        fputs("0x", f);
        for (uint32_t i = 0; p && i < len; i++)
                fprintf(f, "%02x", p[i]);
}

/* The family the batch being rendered works in ("inet" or "netdev"); set by nft_batch_render. */
static _Thread_local const char *render_family = "inet";

static const char *hook_name(uint32_t h)
{
        if (streq(render_family, "netdev"))
                return h == NF_NETDEV_INGRESS ? "ingress" : "?";
        static const char *const names[] = { [NF_INET_PRE_ROUTING] = "prerouting", [NF_INET_LOCAL_IN] = "input",
                                             [NF_INET_FORWARD] = "forward", [NF_INET_LOCAL_OUT] = "output",
                                             [NF_INET_POST_ROUTING] = "postrouting" };
        return h < ARRAY_SIZE(names) && names[h] ? names[h] : "?";
}

static const char *meta_key(uint32_t k)
{
        switch (k) {
        case NFT_META_NFPROTO:
                return "nfproto";
        case NFT_META_L4PROTO:
                return "l4proto";
        case NFT_META_PROTOCOL:
                return "protocol";
        case NFT_META_IIFNAME:
                return "iifname";
        case NFT_META_OIFNAME:
                return "oifname";
        default:
                return "?";
        }
}

static const char *cmp_op(uint32_t op)
{
        static const char *const ops[] = { [NFT_CMP_EQ] = "eq",  [NFT_CMP_NEQ] = "neq", [NFT_CMP_LT] = "lt",
                                           [NFT_CMP_LTE] = "lte", [NFT_CMP_GT] = "gt",  [NFT_CMP_GTE] = "gte" };
        return op < ARRAY_SIZE(ops) && ops[op] ? ops[op] : "?";
}

static const char *base_name(uint32_t base)
{
        return base == NFT_PAYLOAD_NETWORK_HEADER     ? "network"
               : base == NFT_PAYLOAD_TRANSPORT_HEADER ? "transport"
               : base == NFT_PAYLOAD_LL_HEADER        ? "link"
                                                      : "?";
}

static const char *verdict_name(int32_t v)
{
        switch (v) {
        case NF_ACCEPT:
                return "accept";
        case NF_DROP:
                return "drop";
        case NFT_JUMP:
                return "jump";
        case NFT_GOTO:
                return "goto";
        case NFT_RETURN:
                return "return";
        case NFT_CONTINUE:
                return "continue";
        default:
                return "?";
        }
}

static void render_expr(FILE *f, const struct nftnl_expr *e)
{
        const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
        uint32_t len = 0;
        fputs("    ", f);
        if (streq(name, "meta"))
                fprintf(f, "meta load %s => reg %u", meta_key(eu32(e, NFTNL_EXPR_META_KEY)),
                        eu32(e, NFTNL_EXPR_META_DREG));
        else if (streq(name, "cmp")) {
                const void *d = nftnl_expr_get(e, NFTNL_EXPR_CMP_DATA, &len);
                fprintf(f, "cmp %s reg %u ", cmp_op(eu32(e, NFTNL_EXPR_CMP_OP)),
                        eu32(e, NFTNL_EXPR_CMP_SREG));
                hex(f, d, len);
        } else if (streq(name, "payload"))
                fprintf(f, "payload load %ub @ %s + %u => reg %u", eu32(e, NFTNL_EXPR_PAYLOAD_LEN),
                        base_name(eu32(e, NFTNL_EXPR_PAYLOAD_BASE)),
                        eu32(e, NFTNL_EXPR_PAYLOAD_OFFSET), eu32(e, NFTNL_EXPR_PAYLOAD_DREG));
        else if (streq(name, "bitwise")) {
                uint32_t xlen = 0;
                const void *m = nftnl_expr_get(e, NFTNL_EXPR_BITWISE_MASK, &len);
                const void *x = nftnl_expr_get(e, NFTNL_EXPR_BITWISE_XOR, &xlen);
                fprintf(f, "bitwise reg %u = (reg %u & ", eu32(e, NFTNL_EXPR_BITWISE_DREG),
                        eu32(e, NFTNL_EXPR_BITWISE_SREG));
                hex(f, m, len);
                fputs(") ^ ", f);
                hex(f, x, xlen);
        } else if (streq(name, "lookup")) {
                fprintf(f, "lookup reg %u set %s", eu32(e, NFTNL_EXPR_LOOKUP_SREG),
                        nftnl_expr_get_str(e, NFTNL_EXPR_LOOKUP_SET));
                if (nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_SET_ID))
                        fprintf(f, " id %u", eu32(e, NFTNL_EXPR_LOOKUP_SET_ID));
                if (nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_DREG))
                        fprintf(f, " dreg %u", eu32(e, NFTNL_EXPR_LOOKUP_DREG));
        } else if (streq(name, "objref"))
                fprintf(f, "objref counter %s", nftnl_expr_get_str(e, NFTNL_EXPR_OBJREF_IMM_NAME));
        else if (streq(name, "counter"))
                fputs("counter", f);
        else if (streq(name, "immediate") && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_DATA)) {
                const void *d = nftnl_expr_get(e, NFTNL_EXPR_IMM_DATA, &len);
                fprintf(f, "immediate reg %u ", eu32(e, NFTNL_EXPR_IMM_DREG));
                hex(f, d, len);
        } else if (streq(name, "immediate") && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_CHAIN))
                fprintf(f, "immediate %s %s", verdict_name((int32_t)eu32(e, NFTNL_EXPR_IMM_VERDICT)),
                        nftnl_expr_get_str(e, NFTNL_EXPR_IMM_CHAIN));
        else if (streq(name, "immediate"))
                fprintf(f, "immediate %s", verdict_name((int32_t)eu32(e, NFTNL_EXPR_IMM_VERDICT)));
        else if (streq(name, "nat"))
                fprintf(f, "nat %s ip addr reg %u port reg %u", eu32(e, NFTNL_EXPR_NAT_TYPE) == NFT_NAT_DNAT ? "dnat" : "snat",
                        eu32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN),
                        nftnl_expr_is_set(e, NFTNL_EXPR_NAT_REG_PROTO_MIN) ? eu32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN) : 0);
        else if (streq(name, "fib"))
                fprintf(f, "fib flags 0x%x result %u => reg %u", eu32(e, NFTNL_EXPR_FIB_FLAGS),
                        eu32(e, NFTNL_EXPR_FIB_RESULT), eu32(e, NFTNL_EXPR_FIB_DREG));
        else if (streq(name, "reject"))
                fprintf(f, "reject type %u code %u", eu32(e, NFTNL_EXPR_REJECT_TYPE),
                        (nftnl_expr_is_set(e, NFTNL_EXPR_REJECT_CODE) ? nftnl_expr_get_u8(e, NFTNL_EXPR_REJECT_CODE) : 0));
        else if (streq(name, "ct"))
                fprintf(f, "ct load %s => reg %u",
                        eu32(e, NFTNL_EXPR_CT_KEY) == NFT_CT_STATE    ? "state"
                        : eu32(e, NFTNL_EXPR_CT_KEY) == NFT_CT_STATUS ? "status"
                                                                       : "?",
                        eu32(e, NFTNL_EXPR_CT_DREG));
        else
                fprintf(f, "%s", name);
        fputc('\n', f);
}

/* Userdata TLVs: the user's own through its hook, comments as text, anything else in hex. */
static void render_udata(FILE *f, const uint8_t *u, uint32_t len, nft_udata_render_fn hook)
{
        fputs("    userdata", f);
        for (uint32_t off = 0; off + 2 <= len;) {
                uint8_t type = u[off], n = u[off + 1];
                const uint8_t *v = u + off + 2;
                if (off + 2u + n > len)
                        break;
                if (hook && hook(f, type, v, n)) {
                        /* shown by the batch's user */
                } else if (type == 0 && n > 0 && v[n - 1] == '\0') {
                        fprintf(f, " comment \"%.*s\"", (int)n - 1, (const char *)v);
                } else {
                        fprintf(f, " %u:", type);
                        hex(f, v, n);
                }
                off += 2u + n;
        }
        fputc('\n', f);
}

static void render_rule(FILE *f, const char *verb, struct nftnl_rule *r, nft_udata_render_fn hook)
{
        fprintf(f, "%s %s %s %s\n", verb, render_family, nftnl_rule_get_str(r, NFTNL_RULE_TABLE), nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
        struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
        for (struct nftnl_expr *e = it ? nftnl_expr_iter_next(it) : NULL; e; e = nftnl_expr_iter_next(it))
                render_expr(f, e);
        if (it)
                nftnl_expr_iter_destroy(it);
        uint32_t ulen = 0;
        const uint8_t *u = nftnl_rule_get_data(r, NFTNL_RULE_USERDATA, &ulen);
        if (u)
                render_udata(f, u, ulen, hook);
}

static void render_chain(FILE *f, const char *verb, struct nftnl_chain *c)
{
        fprintf(f, "%s %s %s %s", verb, render_family, nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE), nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
        if (nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM))
                fprintf(f, " { type %s hook %s priority %d policy %s }", nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE),
                        hook_name(nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM)),
                        nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
                        verdict_name((int32_t)nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY)));
        if (nftnl_chain_is_set(c, NFTNL_CHAIN_DEV))
                fprintf(f, " device %s", nftnl_chain_get_str(c, NFTNL_CHAIN_DEV));
        uint32_t ulen = 0;
        const uint8_t *u = nftnl_chain_get_data(c, NFTNL_CHAIN_USERDATA, &ulen);
        if (u && ulen > 2 && u[0] == 0 && u[1] + 2u <= ulen && u[1] > 0)
                fprintf(f, " comment \"%.*s\"", (int)u[1] - 1, (const char *)(u + 2));
        fputc('\n', f);
}

static void render_elems(FILE *f, const char *verb, struct nftnl_set *s)
{
        fprintf(f, "%s element %s %s %s", verb, render_family, nftnl_set_get_str(s, NFTNL_SET_TABLE), nftnl_set_get_str(s, NFTNL_SET_NAME));
        if (nftnl_set_is_set(s, NFTNL_SET_ID))
                fprintf(f, " id %u", nftnl_set_get_u32(s, NFTNL_SET_ID));
        fputs(" {", f);
        struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
        for (struct nftnl_set_elem *e = it ? nftnl_set_elems_iter_next(it) : NULL; e; e = nftnl_set_elems_iter_next(it)) {
                uint32_t len = 0;
                const char *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
                if (len == NA_IFNAME_LEN)
                        fprintf(f, " \"%.*s\"", (int)strnlen(key, len), key);
                else {
                        fputc(' ', f);
                        hex(f, key, len);
                }
                if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT))
                        fprintf(f, " : %s %s", verdict_name((int32_t)nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_VERDICT)),
                                nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN));
        }
        if (it)
                nftnl_set_elems_iter_destroy(it);
        fputs(" }\n", f);
}

static void render_set(FILE *f, struct nftnl_set *s)
{
        fprintf(f, "add set %s %s %s id %u { flags 0x%x key type %u len %u", render_family, nftnl_set_get_str(s, NFTNL_SET_TABLE),
                nftnl_set_get_str(s, NFTNL_SET_NAME), nftnl_set_get_u32(s, NFTNL_SET_ID),
                nftnl_set_get_u32(s, NFTNL_SET_FLAGS), nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE),
                nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN));
        if (nftnl_set_is_set(s, NFTNL_SET_DATA_TYPE))
                fprintf(f, " data type 0x%x", nftnl_set_get_u32(s, NFTNL_SET_DATA_TYPE));
        if (nftnl_set_is_set(s, NFTNL_SET_DESC_SIZE))
                fprintf(f, " size %u", nftnl_set_get_u32(s, NFTNL_SET_DESC_SIZE));
        fputs(" }\n", f);
}

int nft_batch_render(const struct nft_batch *b, nft_udata_render_fn udata, char **ret_text, struct na_error *err)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return na_error_sys(err, errno, "firewall: render batch");
        render_family = b->family == NFPROTO_NETDEV ? "netdev" : "inet";
        for (size_t i = 0; i < b->n; i++) {
                const struct nft_op *op = &b->ops[i];
                switch (op->kind) {
                case NFT_OP_TABLE_ADD: {
                        uint32_t ulen = 0;
                        const uint8_t *u = nftnl_table_get_data(op->obj, NFTNL_TABLE_USERDATA, &ulen);
                        fprintf(f, "add table %s %s", render_family, nftnl_table_get_str(op->obj, NFTNL_TABLE_NAME));
                        if (u && ulen > 2 && u[0] == 0 && u[1] + 2u <= ulen && u[1] > 0)
                                fprintf(f, " comment \"%.*s\"", (int)u[1] - 1, (const char *)(u + 2));
                        fputc('\n', f);
                        break;
                }
                case NFT_OP_CHAIN_ADD:
                        render_chain(f, "add chain", op->obj);
                        break;
                case NFT_OP_CHAIN_DEL:
                        render_chain(f, "delete chain", op->obj);
                        break;
                case NFT_OP_CHAIN_FLUSH:
                        fprintf(f, "flush chain %s %s %s\n", render_family, nftnl_rule_get_str(op->obj, NFTNL_RULE_TABLE),
                                nftnl_rule_get_str(op->obj, NFTNL_RULE_CHAIN));
                        break;
                case NFT_OP_SET_ADD:
                        render_set(f, op->obj);
                        break;
                case NFT_OP_ELEM_ADD:
                        render_elems(f, "add", op->obj);
                        break;
                case NFT_OP_ELEM_DEL:
                        render_elems(f, "delete", op->obj);
                        break;
                case NFT_OP_RULE_ADD:
                        render_rule(f, "add rule", op->obj, udata);
                        break;
                case NFT_OP_TABLE_DEL:
                        fprintf(f, "delete table %s %s\n", render_family, nftnl_table_get_str(op->obj, NFTNL_TABLE_NAME));
                        break;
                case NFT_OP_RAW:
                        fprintf(f, "%u messages encoded earlier: %s\n", ((const struct nft_raw *)op->obj)->n, op->what);
                        break;
                case NFT_OP_SET_DEL:
                        fprintf(f, "delete set %s %s %s\n", render_family, nftnl_set_get_str(op->obj, NFTNL_SET_TABLE),
                                nftnl_set_get_str(op->obj, NFTNL_SET_NAME));
                        break;
                }
        }
        if (fclose(f) != 0) {
                free(text);
                return na_error_sys(err, ENOMEM, "firewall: render batch");
        }
        *ret_text = text;
        return 0;
}
