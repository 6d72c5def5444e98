/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The node's drivers and the hooks between them. Each module stays ignorant of the
 * others: the VM handlers call vps_added/vps_removed, and this file turns those into
 * metrics tracking and the removal of the server's firewall chains.
 */
#include "agent/base/services.h"
#include "agent/daemon/selfpath.h"

#include <errno.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/console/consoles.h"
#include "agent/daemon/collector.h"
#include "agent/base/config.h"
#include "agent/base/log.h"
#include "agent/daemon/routes.h"
#include "agent/daemon/sftpd-service.h"
#include "agent/daemon/vm-module-load.h"
#include "common/names.h"
#include "common/timeutil.h"
#include "drivers/app.h"
#include "transfer/transfer.h"
#include "drivers/vm.h"
#include "firewall/fw.h"
#include "metrics/metrics.h"
#include "proto/vps.h"

static bool vps_exists(const struct agent_services *s, const char *vps_id)
{
        return s->vm && s->vm->exists(s->vm_conn, vps_id);
}

static void track(const struct agent_services *s, const char *vps_id, int vcpus, int64_t memory_mb)
{
        if (!s->metrics)
                return;
        struct metrics_target_spec spec = {
                .kind = METRICS_VPS,
                .id = vps_id,
                .vcpus = vcpus > 0 ? (unsigned)vcpus : 0,
                .memory_limit_bytes = memory_mb > 0 ? (uint64_t)memory_mb << 20 : 0,
        };
        struct na_error err = NA_ERROR_INIT;
        if (metrics_track(s->metrics, &spec, &err) < 0)
                log_warn("vps %s: metrics: %s", vps_id, err.message);
        na_error_clear(&err);
}

static void vps_added(const struct agent_services *s, const char *vps_id, int vcpus, int64_t memory_mb)
{
        track(s, vps_id, vcpus, memory_mb);
}

static void vps_removed(const struct agent_services *s, const char *vps_id)
{
        struct na_error err = NA_ERROR_INIT;
        if (s->metrics && metrics_untrack(s->metrics, METRICS_VPS, vps_id, true, &err) < 0)
                log_warn("vps %s: metrics: %s", vps_id, err.message);
        na_error_clear(&err);
        if (s->fw && fw_remove(s->fw, vps_id, &err) < 0)
                log_warn("vps %s: firewall chains left behind: %s", vps_id, err.message);
        na_error_clear(&err);
        if (s->fw && fw_guard_remove(s->fw, vps_id, &err) < 0)
                log_warn("vps %s: anti-spoofing chains left behind: %s", vps_id, err.message);
        na_error_clear(&err);
}

/* The guard of a server's addresses (firewall/fw-guard.c): before it starts, when they change. */
static int guard_set(const struct agent_services *s, const char *vps_id, const char *mac, const char *const *addrs,
                     size_t n, struct na_error *err)
{
        if (!s->fw)
                return 0; /* [firewall] enabled = false: no guard either (docs/firewall.md) */
        return fw_guard_set(s->fw, vps_id, mac, addrs, n, err);
}

static int vm_network_changed(void *userdata, const char *vps_id, const char *mac, const struct proto_vps_network *net,
                              struct na_error *err)
{
        const char *addrs[PROTO_VPS_IPS_MAX];
        size_t n = 0;
        for (size_t i = 0; i < net->n_ipv4; i++)
                addrs[n++] = net->ipv4[i].text;
        for (size_t i = 0; i < net->n_ipv6; i++)
                addrs[n++] = net->ipv6[i].text;
        int r = guard_set(userdata, vps_id, mac, addrs, n, err);
        if (r == -ENOENT || r == -ENODEV) {
                /* A kernel before 6.16 binds no netdev chain to a device that does not exist
                 * yet: the guard is set at the server's start, when its tap exists (the
                 * driver calls again then), before the guest's kernel has booted. */
                log_debug("vps %s: anti-spoofing guard waits for the tap: %s", vps_id, err->message);
                na_error_clear(err);
                r = 0;
        }
        return r;
}

