/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * App networks (issue 12): each app's persistent network namespace, its veth pair
 * and address, groups (apps of one group reach each other by hostname, nothing else
 * does), port exposures (DNAT from the public address) and stored domain exposures.
 * The app driver (app-oci*.c) calls it; the job layer reaches it through the
 * driver table (drivers/app.h: group_set, exposure_*).
 *
 *   struct app_net_options o = { .storage_dir = "/var/lib/nodeagent/apps", .apps_dir = ".../apps/apps",
 *                                .network = "10.88.0.0/16", .ports = "20000-40000" };
 *   struct app_net *n;
 *   app_net_open(&o, &n, &err);          reconciles the nft table in one batch
 *   app_net_register(n, id, hostname, group_id, &err);   at deploy: an address, the group
 *   app_net_prepare(n, id, rootfs, uid, netns, sizeof(netns), netdir, sizeof(netdir), &err);  before a start
 *   app_net_group_set(n, id, group_id, &err);              join (NULL: leave), live
 *   app_net_forget(n, id, &err);                           at delete: everything of the app
 *   app_net_close(n);
 *
 * Layout (one idea a file):
 *   app-net.c         the table of members, the state file, the operations above
 *   app-net-addr.c    CIDR parsing, the address allocator, interface and set names
 *   app-net-ns.c      persistent network namespaces (nsfs bind mounts) and netlink in them
 *   app-net-link.c    veth, addresses and routes through rtnetlink (libmnl)
 *   app-net-nft.c     the nftables ruleset (libnftnl batches, rendered for golden tests)
 *   app-net-hosts.c   the hosts and resolv.conf files and the container's links to them
 *   app-net-expose.c  exposures: decode-checked params in, stored Exposure objects out
 * All functions are thread-safe (one lock) and name the app in their errors.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "drivers/app-routes.h"
#include "proto/app-exposure.h"

#define APP_NET_DEFAULT_TABLE "nodeagent_apps"
#define APP_NET_DIR_IN_CONTAINER "/run/nodeagent" /* the hosts and resolv.conf directory */

struct app_net;

struct app_net_options {
        const char *storage_dir;    /* app-net.json lives here; required */
        const char *apps_dir;       /* <apps_dir>/<id>/net: hosts, resolv.conf; <id>/exposures.json */
        const char *netns_dir;      /* nsfs bind mounts; NULL: <storage_dir>/netns */
        const char *network;        /* "10.88.0.0/16"; NULL or "": networking off (empty namespaces) */
        const char *public_address; /* DNAT destination; NULL: every local address */
        const char *ports;          /* "20000-40000" */
        const char *resolver;       /* used when the host's nameservers are all loopback */
        const char *resolv_conf;    /* the host's; NULL: /etc/resolv.conf */
        const char *apps_domain;    /* managed apex; NULL: no domain exposures */
        const char *table;          /* NULL: APP_NET_DEFAULT_TABLE */
        const struct app_routes *routes; /* domain verification and routing; NULL: none on this node */
};

int app_net_open(const struct app_net_options *o, struct app_net **ret, struct na_error *err);
void app_net_close(struct app_net *n); /* NULL-safe; namespaces, links and rules stay */
bool app_net_enabled(const struct app_net *n);

/* The app's address and group (idempotent; the address is kept until forget). */
int app_net_register(struct app_net *n, const char *app_id, const char *hostname, const char *group_id,
                     struct na_error *err);
/*
 * Before a start: the namespace (made again after a node reboot), the veth pair and
 * routes, the hosts files, and /etc/hosts and /etc/resolv.conf of the root at rootfs
 * made links into APP_NET_DIR_IN_CONTAINER. ret_netns gets the namespace's path,
 * ret_dir the host directory to bind-mount there. uid: the container's root on the host.
 */
int app_net_prepare(struct app_net *n, const char *app_id, const char *rootfs, uint32_t uid, char *ret_netns,
                    size_t netns_len, char *ret_dir, size_t dir_len, struct na_error *err);
/* Move the app to group_id (NULL: none): nft set elements and hosts files, no restart. */
int app_net_group_set(struct app_net *n, const char *app_id, const char *group_id, struct na_error *err);
/* Everything of the app: exposures, rules, namespace, links, address. Unknown app: 0. */
int app_net_forget(struct app_net *n, const char *app_id, struct na_error *err);

/* The app's address, dotted, into buf (16). -ENOENT (err set) when it has none. */
int app_net_address(struct app_net *n, const char *app_id, char buf[16], struct na_error *err);

/* Exposures (app.exposure.*): *ret is the Exposure object (list: an array). */
int app_net_exposure_add(struct app_net *n, const char *app_id, const struct proto_exposure_add *p, json_t **ret,
                         struct na_error *err);
int app_net_exposure_remove(struct app_net *n, const char *app_id, const char *exposure_id, struct na_error *err);
int app_net_exposure_list(struct app_net *n, const char *app_id, json_t **ret, struct na_error *err);
int app_net_exposure_verify(struct app_net *n, const char *app_id, const char *exposure_id, json_t **ret,
                            struct na_error *err);
