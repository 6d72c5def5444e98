/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the firewall's parser reads beyond a chain's rules (struct fw_fetch): the
 * elements of an anonymous set, a port list written by hand with nft, over nft/'s socket.
 */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include "firewall/fw-internal.h"

struct ports_dump {
        uint16_t *ports;
        size_t max, n;
        int bad; /* -E2BIG or -EINVAL: the set is not a plain list of ports */
};

static int ports_cb(const struct nlmsghdr *nlh, void *data)
{
        struct ports_dump *d = data;
        struct nftnl_set *s = nftnl_set_alloc();
        if (!s)
                return MNL_CB_ERROR;
        if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
                nftnl_set_free(s);
                return MNL_CB_ERROR;
        }
        struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
        for (struct nftnl_set_elem *e = it ? nftnl_set_elems_iter_next(it) : NULL; e; e = nftnl_set_elems_iter_next(it)) {
                uint32_t len = 0;
                const uint16_t *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
                if (!key || len != 2 ||
                    (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS) && nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) != 0))
                        d->bad = -EINVAL;
                else if (d->n >= d->max)
                        d->bad = -E2BIG;
                else
                        d->ports[d->n++] = ntohs(*key);
        }
        if (it)
                nftnl_set_elems_iter_destroy(it);
        nftnl_set_free(s);
        return MNL_CB_OK;
}

static int fetch_set_ports(void *ud, const char *set, uint16_t *ports, size_t max, size_t *n, struct na_error *err)
{
        struct fw_nl_fetch_ctx *ctx = ud;
        char req[1024];
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(req, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP, ++ctx->nl->seq);
        struct nftnl_set *s = nftnl_set_alloc();
        if (!s)
                return na_error_sys(err, ENOMEM, "firewall: read set");
        nftnl_set_set_str(s, NFTNL_SET_TABLE, ctx->table);
        nftnl_set_set_str(s, NFTNL_SET_NAME, set);
        nftnl_set_elems_nlmsg_build_payload(nlh, s);
        nftnl_set_free(s);
        struct ports_dump d = { .ports = ports, .max = max };
        int r = nft_nl_dump(ctx->nl, req, ports_cb, &d, set, err);
        if (r == -ENOENT)
                return -EINVAL;
        if (r < 0)
                return r;
        *n = d.n;
        return d.bad;
}

void fw_nl_fetch(struct fw_nl_fetch_ctx *ctx, struct fw_fetch *out)
{
        out->set_ports = fetch_set_ports;
        out->ud = ctx;
}
