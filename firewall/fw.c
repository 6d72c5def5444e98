/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The per-server firewall on nftables, through libnftnl and libmnl (netlink only:
 * no nft process, no libnftables).
 *
 * The node is routed: each server's tap device ("nav" + 12 hex digits of its id,
 * na_vps_ifname()) is an L3 port and the host forwards between it and the uplink,
 * so a server's traffic to and from the world crosses the forward hook, and the
 * agent filters there. What the server exchanges with the node itself (ARP, IPv6
 * neighbour discovery, DHCP, the gateway's own services) goes through the input and
 * output hooks and is never blocked by a customer's rules. The tap device may not
 * exist yet (the server is stopped, or being created): everything matches the
 * interface by name, never by index.
 *
 * The servers are spread over 16 inet tables owned by the agent ([firewall] shards),
 * the shards ("<[firewall] table>-NN", default "nodeagent-00" ... "nodeagent-15"); a
 * server's shard is FNV-1a of its tap name modulo the count (fw_server_table; `nft
 * list chains inet | grep nav…` shows it too). Every shard is a complete copy of one
 * layout:
 *
 *   table inet nodeagent-06 {
 *     map vps-out-map { type ifname : verdict }      iifname -> jump nav…-out
 *     map vps-in-map  { type ifname : verdict }      oifname -> jump nav…-in
 *     chain vps-out { type filter hook forward priority filter; policy accept;
 *                     ct state established,related accept; iifname vmap @vps-out-map }
 *     chain vps-in  { type filter hook forward priority filter + 10; policy accept;
 *                     ct state established,related accept; oifname vmap @vps-in-map }
 *     chain nav6f1c2a3b4c5d-in  { <inbound rules in order>;  counter <inbound policy> }
 *     chain nav6f1c2a3b4c5d-out { <outbound rules in order>; counter <outbound policy> }
 *   }
 *
 * Why shards: the kernel checks a table for loops whenever a batch with verdicts
 * commits to it (nft_table_validate, about 65 ns per rule of the table here), so one
 * table made every server's change cost grow with the whole node (2.8 ms at 10,000
 * rules). Recent kernels keep that state per table (measured on 6.18), so with
 * shards a change validates only its shard (0.5 ms at 10,000 rules, nearly all of
 * it the commit's fixed cost); a kernel that keeps it per network namespace checks
 * every table and gains nothing from shards (nor loses anything).
 * Jumps cannot cross tables, so each shard has its own base chains and maps. A
 * fixed count (rather than tables that split as they grow) keeps a server's table a
 * pure function of its id: nothing to store, look up or move while servers come and
 * go; 16 keeps a shard near 1,000 kernel rules at 1,000 servers. Its cost is on the
 * packet path: a forwarded packet passes 2 x 16 base chains, each a conntrack test
 * and a map miss for the shards that do not hold its server (about 35 ns each, 1 us
 * a packet for the 15 extra tables: bench/firewall/bench-fw-path.sh).
 *
 * Several tables on one hook are safe because nftables verdicts work that way: an
 * accept ends only the base chain that gave it (the packet goes on to the next base
 * chain of the hook, in whatever table), a drop ends the packet for good. So a
 * packet from server A to server B passes A's outbound chain in A's shard and B's
 * inbound chain in B's shard, whatever order the tables hook in, and is dropped if
 * either drops it (tests/firewall/traffic-shards.sh).
 *
 * At start (fw_reconcile, fw-reconcile.c) the agent takes over our tables of an
 * earlier layout: the single table "<[firewall] table>" of the layout before shards,
 * shards beyond the count, and servers in another shard than theirs (the count
 * changed). Everything moves in ONE batch that also deletes the old tables.
 * Inbound is traffic to the server (the packet leaves through its tap: oifname),
 * outbound is traffic from it (iifname). Outbound and inbound are two base chains
 * so that an "allow" is a plain accept that ends only its own direction: traffic
 * between two servers of the node passes the sender's outbound chain and then the
 * receiver's inbound chain. The firewall is stateful: packets of established and
 * related connections are accepted first, in both base chains, so a rule only has
 * to let a connection's first packet through and the answers come back whatever the
 * other direction's policy. Traffic of other interfaces misses the maps and is
 * accepted: the tables only restrict servers; the node's own filtering stays the
 * node's (another table's drop still drops).
 *
 * Every rule has its own counter (nft shows "counter packets N bytes M"); counters
 * start again from zero when the server's configuration is replaced. A port list is
 * one kernel rule per port (fw-build.c says why). Rules carry userdata: the comment
 * (nft's own comment, so `nft list` shows it) and the rule id, configuration
 * position and action (ours; nft skips it). The kernel keeps at most 256 bytes of
 * userdata per rule, so the last bytes of a comment longer than 241 bytes go to a
 * continuation rule without expressions right after it.
 *
 * A configuration is applied in ONE netlink batch (flush the server's two chains,
 * add its rules, its policies as the last rule of each chain, its two map
 * elements): the kernel commits all of it or none, and packets never see a
 * half-applied state. Dispatch goes through the verdict maps keyed by interface
 * name, so the batch holds only that server's objects (plus its shard's table, maps
 * and base chains re-asserted, so a table flushed by hand heals at the next change).
 * enabled = false keeps the chains and takes the map elements out: nothing is
 * filtered, and the rules can still be read. vps.firewall.get rebuilds the
 * configuration from the live ruleset (fw-parse.c), not from the stored copy; the
 * stored copy (<state_dir>/firewall/<vps_id>.json, replaced atomically after the
 * kernel took the batch, fw-state.c) holds the ids' high-water mark, is what drift
 * is measured against and what reconcile re-applies at start. Beside it, <id>.nl
 * keeps the server's operations as sent, so the start sends them again without
 * decoding and building (used only while they match the .json byte for byte).
 *
 * README paragraph (firewall):
 *
 *   Each server's firewall lives in one of the agent's 16 nftables tables, the
 *   shards (inet "nodeagent-00" ... "nodeagent-15", `[firewall] table` is the
 *   prefix), chosen by a hash of the server's tap name. The node is routed, so
 *   filtering happens in the forward hook: in every shard two base chains (vps-out,
 *   then vps-in) accept packets of established and related connections first, then
 *   jump through verdict maps keyed by the server's tap name (nav + 12 hex digits of
 *   its id) to the server's own chains: nav<id>-out for traffic from the server
 *   (iifname) and nav<id>-in for traffic to it (oifname). Each chain holds the
 *   customer's rules in order, each with its own counter and its comment, and ends
 *   with the direction's policy (allow or deny; reject exists per rule only).
 *   Traffic between the server and the node itself (ARP, neighbour discovery, DHCP)
 *   is not filtered. A change replaces one server's chains in a single netlink
 *   batch: it applies whole or not at all, never leaves the server unprotected,
 *   touches no other server, and makes the kernel re-check only that server's
 *   shard. Turning the firewall off takes the server out of the maps and keeps its
 *   rules. vps.firewall.get reads the kernel, not a cache, and reports rules changed
 *   by hand as a firewall.drift event; at start the agent re-applies every stored
 *   configuration (<state_dir>/firewall/), removes the chains of servers it no
 *   longer has, and takes over the single table "nodeagent" of older versions in
 *   one atomic batch. The agent talks netlink directly (libnftnl, libmnl); `nft
 *   list chains inet | grep nav<id>` shows a server's table, `nft list table inet
 *   nodeagent-NN` its rules with their comments and counters (docs/firewall.md).
 */
#include "firewall/fw.h"

#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <ctype.h>
#include <fcntl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <pthread.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/names.h"
#include "firewall/fw-handle.h"

static bool prefix_valid(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > FW_PREFIX_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
                        return false;
        return true;
}

int fw_server_table(const char *table, unsigned shards, const char *vps_id, char buf[FW_TABLE_NAME_MAX],
                    struct na_error *err)
{
        char ifname[NA_IFNAME_LEN];
        if (!table)
                table = FW_DEFAULT_TABLE;
        if (!shards)
                shards = FW_DEFAULT_SHARDS;
        if (!prefix_valid(table) || shards > FW_SHARDS_MAX || !vps_id || na_vps_ifname(vps_id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "firewall: no table for \"%s\" (table %s, %u shards)",
                                    vps_id ? vps_id : "(null)", table, shards);
        fw_shard_table(table, fw_shard_of(ifname, shards), buf);
        return 0;
}

void fw_own_table(const struct fw *fw, const char *ifname, char buf[FW_TABLE_NAME_MAX])
{
        fw_shard_table(fw->prefix, fw_shard_of(ifname, fw->shards), buf);
}

bool fw_table_stale(const struct fw *fw, const char *table)
{
        unsigned shard;
        if (streq(table, fw->prefix))
                return true; /* the single table of the layout before shards */
        return fw_shard_parse(fw->prefix, table, &shard) && shard >= fw->shards;
}

int fw_find_stale(struct fw *fw, struct na_error *err)
{
        char **tables = NULL;
        size_t n = 0;
        int r = nft_nl_table_names(&fw->nl, &tables, &n, err);
        if (r < 0)
                return r;
        nft_strv_free(fw->stale, fw->n_stale);
        fw->stale = NULL;
        fw->n_stale = 0;
        for (size_t i = 0; i < n; i++) {
                if (!fw_table_stale(fw, tables[i]))
                        continue;
                char **v = realloc(fw->stale, (fw->n_stale + 1) * sizeof(*v));
                if (!v) {
                        nft_strv_free(tables, n);
                        return na_error_sys(err, ENOMEM, "firewall: tables");
                }
                fw->stale = v;
                fw->stale[fw->n_stale++] = TAKE_PTR(tables[i]);
        }
        nft_strv_free(tables, n);
        return 0;
}

int fw_open(const struct fw_options *opt, struct fw **ret, struct na_error *err)
{
        const char *table = opt && opt->table ? opt->table : FW_DEFAULT_TABLE;
        unsigned shards = opt && opt->shards ? opt->shards : FW_DEFAULT_SHARDS;
        if (!prefix_valid(table))
                return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                    "firewall: table name \"%s\" is not 1..32 letters, digits, '_' or '-'", table);
        if (shards > FW_SHARDS_MAX)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "firewall: %u shards (at most %d)", shards, FW_SHARDS_MAX);
        _cleanup_free_ struct fw *fw = calloc(1, sizeof(*fw));
        if (!fw)
                return na_error_sys(err, ENOMEM, "firewall");
        snprintf(fw->prefix, sizeof(fw->prefix), "%s", table);
        fw->shards = shards;
        if (opt && opt->state_dir) {
                if (asprintf(&fw->dir, "%s/firewall", opt->state_dir) < 0) {
                        fw->dir = NULL;
                        return na_error_sys(err, ENOMEM, "firewall");
                }
                int r = na_mkdir_p(fw->dir, 0700, err);
                if (r < 0) {
                        free(fw->dir);
                        return na_error_prefix(err, "firewall");
                }
        }
        int r = nft_nl_open(&fw->nl, opt ? opt->netns_fd : -1, err);
        if (r >= 0) {
                /* tables of an earlier layout: unreadable now, fw_reconcile looks again (and says why) */
                struct na_error e = NA_ERROR_INIT;
                (void)fw_find_stale(fw, &e);
                na_error_clear(&e);
        }
        if (r < 0) {
                free(fw->dir);
                return r;
        }
        pthread_mutex_init(&fw->lock, NULL);
        *ret = TAKE_PTR(fw);
        return 0;
}

void fw_close(struct fw *fw)
{
        if (!fw)
                return;
        nft_nl_close(&fw->nl);
        pthread_mutex_destroy(&fw->lock);
        nft_strv_free(fw->stale, fw->n_stale);
        free(fw->dir);
        free(fw);
}

/* ---- the live state of one server ---- */

int fw_read_live(struct fw *fw, const char *table, const char *ifname, bool full, uint32_t id_floor,
                 struct fw_live *live, struct na_error *err)
{
        struct nft_rule_list rules[2] = { 0 };
        struct fw_nl_fetch_ctx ctx = { .nl = &fw->nl, .table = table };
        struct fw_fetch fetch = { 0 };
        int r = 0;
        fw_live_init(live);
        live->max_id = id_floor;
        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                char chain[FW_NAME_MAX];
                fw_chain_name(ifname, (enum fw_direction)dir, chain);
                r = nft_nl_chain_rules(&fw->nl, table, chain, &rules[dir], err);
                live->chain[dir] = r == 0;
                if (r == -ENOENT)
                        r = 0;
                if (r < 0)
                        goto out;
        }
        if (full) {
                static const char *const maps[2] = { FW_MAP_IN, FW_MAP_OUT };
                char target[FW_NAME_MAX], want[FW_NAME_MAX];
                for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                        r = nft_nl_map_has(&fw->nl, table, maps[dir], ifname, &live->elem[dir], target, err);
                        if (r < 0)
                                goto out;
                        fw_chain_name(ifname, (enum fw_direction)dir, want);
                        if (live->elem[dir] && !streq(target, want)) {
                                live->elem[dir] = false;
                                if (!live->anomalies)
                                        live->anomalies = json_array();
                                char text[160];
                                snprintf(text, sizeof(text), "map %s of table %s sends %s to %s", maps[dir], table,
                                         ifname, target);
                                json_array_append_new(live->anomalies, json_string(text));
                        }
                }
                fw_nl_fetch(&ctx, &fetch);
        }
        r = fw_parse_server(rules[0].v, rules[0].n, rules[1].v, rules[1].n, &fetch, live, err);
out:
        nft_rule_list_clear(&rules[0]);
        nft_rule_list_clear(&rules[1]);
        return r;
}

static bool live_any(const struct fw_live *l)
{
        return l->chain[0] || l->chain[1] || l->elem[0] || l->elem[1];
}

/*
 * The server as the kernel enforces it: from its shard table, or, while a table of
 * an earlier layout is still there (a migration the kernel refused for it), from
 * that table when the shard has nothing of it.
 */
static int read_server(struct fw *fw, const char *ifname, bool full, uint32_t id_floor, struct fw_live *live,
                       struct na_error *err)
{
        char table[FW_TABLE_NAME_MAX];
        fw_own_table(fw, ifname, table);
        int r = fw_read_live(fw, table, ifname, full, id_floor, live, err);
        for (size_t i = 0; r >= 0 && !live_any(live) && i < fw->n_stale; i++) {
                fw_live_clear(live);
                r = fw_read_live(fw, fw->stale[i], ifname, full, id_floor, live, err);
        }
        return r;
}

/* While stale tables exist: take the server out of them in the same batch. */
static int build_unstale(struct fw *fw, struct nft_batch *b, const char *ifname, struct na_error *err)
{
        for (size_t i = 0; i < fw->n_stale; i++) {
                struct nft_rule_list probe = { 0 };
                char chain[FW_NAME_MAX];
                fw_chain_name(ifname, FW_INBOUND, chain);
                int r = nft_nl_chain_rules(&fw->nl, fw->stale[i], chain, &probe, err);
                nft_rule_list_clear(&probe);
                if (r == -ENOENT)
                        continue;
                if (r < 0 || (r = fw_build_remove(b, fw->stale[i], ifname, err)) < 0)
                        return r;
        }
        return 0;
}

static int server_ifname(const char *vps_id, char ifname[NA_IFNAME_LEN], struct na_error *err)
{
        if (!vps_id || na_vps_ifname(vps_id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "firewall: \"%s\" is not a server id",
                                    vps_id ? vps_id : "(null)");
        return 0;
}

/* ---- the API ---- */

static int set_locked(struct fw *fw, const char *vps_id, const char *ifname, const struct fw_config *cfg,
                      struct fw_config *ret_live, struct na_error *err)
{
        struct fw_config work, stored;
        struct fw_live live;
        struct nft_batch b;
        uint32_t next_id = 1;
        char table[FW_TABLE_NAME_MAX];
        _cleanup_free_ struct nft_raw *raw = NULL;
        _cleanup_na_error_ struct na_error cache_err = NA_ERROR_INIT;
        size_t from = 0, to = 0;
        fw_own_table(fw, ifname, table);
        fw_live_init(&live);
        nft_batch_init(&b, table);
        proto_fw_init(&stored);
        int r = proto_fw_copy(&work, cfg, err);
        if (r < 0)
                goto out;
        /*
         * ids: given ones are kept; the others get ids above everything this server has
         * or had. The stored high-water mark knows; without one, ask the kernel.
         */
        if (fw_state_load_or_none(fw, vps_id, &stored, &next_id, NULL, 0) == 0 &&
            (r = read_server(fw, ifname, false, 0, &live, err)) < 0)
                goto out;
        if (live.max_id >= next_id)
                next_id = live.max_id + 1;
        for (size_t i = 0; i < work.n_rules; i++)
                if (work.rules[i].id >= next_id)
                        next_id = work.rules[i].id + 1;
        for (size_t i = 0; i < work.n_rules; i++)
                if (work.rules[i].id == 0) {
                        if (next_id > FW_RULE_ID_MAX) {
                                r = na_error_field(err, "rules", "no rule ids left above %u", FW_RULE_ID_MAX);
                                goto out;
                        }
                        work.rules[i].id = next_id++;
                }

        if ((r = fw_build_infra(&b, table, err)) < 0)
                goto out;
        from = b.n;
        if ((r = fw_build_server(&b, table, vps_id, &work, err)) < 0)
                goto out;
        to = b.n;
        if ((r = build_unstale(fw, &b, ifname, err)) < 0 || (r = nft_nl_apply(&fw->nl, &b, err)) < 0)
                goto out;
        /* the server's operations, kept beside its configuration for the start (none: it decodes the JSON) */
        if (fw->dir && nft_batch_encode_range(&b, from, to, &raw, &cache_err) < 0)
                raw = NULL;
        if ((r = fw_state_save(fw, vps_id, &work, next_id, table, raw, err)) < 0) {
                na_error_prefix(err, "the kernel took the new rules but they could not be stored");
                goto out;
        }
        if (ret_live) {
                fw_live_clear(&live);
                if ((r = fw_read_live(fw, table, ifname, true, next_id - 1, &live, err)) < 0)
                        goto out;
                *ret_live = live.cfg;
                proto_fw_init(&live.cfg);
        }
        r = 0;
out:
        nft_batch_clear(&b);
        fw_live_clear(&live);
        proto_fw_clear(&work);
        proto_fw_clear(&stored);
        return r;
}

int fw_set(struct fw *fw, const char *vps_id, const struct fw_config *cfg, struct fw_config *ret_live,
           struct na_error *err)
{
        char ifname[NA_IFNAME_LEN];
        int r = server_ifname(vps_id, ifname, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&fw->lock);
        r = set_locked(fw, vps_id, ifname, cfg, ret_live, err);
        pthread_mutex_unlock(&fw->lock);
        return r < 0 ? na_error_prefix(err, "vps %s", vps_id) : 0;
}

int fw_check_drift(struct fw *fw, const char *vps_id, struct fw_config *ret_live, json_t **ret_reasons,
                   struct na_error *err)
{
        char ifname[NA_IFNAME_LEN];
        int r = server_ifname(vps_id, ifname, err);
        if (r < 0)
                return r;
        struct fw_live live;
        struct fw_config stored;
        uint32_t next_id;
        _cleanup_json_ json_t *reasons = json_array();
        if (!reasons)
                return na_error_sys(err, ENOMEM, "vps %s: firewall", vps_id);

        char problem[512];
        pthread_mutex_lock(&fw->lock);
        int have = fw_state_load_or_none(fw, vps_id, &stored, &next_id, problem, sizeof(problem));
        r = read_server(fw, ifname, true, next_id - 1, &live, err);
        pthread_mutex_unlock(&fw->lock);
        if (r < 0) {
                fw_live_clear(&live);
                proto_fw_clear(&stored);
                return na_error_prefix(err, "vps %s", vps_id);
        }

        size_t count = 0;
        if (problem[0]) {
                json_array_append_new(reasons, json_string(problem));
                count++;
        }
        bool in_kernel = live.chain[0] || live.chain[1] || live.elem[0] || live.elem[1];
        if (have) {
                count += proto_fw_diff(&live.cfg, &stored, reasons);
                if (!in_kernel && fw->dir) {
                        json_array_append_new(reasons, json_string("nothing of this server is in the kernel"));
                        count++;
                }
        } else if (in_kernel && fw->dir) {
                json_array_append_new(reasons, json_string("the kernel has rules but no configuration is stored"));
                count++;
        }
        size_t i;
        json_t *a;
        json_array_foreach(live.anomalies, i, a) {
                json_array_append(reasons, a);
                count++;
        }
        proto_fw_clear(&stored);
        if (ret_live) {
                *ret_live = live.cfg;
                proto_fw_init(&live.cfg);
        }
        fw_live_clear(&live);
        if (ret_reasons)
                *ret_reasons = TAKE_PTR(reasons);
        return (int)(count > INT32_MAX ? INT32_MAX : count);
}

int fw_get(struct fw *fw, const char *vps_id, struct fw_config *ret, struct na_error *err)
{
        char ifname[NA_IFNAME_LEN];
        int r = server_ifname(vps_id, ifname, err);
        if (r < 0)
                return r;
        struct fw_live live;
        struct fw_config stored;
        uint32_t next_id;
        pthread_mutex_lock(&fw->lock);
        fw_state_load_or_none(fw, vps_id, &stored, &next_id, NULL, 0);
        r = read_server(fw, ifname, true, next_id - 1, &live, err);
        pthread_mutex_unlock(&fw->lock);
        proto_fw_clear(&stored);
        if (r < 0) {
                fw_live_clear(&live);
                return na_error_prefix(err, "vps %s", vps_id);
        }
        *ret = live.cfg;
        proto_fw_init(&live.cfg);
        fw_live_clear(&live);
        return 0;
}

static int remove_locked(struct fw *fw, const char *vps_id, const char *ifname, struct na_error *err)
{
        struct fw_live live;
        struct nft_batch b;
        char table[FW_TABLE_NAME_MAX];
        fw_own_table(fw, ifname, table);
        nft_batch_init(&b, table);
        int r = fw_read_live(fw, table, ifname, false, 0, &live, err);
        if (r >= 0 && (live.chain[0] || live.chain[1]) && (r = fw_build_infra(&b, table, err)) >= 0)
                r = fw_build_remove(&b, table, ifname, err);
        if (r >= 0)
                r = build_unstale(fw, &b, ifname, err);
        if (r >= 0)
                r = nft_nl_apply(&fw->nl, &b, err);
        if (r >= 0)
                r = fw_state_delete(fw, vps_id, err);
        nft_batch_clear(&b);
        fw_live_clear(&live);
        return r;
}

int fw_remove(struct fw *fw, const char *vps_id, struct na_error *err)
{
        char ifname[NA_IFNAME_LEN];
        int r = server_ifname(vps_id, ifname, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&fw->lock);
        r = remove_locked(fw, vps_id, ifname, err);
        pthread_mutex_unlock(&fw->lock);
        return r < 0 ? na_error_prefix(err, "vps %s", vps_id) : 0;
}

int fw_render_set(const char *table, const char *vps_id, const struct fw_config *cfg, char **ret_text,
                  struct na_error *err)
{
        struct fw_config work;
        struct nft_batch b;
        char shard[FW_TABLE_NAME_MAX];
        int r = fw_server_table(table, 0, vps_id, shard, err);
        if (r < 0)
                return r;
        nft_batch_init(&b, shard);
        if ((r = proto_fw_copy(&work, cfg, err)) < 0)
                return r;
        uint32_t next = 1;
        for (size_t i = 0; i < work.n_rules; i++)
                if (work.rules[i].id >= next)
                        next = work.rules[i].id + 1;
        for (size_t i = 0; i < work.n_rules; i++)
                if (work.rules[i].id == 0)
                        work.rules[i].id = next++;
        if ((r = fw_build_infra(&b, shard, err)) >= 0 && (r = fw_build_server(&b, shard, vps_id, &work, err)) >= 0)
                r = nft_batch_render(&b, fw_udata_render, ret_text, err);
        nft_batch_clear(&b);
        proto_fw_clear(&work);
        return r;
}
