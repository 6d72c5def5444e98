/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app network: the table of members (id, hostname, group, address), kept in
 * <storage_dir>/app-net.json (replaced atomically), and the operations of app-net.h.
 * The kernel follows the table: at open the whole nft table is rebuilt in one
 * batch (reconcile), afterwards each change is one batch of its own; the table and
 * its file change only after the kernel took the batch, so a refused change leaves
 * the previous rules in force and nothing half-applied.
 */
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/app/net/app-net-internal.h"

#define STATE_MAX (8u << 20)

bool app_net_enabled(const struct app_net *n)
{
        return n && n->enabled;
}

struct app_net_member *app_net_member_find(struct app_net *n, const char *id)
{
        for (size_t i = 0; i < n->n; i++)
                if (strcmp(n->m[i].id, id) == 0)
                        return &n->m[i];
        return NULL;
}

static size_t group_size(struct app_net *n, const char *g)
{
        size_t k = 0;
        for (size_t i = 0; i < n->n; i++)
                if (strcmp(n->m[i].group, g) == 0)
                        k++;
        return k;
}

/* Distinct groups with members (pointers into the table). */
static const char **groups_of(struct app_net *n, size_t *ret_n)
{
        const char **v = calloc(n->n + 1, sizeof(*v));
        size_t k = 0;
        for (size_t i = 0; v && i < n->n; i++) {
                if (!n->m[i].group[0])
                        continue;
                bool seen = false;
                for (size_t j = 0; j < k && !seen; j++)
                        seen = strcmp(v[j], n->m[i].group) == 0;
                if (!seen)
                        v[k++] = n->m[i].group;
        }
        *ret_n = k;
        return v;
}

/* Port exposures of every app, for the exposures chain. */
static struct app_net_port *ports_of(struct app_net *n, size_t *ret_n)
{
        size_t cap = 0, k = 0;
        for (size_t i = 0; i < n->n; i++)
                cap += json_array_size(n->m[i].exposures);
        struct app_net_port *v = calloc(cap + 1, sizeof(*v));
        for (size_t i = 0; v && i < n->n; i++) {
                size_t j;
                json_t *e;
                json_array_foreach(n->m[i].exposures, j, e) {
                        if (!app_net_exposure_is_port(e))
                                continue;
                        v[k++] = (struct app_net_port){
                                .external = (uint16_t)json_integer_value(json_object_get(e, "externalPort")),
                                .container = (uint16_t)json_integer_value(json_object_get(e, "containerPort")),
                                .l4proto = app_net_exposure_l4proto(e),
                                .addr = n->m[i].addr,
                        };
                }
        }
        *ret_n = k;
        return v;
}

int app_net_rules_fill(struct app_net *n, struct app_net_rules *rs, struct na_error *err)
{
        *rs = (struct app_net_rules){ .table = n->table, .range = n->range, .public_addr = n->public_addr };
        rs->groups = groups_of(n, &rs->n_groups);
        rs->ports = ports_of(n, &rs->n_ports);
        if (!rs->groups || !rs->ports) {
                app_net_rules_clear(rs);
                return na_error_sys(err, ENOMEM, "app network: rules");
        }
        return 0;
}

void app_net_rules_clear(struct app_net_rules *rs)
{
        free((void *)rs->groups);
        free((void *)rs->ports);
        rs->groups = NULL;
        rs->ports = NULL;
}

int app_net_apply(struct app_net *n, struct nft_batch *b, struct na_error *err)
{
        int r = nft_nl_apply(&n->nl, b, err);
        return r < 0 ? na_error_prefix(err, "app network: nftables table %s", n->table) : 0;
}

/* ---- the state file ---- */

/*
 * durable: fsync'd (an address given or taken back). A group change is not: the
 * app's own record (app.json, fsync'd by the driver) holds its group, and the driver
 * registers every app again at open, which puts a group a crash lost back.
 */