/* Libvirt's event thread: a server changed state. */
static void vm_state_changed(void *userdata, const char *vps_id, enum proto_vps_state state)
{
        struct agent_services *s = userdata;
        if (s->emit_event)
                s->emit_event(s, "vps.state", vps_id, json_pack("{s:s}", "state", proto_vps_state_name(state)));
}

/* The drivers this agent has, by kind; [vm] driver picks one by name ("none": no servers).
 * A VM driver is a module, loaded only when configured (agent/daemon/vm-module-load.h). */
static const char *const vm_drivers[] = { "libvirt" };

static int find_driver(const char *kind, const char *name, const char *const *names, size_t n, size_t *ret,
                       struct na_error *err)
{
        char known[256] = "none";
        for (size_t i = 0; i < n; i++) {
                if (streq(names[i], name)) {
                        *ret = i;
                        return 1;
                }
                size_t len = strlen(known);
                snprintf(known + len, sizeof(known) - len, ", %s", names[i]);
        }
        if (streq(name, "none"))
                return 0;
        return na_error_set(err, EINVAL, NA_E_INTERNAL, "[%s] driver: unknown driver '%s' (this agent has: %s)", kind,
                            name, known);
}

static int open_vm(struct agent_services *s, struct na_error *err)
{
        const struct agent_config *cfg = s->config;
        size_t which;
        int r = find_driver("vm", cfg->vm_driver ? cfg->vm_driver : "libvirt", vm_drivers, ARRAY_SIZE(vm_drivers),
                            &which, err);
        if (r <= 0)
                return r;
        const struct vm_driver *drv;
        r = vm_module_load(vm_drivers[which], &drv, err);
        if (r < 0)
                return na_error_prefix(err, "[vm] driver %s", vm_drivers[which]);
        struct vm_options o = {
                .uri = cfg->vm_uri,
                .state_dir = cfg->state_dir,
                .templates_file = cfg->templates_file,
                .images_dir = cfg->images_dir,
                .storage_dir = cfg->vm_storage_dir,
                .backups_dir = cfg->vm_backups_dir,
                .domain_type = cfg->vm_domain_type,
                .start_stagger_ms = (unsigned)cfg->vm_restart_stagger_sec * 1000,
                .guest_agent_timeout_sec = (unsigned)cfg->vm_guest_agent_timeout_sec,
                .on_state = vm_state_changed,
                .on_network = vm_network_changed,
                .userdata = s,
                .network = {
                        .mode = cfg->vm_network_mode && streq(cfg->vm_network_mode, "bridged") ? VM_NET_BRIDGED
                                                                                               : VM_NET_ROUTED,
                        .bridge = cfg->vm_bridge,
                        .gateway4 = cfg->vm_gateway4,
                        .gateway6 = cfg->vm_gateway6,
                        .uplink = cfg->vm_uplink,
                },
                /* libvirtd down at start must not keep the agent (and node.status,
                 * firewall, metrics) down: server jobs fail with DRIVER_ERROR until
                 * the driver's reconnect timer gets through. */
                .connect_later = true,
        };
        r = drv->open(&o, &s->vm_conn, err);
        if (r < 0)
                return na_error_prefix(err, "[vm] %s driver, uri %s", drv->name, cfg->vm_uri);
        s->vm = drv;
        return 0;
}

/* ---- apps ---- */

static const struct app_driver *const app_drivers[] = { &app_oci_driver };

/* The driver's thread: an app changed state or ended. */
static void app_event(void *userdata, const char *type, const char *app_id, json_t *data)
{
        struct agent_services *s = userdata;
        if (s->emit_event)
                s->emit_event(s, type, app_id, data);
        else if (data)
                json_decref(data);
}

/* File access to an app ended (drivers/app.h): its live file sessions end. */
static void app_files_off(void *userdata, const char *app_id, const char *reason)
{
        struct agent_services *s = userdata;
        consoles_files_end(s->consoles, app_id, reason);
}

