/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The netlink side: one NETLINK_NETFILTER socket (opened in the caller's network
 * namespace or in a given one), batches sent in one sendmsg, and the few reads the
 * library needs (a chain's rules, a map element, an anonymous set, chain names).
 *
 * A batch is processed by the kernel inside sendmsg(): by the time it returns,
 * every error and the ack asked for on the last operation are queued on the socket,
 * so they are read without blocking. Acks are capped (NETLINK_CAP_ACK) and carry the
 * kernel's message when it has one (NETLINK_EXT_ACK).
 */
#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>

#include "nft/nft.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RECV_SIZE (64u * 1024u)
#define RCVBUF_BYTES (4u << 20)

int nft_nl_open(struct nft_nl *nl, int netns_fd, struct na_error *err)
{
        memset(nl, 0, sizeof(*nl));
        _cleanup_close_ int home = -1;
        if (netns_fd >= 0) {
                home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
                if (home < 0)
                        return na_error_sys(err, errno, "firewall: open own network namespace");
                if (setns(netns_fd, CLONE_NEWNET) < 0)
                        return na_error_sys(err, errno, "firewall: enter network namespace");
        }
        nl->sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        int saved = errno;
        if (home >= 0 && setns(home, CLONE_NEWNET) < 0) {
                /* this thread would stay in the other namespace: nothing sensible to go on with */
                if (nl->sock)
                        mnl_socket_close(nl->sock);
                nl->sock = NULL;
                return na_error_sys(err, errno, "firewall: return to own network namespace");
        }
        if (!nl->sock)
                return na_error_sys(err, saved, "firewall: open netlink socket");
        if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
                saved = errno;
                nft_nl_close(nl);
                return na_error_sys(err, saved, "firewall: bind netlink socket");
        }
        int one = 1, fd = mnl_socket_get_fd(nl->sock), rcv = (int)RCVBUF_BYTES;
        (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
        (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
        nl->portid = mnl_socket_get_portid(nl->sock);
        nl->seq = (uint32_t)time(NULL);
        return 0;
}

void nft_nl_close(struct nft_nl *nl)
{
        if (nl->sock)
                mnl_socket_close(nl->sock);
        nl->sock = NULL;
}

/* Read and drop whatever is queued (answers of an earlier, failed exchange). */
static void drain(struct nft_nl *nl)
{
        char buf[4096];
        int fd = mnl_socket_get_fd(nl->sock);
        while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0 || errno == ENOBUFS)
                ;
}

static int ensure_sndbuf(struct nft_nl *nl, size_t len, struct na_error *err)
{
        if (len + 4096 <= nl->sndbuf)
                return 0;
        if (len > (size_t)INT32_MAX / 2)
                return na_error_set(err, EMSGSIZE, NA_E_INTERNAL, "firewall: batch of %zu bytes", len);
        int want = (int)(len + 65536), fd = mnl_socket_get_fd(nl->sock);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) < 0 &&
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) < 0)
                return na_error_sys(err, errno, "firewall: send buffer of %d bytes", want);
        nl->sndbuf = (size_t)want;
        return 0;
}

struct ack_state {
        uint32_t first_seq, last_seq;
        bool confirmed;        /* the ack of the last operation arrived */
        uint32_t err_seq;      /* lowest failing sequence number, 0: none */
        int err_errno;
        char err_msg[128];
        size_t n_errors;
        bool overflow;
};

static int ext_ack_cb(const struct nlattr *attr, void *data)
{
        struct ack_state *st = data;
        if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG && mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
                snprintf(st->err_msg, sizeof(st->err_msg), "%s", mnl_attr_get_str(attr));
        return MNL_CB_OK;
}

static void ack_message(struct ack_state *st, const struct nlmsghdr *nlh)
{
        if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                return;
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (e->error == 0) {
                if (nlh->nlmsg_seq == st->last_seq)
                        st->confirmed = true;
                return;
        }
        st->n_errors++;
        if (st->err_seq && nlh->nlmsg_seq >= st->err_seq)
                return;
        st->err_seq = nlh->nlmsg_seq;
        st->err_errno = -e->error;
        st->err_msg[0] = '\0';
        if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
                /* with NETLINK_CAP_ACK the original message is cut to its header */
                unsigned offset = sizeof(struct nlmsgerr);
                if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
                        offset += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
                if (NLMSG_LENGTH(offset) <= nlh->nlmsg_len)
                        mnl_attr_parse(nlh, offset, ext_ack_cb, st);
        }
}