int app_net_save(struct app_net *n, bool durable, struct na_error *err)
{
        _cleanup_json_ json_t *apps = json_object();
        for (size_t i = 0; apps && i < n->n; i++) {
                char a[16];
                app_net_addr_str(n->m[i].addr, a);
                json_object_set_new(apps, n->m[i].id,
                                    json_pack("{s:s, s:s, s:o}", "addr", a, "hostname", n->m[i].hostname, "group",
                                              n->m[i].group[0] ? json_string(n->m[i].group) : json_null()));
        }
        _cleanup_json_ json_t *doc = apps ? json_pack("{s:O}", "apps", apps) : NULL;
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        if (!text)
                return na_error_sys(err, ENOMEM, "app network: save");
        int r;
        if (durable)
                r = na_atomic_write(n->state_path, text, strlen(text), 0600, err);
        else {
                char dir[4200];
                snprintf(dir, sizeof(dir), "%s", n->state_path);
                *strrchr(dir, '/') = '\0';
                r = app_net_write_file(dir, "app-net.json", text, 0600, err);
        }
        return r < 0 ? na_error_prefix(err, "app network") : 0;
}

static int add_member(struct app_net *n, const char *id, const char *hostname, const char *group, uint32_t addr,
                      struct na_error *err)
{
        if (n->n == n->cap) {
                size_t cap = n->cap ? n->cap * 2 : 16;
                struct app_net_member *m = realloc(n->m, cap * sizeof(*m));
                if (!m)
                        return na_error_sys(err, ENOMEM, "app %s: network", id);
                n->m = m;
                n->cap = cap;
        }
        struct app_net_member *m = &n->m[n->n];
        memset(m, 0, sizeof(*m));
        snprintf(m->id, sizeof(m->id), "%s", id);
        snprintf(m->hostname, sizeof(m->hostname), "%s", hostname ? hostname : "");
        snprintf(m->group, sizeof(m->group), "%s", group ? group : "");
        m->addr = addr;
        m->exposures = json_array();
        if (!m->exposures)
                return na_error_sys(err, ENOMEM, "app %s: network", id);
        n->n++;
        return 0;
}

static void drop_member(struct app_net *n, struct app_net_member *m)
{
        json_decref(m->exposures);
        size_t i = (size_t)(m - n->m);
        memmove(m, m + 1, (n->n - i - 1) * sizeof(*m));
        n->n--;
}

static int load(struct app_net *n, struct na_error *err)
{
        _cleanup_json_ json_t *doc = na_json_load(n->state_path, STATE_MAX);
        if (!doc)
                return access(n->state_path, F_OK) == 0
                               ? na_error_set(err, EBADMSG, NA_E_INTERNAL, "app network: %s is damaged", n->state_path)
                               : 0;
        const char *id;
        json_t *v;
        json_object_foreach(json_object_get(doc, "apps"), id, v) {
                uint32_t addr = 0;
                const char *g = json_string_value(json_object_get(v, "group"));
                if (app_net_addr_parse(json_string_value(json_object_get(v, "addr")), &addr) < 0 ||
                    !app_net_in_range(&n->range, addr) || strlen(id) != 36)
                        return na_error_set(err, EBADMSG, NA_E_INTERNAL,
                                            "app network: %s: app %s has no address in %u.%u.%u.%u/%u (was [apps] "
                                            "network changed?)",
                                            n->state_path, id, n->range.base >> 24, (n->range.base >> 16) & 255,
                                            (n->range.base >> 8) & 255, n->range.base & 255, n->range.prefix);
                int r = add_member(n, id, json_string_value(json_object_get(v, "hostname")), g, addr, err);
                if (r < 0)
                        return r;
                if ((r = app_net_exposures_load(n, &n->m[n->n - 1], err)) < 0)
                        return r;
        }
        return 0;
}

/* ---- hosts files ---- */

static int write_hosts(struct app_net *n, struct app_net_member *m, struct na_error *err)
{
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/%s", n->apps_dir, m->id);
        if (access(dir, F_OK) < 0)
                return 0; /* not deployed here (yet): nothing to show */
        snprintf(dir, sizeof(dir), "%s/%s/net", n->apps_dir, m->id);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "app %s: mkdir %s", m->id, dir);
        _cleanup_free_ struct app_net_host_entry *others = calloc(n->n + 1, sizeof(*others));
        if (!others)
                return na_error_sys(err, ENOMEM, "app %s: hosts", m->id);
        size_t k = 0;
        for (size_t i = 0; m->group[0] && i < n->n; i++)
                if (&n->m[i] != m && strcmp(n->m[i].group, m->group) == 0)
                        others[k++] = (struct app_net_host_entry){ n->m[i].addr, n->m[i].hostname };
        struct app_net_host_entry self = { m->addr, m->hostname };
        _cleanup_free_ char *text = app_net_hosts_render(&self, others, k);
        if (!text)
                return na_error_sys(err, ENOMEM, "app %s: hosts", m->id);
        int r = app_net_write_file(dir, "hosts", text, 0644, err);
        return r < 0 ? na_error_prefix(err, "app %s", m->id) : 0;
}