/* An app's cgroup appeared or went: metrics follow it. */
static void app_cgroup(void *userdata, const char *app_id, const char *cgroup, double cpu_cores, int64_t memory_mb)
{
        struct agent_services *s = userdata;
        if (!s->metrics)
                return;
        struct na_error err = NA_ERROR_INIT;
        if (!cgroup) {
                if (metrics_untrack(s->metrics, METRICS_APP, app_id, true, &err) < 0 && err.errnum != ENOENT)
                        log_warn("app %s: metrics: %s", app_id, err.message);
        } else {
                /* The host side of its veth, where app networks are on (else the app
                 * has no interface of its own to count). */
                char ifname[NA_IFNAME_LEN] = "";
                if (s->config->apps_network && s->config->apps_network[0])
                        na_app_ifname(app_id, ifname);
                struct metrics_target_spec spec = {
                        .kind = METRICS_APP,
                        .id = app_id,
                        .cgroup = cgroup,
                        .ifname = ifname[0] ? ifname : NULL,
                        .vcpus = cpu_cores >= 1 ? (unsigned)cpu_cores : 1,
                        .memory_limit_bytes = memory_mb > 0 ? (uint64_t)memory_mb << 20 : 0,
                };
                if (metrics_track(s->metrics, &spec, &err) < 0)
                        log_warn("app %s: metrics: %s", app_id, err.message);
        }
        na_error_clear(&err);
}

/* An executable file named name on PATH, into buf. */
static bool find_on_path(const char *name, char *buf, size_t len)
{
        const char *path = getenv("PATH");
        if (!path || !*path)
                path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, ":");
                if (n && (size_t)snprintf(buf, len, "%.*s/%s", (int)n, p, name) < len && buf[0] == '/' &&
                    access(buf, X_OK) == 0)
                        return true;
                p += n + (p[n] == ':');
        }
        return false;
}

/* nodeagent-sftpd when [apps] sftp_listen is set (agent/daemon/sftpd-service.h); without it SFTP is off, apps are not. */
static void start_sftpd(struct agent_services *s)
{
        const struct agent_config *cfg = s->config;
        if (!cfg->apps_sftp_listen || !*cfg->apps_sftp_listen)
                return;
        char bin[PATH_MAX];
        struct na_error err = NA_ERROR_INIT;
        int r = 0;
        if (cfg->apps_sftpd)
                snprintf(bin, sizeof(bin), "%s", cfg->apps_sftpd);
        else
                r = agent_beside_exe(NA_LIBEXEC_RELDIR, "nodeagent-sftpd", bin, sizeof(bin), &err);
        if (r >= 0 && access(bin, X_OK) < 0)
                r = na_error_sys(&err, errno, "[apps] sftpd %s", bin);
        if (r >= 0)
                r = agent_sftpd_start(cfg, bin, &s->sftpd, &err);
        if (r < 0)
                log_error("sftp is off on this node: %s", err.message);
        na_error_clear(&err);
}

