/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * From kernel rules back to a configuration: a small interpreter over the rule's
 * expressions that knows what each register holds (meta nfproto/l4proto, a network
 * or transport header field, masked or not) and turns comparisons on them into
 * rule fields. It accepts what fw-build.c writes and what nft writes for the same
 * matches, so a rule edited by hand with nft is read as what it does. Anything else
 * (another match, a jump, a log) cannot be expressed as a configuration rule: it is
 * left out and reported as an anomaly, which makes the server's state a drift.
 */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <arpa/inet.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdarg.h>
#include <sys/socket.h>

#include "firewall/fw-internal.h"

void fw_live_init(struct fw_live *l)
{
        memset(l, 0, sizeof(*l));
        proto_fw_init(&l->cfg);
}

void fw_live_clear(struct fw_live *l)
{
        proto_fw_clear(&l->cfg);
        if (l->anomalies)
                json_decref(l->anomalies);
        fw_live_init(l);
}

static void anomaly(struct fw_live *l, const char *fmt, ...) _printf_(2, 3);
static void anomaly(struct fw_live *l, const char *fmt, ...)
{
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (!l->anomalies)
                l->anomalies = json_array();
        if (l->anomalies)
                json_array_append_new(l->anomalies, json_string(buf));
}

/* ---- one rule ---- */

enum regkind { RS_NONE, RS_META, RS_PAYLOAD };
struct regsrc {
        enum regkind kind;
        uint32_t key;             /* RS_META */
        uint32_t base, off, len;  /* RS_PAYLOAD */
        bool masked;
        uint8_t mask[16];
};

enum verdict { V_NONE, V_ACCEPT, V_DROP, V_REJECT };

struct parsed {
        int nfproto;  /* 0, NFPROTO_IPV4 or NFPROTO_IPV6 */
        int l4proto;  /* -1: none */
        struct fw_addr src, dst;
        struct fw_ports port;
        bool have_lo, have_hi;
        bool has_match;
        enum verdict verdict;
        char why[160]; /* set: the rule cannot be expressed */
};

static void why(struct parsed *p, const char *fmt, ...) _printf_(2, 3);
static void why(struct parsed *p, const char *fmt, ...)
{
        if (p->why[0])
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why, sizeof(p->why), fmt, ap);
        va_end(ap);
}

/* libnftnl's getters do not all check that the attribute is there */
static uint32_t eu32(const struct nftnl_expr *e, uint16_t attr)
{
        return nftnl_expr_is_set(e, attr) ? nftnl_expr_get_u32(e, attr) : 0;
}

#define NREGS 32
static struct regsrc *reg_at(struct regsrc *regs, uint32_t reg)
{
        return reg < NREGS ? &regs[reg] : NULL;
}

static void cmp_address(struct parsed *p, const struct regsrc *rs, const uint8_t *data, uint32_t len)
{
        if (!p->nfproto) {
                why(p, "a network header match without a family match");
                return;
        }
        bool v6 = p->nfproto == NFPROTO_IPV6;
        uint32_t alen = v6 ? 16 : 4, src_off = v6 ? 8 : 12, dst_off = v6 ? 24 : 16;
        struct fw_addr *a = rs->off == src_off ? &p->src : rs->off == dst_off ? &p->dst : NULL;
        if (!a || rs->len != len || len == 0 || len > alen || a->family) {
                why(p, "a network header match at offset %u", rs->off);
                return;
        }
        unsigned prefix = len * 8;
        if (rs->masked) {
                prefix = 0;
                while (prefix < len * 8 && (rs->mask[prefix / 8] & (0x80u >> (prefix % 8))))
                        prefix++;
                for (unsigned i = prefix; i < len * 8; i++)
                        if (rs->mask[i / 8] & (0x80u >> (i % 8))) {
                                why(p, "an address mask that is not a prefix");
                                return;
                        }
        }
        for (unsigned i = prefix; i < len * 8; i++)
                if (data[i / 8] & (0x80u >> (i % 8))) {
                        why(p, "an address match that can never be true");
                        return;
                }
        a->family = v6 ? AF_INET6 : AF_INET;
        a->prefix = (uint8_t)prefix;
        memcpy(a->bytes, data, len);
}

