/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The per-server firewall on nftables (libnftnl + libmnl, netlink only). See the top
 * of firewall/fw.c for how the shard tables are laid out and why (docs/firewall.md for operators).
 *
 * Every function is thread-safe (one lock around the netlink socket and the state
 * files); handlers for different servers may call them concurrently. Failures:
 * DRIVER_ERROR (details.reason = the kernel's answer) when the kernel refuses,
 * INTERNAL_ERROR for the rest; messages name the server ("vps <id>: firewall: ...").
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "common/error.h"
#include "proto/firewall.h"

#define FW_DEFAULT_TABLE "nodeagent"
#define FW_DEFAULT_SHARDS 16
#define FW_TABLE_NAME_MAX 40 /* a shard table's name, "<table>-NN", and its NUL */

struct fw;

struct fw_options {
        const char *table;     /* prefix of the agent's inet tables ("<table>-00"...); NULL: FW_DEFAULT_TABLE */
        unsigned shards;       /* tables the servers are spread over (1..64); 0: FW_DEFAULT_SHARDS */
        const char *state_dir; /* configurations go to <state_dir>/firewall/<vps_id>.json; NULL: kept nowhere */
        int netns_fd;          /* network namespace to work in; -1: the caller's */
};

/*
 * The table that holds a server's chains and dispatch elements: "<table>-NN", NN =
 * FNV-1a of its tap name modulo shards (table NULL: FW_DEFAULT_TABLE, shards 0:
 * FW_DEFAULT_SHARDS). No kernel involved.
 */
int fw_server_table(const char *table, unsigned shards, const char *vps_id, char buf[FW_TABLE_NAME_MAX],
                    struct na_error *err);
/*
 * Whether name is a table the firewall owns with this prefix: "<table>" (the layout
 * before shards) or "<table>-NN". Inline: the configuration check uses it without
 * linking the library.
 */
static inline bool fw_table_is_ours(const char *table, const char *name)
{
        size_t n = strlen(table);
        if (strncmp(name, table, n) != 0)
                return false;
        name += n;
        return !name[0] || (name[0] == '-' && name[1] >= '0' && name[1] <= '9' && name[2] >= '0' && name[2] <= '9' &&
                            !name[3]);
}

/*
 * Open the netlink socket (in opt->netns_fd's namespace) and the state directory, and
 * note our tables of an earlier layout (read from there until fw_reconcile takes
 * them over). Touches no rule.
 */
int fw_open(const struct fw_options *opt, struct fw **ret, struct na_error *err);
/* Close the socket. The rules stay in force: the kernel keeps them without the agent. */
void fw_close(struct fw *fw);

/*
 * Replace a server's configuration in one netlink batch: if the kernel refuses any
 * part, nothing changes and the previous rules stay in force. Rules without an id
 * (0) get the next free one (above every id the server has or had). cfg must be
 * valid (proto_fw_decode). enabled = false keeps the rules in the kernel but takes
 * the server's interface out of the dispatch maps, so nothing is filtered. The
 * configuration is stored after the kernel took it. ret_live (optional) receives
 * the configuration read back from the kernel.
 */
int fw_set(struct fw *fw, const char *vps_id, const struct fw_config *cfg, struct fw_config *ret_live,
           struct na_error *err);

/* The configuration the kernel enforces now, rebuilt from the live ruleset. */
int fw_get(struct fw *fw, const char *vps_id, struct fw_config *ret, struct na_error *err);

/*
 * Compare the live ruleset with the stored configuration. Returns the number of
 * differences (0: none) and, optionally, the live configuration and the reasons
 * (a JSON array of strings, e.g. "rule 3: port: kernel 2222, stored 22", "inbound
 * rule (handle 12) was added by hand").
 */
int fw_check_drift(struct fw *fw, const char *vps_id, struct fw_config *ret_live, json_t **ret_reasons,
                   struct na_error *err);

/* Remove a server's chains, dispatch elements and stored configuration (vps.delete). Idempotent. */
int fw_remove(struct fw *fw, const char *vps_id, struct na_error *err);

struct fw_reconcile_stats {
        size_t applied;  /* stored configurations applied */
        size_t removed;  /* servers whose chains were removed */
        size_t failed;   /* servers the kernel refused (the others are applied all the same) */
};

/*
 * At start: re-apply the stored configuration of every server in known_ids (NULL:
 * of every stored server) in its shard and remove the chains and stored
 * configuration of servers not in known_ids (NULL: remove none), one batch per
 * shard. Chains of a known server without a stored configuration are left as they
 * are. Our tables of an earlier layout (the single table "<table>", shards beyond
 * the count) are taken over in ONE batch that fills every shard and deletes them;
 * a known server they hold without a stored configuration is carried over with its
 * rules there. If the kernel refuses a batch, each of its servers is tried in a
 * batch of its own (fw-reconcile.c).
 */
int fw_reconcile(struct fw *fw, const char *const *known_ids, struct fw_reconcile_stats *ret, struct na_error *err);

/*
 * The anti-spoofing guard of a server (fw-guard.c says how and why a netdev table):
 * frames from its tap pass only with its MAC as source, IPv4 and ARP only from its
 * IPv4 addresses (ARP probes from 0.0.0.0 too), IPv6 only from its IPv6 addresses,
 * its EUI-64 link-local or ::, neighbour advertisements only of those addresses, no
 * router advertisements or redirects; nothing else. Checked at the tap's ingress,
 * before the server's firewall rules and the node's. In the table "<table>-guard"
 * (netdev); applies before the tap exists and holds across its re-creations. addrs:
 * n addresses in text (at most FW_GUARD_ADDRS_MAX); set replaces the server's guard
 * in one batch; remove is idempotent.
 */
#define FW_GUARD_ADDRS_MAX 32
int fw_guard_set(struct fw *fw, const char *vps_id, const char *mac, const char *const *addrs, size_t n,
                 struct na_error *err);
int fw_guard_remove(struct fw *fw, const char *vps_id, struct na_error *err);
/* The batch fw_guard_set sends, as stable text (golden tests); table NULL: FW_DEFAULT_TABLE. */
int fw_guard_render(const char *table, const char *vps_id, const char *mac, const char *const *addrs, size_t n,
                    char **ret_text, struct na_error *err);

/*
 * The batch fw_set would send for cfg on an empty shard table ("<table>-NN" of the
 * server), as stable text (one operation a line, expressions indented): for golden
 * tests. No kernel involved.
 */
int fw_render_set(const char *table, const char *vps_id, const struct fw_config *cfg, char **ret_text,
                  struct na_error *err);