static int open_apps(struct agent_services *s, struct na_error *err)
{
        const struct agent_config *cfg = s->config;
        if (!cfg->apps_enabled) {
                snprintf(s->apps_off_reason, sizeof(s->apps_off_reason), "[apps] enabled = false");
                return 0;
        }
        static char runtime[PATH_MAX], monitor[PATH_MAX];
        if (cfg->apps_runtime)
                snprintf(runtime, sizeof(runtime), "%s", cfg->apps_runtime);
        else if (!find_on_path("crun", runtime, sizeof(runtime)))
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "no crun on PATH (install crun, or set [apps] runtime)");
        if (access(runtime, X_OK) < 0)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "[apps] runtime %s: %s", runtime, strerror(errno));
        if (cfg->apps_monitor)
                snprintf(monitor, sizeof(monitor), "%s", cfg->apps_monitor);
        else if (agent_beside_exe(NA_LIBEXEC_RELDIR, "nodeagent-monitor", monitor, sizeof(monitor), err) < 0)
                return na_error_prefix(err, "[apps] monitor");
        if (access(monitor, X_OK) < 0)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "[apps] monitor %s: %s", monitor, strerror(errno));
        /* Domain routing is not a reason to keep apps off: without it domains stay pending. */
        struct na_error rerr = NA_ERROR_INIT;
        if (agent_routes_open(cfg, &s->routes, &rerr) < 0) {
                log_error("domain routing is off on this node: %s", rerr.message);
                na_error_clear(&rerr);
        }
        struct app_options o = {
                .routes = agent_routes_table(s->routes),
                .state_dir = cfg->state_dir,
                .storage_dir = cfg->apps_storage_dir,
                .images_dir = cfg->apps_images_dir,
                .runtime = runtime,
                .monitor = monitor,
                .registry = cfg->apps_registry,
                .registry_ca_file = cfg->apps_registry_ca_file,
                .allow_insecure_http = cfg->allow_insecure_http,
                .id_base = (uint32_t)cfg->apps_id_base,
                .start_stagger_ms = (unsigned)cfg->apps_restart_stagger_sec * 1000,
                .start_parallel = (unsigned)cfg->node_parallel_jobs,
                .on_event = app_event,
                .on_cgroup = app_cgroup,
                .on_files_off = app_files_off,
                .userdata = s,
                .backups_dir = cfg->apps_backups_dir,
                .network = cfg->apps_network,
                .public_address = cfg->apps_public_address,
                .ports = cfg->apps_ports,
                .resolver = cfg->apps_resolver,
                .apps_domain = cfg->apps_apps_domain,
                .net_table = cfg->apps_nft_table,
                .image_unpack_max_bytes = (uint64_t)cfg->apps_image_unpack_max_mb << 20,
                .image_unpack_max_files = (uint64_t)cfg->apps_image_unpack_max_files,
                .image_unpack_reserve_percent = (unsigned)cfg->apps_image_unpack_reserve_percent,
                .image_pull_max_bytes = (uint64_t)cfg->apps_image_pull_max_mb << 20,
                .output_lines_per_sec = (unsigned)cfg->apps_output_lines_per_sec,
                .monitor_memory_mb = (unsigned)cfg->apps_monitor_memory_mb,
                .io = { .read_bps = (uint64_t)cfg->apps_io_read_mbps << 20,
                        .write_bps = (uint64_t)cfg->apps_io_write_mbps << 20,
                        .read_iops = (uint64_t)cfg->apps_io_read_iops,
                        .write_iops = (uint64_t)cfg->apps_io_write_iops },
        };
        if (cfg->apps_crash_backoff_ms)
                (void)config_parse_backoff(cfg->apps_crash_backoff_ms, o.crash_backoff_ms);
        const struct app_driver *drv = app_drivers[0];
        int r = drv->open(&o, &s->app_conn, err);
        if (r < 0) {
                agent_routes_close(s->routes);
                s->routes = NULL;
                return na_error_prefix(err, "[apps] %s driver", drv->name);
        }
        s->app = drv;
        start_sftpd(s);
        agent_routes_start(s->routes, s);
        return 0;
}