int nft_nl_apply(struct nft_nl *nl, const struct nft_batch *b, struct na_error *err)
{
        if (b->n == 0)
                return 0;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        uint32_t seq = nl->seq;
        nl->seq += (uint32_t)nft_batch_messages(b) + 2;
        int r = nft_batch_serialize(b, seq, &buf, &len, err);
        if (r < 0)
                return r;
        return nft_nl_send(nl, b, buf, len, seq, err);
}

int nft_nl_send(struct nft_nl *nl, const struct nft_batch *b, const char *buf, size_t len, uint32_t seq,
               struct na_error *err)
{
        if (b->n == 0)
                return 0;
        int r = ensure_sndbuf(nl, len, err);
        if (r < 0)
                return r;
        drain(nl);

        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        int fd = mnl_socket_get_fd(nl->sock);
        ssize_t sent = RETRY_EINTR(sendto(fd, buf, len, 0, (struct sockaddr *)&kernel, sizeof(kernel)));
        if (sent < 0)
                return na_error_sys(err, errno, "firewall: send batch of %zu operations", nft_batch_messages(b));
        if ((size_t)sent != len)
                return na_error_set(err, EIO, NA_E_DRIVER, "firewall: short send of a batch (%zd of %zu bytes)", sent, len);

        struct ack_state st = { .first_seq = seq + 1, .last_seq = seq + (uint32_t)nft_batch_messages(b) };
        _cleanup_free_ char *rbuf = malloc(RECV_SIZE);
        if (!rbuf)
                return na_error_sys(err, ENOMEM, "firewall: receive buffer");
        for (;;) {
                ssize_t n = recv(fd, rbuf, RECV_SIZE, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == ENOBUFS) {
                        st.overflow = true;
                        continue;
                }
                if (n <= 0)
                        break;
                const struct nlmsghdr *nlh = (const struct nlmsghdr *)(const void *)rbuf;
                int left = (int)n;
                for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left))
                        if (nlh->nlmsg_pid == nl->portid || nlh->nlmsg_pid == 0)
                                ack_message(&st, nlh);
        }

        if (st.err_seq) {
                const char *what = "the batch";
                if (st.err_seq >= st.first_seq && st.err_seq <= st.last_seq)
                        what = nft_batch_what(b, st.err_seq - st.first_seq);
                char reason[384];
                snprintf(reason, sizeof(reason), "the kernel refused %s: %s%s%s", what, strerror(st.err_errno),
                         st.err_msg[0] ? ": " : "", st.err_msg);
                na_error_set(err, st.err_errno, NA_E_DRIVER, "firewall: %s%s", reason,
                             st.n_errors > 1 ? " (and more errors)" : "");
                na_error_detail(err, "reason", json_string(reason));
                return -st.err_errno;
        }
        if (st.overflow || !st.confirmed) {
                const char *reason = st.overflow ? "the kernel's answers overflowed the socket"
                                                 : "the kernel did not confirm the batch";
                na_error_set(err, EPROTO, NA_E_DRIVER, "firewall: %s", reason);
                na_error_detail(err, "reason", json_string(reason));
                return -EPROTO;
        }
        return 0;
}

/* ---- reads ---- */

/* nft_nl_dump: one request, cb over its answers. */
int nft_nl_dump(struct nft_nl *nl, char *req, int (*cb)(const struct nlmsghdr *nlh, void *data), void *data,
                const char *what, struct na_error *err)
{
        struct nlmsghdr *nlh = (struct nlmsghdr *)(void *)req;
        drain(nl);
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return na_error_sys(err, errno, "firewall: ask for %s", what);
        _cleanup_free_ char *buf = malloc(RECV_SIZE);
        if (!buf)
                return na_error_sys(err, ENOMEM, "firewall: read %s", what);
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl->sock, buf, RECV_SIZE);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return na_error_sys(err, errno, "firewall: read %s", what);
                errno = 0;
                int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, nl->portid, cb, data);
                if (r == MNL_CB_STOP)
                        return 0;
                if (r < 0) {
                        int e = errno ? errno : EIO;
                        if (e == ENOENT)
                                return -ENOENT;
                        drain(nl);
                        na_error_set(err, e, NA_E_DRIVER, "firewall: read %s: %s", what, strerror(e));
                        na_error_detail(err, "reason", json_string(strerror(e)));
                        return -e;
                }
        }
}

