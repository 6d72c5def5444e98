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
 * One inet table owned by the agent ([firewall] table, default "nodeagent"):
 *
 *   map vps-out-map { type ifname : verdict }      iifname -> jump nav…-out
 *   map vps-in-map  { type ifname : verdict }      oifname -> jump nav…-in
 *   chain vps-out { type filter hook forward priority filter; policy accept;
 *                   ct state established,related accept; iifname vmap @vps-out-map }
 *   chain vps-in  { type filter hook forward priority filter + 10; policy accept;
 *                   ct state established,related accept; oifname vmap @vps-in-map }
 *   chain nav6f1c2a3b4c5d-in  { <inbound rules in order>;  counter <inbound policy> }
 *   chain nav6f1c2a3b4c5d-out { <outbound rules in order>; counter <outbound policy> }
 *
 * Inbound is traffic to the server (the packet leaves through its tap: oifname),
 * outbound is traffic from it (iifname). Outbound and inbound are two base chains
 * so that an "allow" is a plain accept that ends only its own direction: traffic
 * between two servers of the node passes the sender's outbound chain and then the
 * receiver's inbound chain. The firewall is stateful: packets of established and
 * related connections are accepted first, in both base chains, so a rule only has
 * to let a connection's first packet through and the answers come back whatever the
 * other direction's policy. Traffic of other interfaces misses the maps and is
 * accepted: the table only restricts servers; the node's own filtering stays the
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
 * name, so the batch holds only that server's objects (plus the table, maps and base
 * chains re-asserted, so a table flushed by hand heals at the next change). The
 * kernel still checks the whole table for loops when it commits a batch with
 * verdicts (nft_table_validate), which costs about 65 ns per rule of the node on
 * this kind of machine: see bench/firewall. enabled = false keeps the chains and
 * takes the map elements out: nothing is filtered, and the rules can still be read.
 * vps.firewall.get rebuilds the configuration from the live ruleset (fw-parse.c),
 * not from the stored copy; the stored copy (<state_dir>/firewall/<vps_id>.json,
 * replaced atomically after the kernel took the batch) holds the ids' high-water
 * mark, is what drift is measured against and what reconcile re-applies at start.
 *
 * README paragraph (firewall):
 *
 *   Each server's firewall lives in the agent's own nftables table (inet
 *   "nodeagent", `[firewall] table`). The node is routed, so filtering happens in
 *   the forward hook: two base chains (vps-out, then vps-in) accept packets of
 *   established and related connections first, then jump through verdict maps
 *   keyed by the server's tap name (nav + 12 hex digits of its id) to the server's
 *   own chains: nav<id>-out for traffic from the server (iifname) and nav<id>-in for
 *   traffic to it (oifname). Each chain holds the customer's rules in order, each
 *   with its own counter and its comment, and ends with the direction's policy
 *   (allow or deny; reject exists per rule only). Traffic between the server and
 *   the node itself (ARP, neighbour discovery, DHCP) is not filtered. A change
 *   replaces one server's chains in a single netlink batch: it applies whole or not
 *   at all, never leaves the server unprotected, and touches no other server.
 *   Turning the firewall off takes the server out of the maps and keeps its rules.
 *   vps.firewall.get reads the kernel, not a cache, and reports rules changed by
 *   hand as a firewall.drift event; at start the agent re-applies every stored
 *   configuration (<state_dir>/firewall/) and removes the chains of servers it no
 *   longer has. The agent talks netlink directly (libnftnl, libmnl); `nft list
 *   table inet nodeagent` shows the same rules with their comments and counters.
 */
#include "firewall/fw.h"

#include <stdio.h> /* before libnftnl: its headers use FILE */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <pthread.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/names.h"
#include "common/uuid.h"
#include "firewall/fw-internal.h"

#define STATE_MAX (4u << 20)

struct fw {
        pthread_mutex_t lock;
        struct fw_nl nl;
        char table[FW_TABLE_NAME_MAX];
        char *dir; /* <state_dir>/firewall, or NULL */
};

static bool table_name_valid(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n >= FW_TABLE_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
                        return false;
        return true;
}