static int open_metrics(struct agent_services *s, struct na_error *err)
{
        const struct agent_config *cfg = s->config;
        /* A tracked target keeps a few cgroup files open: allow many descriptors. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_warn("metrics: cannot raise the open file limit to %llu (%s); with many servers and apps "
                                 "some cgroup files may not open",
                                 (unsigned long long)rl.rlim_max, strerror(errno));
        }
        struct metrics_options o = {
                .state_dir = cfg->state_dir,
                .proc_root = cfg->metrics_proc_root,
                .sys_root = cfg->metrics_sys_root,
                .cgroup_root = cfg->metrics_cgroup_root,
                .interval_sec = (unsigned)cfg->metrics_interval_sec,
        };
        int r = metrics_open(&o, &s->metrics, err);
        if (r < 0)
                return na_error_prefix(err, "metrics");
        r = collector_start(s->metrics, (unsigned)cfg->metrics_interval_sec, &s->collector, err);
        if (r < 0)
                return r;
        return 0;
}

static int open_firewall(struct agent_services *s, struct na_error *err)
{
        const struct agent_config *cfg = s->config;
        if (!cfg->fw_enabled)
                return 0;
        struct fw_options o = { .table = cfg->fw_table, .shards = (unsigned)cfg->fw_shards, .state_dir = cfg->state_dir,
                                .netns_fd = -1 };
        int r = fw_open(&o, &s->fw, err);
        return r < 0 ? na_error_prefix(err, "firewall (tables inet %s-NN)", cfg->fw_table) : 0;
}

int services_open(struct agent_services *s, struct na_error *err)
{
        s->vps_exists = vps_exists;
        s->vps_added = vps_added;
        s->vps_removed = vps_removed;
        int r = open_vm(s, err);
        if (r >= 0)
                r = open_firewall(s, err);
        if (r >= 0) {
                /* Apps that cannot open do not take servers, the firewall and metrics down
                 * with them: they are off, and app jobs say why. */
                struct na_error aerr = NA_ERROR_INIT;
                if (open_apps(s, &aerr) < 0) {
                        log_error("apps are off on this node: %s", aerr.message);
                        snprintf(s->apps_off_reason, sizeof(s->apps_off_reason), "%s", aerr.message);
                }
                na_error_clear(&aerr);
        }
        if (r >= 0)
                r = open_metrics(s, err);
        if (r < 0)
                services_close(s);
        return r;
}

/*
 * Re-apply every stored firewall and remove the chains of servers this node no
 * longer has. Without an inventory (libvirtd not reachable yet) nothing is removed.
 */
static void reconcile_firewall(struct agent_services *s, json_t *inventory)
{
        if (!s->fw)
                return;
        const char **ids = NULL;
        if (inventory) {
                ids = calloc(json_array_size(inventory) + 1, sizeof(*ids));
                size_t i;
                json_t *item;
                json_array_foreach(inventory, i, item) {
                        if (ids)
                                ids[i] = json_string_value(json_object_get(item, "id"));
                }
        }
        struct fw_reconcile_stats st = { 0 };
        struct na_error err = NA_ERROR_INIT;
        if (fw_reconcile(s->fw, inventory ? ids : NULL, &st, &err) < 0)
                log_error("firewall: re-applying the stored configurations: %s", err.message);
        else
                log_info("firewall: %zu server(s) re-applied, %zu of gone servers removed, %zu refused by the kernel",
                         st.applied, st.removed, st.failed);
        if (st.failed)
                log_error("firewall: %zu server(s) run unfiltered: the kernel refused their stored rules", st.failed);
        na_error_clear(&err);
        free(ids);
}

void services_start(struct agent_services *s)
{
        struct na_error err = NA_ERROR_INIT;
        if (s->app)
                s->app->resume(s->app_conn); /* on the driver's thread: re-attach, restart after a reboot */
        if (s->metrics) {
                if (metrics_prune(s->metrics, na_now_real_ms(), &err) < 0)
                        log_warn("metrics: %s", err.message);
                na_error_clear(&err);
        }
        if (!s->vm) {
                reconcile_firewall(s, NULL);
                return;
        }
        json_t *inv = NULL;
        if (s->vm->inventory(s->vm_conn, &inv, &err) < 0) {
                log_warn("vm: inventory at start: %s", err.message);
                na_error_clear(&err);
                inv = NULL;
        }
        size_t i;
        json_t *item;
        unsigned servers = 0;
        json_array_foreach(inv, i, item) {
                const char *id = json_string_value(json_object_get(item, "id"));
                struct proto_vps_server srv;
                if (!id)
                        continue;
                servers++;
                if (s->vm->get_server(s->vm_conn, id, &srv, &err) == 0) {
                        track(s, id, (int)(srv.plan.cpu_cores * srv.plan.cpu_threads), srv.plan.ram_mb);
                        /* The guard again (a node reboot emptied the kernel's tables). */
                        const char *addrs[PROTO_VPS_IPS_MAX];
                        for (size_t k = 0; k < srv.n_ip_addresses; k++)
                                addrs[k] = srv.ip_addresses[k];
                        if (srv.n_ip_addresses && guard_set(s, id, srv.mac, addrs, srv.n_ip_addresses, &err) < 0)
                                log_error("vps %s: anti-spoofing guard: %s", id, err.message);
                } else
                        track(s, id, 0, 0);
                na_error_clear(&err);
        }
        reconcile_firewall(s, inv);
        json_decref(inv);
        /* After the firewall: servers started again are filtered from their first packet. */
        if (s->vm->resume_servers(s->vm_conn, false, NULL, &err) < 0)
                log_warn("vm: starting servers again after a node reboot: %s", err.message);
        na_error_clear(&err);
        log_info("vm: %s, %u server(s) on this node", s->vm->uri(s->vm_conn), servers);
}

