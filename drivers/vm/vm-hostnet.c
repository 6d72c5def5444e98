/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Routed mode on the host ([vm] network_mode = routed), through rtnetlink (libmnl;
 * never ip(8), never a shell). For a server whose tap exists:
 *
 *   - the tap holds the guest's next hop: 169.254.0.1/32 and fe80::1/64 (no DAD:
 *     the address is the node's on every tap, never a neighbour's);
 *   - each of its addresses has a host route to the tap (/32, /128), protocol
 *     static, in the main table;
 *   - each address has a proxy neighbour entry on the uplink (when one is set), so
 *     the node answers ARP (with forwarding on) and NDP (with proxy_ndp on) for it.
 *
 * Everything is set with create-or-replace and removed ignoring "not there", so
 * applying twice is applying once. Addresses of old that the new set lacks lose
 * their route and proxy entry. The routes go with the tap when it is destroyed;
 * the proxy entries stay until the server is deleted (vm_hostnet_forget).
 */
#include "drivers/vm/vm-util.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NL_BUF 8192 /* MNL_SOCKET_BUFFER_SIZE is a run-time value (the page size) */

struct nl {
        struct mnl_socket *sock;
        unsigned seq;
        unsigned portid;
};

static void nl_close(struct nl *nl)
{
        if (nl->sock)
                mnl_socket_close(nl->sock);
        nl->sock = NULL;
}

static int nl_open(struct nl *nl, struct na_error *err)
{
        nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!nl->sock)
                return na_error_sys(err, errno, "rtnetlink: open");
        if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
                int e = errno;
                nl_close(nl);
                return na_error_sys(err, e, "rtnetlink: bind");
        }
        nl->portid = mnl_socket_get_portid(nl->sock);
        nl->seq = (unsigned)time(NULL);
        return 0;
}

/* Send one request with NLM_F_ACK and read its answer: 0 or the kernel's -errno. */
static int nl_talk(struct nl *nl, struct nlmsghdr *nlh)
{
        nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = ++nl->seq;
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        char buf[NL_BUF];
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl->sock, buf, sizeof(buf));
                if (n < 0)
                        return errno == EINTR ? -EINTR : -errno;
                int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, nl->portid, NULL, NULL);
                if (r == MNL_CB_ERROR)
                        return -errno;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
        const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
        *(unsigned *)data = (unsigned)ifi->ifi_index;
        return MNL_CB_OK;
}

/*
 * An interface's index by name through rtnetlink (not if_nametoindex: its ioctl is
 * outside the agent's seccomp allow-list); 0 when there is none.
 */
static int link_index(struct nl *nl, const char *name, unsigned *ret)
{
        char buf[NL_BUF];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST;
        nlh->nlmsg_seq = ++nl->seq;
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        *ret = 0;
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl->sock, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, nl->portid, link_cb, ret);
                if (r == MNL_CB_ERROR)
                        return errno == ENODEV ? 0 : -errno;
                if (r == MNL_CB_STOP || *ret)
                        return 0;
        }
}

static size_t addr_len(int family)
{
        return family == AF_INET ? 4 : 16;
}

/* The next hop on the tap: 169.254.0.1/32 or fe80::1/64. */
static int tap_address(struct nl *nl, unsigned ifindex, int family)
{
        char buf[NL_BUF];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_NEWADDR;
        nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = (unsigned char)family;
        ifa->ifa_index = ifindex;
        unsigned char a[16];
        if (family == AF_INET) {
                inet_pton(AF_INET, VM_ROUTED_GW4, a);
                ifa->ifa_prefixlen = 32;
                ifa->ifa_scope = RT_SCOPE_LINK;
                mnl_attr_put(nlh, IFA_LOCAL, 4, a);
        } else {
                inet_pton(AF_INET6, VM_ROUTED_GW6, a);
                ifa->ifa_prefixlen = 64;
                ifa->ifa_scope = RT_SCOPE_LINK;
                ifa->ifa_flags = IFA_F_NODAD;
                mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
        }
        mnl_attr_put(nlh, IFA_ADDRESS, addr_len(family), a);
        return nl_talk(nl, nlh);
}

/* A host route to the tap (add: create or replace; else delete). */
static int host_route(struct nl *nl, bool add, unsigned ifindex, const struct proto_vps_addr *a)
{
        char buf[NL_BUF];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE;
        nlh->nlmsg_flags = add ? NLM_F_CREATE | NLM_F_REPLACE : 0;
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = (unsigned char)a->family;
        rtm->rtm_dst_len = (unsigned char)(addr_len(a->family) * 8);
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = add ? RT_SCOPE_LINK : RT_SCOPE_NOWHERE;
        rtm->rtm_type = RTN_UNICAST;
        mnl_attr_put(nlh, RTA_DST, addr_len(a->family), a->bytes);
        mnl_attr_put_u32(nlh, RTA_OIF, ifindex);
        int r = nl_talk(nl, nlh);
        return !add && (r == -ESRCH || r == -ENOENT || r == -ENODEV) ? 0 : r;
}

