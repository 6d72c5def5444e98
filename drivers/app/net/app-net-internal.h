/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the app network code (see app-net.h for the layout). Addresses are IPv4 in
 * host byte order unless a name says _be.
 */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/names.h"
#include "drivers/app/net/app-net.h"
#include "nft/nft.h"

/* ---- app-net-addr.c: ranges, the allocator, names ---- */

struct app_net_range {
        uint32_t base;   /* network address */
        uint8_t prefix;  /* 8..30 */
        uint32_t size;   /* 2^(32-prefix) */
};
/* "10.88.0.0/16": -EINVAL (and *why) for host bits set, a prefix outside 8..30, a bad address. */
int app_net_range_parse(const char *cidr, struct app_net_range *ret, const char **why);
static inline uint32_t app_net_gateway(const struct app_net_range *r)
{
        return r->base + 1; /* the first address of the range: the node's side */
}
static inline bool app_net_in_range(const struct app_net_range *r, uint32_t a)
{
        return a - r->base < r->size;
}
/* The lowest free app address (base+2 .. broadcast-1) not in taken[]; -ENOSPC when full. */
int app_net_addr_pick(const struct app_net_range *r, const uint32_t *taken, size_t n, uint32_t *ret);
/* "lo-hi", 1 <= lo <= hi <= 65535. */
int app_net_ports_parse(const char *s, uint16_t *lo, uint16_t *hi);
void app_net_addr_str(uint32_t a, char buf[16]);
int app_net_addr_parse(const char *s, uint32_t *ret);
/* The host side of an app's veth: "nap" + the first 12 hex digits of its id. */
#define APP_NET_IF_PREFIX "nap" /* as na_app_ifname() (common/names.h) names them */
void app_net_ifname(const char *app_id, char buf[NA_IFNAME_LEN]);
/* The nft set of a group: "g" + the 32 hex digits of its id. */
#define APP_NET_SET_NAME_LEN 34
void app_net_group_set_name(const char *group_id, char buf[APP_NET_SET_NAME_LEN]);

/* ---- app-net-nft.c: the ruleset ---- */

struct app_net_port {
        uint16_t external, container;
        uint8_t l4proto;    /* IPPROTO_TCP or IPPROTO_UDP */
        uint32_t addr;      /* the app's */
};

struct app_net_rules {
        const char *table;
        struct app_net_range range;
        uint32_t public_addr;            /* 0: every local address (fib daddr type local) */
        const char *const *groups;       /* group ids with at least one member */
        size_t n_groups;
        const struct app_net_port *ports;
        size_t n_ports;
};
/* Everything, replacing whatever the table held (add table; delete table; add ...): one batch. */
int app_net_nft_full(struct nft_batch *b, const struct app_net_rules *rs, const char *const *members_of_groups,
                     const uint32_t *member_addrs, size_t n_members, struct na_error *err);
/* A group appeared or went: the groups chain again (and the set made or deleted). */
int app_net_nft_groups(struct nft_batch *b, const struct app_net_rules *rs, const char *added, const char *removed,
                       struct na_error *err);
/* One address into or out of a group's set. */
int app_net_nft_member(struct nft_batch *b, const char *group_id, uint32_t addr, bool add, struct na_error *err);
/* The exposures chain again. */
int app_net_nft_ports(struct nft_batch *b, const struct app_net_rules *rs, struct na_error *err);

/* ---- app-net-ns.c: namespaces ---- */

/* The namespace mounted at path: kept when it is one, made (and bind-mounted) when not. */
int app_net_ns_ensure(const char *path, struct na_error *err);
/* Unmount and remove (absent: 0). */
int app_net_ns_remove(const char *path, struct na_error *err);
/* A NETLINK_ROUTE socket inside the namespace at path (opened by a thread that setns()es into it). */
int app_net_ns_rtnl(const char *path, struct mnl_socket **ret, struct na_error *err);

/* ---- app-net-link.c: rtnetlink ---- */

struct app_net_link_cfg {
        const char *ifname;   /* host side */
        uint32_t addr, gateway;
};
/* Create (or keep) the veth pair into ns_sock's namespace and configure both sides. */
int app_net_link_setup(struct mnl_socket *host, struct mnl_socket *ns, const char *ns_path,
                       const struct app_net_link_cfg *cfg, struct na_error *err);
/* Delete the host side (and with it the pair); absent: 0. */
int app_net_link_delete(struct mnl_socket *host, const char *ifname, struct na_error *err);
/* Whether the host side exists. */
int app_net_link_exists(struct mnl_socket *host, const char *ifname, bool *ret, struct na_error *err);

/* ---- app-net-hosts.c ---- */

struct app_net_host_entry {
        uint32_t addr;
        const char *hostname;
};
/* Render the hosts file: localhost lines, self first, then the group's members. */
char *app_net_hosts_render(const struct app_net_host_entry *self, const struct app_net_host_entry *others,
                           size_t n);
/* resolv.conf for apps from the host's text: its nameservers unless loopback; else resolver or 1.1.1.1. */
char *app_net_resolv_render(const char *host_text, const char *resolver);
/* Write name in dir atomically (temp + rename, not synced: rewritten before every start). */
int app_net_write_file(const char *dir, const char *name, const char *text, mode_t mode, struct na_error *err);
/* /etc/hosts and /etc/resolv.conf of the root at rootfs: links into APP_NET_DIR_IN_CONTAINER. */
int app_net_root_links(const char *rootfs, uint32_t uid, struct na_error *err);

/* ---- app-net.c: the table of members ---- */

struct app_net_member {
        char id[40];
        char hostname[64];
        char group[40];   /* "": none */
        uint32_t addr;
        json_t *exposures; /* array of Exposure objects, as <apps_dir>/<id>/exposures.json */
};

struct app_net {
        bool enabled;
        pthread_mutex_t lock;
        struct app_net_range range;
        uint32_t public_addr; /* 0: every local address */
        uint16_t port_lo, port_hi;
        char table[NFT_TABLE_NAME_MAX];
        char state_path[4200], netns_dir[4200], apps_dir[4096];
        char *resolver, *resolv_conf, *apps_domain;
        const struct app_routes *routes;
        struct nft_nl nl;
        bool nl_open;
        struct mnl_socket *rtnl; /* in the agent's namespace */
        struct app_net_member *m;
        size_t n, cap;
};
DEFINE_TRIVIAL_CLEANUP_FUNC(struct app_net *, app_net_close)

struct app_net_member *app_net_member_find(struct app_net *n, const char *id);
int app_net_rules_fill(struct app_net *n, struct app_net_rules *rs, struct na_error *err);
void app_net_rules_clear(struct app_net_rules *rs);
int app_net_apply(struct app_net *n, struct nft_batch *b, struct na_error *err);
int app_net_save(struct app_net *n, bool durable, struct na_error *err);
int app_net_reconcile(struct app_net *n, struct na_error *err);

/* ---- app-net-expose.c ---- */

bool app_net_exposure_is_port(json_t *e);
uint8_t app_net_exposure_l4proto(json_t *e);
int app_net_exposures_load(struct app_net *n, struct app_net_member *m, struct na_error *err);
/* Every exposure of m: routes removed, ports out of the chain, the file removed. */
int app_net_exposures_drop_all(struct app_net *n, struct app_net_member *m, struct na_error *err);