/* The hosts files of every member of group g (and of m, when given). */
static int write_group_hosts(struct app_net *n, const char *g, struct na_error *err)
{
        for (size_t i = 0; g && g[0] && i < n->n; i++)
                if (strcmp(n->m[i].group, g) == 0) {
                        int r = write_hosts(n, &n->m[i], err);
                        if (r < 0)
                                return r;
                }
        return 0;
}

/* ---- open, close ---- */

static char *dup_or(const char *v, const char *dflt)
{
        return strdup(v && *v ? v : dflt);
}

int app_net_open(const struct app_net_options *o, struct app_net **ret, struct na_error *err)
{
        _cleanup_(app_net_closep) struct app_net *n = calloc(1, sizeof(*n));
        if (!n)
                return na_error_sys(err, ENOMEM, "app network");
        pthread_mutex_init(&n->lock, NULL);
        n->routes = o->routes;
        n->resolver = o->resolver && *o->resolver ? strdup(o->resolver) : NULL;
        n->resolv_conf = dup_or(o->resolv_conf, "/etc/resolv.conf");
        n->apps_domain = o->apps_domain && *o->apps_domain ? strdup(o->apps_domain) : NULL;
        snprintf(n->table, sizeof(n->table), "%s", o->table && *o->table ? o->table : APP_NET_DEFAULT_TABLE);
        snprintf(n->apps_dir, sizeof(n->apps_dir), "%s", o->apps_dir ? o->apps_dir : "");
        snprintf(n->state_path, sizeof(n->state_path), "%s/app-net.json", o->storage_dir);
        if (o->netns_dir && *o->netns_dir)
                snprintf(n->netns_dir, sizeof(n->netns_dir), "%s", o->netns_dir);
        else
                snprintf(n->netns_dir, sizeof(n->netns_dir), "%s/netns", o->storage_dir);
        if (!o->network || !*o->network) {
                *ret = TAKE_PTR(n); /* networking off: every app gets an empty namespace */
                return 0;
        }
        const char *why = NULL;
        if (app_net_range_parse(o->network, &n->range, &why) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "[apps] network %s: %s", o->network, why);
        if (app_net_ports_parse(o->ports ? o->ports : "20000-40000", &n->port_lo, &n->port_hi) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "[apps] ports %s: must be lo-hi", o->ports);
        if (o->public_address && *o->public_address &&
            app_net_addr_parse(o->public_address, &n->public_addr) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "[apps] public_address %s: not an IPv4 address",
                                    o->public_address);
        if (!n->resolv_conf || !n->apps_dir[0])
                return na_error_sys(err, ENOMEM, "app network");
        int r = na_mkdir_p(n->netns_dir, 0711, err);
        if (r >= 0)
                r = load(n, err);
        if (r >= 0)
                r = nft_nl_open(&n->nl, -1, err);
        if (r < 0)
                return na_error_prefix(err, "app network");
        n->nl_open = true;
        n->rtnl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!n->rtnl || mnl_socket_bind(n->rtnl, 0, MNL_SOCKET_AUTOPID) < 0)
                return na_error_sys(err, errno, "app network: rtnetlink socket");
        /* Routing between the apps and out: the node forwards (in its namespace). */
        _cleanup_close_ int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "1\n", 2) != 2)
                return na_error_sys(err, errno, "app network: enable net.ipv4.ip_forward");
        n->enabled = true;
        if ((r = app_net_reconcile(n, err)) < 0)
                return r;
        *ret = TAKE_PTR(n);
        return 0;
}

int app_net_reconcile(struct app_net *n, struct na_error *err)
{
        struct app_net_rules rs;
        int r = app_net_rules_fill(n, &rs, err);
        if (r < 0)
                return r;
        _cleanup_free_ const char **gv = calloc(n->n + 1, sizeof(*gv));
        _cleanup_free_ uint32_t *av = calloc(n->n + 1, sizeof(*av));
        struct nft_batch b;
        nft_batch_init(&b, n->table);
        if (!gv || !av)
                r = na_error_sys(err, ENOMEM, "app network");
        for (size_t i = 0; r >= 0 && i < n->n; i++) {
                gv[i] = n->m[i].group[0] ? n->m[i].group : NULL;
                av[i] = n->m[i].addr;
        }
        if (r >= 0)
                r = app_net_nft_full(&b, &rs, gv, av, n->n, err);
        if (r >= 0)
                r = app_net_apply(n, &b, err);
        nft_batch_clear(&b);
        app_net_rules_clear(&rs);
        return r;
}