int fw_open(const struct fw_options *opt, struct fw **ret, struct na_error *err)
{
        const char *table = opt && opt->table ? opt->table : FW_DEFAULT_TABLE;
        if (!table_name_valid(table))
                return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                    "firewall: table name \"%s\" is not 1..32 letters, digits, '_' or '-'", table);
        _cleanup_free_ struct fw *fw = calloc(1, sizeof(*fw));
        if (!fw)
                return na_error_sys(err, ENOMEM, "firewall");
        snprintf(fw->table, sizeof(fw->table), "%s", table);
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
        int r = fw_nl_open(&fw->nl, opt ? opt->netns_fd : -1, err);
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
        fw_nl_close(&fw->nl);
        pthread_mutex_destroy(&fw->lock);
        free(fw->dir);
        free(fw);
}

/* ---- stored configurations ---- */

static int state_path(const struct fw *fw, const char *vps_id, char *buf, size_t len)
{
        int n = snprintf(buf, len, "%s/%s.json", fw->dir, vps_id);
        for (char *p = buf + strlen(fw->dir) + 1; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* 1: loaded, 0: none stored. *next_id: the lowest id never handed out. */
static int state_load(const struct fw *fw, const char *vps_id, struct fw_config *cfg, uint32_t *next_id,
                      struct na_error *err)
{
        proto_fw_init(cfg);
        *next_id = 1;
        if (!fw->dir)
                return 0;
        char path[4096];
        _cleanup_free_ char *text = NULL;
        if (state_path(fw, vps_id, path, sizeof(path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "firewall: state path too long");
        struct na_error rerr = NA_ERROR_INIT;
        if (na_read_file(path, STATE_MAX, &text, NULL, &rerr) < 0) {
                int e = rerr.errnum;
                if (e == ENOENT) {
                        na_error_clear(&rerr);
                        return 0;
                }
                na_error_move(err, &rerr);
                return -e;
        }
        json_error_t jerr;
        _cleanup_json_ json_t *root = json_loads(text, 0, &jerr);
        struct na_error derr = NA_ERROR_INIT;
        if (!root || proto_fw_decode(root, cfg, &derr) < 0) {
                na_error_clear(&derr);
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "firewall: %s: not a valid stored configuration", path);
        }
        json_int_t next = json_integer_value(json_object_get(root, "nextRuleId"));
        *next_id = next > 0 && next <= (json_int_t)FW_RULE_ID_MAX + 1 ? (uint32_t)next : 1;
        for (size_t i = 0; i < cfg->n_rules; i++)
                if (cfg->rules[i].id >= *next_id)
                        *next_id = cfg->rules[i].id + 1;
        return 1;
}

/*
 * state_load for readers that go on without it: an unreadable stored configuration
 * counts as none (problem, when given, says why). Returns 1 or 0.
 */
static int state_load_or_none(const struct fw *fw, const char *vps_id, struct fw_config *cfg, uint32_t *next_id,
                              char *problem, size_t len)
{
        struct na_error e = NA_ERROR_INIT;
        int r = state_load(fw, vps_id, cfg, next_id, &e);
        if (problem)
                snprintf(problem, len, "%s", r < 0 ? e.message : "");
        na_error_clear(&e);
        if (r >= 0)
                return r;
        proto_fw_init(cfg);
        *next_id = 1;
        return 0;
}

static int state_save(const struct fw *fw, const char *vps_id, const struct fw_config *cfg, uint32_t next_id,
                      struct na_error *err)
{
        if (!fw->dir)
                return 0;
        char path[4096];
        if (state_path(fw, vps_id, path, sizeof(path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "firewall: state path too long");
        _cleanup_json_ json_t *root = proto_fw_encode(cfg);
        if (!root || json_object_set_new(root, "nextRuleId", json_integer(next_id)) < 0 ||
            json_object_set_new(root, "vpsId", json_string(vps_id)) < 0)
                return na_error_sys(err, ENOMEM, "firewall: encode configuration");
        _cleanup_free_ char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text)
                return na_error_sys(err, ENOMEM, "firewall: encode configuration");
        return na_atomic_write(path, text, strlen(text), 0600, err);
}

static int state_delete(const struct fw *fw, const char *vps_id, struct na_error *err)
{
        if (!fw->dir)
                return 0;
        char path[4096];
        if (state_path(fw, vps_id, path, sizeof(path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "firewall: state path too long");
        if (unlink(path) < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "firewall: remove %s", path);
        }
        return na_fsync_parent(path, err);
}

/* ---- the live state of one server ---- */

/*
 * What the kernel holds for a server. Rules the agent did not write get ids above
 * id_floor (the stored high-water mark) and above every id in the kernel.
 */
static int read_live(struct fw *fw, const char *ifname, bool full, uint32_t id_floor, struct fw_live *live,
                     struct na_error *err)
{
        struct fw_rule_list rules[2] = { 0 };
        struct fw_nl_fetch_ctx ctx = { .nl = &fw->nl, .table = fw->table };
        struct fw_fetch fetch = { 0 };
        int r = 0;
        fw_live_init(live);
        live->max_id = id_floor;
        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                char chain[FW_NAME_MAX];
                fw_chain_name(ifname, (enum fw_direction)dir, chain);
                r = fw_nl_chain_rules(&fw->nl, fw->table, chain, &rules[dir], err);
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
                        r = fw_nl_map_has(&fw->nl, fw->table, maps[dir], ifname, &live->elem[dir], target, err);
                        if (r < 0)
                                goto out;
                        fw_chain_name(ifname, (enum fw_direction)dir, want);
                        if (live->elem[dir] && !streq(target, want)) {
                                live->elem[dir] = false;
                                if (!live->anomalies)
                                        live->anomalies = json_array();
                                char text[160];
                                snprintf(text, sizeof(text), "map %s sends %s to %s", maps[dir], ifname, target);
                                json_array_append_new(live->anomalies, json_string(text));
                        }
                }
                fw_nl_fetch(&ctx, &fetch);
        }
        r = fw_parse_server(rules[0].v, rules[0].n, rules[1].v, rules[1].n, &fetch, live, err);
out:
        fw_rule_list_clear(&rules[0]);
        fw_rule_list_clear(&rules[1]);
        return r;
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
        struct fw_batch b;
        uint32_t next_id = 1;
        fw_live_init(&live);
        fw_batch_init(&b, fw->table);
        proto_fw_init(&stored);
        int r = proto_fw_copy(&work, cfg, err);
        if (r < 0)
                goto out;
        /*
         * ids: given ones are kept; the others get ids above everything this server has
         * or had. The stored high-water mark knows; without one, ask the kernel.
         */
        if (state_load_or_none(fw, vps_id, &stored, &next_id, NULL, 0) == 0 &&
            (r = read_live(fw, ifname, false, 0, &live, err)) < 0)
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

        if ((r = fw_build_infra(&b, err)) < 0 || (r = fw_build_server(&b, vps_id, &work, err)) < 0 ||
            (r = fw_nl_apply(&fw->nl, &b, err)) < 0)
                goto out;
        if ((r = state_save(fw, vps_id, &work, next_id, err)) < 0) {
                na_error_prefix(err, "the kernel took the new rules but they could not be stored");
                goto out;
        }
        if (ret_live) {
                fw_live_clear(&live);
                if ((r = read_live(fw, ifname, true, next_id - 1, &live, err)) < 0)
                        goto out;
                *ret_live = live.cfg;
                proto_fw_init(&live.cfg);
        }
        r = 0;
out:
        fw_batch_clear(&b);
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
        int have = state_load_or_none(fw, vps_id, &stored, &next_id, problem, sizeof(problem));
        r = read_live(fw, ifname, true, next_id - 1, &live, err);
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
        state_load_or_none(fw, vps_id, &stored, &next_id, NULL, 0);
        r = read_live(fw, ifname, true, next_id - 1, &live, err);
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
        struct fw_batch b;
        fw_batch_init(&b, fw->table);
        int r = read_live(fw, ifname, false, 0, &live, err);
        if (r >= 0 && (live.chain[0] || live.chain[1])) {
                if ((r = fw_build_infra(&b, err)) >= 0 && (r = fw_build_remove(&b, ifname, err)) >= 0)
                        r = fw_nl_apply(&fw->nl, &b, err);
        }
        if (r >= 0)
                r = state_delete(fw, vps_id, err);
        fw_batch_clear(&b);
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
        struct fw_batch b;
        fw_batch_init(&b, table ? table : FW_DEFAULT_TABLE);
        int r = proto_fw_copy(&work, cfg, err);
        if (r < 0)
                return r;
        uint32_t next = 1;
        for (size_t i = 0; i < work.n_rules; i++)
                if (work.rules[i].id >= next)
                        next = work.rules[i].id + 1;
        for (size_t i = 0; i < work.n_rules; i++)
                if (work.rules[i].id == 0)
                        work.rules[i].id = next++;
        if ((r = fw_build_infra(&b, err)) >= 0 && (r = fw_build_server(&b, vps_id, &work, err)) >= 0)
                r = fw_batch_render(&b, ret_text, err);
        fw_batch_clear(&b);
        proto_fw_clear(&work);
        return r;
}

/* ---- reconcile ---- */

struct stored_list {
        char **ids;
        size_t n;
};

static int list_stored(const struct fw *fw, struct stored_list *out, struct na_error *err)
{
        memset(out, 0, sizeof(*out));
        if (!fw->dir)
                return 0;
        DIR *d = opendir(fw->dir);
        if (!d)
                return na_error_sys(err, errno, "firewall: open %s", fw->dir);
        size_t cap = 0;
        int r = 0;
        for (struct dirent *de = readdir(d); de; de = readdir(d)) {
                size_t len = strlen(de->d_name);
                if (len != NA_UUID_STRLEN + 5 || !streq(de->d_name + NA_UUID_STRLEN, ".json"))
                        continue;
                char id[NA_UUID_STRLEN + 1];
                memcpy(id, de->d_name, NA_UUID_STRLEN);
                id[NA_UUID_STRLEN] = '\0';
                if (!na_uuid_valid(id))
                        continue;
                if (out->n == cap) {
                        cap = cap ? cap * 2 : 64;
                        char **v = realloc(out->ids, cap * sizeof(*v));
                        if (!v) {
                                r = na_error_sys(err, ENOMEM, "firewall: list %s", fw->dir);
                                break;
                        }
                        out->ids = v;
                }
                if (!(out->ids[out->n] = strdup(id))) {
                        r = na_error_sys(err, ENOMEM, "firewall: list %s", fw->dir);
                        break;
                }
                out->n++;
        }
        closedir(d);
        return r;
}

static bool id_known(const char *const *known, const char *id)
{
        if (!known)
                return true;
        for (; *known; known++)
                if (strcasecmp(*known, id) == 0)
                        return true;
        return false;
}

static bool ifname_known(const char *const *known, const char *ifname)
{
        char other[NA_IFNAME_LEN];
        for (; known && *known; known++)
                if (na_vps_ifname(*known, other) == 0 && streq(other, ifname))
                        return true;
        return false;
}

struct plan_item {
        char vps_id[NA_UUID_STRLEN + 1]; /* "" for a chain pair without a stored configuration */
        char ifname[NA_IFNAME_LEN];
        bool apply;                      /* else remove */
        struct fw_config cfg;
        uint32_t next_id;
};

static int plan_add(struct plan_item **v, size_t *n, struct plan_item item, struct na_error *err)
{
        struct plan_item *nv = realloc(*v, (*n + 1) * sizeof(*nv));
        if (!nv) {
                proto_fw_clear(&item.cfg);
                return na_error_sys(err, ENOMEM, "firewall: reconcile");
        }
        nv[(*n)++] = item;
        *v = nv;
        return 0;
}

static bool plan_has_ifname(const struct plan_item *v, size_t n, const char *ifname)
{
        for (size_t i = 0; i < n; i++)
                if (streq(v[i].ifname, ifname))
                        return true;
        return false;
}

static int build_item(const struct plan_item *it, struct fw_batch *b, struct na_error *err)
{
        int r = it->apply ? fw_build_server(b, it->vps_id, &it->cfg, err) : fw_build_remove(b, it->ifname, err);
        if (r < 0)
                na_error_prefix(err, "%s %s", it->vps_id[0] ? "vps" : "interface",
                                it->vps_id[0] ? it->vps_id : it->ifname);
        return r;
}

static int reconcile_locked(struct fw *fw, const char *const *known, struct fw_reconcile_stats *st,
                            struct na_error *err)
{
        struct stored_list stored = { 0 };
        struct plan_item *plan = NULL;
        size_t n_plan = 0;
        char **chains = NULL;
        size_t n_chains = 0;
        struct fw_batch b;
        struct na_error unreadable = NA_ERROR_INIT, first_unreadable = NA_ERROR_INIT;
        fw_batch_init(&b, fw->table);

        int r = list_stored(fw, &stored, err);
        if (r < 0)
                goto out;
        r = fw_nl_chain_names(&fw->nl, fw->table, &chains, &n_chains, err);
        if (r == -ENOENT)
                r = 0;
        if (r < 0)
                goto out;

        for (size_t i = 0; i < stored.n; i++) {
                struct plan_item it = { .apply = id_known(known, stored.ids[i]) };
                snprintf(it.vps_id, sizeof(it.vps_id), "%s", stored.ids[i]);
                na_vps_ifname(it.vps_id, it.ifname);
                if (it.apply && state_load(fw, it.vps_id, &it.cfg, &it.next_id, &unreadable) < 0) {
                        /* the others are applied all the same; this server's kernel state is left alone */
                        na_error_prefix(&unreadable, "vps %s", it.vps_id);
                        if (!first_unreadable.code)
                                na_error_move(&first_unreadable, &unreadable);
                        na_error_clear(&unreadable);
                        st->failed++;
                        continue;
                }
                if ((r = plan_add(&plan, &n_plan, it, err)) < 0)
                        goto out;
        }
        for (size_t i = 0; i < n_chains; i++) {
                char ifname[NA_IFNAME_LEN];
                enum fw_direction dir;
                if (!fw_chain_parse(chains[i], ifname, &dir) || plan_has_ifname(plan, n_plan, ifname))
                        continue;
                if (!known || ifname_known(known, ifname))
                        continue; /* a server we know, without a stored configuration: left as it is */
                struct plan_item it = { .apply = false };
                snprintf(it.ifname, sizeof(it.ifname), "%s", ifname);
                if ((r = plan_add(&plan, &n_plan, it, err)) < 0)
                        goto out;
        }

        /* one batch for everything */
        if ((r = fw_build_infra(&b, err)) < 0)
                goto out;
        for (size_t i = 0; i < n_plan; i++)
                if ((r = build_item(&plan[i], &b, err)) < 0)
                        goto out;
        r = fw_nl_apply(&fw->nl, &b, err);
        if (r < 0) {
                /* one server the kernel refuses must not keep the others unprotected: one batch each */
                struct na_error first = NA_ERROR_INIT;
                size_t failed = 0;
                na_error_move(&first, err);
                for (size_t i = 0; i < n_plan; i++) {
                        struct fw_batch one;
                        fw_batch_init(&one, fw->table);
                        int rr = fw_build_infra(&one, err);
                        if (rr >= 0)
                                rr = build_item(&plan[i], &one, err);
                        if (rr >= 0)
                                rr = fw_nl_apply(&fw->nl, &one, err);
                        fw_batch_clear(&one);
                        if (rr < 0) {
                                na_error_prefix(err, "%s %s", plan[i].vps_id[0] ? "vps" : "interface",
                                                plan[i].vps_id[0] ? plan[i].vps_id : plan[i].ifname);
                                failed++;
                                if (failed == 1)
                                        na_error_move(&first, err);
                                na_error_clear(err);
                                plan[i].ifname[0] = '\0'; /* not done */
                                continue;
                        }
                }
                st->failed += failed;
                if (failed) {
                        na_error_move(err, &first);
                        na_error_prefix(err, "firewall: reconcile: %zu of %zu servers failed, first", failed, n_plan);
                        r = -(err->errnum ? err->errnum : EIO);
                } else {
                        na_error_clear(&first);
                        r = 0;
                }
        }
        for (size_t i = 0; i < n_plan; i++) {
                if (!plan[i].ifname[0])
                        continue;
                if (plan[i].apply)
                        st->applied++;
                else {
                        st->removed++;
                        if (plan[i].vps_id[0]) {
                                int rr = state_delete(fw, plan[i].vps_id, err);
                                if (rr < 0 && r >= 0)
                                        r = rr;
                        }
                }
        }
        if (r >= 0 && first_unreadable.code) {
                na_error_move(err, &first_unreadable);
                na_error_prefix(err, "firewall: reconcile: %zu stored configurations unreadable, first", st->failed);
                r = -(err->errnum ? err->errnum : EIO);
        }
out:
        na_error_clear(&first_unreadable);
        fw_batch_clear(&b);
        for (size_t i = 0; i < n_plan; i++)
                proto_fw_clear(&plan[i].cfg);
        free(plan);
        fw_strv_free(chains, n_chains);
        fw_strv_free(stored.ids, stored.n);
        return r;
}

int fw_reconcile(struct fw *fw, const char *const *known_ids, struct fw_reconcile_stats *ret, struct na_error *err)
{
        struct fw_reconcile_stats st = { 0 };
        pthread_mutex_lock(&fw->lock);
        int r = reconcile_locked(fw, known_ids, &st, err);
        pthread_mutex_unlock(&fw->lock);
        if (ret)
                *ret = st;
        return r;
}
