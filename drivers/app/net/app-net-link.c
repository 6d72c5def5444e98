/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An app's link to the node, through rtnetlink (libmnl; never the ip command): a
 * veth pair whose host side is "nap<12 hex>" and whose peer is eth0 inside the
 * app's namespace (made there directly: IFLA_NET_NS_FD in the peer's attributes,
 * so a host interface called eth0 is no conflict). Routed, no bridge: the host side
 * holds the gateway address /32 and a /32 route to the app; inside, the app's
 * address /32, a link route to the gateway and the default route through it. So
 * every packet between two apps crosses the host's forward hook.
 * Every request is sent with NLM_F_REPLACE where the kernel allows it: a second
 * setup of a configured app changes nothing.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drivers/app/net/app-net-internal.h"

#define REQ_BUF 1024 /* one request with a few attributes */

struct talk {
        int ifindex; /* RTM_GETLINK answer */
};

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
        struct talk *t = data;
        if (nlh->nlmsg_type == RTM_NEWLINK) {
                const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
                t->ifindex = ifi->ifi_index;
        }
        return MNL_CB_OK;
}

/* Send one request and read until its ACK (or answer). -errno from the kernel. */
static int talk(struct mnl_socket *s, struct nlmsghdr *nlh, struct talk *t)
{
        static uint32_t seq_counter;
        uint32_t seq = __atomic_add_fetch(&seq_counter, 1, __ATOMIC_RELAXED) + (uint32_t)time(NULL);
        nlh->nlmsg_seq = seq;
        if (mnl_socket_sendto(s, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        char buf[8192];
        uint32_t portid = mnl_socket_get_portid(s);
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(s, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                int r = mnl_cb_run(buf, (size_t)n, seq, portid, t ? link_cb : NULL, t);
                if (r < 0)
                        return -errno;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

static struct nlmsghdr *start(char *buf, uint16_t type, uint16_t flags)
{
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | NLM_F_ACK | flags);
        return nlh;
}

static int link_index(struct mnl_socket *s, const char *name, int *ret)
{
        char buf[REQ_BUF];
        struct nlmsghdr *nlh = start(buf, RTM_GETLINK, 0);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        struct talk t = { .ifindex = 0 };
        int r = talk(s, nlh, &t);
        if (r < 0)
                return r;
        *ret = t.ifindex;
        return t.ifindex > 0 ? 0 : -ENODEV;
}

static int link_up(struct mnl_socket *s, int index)
{
        char buf[REQ_BUF];
        struct nlmsghdr *nlh = start(buf, RTM_NEWLINK, 0);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        return talk(s, nlh, NULL);
}

static int veth_create(struct mnl_socket *s, const char *name, int ns_fd)
{
        char buf[REQ_BUF];
        struct nlmsghdr *nlh = start(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        struct ifinfomsg *pi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pi));
        pi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, "eth0");
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)ns_fd);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, info);
        return talk(s, nlh, NULL);
}

static int addr_add(struct mnl_socket *s, int index, uint32_t addr)
{
        char buf[REQ_BUF];
        struct nlmsghdr *nlh = start(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 32;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (uint32_t)index;
        uint32_t be = htonl(addr);
        mnl_attr_put_u32(nlh, IFA_LOCAL, be);
        mnl_attr_put_u32(nlh, IFA_ADDRESS, be);
        return talk(s, nlh, NULL);
}

/* dst/len via gateway (0: a link route) out of index. */
static int route_add(struct mnl_socket *s, int index, uint32_t dst, uint8_t len, uint32_t gateway)
{
        char buf[REQ_BUF];
        struct nlmsghdr *nlh = start(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET;
        rtm->rtm_dst_len = len;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = gateway ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
        rtm->rtm_type = RTN_UNICAST;
        if (len)
                mnl_attr_put_u32(nlh, RTA_DST, htonl(dst));
        if (gateway)
                mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
        return talk(s, nlh, NULL);
}

int app_net_link_exists(struct mnl_socket *host, const char *ifname, bool *ret, struct na_error *err)
{
        int index = 0, r = link_index(host, ifname, &index);
        if (r < 0 && r != -ENODEV)
                return na_error_sys(err, -r, "link %s: look up", ifname);
        *ret = r == 0;
        return 0;
}

#define STEP(expr, ...)                                                 \
        do {                                                            \
                int _r = (expr);                                        \
                if (_r < 0)                                             \
                        return na_error_sys(err, -_r, __VA_ARGS__);     \
        } while (0)

int app_net_link_setup(struct mnl_socket *host, struct mnl_socket *ns, const char *ns_path,
                       const struct app_net_link_cfg *cfg, struct na_error *err)
{
        const char *n = cfg->ifname;
        int hi = 0, eth0 = 0, r = link_index(host, n, &hi);
        if (r == 0 && link_index(ns, "eth0", &eth0) == -ENODEV) {
                /* A host side whose peer is in another (an old) namespace: made again. */
                if ((r = app_net_link_delete(host, n, err)) < 0)
                        return r;
                r = -ENODEV;
        }
        if (r == -ENODEV) {
                int fd = open(ns_path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return na_error_sys(err, errno, "link %s: open %s", n, ns_path);
                r = veth_create(host, n, fd);
                close(fd);
                if (r < 0)
                        return na_error_sys(err, -r, "link %s: create veth pair", n);
                r = link_index(host, n, &hi);
        }
        if (r < 0)
                return na_error_sys(err, -r, "link %s: look up", n);
        char gw[16], me[16];
        app_net_addr_str(cfg->gateway, gw);
        app_net_addr_str(cfg->addr, me);
        STEP(link_up(host, hi), "link %s: up", n);
        STEP(addr_add(host, hi, cfg->gateway), "link %s: address %s", n, gw);
        STEP(route_add(host, hi, cfg->addr, 32, 0), "link %s: route to %s", n, me);

        int lo = 0, eth = 0;
        STEP(link_index(ns, "lo", &lo), "link %s: the app's lo", n);
        STEP(link_up(ns, lo), "link %s: the app's lo up", n);
        STEP(link_index(ns, "eth0", &eth), "link %s: the app's eth0", n);
        STEP(link_up(ns, eth), "link %s: the app's eth0 up", n);
        STEP(addr_add(ns, eth, cfg->addr), "link %s: the app's address %s", n, me);
        STEP(route_add(ns, eth, cfg->gateway, 32, 0), "link %s: the app's route to %s", n, gw);
        STEP(route_add(ns, eth, 0, 0, cfg->gateway), "link %s: the app's default route via %s", n, gw);
        return 0;
}

int app_net_link_delete(struct mnl_socket *host, const char *ifname, struct na_error *err)
{
        int index = 0, r = link_index(host, ifname, &index);
        if (r == -ENODEV)
                return 0;
        if (r < 0)
                return na_error_sys(err, -r, "link %s: look up", ifname);
        char buf[REQ_BUF];
        struct nlmsghdr *nlh = start(buf, RTM_DELLINK, 0);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        r = talk(host, nlh, NULL);
        return r < 0 && r != -ENODEV ? na_error_sys(err, -r, "link %s: delete", ifname) : 0;
}