void services_close(struct agent_services *s)
{
        agent_sftpd_stop(s->sftpd);
        s->sftpd = NULL;
        agent_routes_stop(s->routes);
        if (s->app)
                s->app->close(s->app_conn); /* the apps keep running */
        agent_routes_close(s->routes); /* HAProxy keeps running: routes survive the agent */
        s->routes = NULL;
        s->app = NULL;
        s->app_conn = NULL;
        collector_stop(s->collector);
        s->collector = NULL;
        metrics_close(s->metrics);
        s->metrics = NULL;
        fw_close(s->fw); /* the rules stay in force */
        s->fw = NULL;
        if (s->vm)
                s->vm->close(s->vm_conn);
        s->vm = NULL;
        s->vm_conn = NULL;
}

json_t *services_inventory(struct agent_services *s)
{
        json_t *vps = NULL;
        struct na_error err = NA_ERROR_INIT;
        if (s->vm && s->vm->inventory(s->vm_conn, &vps, &err) < 0) {
                log_warn("vm: inventory: %s", err.message);
                vps = NULL;
        }
        na_error_clear(&err);
        json_t *apps = NULL;
        if (s->app && s->app->inventory(s->app_conn, &apps, &err) < 0) {
                log_warn("apps: inventory: %s", err.message);
                apps = NULL;
        }
        na_error_clear(&err);
        return json_pack("{s:o, s:o}", "vps", vps ? vps : json_array(), "apps", apps ? apps : json_array());
}

json_t *services_capabilities(struct agent_services *s)
{
        return json_pack("{s:s, s:s, s:s, s:s}", "vmDriver", s->vm ? s->vm->name : "none", "vmDriverUri",
                         s->vm ? s->vm->uri(s->vm_conn) : "", "appDriver", s->app ? s->app->name : "none", "firewall",
                         s->fw ? "nftables" : "none");
}

json_t *services_metrics_samples(struct agent_services *s)
{
        return s->metrics ? metrics_latest_json(s->metrics) : NULL;
}

const char *services_cgroup_mode(struct agent_services *s)
{
        return s->metrics ? metrics_cgroup_mode(s->metrics) : "none";
}

void services_set_metrics_interval(struct agent_services *s, unsigned interval_sec)
{
        if (!s->metrics || !interval_sec)
                return;
        metrics_set_interval(s->metrics, interval_sec);
        collector_set_interval(s->collector, interval_sec);
}

void services_transfer_options(const struct agent_services *s, struct transfer_options *ret)
{
        const struct agent_config *cfg = s ? s->config : NULL;
        *ret = (struct transfer_options){ 0 };
        if (!cfg)
                return;
        ret->ca_file = cfg->apps_transfer_ca_file;
        ret->allow_insecure_http = cfg->allow_insecure_http;
        if (cfg->apps_transfer_part_size_mb > 0)
                ret->part_size = (uint64_t)cfg->apps_transfer_part_size_mb << 20;
}

int services_apps_on(const struct agent_services *s, const char *id, struct na_error *err)
{
        if (s && s->app)
                return 0;
        const char *why = s && s->apps_off_reason[0] ? s->apps_off_reason : "no container runtime";
        na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: apps are off on this node: %s", id && *id ? id : "-", why);
        na_error_detail(err, "reason", json_string(why));
        return -ENOTSUP;
}