void app_net_close(struct app_net *n)
{
        if (!n)
                return;
        for (size_t i = 0; i < n->n; i++)
                json_decref(n->m[i].exposures);
        free(n->m);
        if (n->nl_open)
                nft_nl_close(&n->nl);
        if (n->rtnl)
                mnl_socket_close(n->rtnl);
        free(n->resolver);
        free(n->resolv_conf);
        free(n->apps_domain);
        pthread_mutex_destroy(&n->lock);
        free(n);
}

/* ---- members ---- */

static int group_move_locked(struct app_net *n, struct app_net_member *m, const char *group, struct na_error *err)
{
        const char *g = group ? group : "";
        if (strcmp(m->group, g) == 0)
                return 0;
        char old[40];
        snprintf(old, sizeof(old), "%s", m->group);
        struct app_net_rules rs;
        int r = app_net_rules_fill(n, &rs, err);
        if (r < 0)
                return r;
        struct nft_batch b;
        nft_batch_init(&b, n->table);
        const char *added = g[0] && group_size(n, g) == 0 ? g : NULL;
        const char *removed = old[0] && group_size(n, old) == 1 ? old : NULL;
        if (old[0])
                r = app_net_nft_member(&b, old, m->addr, false, err);
        if (r >= 0 && (added || removed))
                r = app_net_nft_groups(&b, &rs, added, removed, err);
        if (r >= 0 && g[0])
                r = app_net_nft_member(&b, g, m->addr, true, err);
        if (r >= 0)
                r = app_net_apply(n, &b, err);
        nft_batch_clear(&b);
        app_net_rules_clear(&rs);
        if (r < 0)
                return na_error_prefix(err, "app %s: group %s", m->id, g[0] ? g : "(none)");
        /* Not saved to app-net.json: the app's record (app.json) keeps its group and the
         * driver registers every app again at open. The hosts files of both groups (the
         * app's own among the new group's, or alone when it left). */
        snprintf(m->group, sizeof(m->group), "%s", g);
        r = write_group_hosts(n, old, err);
        if (r >= 0)
                r = g[0] ? write_group_hosts(n, g, err) : write_hosts(n, m, err);
        return r;
}

int app_net_register(struct app_net *n, const char *app_id, const char *hostname, const char *group_id,
                     struct na_error *err)
{
        if (!app_net_enabled(n))
                return 0;
        pthread_mutex_lock(&n->lock);
        int r = 0;
        struct app_net_member *m = app_net_member_find(n, app_id);
        bool had_group = m && m->group[0];
        char was_group[40] = "";
        if (m)
                snprintf(was_group, sizeof(was_group), "%s", m->group);
        if (!m) {
                _cleanup_free_ uint32_t *taken = calloc(n->n + 1, sizeof(*taken));
                uint32_t addr = 0;
                for (size_t i = 0; taken && i < n->n; i++)
                        taken[i] = n->m[i].addr;
                r = taken ? app_net_addr_pick(&n->range, taken, n->n, &addr) : -ENOMEM;
                if (r == -ENOSPC)
                        r = na_error_set(err, ENOSPC, NA_E_INTERNAL, "app %s: no free address left in [apps] network",
                                         app_id);
                else if (r < 0)
                        r = na_error_sys(err, -r, "app %s: network", app_id);
                if (r >= 0)
                        r = add_member(n, app_id, hostname, NULL, addr, err);
                if (r >= 0 && (r = app_net_save(n, true, err)) < 0)
                        drop_member(n, &n->m[n->n - 1]);
                m = r >= 0 ? &n->m[n->n - 1] : NULL;
        } else if (hostname && strcmp(m->hostname, hostname) != 0) {
                snprintf(m->hostname, sizeof(m->hostname), "%s", hostname);
                r = app_net_save(n, false, err);
        }
        if (r >= 0)
                r = group_move_locked(n, m, group_id, err);
        /* The file says the group an app had when it was saved last: a changed one is
         * saved now (not durably: app.json is the record), so that the next open's
         * reconcile starts from it. */
        if (r >= 0 && (had_group || m->group[0]) && strcmp(was_group, m->group) != 0)
                r = app_net_save(n, false, err);
        if (r >= 0)
                r = write_hosts(n, m, err);
        pthread_mutex_unlock(&n->lock);
        return r;
}