static bool is_dport(const struct regsrc *rs)
{
        return rs->kind == RS_PAYLOAD && rs->base == NFT_PAYLOAD_TRANSPORT_HEADER && rs->off == 2 && rs->len == 2 &&
               !rs->masked;
}

static void port_value(struct parsed *p, uint32_t op, const uint8_t *data, uint32_t len)
{
        uint16_t be;
        if (len != 2 || p->port.kind == FW_PORT_LIST || (p->port.kind == FW_PORT_SINGLE && op != NFT_CMP_EQ)) {
                why(p, "a port match the configuration cannot express");
                return;
        }
        memcpy(&be, data, 2);
        uint16_t v = ntohs(be);
        if (op == NFT_CMP_EQ && p->port.kind == FW_PORT_ANY && !p->have_lo && !p->have_hi) {
                p->port.kind = FW_PORT_SINGLE;
                p->port.v[0] = v;
        } else if (op == NFT_CMP_GTE && !p->have_lo) {
                p->have_lo = true;
                p->port.v[0] = v;
        } else if (op == NFT_CMP_LTE && !p->have_hi) {
                p->have_hi = true;
                p->port.v[1] = v;
        } else
                why(p, "a port match the configuration cannot express");
}

static void do_cmp(struct parsed *p, struct regsrc *regs, const struct nftnl_expr *e)
{
        uint32_t len = 0, op = eu32(e, NFTNL_EXPR_CMP_OP);
        const uint8_t *data = nftnl_expr_get(e, NFTNL_EXPR_CMP_DATA, &len);
        struct regsrc *rs = reg_at(regs, eu32(e, NFTNL_EXPR_CMP_SREG));
        p->has_match = true;
        if (!rs || !data) {
                why(p, "a comparison on an unknown register");
                return;
        }
        if (rs->kind == RS_META && op == NFT_CMP_EQ && len == 1 && rs->key == NFT_META_NFPROTO) {
                if (p->nfproto || (data[0] != NFPROTO_IPV4 && data[0] != NFPROTO_IPV6))
                        why(p, "a family match the configuration cannot express");
                else
                        p->nfproto = data[0];
        } else if (rs->kind == RS_META && op == NFT_CMP_EQ && len == 1 && rs->key == NFT_META_L4PROTO) {
                if (p->l4proto >= 0 || (data[0] != IPPROTO_TCP && data[0] != IPPROTO_UDP && data[0] != IPPROTO_ICMP &&
                                        data[0] != IPPROTO_ICMPV6))
                        why(p, "a protocol match the configuration cannot express (%u)", data[0]);
                else
                        p->l4proto = data[0];
        } else if (rs->kind == RS_PAYLOAD && rs->base == NFT_PAYLOAD_NETWORK_HEADER && op == NFT_CMP_EQ)
                cmp_address(p, rs, data, len);
        else if (is_dport(rs) && (op == NFT_CMP_EQ || op == NFT_CMP_GTE || op == NFT_CMP_LTE))
                port_value(p, op, data, len);
        else
                why(p, "a comparison the configuration cannot express");
}

static void do_range(struct parsed *p, struct regsrc *regs, const struct nftnl_expr *e)
{
        uint32_t flen = 0, tlen = 0;
        const uint8_t *from = nftnl_expr_get(e, NFTNL_EXPR_RANGE_FROM_DATA, &flen);
        const uint8_t *to = nftnl_expr_get(e, NFTNL_EXPR_RANGE_TO_DATA, &tlen);
        struct regsrc *rs = reg_at(regs, eu32(e, NFTNL_EXPR_RANGE_SREG));
        p->has_match = true;
        if (!rs || !is_dport(rs) || eu32(e, NFTNL_EXPR_RANGE_OP) != NFT_RANGE_EQ || !from || !to) {
                why(p, "a range match the configuration cannot express");
                return;
        }
        port_value(p, NFT_CMP_GTE, from, flen);
        port_value(p, NFT_CMP_LTE, to, tlen);
}