void nft_rule_list_clear(struct nft_rule_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                nftnl_rule_free(l->v[i]);
        free(l->v);
        memset(l, 0, sizeof(*l));
}

static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
        struct nft_rule_list *l = data;
        struct nftnl_rule *r = nftnl_rule_alloc();
        if (!r)
                return MNL_CB_ERROR;
        if (nftnl_rule_nlmsg_parse(nlh, r) < 0) {
                nftnl_rule_free(r);
                return MNL_CB_ERROR;
        }
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                struct nftnl_rule **v = realloc(l->v, cap * sizeof(*v));
                if (!v) {
                        nftnl_rule_free(r);
                        errno = ENOMEM;
                        return MNL_CB_ERROR;
                }
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = r;
        return MNL_CB_OK;
}

static int rules_dump(struct nft_nl *nl, const char *table, const char *chain, struct nft_rule_list *out,
                      struct na_error *err)
{
        char req[1024];
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, ++nl->seq);
        struct nftnl_rule *r = nftnl_rule_alloc();
        if (!r)
                return na_error_sys(err, ENOMEM, "firewall: read rules");
        nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table);
        if (chain)
                nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
        nftnl_rule_nlmsg_build_payload(nlh, r);
        nftnl_rule_free(r);
        char what[96];
        snprintf(what, sizeof(what), "the rules of %s", chain ? chain : table);
        int ret = nft_nl_dump(nl, req, rule_cb, out, what, err);
        if (ret < 0)
                nft_rule_list_clear(out);
        return ret;
}

struct chain_probe {
        bool found;
};

static int chain_cb(const struct nlmsghdr *nlh, void *data)
{
        ((struct chain_probe *)data)->found = true;
        (void)nlh;
        return MNL_CB_OK;
}

int nft_nl_chain_rules(struct nft_nl *nl, const char *table, const char *chain, struct nft_rule_list *out,
                      struct na_error *err)
{
        /* a rule dump of a missing chain is just empty: ask for the chain first */
        char req[1024];
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETCHAIN, NFPROTO_INET, NLM_F_ACK, ++nl->seq);
        struct nftnl_chain *c = nftnl_chain_alloc();
        if (!c)
                return na_error_sys(err, ENOMEM, "firewall: read chain");
        nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
        nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
        nftnl_chain_nlmsg_build_payload(nlh, c);
        nftnl_chain_free(c);
        struct chain_probe probe = { 0 };
        int r = nft_nl_dump(nl, req, chain_cb, &probe, chain, err);
        if (r < 0)
                return r;
        return rules_dump(nl, table, chain, out, err);
}

struct elem_probe {
        bool found;
        char chain[NFT_NAME_MAX];
};

static int elem_cb(const struct nlmsghdr *nlh, void *data)
{
        struct elem_probe *p = data;
        struct nftnl_set *s = nftnl_set_alloc();
        if (!s)
                return MNL_CB_ERROR;
        if (nftnl_set_elems_nlmsg_parse(nlh, s) >= 0) {
                struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
                struct nftnl_set_elem *e = it ? nftnl_set_elems_iter_next(it) : NULL;
                if (e) {
                        p->found = true;
                        const char *chain = nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN);
                        snprintf(p->chain, sizeof(p->chain), "%s", chain ? chain : "");
                }
                if (it)
                        nftnl_set_elems_iter_destroy(it);
        }
        nftnl_set_free(s);
        return MNL_CB_OK;
}