int app_net_group_set(struct app_net *n, const char *app_id, const char *group_id, struct na_error *err)
{
        if (!app_net_enabled(n))
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: groups: [apps] network is off on this node",
                                    app_id);
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        int r = m ? group_move_locked(n, m, group_id, err)
                  : na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: not on this node's network", app_id);
        pthread_mutex_unlock(&n->lock);
        return r;
}

int app_net_prepare(struct app_net *n, const char *app_id, const char *rootfs, uint32_t uid, char *ret_netns,
                    size_t netns_len, char *ret_dir, size_t dir_len, struct na_error *err)
{
        ret_netns[0] = ret_dir[0] = '\0';
        if (!app_net_enabled(n))
                return 0;
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        char path[4200], dir[4200];
        snprintf(path, sizeof(path), "%s/%s", n->netns_dir, app_id);
        snprintf(dir, sizeof(dir), "%s/%s/net", n->apps_dir, app_id);
        struct mnl_socket *ns = NULL;
        int r = m ? 0 : na_error_set(err, ENOENT, NA_E_INTERNAL, "app %s: not on this node's network", app_id);
        if (r >= 0)
                r = app_net_ns_ensure(path, err);
        if (r >= 0)
                r = app_net_ns_rtnl(path, &ns, err);
        if (r >= 0) {
                NA_ANALYZER_FP("-Wanalyzer-null-dereference") /* m is not NULL when r >= 0: a missing member set r negative above */
                struct app_net_link_cfg cfg = { .addr = m->addr, .gateway = app_net_gateway(&n->range) };
                NA_ANALYZER_FP_END
                char ifname[NA_IFNAME_LEN];
                app_net_ifname(app_id, ifname);
                cfg.ifname = ifname;
                r = app_net_link_setup(n->rtnl, ns, path, &cfg, err);
        }
        if (ns)
                mnl_socket_close(ns);
        if (r >= 0)
                r = write_hosts(n, m, err);
        _cleanup_free_ char *host_resolv = NULL;
        if (r >= 0) {
                struct na_error e = NA_ERROR_INIT;
                (void)na_read_file(n->resolv_conf, 1u << 16, &host_resolv, NULL, &e);
                na_error_clear(&e);
                _cleanup_free_ char *text = app_net_resolv_render(host_resolv, n->resolver);
                r = text ? app_net_write_file(dir, "resolv.conf", text, 0644, err) : na_error_sys(err, ENOMEM, "resolv");
        }
        if (r >= 0)
                r = app_net_root_links(rootfs, uid, err);
        pthread_mutex_unlock(&n->lock);
        if (r < 0)
                return na_error_prefix(err, "app %s: network", app_id);
        snprintf(ret_netns, netns_len, "%s", path);
        snprintf(ret_dir, dir_len, "%s", dir);
        return 0;
}

int app_net_forget(struct app_net *n, const char *app_id, struct na_error *err)
{
        if (!app_net_enabled(n))
                return 0;
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        int r = 0;
        if (m && json_array_size(m->exposures) > 0)
                r = app_net_exposures_drop_all(n, m, err);
        if (r >= 0 && m)
                r = group_move_locked(n, m, NULL, err);
        char ifname[NA_IFNAME_LEN], path[4200];
        app_net_ifname(app_id, ifname);
        snprintf(path, sizeof(path), "%s/%s", n->netns_dir, app_id);
        if (r >= 0)
                r = app_net_link_delete(n->rtnl, ifname, err);
        if (r >= 0)
                r = app_net_ns_remove(path, err);
        if (r >= 0 && m) {
                drop_member(n, m);
                r = app_net_save(n, true, err);
        }
        if (r >= 0) {
                snprintf(path, sizeof(path), "%s/%s/exposures.json", n->apps_dir, app_id);
                (void)unlink(path);
        }
        pthread_mutex_unlock(&n->lock);
        return r < 0 ? na_error_prefix(err, "app %s: network", app_id) : 0;
}

int app_net_address(struct app_net *n, const char *app_id, char buf[16], struct na_error *err)
{
        if (!app_net_enabled(n))
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "app %s: [apps] network is off on this node", app_id);
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        if (m)
                app_net_addr_str(m->addr, buf);
        pthread_mutex_unlock(&n->lock);
        return m ? 0 : na_error_set(err, ENOENT, NA_E_INTERNAL, "app %s: no address on this node", app_id);
}