static void do_lookup(struct parsed *p, struct regsrc *regs, const struct nftnl_expr *e, const struct fw_fetch *fetch,
                      struct na_error *err, int *fatal)
{
        struct regsrc *rs = reg_at(regs, eu32(e, NFTNL_EXPR_LOOKUP_SREG));
        const char *set = nftnl_expr_get_str(e, NFTNL_EXPR_LOOKUP_SET);
        p->has_match = true;
        if (!rs || !is_dport(rs) || !set || strncmp(set, "__set", 5) != 0 ||
            nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_DREG) || eu32(e, NFTNL_EXPR_LOOKUP_FLAGS) != 0 ||
            p->port.kind != FW_PORT_ANY || p->have_lo || p->have_hi) {
                why(p, "a set lookup the configuration cannot express");
                return;
        }
        if (!fetch->set_ports) {
                /* a shallow read (before a replacement): which ports does not matter */
                p->port.kind = FW_PORT_LIST;
                return;
        }
        size_t n = 0;
        int r = fetch->set_ports(fetch->ud, set, p->port.v, FW_PORTS_MAX, &n, err);
        if (r == -E2BIG || r == -EINVAL) {
                na_error_clear(err);
                why(p, "a port set the configuration cannot express");
                return;
        }
        if (r < 0) {
                *fatal = r;
                return;
        }
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && p->port.v[j] < p->port.v[j - 1]; j--) {
                        uint16_t t = p->port.v[j];
                        p->port.v[j] = p->port.v[j - 1];
                        p->port.v[j - 1] = t;
                }
        for (size_t i = 1; i < n; i++)
                if (p->port.v[i] == p->port.v[i - 1] || p->port.v[i - 1] == 0)
                        why(p, "a port set the configuration cannot express");
        if (n < 2) {
                why(p, "a port set of %zu ports", n);
                return;
        }
        p->port.kind = FW_PORT_LIST;
        p->port.n = (uint16_t)n;
}

static void do_bitwise(struct parsed *p, struct regsrc *regs, const struct nftnl_expr *e)
{
        uint32_t mlen = 0, xlen = 0, len = eu32(e, NFTNL_EXPR_BITWISE_LEN);
        const uint8_t *mask = nftnl_expr_get(e, NFTNL_EXPR_BITWISE_MASK, &mlen);
        const uint8_t *xor = nftnl_expr_get(e, NFTNL_EXPR_BITWISE_XOR, &xlen);
        struct regsrc *src = reg_at(regs, eu32(e, NFTNL_EXPR_BITWISE_SREG));
        struct regsrc *dst = reg_at(regs, eu32(e, NFTNL_EXPR_BITWISE_DREG));
        bool xor_zero = xor != NULL && xlen == len;
        for (uint32_t i = 0; xor_zero && i < xlen; i++)
                xor_zero = xor[i] == 0;
        if (!src || !dst || src != dst || src->kind != RS_PAYLOAD || src->masked || !mask || mlen != len ||
            len != src->len || len > sizeof(src->mask) || !xor_zero ||
            eu32(e, NFTNL_EXPR_BITWISE_OP) != NFT_BITWISE_BOOL) {
                why(p, "a bitwise operation the configuration cannot express");
                return;
        }
        src->masked = true;
        memcpy(src->mask, mask, len);
}