int nft_nl_map_has(struct nft_nl *nl, const char *table, const char *map, const char *ifname, bool *ret,
                  char *ret_chain, struct na_error *err)
{
        char req[1024];
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_ACK, ++nl->seq);
        struct nftnl_set *s = nftnl_set_alloc();
        struct nftnl_set_elem *e = s ? nftnl_set_elem_alloc() : NULL;
        if (!e) {
                if (s)
                        nftnl_set_free(s);
                return na_error_sys(err, ENOMEM, "firewall: read map");
        }
        char key[NA_IFNAME_LEN] = { 0 };
        snprintf(key, sizeof(key), "%s", ifname);
        nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
        nftnl_set_set_str(s, NFTNL_SET_NAME, map);
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, sizeof(key));
        nftnl_set_elem_add(s, e);
        nftnl_set_elems_nlmsg_build_payload(nlh, s);
        nftnl_set_free(s);

        struct elem_probe probe = { 0 };
        char what[96];
        snprintf(what, sizeof(what), "element %s of map %s", ifname, map);
        int r = nft_nl_dump(nl, req, elem_cb, &probe, what, err);
        if (r == -ENOENT) {
                probe.found = false;
                r = 0;
        }
        if (r < 0)
                return r;
        *ret = probe.found;
        if (ret_chain)
                snprintf(ret_chain, NFT_NAME_MAX, "%s", probe.found ? probe.chain : "");
        return 0;
}

/* ---- names, for reconcile ---- */

struct names {
        char **v;
        size_t n, cap;
};

void nft_strv_free(char **v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

static int names_add(struct names *l, const char *name)
{
        if (!name)
                return MNL_CB_OK;
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 64;
                char **v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return MNL_CB_ERROR;
                l->v = v;
                l->cap = cap;
        }
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
        if (!(l->v[l->n] = strdup(name)))
                return MNL_CB_ERROR;
        NA_ANALYZER_FP_END
        l->n++;
        return MNL_CB_OK;
}

struct chain_names {
        struct names names, tables;
};

static int chain_name_cb(const struct nlmsghdr *nlh, void *data)
{
        struct chain_names *l = data;
        struct nftnl_chain *c = nftnl_chain_alloc();
        if (!c)
                return MNL_CB_ERROR;
        int r = nftnl_chain_nlmsg_parse(nlh, c) < 0 ? MNL_CB_ERROR
                                                     : names_add(&l->names, nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
        if (r == MNL_CB_OK && l->names.n > l->tables.n)
                r = names_add(&l->tables, nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE));
        if (r == MNL_CB_OK && l->names.n != l->tables.n)
                r = MNL_CB_ERROR; /* a chain without a table: not from this kernel */
        nftnl_chain_free(c);
        return r;
}

int nft_nl_chain_names(struct nft_nl *nl, const char *table, char ***ret, char ***ret_tables, size_t *ret_n,
                      struct na_error *err)
{
        char req[1024];
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETCHAIN, NFPROTO_INET, NLM_F_DUMP, ++nl->seq);
        struct nftnl_chain *c = nftnl_chain_alloc();
        if (!c)
                return na_error_sys(err, ENOMEM, "firewall: read chains");
        if (table)
                nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
        nftnl_chain_nlmsg_build_payload(nlh, c);
        nftnl_chain_free(c);
        struct chain_names l = { 0 };
        int r = nft_nl_dump(nl, req, chain_name_cb, &l, "the chains", err);
        if (r < 0) {
                nft_strv_free(l.names.v, l.names.n);
                nft_strv_free(l.tables.v, l.tables.n);
                return r;
        }
        *ret = l.names.v;
        if (ret_tables)
                *ret_tables = l.tables.v;
        else
                nft_strv_free(l.tables.v, l.tables.n);
        *ret_n = l.names.n;
        return 0;
}

static int table_name_cb(const struct nlmsghdr *nlh, void *data)
{
        struct nftnl_table *t = nftnl_table_alloc();
        if (!t)
                return MNL_CB_ERROR;
        int r = nftnl_table_nlmsg_parse(nlh, t) < 0 ? MNL_CB_ERROR
                                                     : names_add(data, nftnl_table_get_str(t, NFTNL_TABLE_NAME));
        nftnl_table_free(t);
        return r;
}

int nft_nl_table_names(struct nft_nl *nl, char ***ret, size_t *ret_n, struct na_error *err)
{
        char req[1024];
        nftnl_nlmsg_build_hdr(req, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_DUMP, ++nl->seq);
        struct names l = { 0 };
        int r = nft_nl_dump(nl, req, table_name_cb, &l, "the tables", err);
        if (r < 0) {
                nft_strv_free(l.v, l.n);
                return r;
        }
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}