/* A proxy neighbour entry on the uplink (ip neigh add proxy ADDR dev UPLINK). */
static int proxy_entry(struct nl *nl, bool add, unsigned ifindex, const struct proto_vps_addr *a)
{
        char buf[NL_BUF];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = add ? RTM_NEWNEIGH : RTM_DELNEIGH;
        nlh->nlmsg_flags = add ? NLM_F_CREATE | NLM_F_REPLACE : 0;
        struct ndmsg *ndm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ndm));
        ndm->ndm_family = (unsigned char)a->family;
        ndm->ndm_ifindex = (int)ifindex;
        ndm->ndm_flags = NTF_PROXY;
        ndm->ndm_state = NUD_PERMANENT;
        mnl_attr_put(nlh, NDA_DST, addr_len(a->family), a->bytes);
        int r = nl_talk(nl, nlh);
        return !add && (r == -ENOENT || r == -ESRCH || r == -ENODEV) ? 0 : r;
}

static bool holds(const struct proto_vps_network *n, const struct proto_vps_addr *a)
{
        const struct proto_vps_addr *list = a->family == AF_INET ? n->ipv4 : n->ipv6;
        size_t count = a->family == AF_INET ? n->n_ipv4 : n->n_ipv6;
        for (size_t i = 0; i < count; i++)
                if (memcmp(list[i].bytes, a->bytes, 16) == 0)
                        return true;
        return false;
}

/* Call fn for every address of n (v4, then v6); stops at the first failure. */
#define FOR_EACH_ADDR(n, a, body)                                                          \
        for (size_t _k = 0; _k < (n)->n_ipv4 + (n)->n_ipv6; _k++) {                        \
                const struct proto_vps_addr *a =                                           \
                        _k < (n)->n_ipv4 ? &(n)->ipv4[_k] : &(n)->ipv6[_k - (n)->n_ipv4];  \
                body                                                                       \
        }

static int fail(struct na_error *err, int r, const char *ifname, const char *what, const char *addr)
{
        na_error_set(err, -r, NA_E_DRIVER, "%s: %s %s: %s", ifname, what, addr ? addr : "", strerror(-r));
        na_error_detail(err, "reason", json_string(strerror(-r)));
        return r;
}

int vm_hostnet_apply(const char *ifname, const char *uplink, const struct proto_vps_network *net,
                     const struct proto_vps_network *old, bool *ret_applied, struct na_error *err)
{
        if (ret_applied)
                *ret_applied = false;
        struct nl nl = { 0 };
        int r = nl_open(&nl, err);
        if (r < 0)
                return r;
        unsigned tap = 0, up = 0;
        if ((r = link_index(&nl, ifname, &tap)) < 0 || (uplink && (r = link_index(&nl, uplink, &up)) < 0)) {
                fail(err, r, ifname, "look up", uplink);
                goto out;
        }
        if (uplink && !up) {
                r = na_error_set(err, ENODEV, NA_E_DRIVER, "[vm] uplink %s: no such interface", uplink);
                goto out;
        }
        /* What the new set lacks goes first (tap or not: the proxy entries outlive it). */
        if (old)
                FOR_EACH_ADDR(old, a, {
                        if (holds(net, a))
                                continue;
                        if (tap && (r = host_route(&nl, false, tap, a)) < 0) {
                                fail(err, r, ifname, "remove the route to", a->text);
                                goto out;
                        }
                        if (up && (r = proxy_entry(&nl, false, up, a)) < 0) {
                                fail(err, r, uplink, "remove the proxy entry of", a->text);
                                goto out;
                        }
                })
        if (!tap)
                goto out; /* not running: done at its start */
        if ((r = tap_address(&nl, tap, AF_INET)) < 0 && r != -EEXIST) {
                fail(err, r, ifname, "add the next hop", VM_ROUTED_GW4);
                goto out;
        }
        if ((r = tap_address(&nl, tap, AF_INET6)) < 0 && r != -EEXIST) {
                fail(err, r, ifname, "add the next hop", VM_ROUTED_GW6);
                goto out;
        }
        FOR_EACH_ADDR(net, a, {
                if ((r = host_route(&nl, true, tap, a)) < 0) {
                        fail(err, r, ifname, "route", a->text);
                        goto out;
                }
                if (up && (r = proxy_entry(&nl, true, up, a)) < 0) {
                        fail(err, r, uplink, "add the proxy entry of", a->text);
                        goto out;
                }
        })
        r = 0;
        if (ret_applied)
                *ret_applied = true;
out:
        nl_close(&nl);
        return r < 0 ? r : 0;
}

int vm_hostnet_forget(const char *uplink, const struct proto_vps_network *net, struct na_error *err)
{
        if (!uplink)
                return 0;
        struct nl nl = { 0 };
        int r = nl_open(&nl, err);
        if (r < 0)
                return r;
        unsigned up = 0;
        if ((r = link_index(&nl, uplink, &up)) < 0 || !up) {
                nl_close(&nl);
                return r < 0 ? fail(err, r, uplink, "look up", NULL) : 0; /* gone: nothing of ours is left on it */
        }
        FOR_EACH_ADDR(net, a, {
                if ((r = proxy_entry(&nl, false, up, a)) < 0) {
                        fail(err, r, uplink, "remove the proxy entry of", a->text);
                        break;
                }
        })
        nl_close(&nl);
        return r < 0 ? r : 0;
}