static void parse_exprs(struct nftnl_rule *r, const struct fw_fetch *fetch, struct parsed *p, struct na_error *err,
                        int *fatal)
{
        struct regsrc regs[NREGS] = { 0 };
        struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
        if (!it) {
                *fatal = na_error_sys(err, ENOMEM, "firewall: read rule");
                return;
        }
        for (struct nftnl_expr *e = nftnl_expr_iter_next(it); e && !*fatal; e = nftnl_expr_iter_next(it)) {
                const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
                if (p->verdict != V_NONE) {
                        why(p, "expressions after the verdict");
                        break;
                }
                if (streq(name, "meta")) {
                        struct regsrc *rs = reg_at(regs, eu32(e, NFTNL_EXPR_META_DREG));
                        uint32_t key = eu32(e, NFTNL_EXPR_META_KEY);
                        if (!rs || !nftnl_expr_is_set(e, NFTNL_EXPR_META_DREG) ||
                            (key != NFT_META_NFPROTO && key != NFT_META_L4PROTO))
                                why(p, "a meta match the configuration cannot express (key %u)", key);
                        else
                                *rs = (struct regsrc){ .kind = RS_META, .key = key };
                } else if (streq(name, "payload")) {
                        struct regsrc *rs = reg_at(regs, eu32(e, NFTNL_EXPR_PAYLOAD_DREG));
                        if (!rs || !nftnl_expr_is_set(e, NFTNL_EXPR_PAYLOAD_DREG))
                                why(p, "a payload write");
                        else
                                *rs = (struct regsrc){ .kind = RS_PAYLOAD,
                                                       .base = eu32(e, NFTNL_EXPR_PAYLOAD_BASE),
                                                       .off = eu32(e, NFTNL_EXPR_PAYLOAD_OFFSET),
                                                       .len = eu32(e, NFTNL_EXPR_PAYLOAD_LEN) };
                } else if (streq(name, "bitwise"))
                        do_bitwise(p, regs, e);
                else if (streq(name, "cmp"))
                        do_cmp(p, regs, e);
                else if (streq(name, "range"))
                        do_range(p, regs, e);
                else if (streq(name, "lookup"))
                        do_lookup(p, regs, e, fetch, err, fatal);
                else if (streq(name, "counter") ||
                         (streq(name, "objref") && eu32(e, NFTNL_EXPR_OBJREF_IMM_TYPE) == NFT_OBJECT_COUNTER))
                        ; /* counting is not configuration */
                else if (streq(name, "immediate")) {
                        uint32_t v = eu32(e, NFTNL_EXPR_IMM_VERDICT);
                        if (eu32(e, NFTNL_EXPR_IMM_DREG) != NFT_REG_VERDICT ||
                            (v != NF_ACCEPT && v != NF_DROP))
                                why(p, "a verdict the configuration cannot express");
                        else
                                p->verdict = v == NF_ACCEPT ? V_ACCEPT : V_DROP;
                } else if (streq(name, "reject"))
                        p->verdict = V_REJECT;
                else
                        why(p, "a %s expression", name);
        }
        nftnl_expr_iter_destroy(it);
        if (p->have_lo != p->have_hi)
                why(p, "a one-sided port comparison");
        else if (p->have_lo) {
                if (p->port.kind != FW_PORT_ANY || p->port.v[0] > p->port.v[1] || p->port.v[0] == 0)
                        why(p, "a port range the configuration cannot express");
                else
                        p->port.kind = p->port.v[0] == p->port.v[1] ? FW_PORT_SINGLE : FW_PORT_RANGE;
        }
        if (p->port.kind != FW_PORT_ANY && p->port.kind != FW_PORT_LIST && p->port.v[0] == 0)
                why(p, "port 0");
        if (p->port.kind != FW_PORT_ANY && p->l4proto != IPPROTO_TCP && p->l4proto != IPPROTO_UDP)
                why(p, "a port match without tcp or udp");
}

/* ---- userdata ---- */

/*
 * Our own walk over the TLVs (libnftnl's trusts the lengths): userdata can come
 * from any tool that wrote into the table.
 */
static bool read_udata(struct nftnl_rule *r, struct fw_meta *meta, bool *has_meta, char *comment, size_t len)
{
        uint32_t ulen = 0;
        const uint8_t *u = nftnl_rule_get_data(r, NFTNL_RULE_USERDATA, &ulen);
        *has_meta = false;
        comment[0] = '\0';
        if (!u)
                return true;
        uint32_t off = 0;
        while (off + 2 <= ulen) {
                uint8_t type = u[off], n = u[off + 1];
                const uint8_t *v = u + off + 2;
                if (off + 2u + n > ulen)
                        return false;
                off += 2u + n;
                if (type == NFTNL_UDATA_RULE_COMMENT) {
                        if (n == 0 || v[n - 1] != '\0' || n > len)
                                return false;
                        memcpy(comment, v, n);
                } else if (type == FW_UDATA_META) {
                        if (n != 10 || v[0] != FW_META_VERSION || v[1] > FW_META_TAIL || v[3] > FW_ACTION_REJECT)
                                return false;
                        uint32_t id;
                        uint16_t pos;
                        memcpy(&id, v + 4, 4);
                        memcpy(&pos, v + 8, 2);
                        *meta = (struct fw_meta){ .kind = v[1], .flags = v[2], .action = v[3], .id = ntohl(id),
                                                  .position = ntohs(pos) };
                        if (meta->kind != FW_META_POLICY && (meta->id == 0 || meta->id > FW_RULE_ID_MAX))
                                return false;
                        *has_meta = true;
                }
        }
        return off == ulen;
}

/* ---- a chain ---- */

struct item {
        struct fw_rule rule;
        uint16_t position;
        bool list_part;    /* a port of a port list (FW_META_LIST) */
        bool continued;    /* a continuation rule with the comment's end should follow */
};

struct chain_result {
        struct item *items;
        size_t n;
        bool has_policy;
        enum fw_action policy;
};

static enum fw_action verdict_action(enum verdict v)
{
        return v == V_ACCEPT ? FW_ACTION_ALLOW : v == V_DROP ? FW_ACTION_DENY : FW_ACTION_REJECT;
}

/* Whether two rules are the same but for their port (the parts of one port list). */
static bool same_but_port(const struct fw_rule *a, const struct fw_rule *b)
{
        struct fw_rule x = *a, y = *b;
        memset(&x.port, 0, sizeof(x.port));
        memset(&y.port, 0, sizeof(y.port));
        return proto_fw_rule_equal(&x, &y);
}

/* A port-list part joins the list it continues; returns true when it did. */
static bool join_list(struct chain_result *out, const struct item *it, struct fw_live *l, const char *dname)
{
        struct item *prev = out->n ? &out->items[out->n - 1] : NULL;
        if (!it->list_part || !prev || !prev->list_part || prev->rule.id != it->rule.id ||
            it->rule.port.kind != FW_PORT_SINGLE || !same_but_port(&prev->rule, &it->rule))
                return false;
        struct fw_ports *p = &prev->rule.port;
        if (p->kind == FW_PORT_SINGLE) {
                p->kind = FW_PORT_LIST;
                p->n = 1;
        }
        if (p->kind != FW_PORT_LIST || p->n == FW_PORTS_MAX) {
                anomaly(l, "%s rule %u: its port list is too long", dname, it->rule.id);
                return false;
        }
        for (size_t i = 0; i < p->n; i++)
                if (p->v[i] == it->rule.port.v[0]) {
                        anomaly(l, "%s rule %u: port %u appears twice", dname, it->rule.id, p->v[i]);
                        return true;
                }
        p->v[p->n++] = it->rule.port.v[0];
        return true;
}

static int parse_rule(enum fw_direction dir, struct nftnl_rule *r, bool last, const struct fw_fetch *fetch,
                      struct fw_live *l, struct chain_result *out, struct na_error *err)
{
        const char *dname = proto_fw_directions[dir];
        unsigned long long handle = (unsigned long long)nftnl_rule_get_u64(r, NFTNL_RULE_HANDLE);
        struct fw_meta meta = { 0 };
        bool has_meta;
        char comment[FW_COMMENT_MAX + 2];
        struct parsed p = { .l4proto = -1 };
        int fatal = 0;

        if (!read_udata(r, &meta, &has_meta, comment, sizeof(comment))) {
                anomaly(l, "%s rule (handle %llu) has userdata the agent did not write", dname, handle);
                has_meta = false;
                comment[0] = '\0';
        }
        parse_exprs(r, fetch, &p, err, &fatal);
        if (fatal)
                return fatal;

        if (has_meta && meta.kind == FW_META_POLICY) {
                if (!last)
                        anomaly(l, "%s chain has rules after its policy rule", dname);
                if (p.why[0] || p.has_match)
                        anomaly(l, "%s policy rule (handle %llu) was changed: %s", dname, handle,
                                p.why[0] ? p.why : "it has matches");
                out->has_policy = true;
                if (p.verdict == V_NONE)
                        anomaly(l, "%s policy rule (handle %llu) has no verdict", dname, handle);
                /* no verdict falls through to the base chain, which accepts */
                out->policy = p.verdict == V_NONE ? FW_ACTION_ALLOW : verdict_action(p.verdict);
                return 0;
        }
        if (has_meta && meta.kind == FW_META_TAIL) {
                struct item *prev = out->n ? &out->items[out->n - 1] : NULL;
                size_t used = prev ? strlen(prev->rule.comment) : 0;
                if (p.has_match || p.verdict != V_NONE || p.why[0])
                        anomaly(l, "%s rule (handle %llu) holding the end of a comment was changed", dname, handle);
                if (!prev || !prev->continued || prev->rule.id != meta.id || used + strlen(comment) > FW_COMMENT_MAX)
                        anomaly(l, "%s rule (handle %llu): the end of a comment without its rule", dname, handle);
                else {
                        memcpy(prev->rule.comment + used, comment, strlen(comment) + 1);
                        prev->continued = false;
                }
                return 0;
        }
        if (p.why[0]) {
                anomaly(l, "%s rule (handle %llu) cannot be expressed as a configuration rule: %s", dname, handle,
                        p.why);
                return 0;
        }
        if (p.verdict == V_NONE && !has_meta) {
                anomaly(l, "%s rule (handle %llu) without a verdict was added by hand", dname, handle);
                return 0;
        }

        struct item it = { 0 };
        struct fw_rule *fr = &it.rule;
        fr->type = dir;
        fr->protocol = p.l4proto == IPPROTO_TCP      ? FW_PROTO_TCP
                       : p.l4proto == IPPROTO_UDP    ? FW_PROTO_UDP
                       : p.l4proto == IPPROTO_ICMP   ? FW_PROTO_ICMP
                       : p.l4proto == IPPROTO_ICMPV6 ? FW_PROTO_ICMPV6
                                                     : FW_PROTO_ALL;
        fr->port = p.port;
        fr->source = p.src;
        fr->destination = p.dst;
        if (p.nfproto && !p.src.family && !p.dst.family) {
                fr->source.family = p.nfproto == NFPROTO_IPV4 ? AF_INET : AF_INET6;
                fr->source.prefix = 0;
        }
        fr->enabled = p.verdict != V_NONE;
        fr->action = fr->enabled ? verdict_action(p.verdict) : meta.action;
        fr->id = has_meta ? meta.id : 0;
        snprintf(fr->comment, sizeof(fr->comment), "%s", comment);
        proto_fw_rule_canonicalize(fr);
        it.position = has_meta ? meta.position : (out->n ? out->items[out->n - 1].position : 0);
        it.list_part = has_meta && (meta.flags & FW_META_LIST);
        it.continued = has_meta && (meta.flags & FW_META_CONTINUED);
        if (!has_meta)
                anomaly(l, "%s rule (handle %llu) was added by hand", dname, handle);
        if (has_meta && meta.id > l->max_id)
                l->max_id = meta.id;
        if (join_list(out, &it, l, dname))
                return 0;
        struct item *prev = out->n ? &out->items[out->n - 1] : NULL;
        if (prev && prev->continued)
                anomaly(l, "%s rule %u: the end of its comment is missing", dname, prev->rule.id);
        out->items[out->n++] = it;
        return 0;
}

/* Port lists come back in canonical form: ascending, and a list of one port is that port. */
static void finish_lists(struct chain_result *out)
{
        for (size_t i = 0; i < out->n; i++) {
                struct fw_ports *p = &out->items[i].rule.port;
                if (p->kind != FW_PORT_LIST || !out->items[i].list_part)
                        continue;
                for (size_t a = 1; a < p->n; a++)
                        for (size_t b = a; b > 0 && p->v[b] < p->v[b - 1]; b--) {
                                uint16_t t = p->v[b];
                                p->v[b] = p->v[b - 1];
                                p->v[b - 1] = t;
                        }
                if (p->n == 1)
                        p->kind = FW_PORT_SINGLE;
        }
}

static int parse_chain(enum fw_direction dir, struct nftnl_rule *const *rules, size_t n, const struct fw_fetch *fetch,
                       struct fw_live *l, struct chain_result *out, struct na_error *err)
{
        out->items = n ? calloc(n, sizeof(*out->items)) : NULL;
        if (n && !out->items)
                return na_error_sys(err, ENOMEM, "firewall: read rules");
        for (size_t i = 0; i < n; i++) {
                int r = parse_rule(dir, rules[i], i + 1 == n, fetch, l, out, err);
                if (r < 0)
                        return r;
        }
        if (out->n && out->items[out->n - 1].continued)
                anomaly(l, "%s rule %u: the end of its comment is missing", proto_fw_directions[dir],
                        out->items[out->n - 1].rule.id);
        finish_lists(out);
        return 0;
}

static int merge(struct chain_result res[2], struct fw_live *live, struct na_error *err)
{
        struct fw_config *cfg = &live->cfg;
        size_t total = res[0].n + res[1].n;
        cfg->rules = total ? calloc(total, sizeof(*cfg->rules)) : NULL;
        if (total && !cfg->rules)
                return na_error_sys(err, ENOMEM, "firewall: read rules");
        /* merge the two chains by configuration position, each chain keeping its kernel order */
        size_t i = 0, j = 0;
        while (i < res[0].n || j < res[1].n) {
                bool take_in = j >= res[1].n || (i < res[0].n && res[0].items[i].position <= res[1].items[j].position);
                cfg->rules[cfg->n_rules++] = take_in ? res[0].items[i++].rule : res[1].items[j++].rule;
        }
        /* ids: duplicates (a rule copied by hand) and rules added by hand get new ones */
        for (size_t a = 0; a < cfg->n_rules; a++)
                for (size_t b = 0; b < a && cfg->rules[a].id; b++)
                        if (cfg->rules[b].id == cfg->rules[a].id) {
                                anomaly(live, "rule id %u appears twice", cfg->rules[a].id);
                                cfg->rules[a].id = 0;
                        }
        for (size_t a = 0; a < cfg->n_rules; a++)
                if (cfg->rules[a].id == 0 && live->max_id < FW_RULE_ID_MAX)
                        cfg->rules[a].id = ++live->max_id;

        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                enum fw_action *policy = dir == FW_INBOUND ? &cfg->inbound_policy : &cfg->outbound_policy;
                *policy = res[dir].has_policy ? res[dir].policy : FW_ACTION_ALLOW;
                if (live->chain[dir] && !res[dir].has_policy)
                        anomaly(live, "%s chain has no policy rule", proto_fw_directions[dir]);
        }
        if (live->chain[0] != live->chain[1])
                anomaly(live, "the %s chain is missing", live->chain[0] ? "outbound" : "inbound");
        if (live->elem[0] != live->elem[1])
                anomaly(live, "only the %s direction is dispatched", live->elem[0] ? "inbound" : "outbound");
        cfg->enabled = live->elem[0] && live->elem[1];
        return 0;
}

int fw_parse_server(struct nftnl_rule *const *rules_in, size_t n_in,
                    struct nftnl_rule *const *rules_out, size_t n_out, const struct fw_fetch *fetch,
                    struct fw_live *live, struct na_error *err)
{
        struct chain_result res[2] = { 0 };
        int r = parse_chain(FW_INBOUND, rules_in, n_in, fetch, live, &res[FW_INBOUND], err);
        if (r >= 0)
                r = parse_chain(FW_OUTBOUND, rules_out, n_out, fetch, live, &res[FW_OUTBOUND], err);
        if (r >= 0)
                r = merge(res, live, err);
        free(res[0].items);
        free(res[1].items);
        return r;
}
