/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A server's domain once it exists: power (converging), status, the Server view,
 * upgrade, delete, the hello inventory and the starts after a node reboot.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/names.h"
#include "common/timeutil.h"
#include "common/uuid.h"

#define POLL_MS 250

bool vm_lv_exists(struct vm_conn *c, const char *id)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        struct na_error e = NA_ERROR_INIT;
        bool ok = vm_domain_get(c, id, &dom, &e) == 0;
        na_error_clear(&e);
        return ok;
}

int vm_lv_want_running(struct vm_conn *c, const char *id, bool running, struct na_error *err)
{
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        int r = vm_meta_load(c->meta_dir, id, &m, err);
        if (r == -ENOENT)
                return 0; /* a domain the agent did not create: nothing to remember */
        if (r < 0)
                return r;
        if (m.want_running == running)
                return 0;
        m.want_running = running;
        return vm_meta_save(c->meta_dir, &m, err);
}

int vm_lv_force_off(struct vm_conn *c, const char *id, virDomainPtr dom, struct na_error *err)
{
        bool active = false;
        int r = vm_domain_state(c, id, dom, NULL, &active, err);
        if (r < 0)
                return r;
        if (active && virDomainDestroy(dom) < 0) {
                /* It may have stopped on its own meanwhile. */
                bool still = true;
                struct na_error e2 = NA_ERROR_INIT;
                if (vm_domain_state(c, id, dom, NULL, &still, &e2) == 0 && !still) {
                        virResetLastError();
                        na_error_clear(&e2);
                } else {
                        na_error_clear(&e2);
                        return vm_virt_error(err, id, "force off");
                }
        }
        vm_mem_started(c, id, 0);
        return 0;
}

int vm_lv_start(struct vm_conn *c, const char *id, virDomainPtr dom, struct na_error *err)
{
        int state = 0, reason = 0;
        if (virDomainGetState(dom, &state, &reason, 0) < 0)
                return vm_virt_error(err, id, "read state");
        switch (state) {
        case VIR_DOMAIN_RUNNING:
        case VIR_DOMAIN_BLOCKED:
        case VIR_DOMAIN_SHUTDOWN:
                break;
        case VIR_DOMAIN_PAUSED:
                if (virDomainResume(dom) < 0)
                        return vm_virt_error(err, id, "resume");
                break;
        case VIR_DOMAIN_PMSUSPENDED:
                if (virDomainPMWakeup(dom, 0) < 0)
                        return vm_virt_error(err, id, "wake up");
                break;
        default:
                if (virDomainCreate(dom) < 0)
                        return vm_virt_error(err, id, "start");
                vm_mem_started(c, id, (int64_t)na_now_real_ms());
                break;
        }
        /* Its tap exists now: routes and neighbour answers (routed mode), also when it ran already. */
        return vm_lv_host_network_of(c, id, err);
}

/* Wait up to ms for the domain to be off; 1 when it is, 0 when not yet. */
static int wait_off(struct vm_conn *c, const char *id, virDomainPtr dom, uint64_t ms,
                    const struct na_progress *progress, struct na_error *err)
{
        uint64_t until = na_now_mono_us() + ms * 1000;
        for (;;) {
                bool active = true;
                int r = vm_domain_state(c, id, dom, NULL, &active, err);
                if (r < 0)
                        return r;
                if (!active)
                        return 1;
                if (na_now_mono_us() >= until)
                        return 0;
                if ((r = na_progress_checkpoint(progress, err)) < 0)
                        return r;
                struct timespec ts = { 0, POLL_MS * 1000L * 1000L };
                nanosleep(&ts, NULL);
        }
}

static int power_stop(struct vm_conn *c, const char *id, virDomainPtr dom, unsigned grace_sec,
                      const struct na_progress *progress, struct na_error *err)
{
        int state = 0, reason = 0;
        if (virDomainGetState(dom, &state, &reason, 0) < 0)
                return vm_virt_error(err, id, "read state");
        if (state == VIR_DOMAIN_SHUTOFF || state == VIR_DOMAIN_CRASHED || state == VIR_DOMAIN_NOSTATE)
                return 0;
        /* A paused guest cannot answer the power button: it goes off at once. */
        if (state != VIR_DOMAIN_PAUSED && state != VIR_DOMAIN_PMSUSPENDED && grace_sec > 0) {
                if (virDomainShutdownFlags(dom, VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN) < 0) {
                        /* Some drivers only know their default method. */
                        virResetLastError();
                        if (virDomainShutdown(dom) < 0) {
                                int r = vm_domain_state(c, id, dom, NULL, NULL, err);
                                if (r < 0)
                                        return r;
                                virResetLastError();
                        }
                }
                int r = wait_off(c, id, dom, (uint64_t)grace_sec * 1000, progress, err);
                if (r < 0)
                        return r;
                if (r == 1) {
                        vm_mem_started(c, id, 0);
                        return 0;
                }
        }
        return vm_lv_force_off(c, id, dom, err);
}

int vm_lv_power(struct vm_conn *c, const char *id, enum proto_vps_power_action action, unsigned grace_sec,
                const struct na_progress *progress, enum proto_vps_state *ret_state, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        if ((r = vm_refuse_installing(c, id, err)) < 0)
                return r;
        bool want = action == PROTO_VPS_POWER_START || action == PROTO_VPS_POWER_REBOOT;
        if ((r = vm_lv_want_running(c, id, want, err)) < 0)
                return r;

        switch (action) {
        case PROTO_VPS_POWER_START:
                r = vm_lv_start(c, id, dom, err);
                break;
        case PROTO_VPS_POWER_STOP:
                r = power_stop(c, id, dom, grace_sec, progress, err);
                break;
        case PROTO_VPS_POWER_FORCE_STOP:
                r = vm_lv_force_off(c, id, dom, err);
                break;
        case PROTO_VPS_POWER_REBOOT:
                /*
                 * A cold reboot: the power button, off by force after graceSec, then a
                 * start. virDomainReboot only asks the guest (ACPI), which a hung guest
                 * ignores while the call succeeds; and a warm reboot inside the same qemu
                 * would not apply a plan change that waits for a restart (vps.upgrade).
                 * Rebooting a stopped server starts it.
                 */
                r = power_stop(c, id, dom, grace_sec, progress, err);
                if (r >= 0)
                        r = vm_lv_start(c, id, dom, err);
                break;
        default:
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vps %s: unknown power action %d", id, (int)action);
        }
        if (r < 0)
                return r;
        return vm_domain_state(c, id, dom, ret_state, NULL, err);
}

/* When a running domain started: what we saw, else the qemu pid file's time. */
static int64_t started_ms(struct vm_conn *c, const char *id)
{
        int64_t ms = vm_mem_started_get(c, id);
        if (ms > 0 || c->is_test)
                return ms;
        static const char *const dirs[] = { "/run/libvirt/qemu", "/var/run/libvirt/qemu" };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                char path[256];
                struct stat st;
                snprintf(path, sizeof(path), "%s/vps-%s.pid", dirs[i], id);
                if (stat(path, &st) == 0) {
                        ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
                        vm_mem_started(c, id, ms);
                        return ms;
                }
        }
        return 0;
}

int vm_lv_status(struct vm_conn *c, const char *id, struct proto_vps_status *ret, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        virDomainInfo info;
        int state = 0, reason = 0;
        if (virDomainGetInfo(dom, &info) < 0 || virDomainGetState(dom, &state, &reason, 0) < 0)
                return vm_virt_error(err, id, "read status");
        memset(ret, 0, sizeof(*ret));
        ret->state = vm_state_from_virt(c, id, state, reason);
        bool active = state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_CRASHED && state != VIR_DOMAIN_NOSTATE;
        if (active) {
                ret->cpu_time_ns = info.cpuTime;
                ret->memory_mb = (int64_t)(info.memory / 1024);
                int64_t since = started_ms(c, id), now = (int64_t)na_now_real_ms();
                ret->uptime_sec = since > 0 && now > since ? (now - since) / 1000 : 0;
        }
        return 0;
}

static void fill_from_meta(struct proto_vps_server *s, const struct vm_meta *m)
{
        snprintf(s->name, sizeof(s->name), "%s", m->name);
        snprintf(s->hostname, sizeof(s->hostname), "%s", m->hostname);
        s->plan = m->plan;
        snprintf(s->template_id, sizeof(s->template_id), "%s", m->template_id);
        snprintf(s->image_slug, sizeof(s->image_slug), "%s", m->image_slug);
        s->os = m->os;
        s->created_at_ms = m->created_at_ms;
        /* The assignment, not what ARP happens to show (4.1). */
        s->n_ip_addresses = 0;
        for (size_t i = 0; i < m->network.n_ipv4 + m->network.n_ipv6 && m->has_network; i++) {
                const struct proto_vps_addr *a =
                        i < m->network.n_ipv4 ? &m->network.ipv4[i] : &m->network.ipv6[i - m->network.n_ipv4];
                snprintf(s->ip_addresses[s->n_ip_addresses++], sizeof(s->ip_addresses[0]), "%s", a->text);
        }
}

int vm_lv_get_server(struct vm_conn *c, const char *id, struct proto_vps_server *ret, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->id, sizeof(ret->id), "%s", id);
        bool active = false;
        if ((r = vm_domain_state(c, id, dom, &ret->state, &active, err)) < 0)
                return r;
        vm_mac_from_id(id, ret->mac);
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        r = vm_meta_load(c->meta_dir, id, &m, err);
        if (r == 0)
                fill_from_meta(ret, &m);
        else if (r == -ENOENT) {
                /* A domain the agent did not create: what libvirt knows. */
                virDomainInfo info;
                if (virDomainGetInfo(dom, &info) < 0)
                        return vm_virt_error(err, id, "read domain");
                ret->plan.cpu_cores = info.nrVirtCpu;
                ret->plan.cpu_threads = 1;
                ret->plan.ram_mb = (int64_t)(info.maxMem / 1024);
        } else
                return r;
        return 0;
}

int vm_lv_inventory(struct vm_conn *c, json_t **ret, struct na_error *err)
{
        _cleanup_virconn_ virConnectPtr conn = NULL;
        int r = vm_conn_get(c, &conn, err);
        if (r < 0)
                return r;
        virDomainStatsRecordPtr *stats = NULL;
        int n = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_STATE, &stats, 0);
        if (n < 0)
                return vm_virt_error(err, NULL, "list domains");
        json_t *list = json_array();
        for (int i = 0; i < n && list; i++) {
                const char *name = virDomainGetName(stats[i]->dom);
                if (!name || strncmp(name, "vps-", 4) != 0 || !na_uuid_valid(name + 4))
                        continue;
                int state = 0, reason = 0;
                virTypedParamsGetInt(stats[i]->params, stats[i]->nparams, "state.state", &state);
                virTypedParamsGetInt(stats[i]->params, stats[i]->nparams, "state.reason", &reason);
                json_array_append_new(list, json_pack("{s:s, s:s}", "id", name + 4, "state",
                                                      proto_vps_state_name(vm_state_from_virt(c, name + 4, state,
                                                                                              reason))));
        }
        virDomainStatsRecordListFree(stats);
        if (!list)
                return na_error_sys(err, ENOMEM, "inventory");
        *ret = list;
        return 0;
}

static int resume_run(struct vm_conn *c, unsigned *ret_started, struct na_error *err)
{
        _cleanup_virconn_ virConnectPtr conn = NULL;
        int r = vm_conn_get(c, &conn, err);
        if (r < 0)
                return r;
        virDomainStatsRecordPtr *stats = NULL;
        int n = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_STATE, &stats, 0);
        if (n < 0)
                return vm_virt_error(err, NULL, "list domains");
        unsigned started = 0;
        int result = 0;
        for (int i = 0; i < n; i++) {
                const char *name = virDomainGetName(stats[i]->dom);
                if (!name || strncmp(name, "vps-", 4) != 0 || !na_uuid_valid(name + 4))
                        continue;
                int state = 0;
                virTypedParamsGetInt(stats[i]->params, stats[i]->nparams, "state.state", &state);
                if (state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_CRASHED)
                        continue;
                const char *id = name + 4;
                struct vm_meta m;
                struct na_error e = NA_ERROR_INIT;
                bool want = false;
                if (vm_meta_load(c->meta_dir, id, &m, &e) == 0) {
                        want = m.want_running && !m.installing;
                        vm_meta_clear(&m);
                }
                na_error_clear(&e);
                if (!want)
                        continue;
                if (started > 0 && !vm_conn_sleep(c, c->stagger_ms))
                        break;
                if (virDomainCreate(stats[i]->dom) < 0) {
                        /* One server that does not start does not keep the others down. */
                        if (result == 0)
                                result = vm_virt_error(err, id, "start after node reboot");
                        else
                                virResetLastError();
                        continue;
                }
                vm_mem_started(c, id, (int64_t)na_now_real_ms());
                started++;
        }
        virDomainStatsRecordListFree(stats);
        if (ret_started)
                *ret_started = started;
        return result;
}

static void *resume_main(void *arg)
{
        struct vm_conn *c = arg;
        /* Until the hypervisor answers (it may come up after the agent); failures of single
         * servers are visible in the inventory and the state events. */
        for (;;) {
                virConnectPtr conn = NULL;
                struct na_error e = NA_ERROR_INIT;
                bool up = vm_conn_get(c, &conn, &e) == 0;
                if (conn)
                        virConnectClose(conn);
                na_error_clear(&e);
                if (up) {
                        resume_run(c, NULL, &e);
                        na_error_clear(&e);
                        return NULL;
                }
                if (!vm_conn_sleep(c, c->reconnect_ms))
                        return NULL;
        }
}

int vm_lv_resume_servers(struct vm_conn *c, bool wait, unsigned *ret_started, struct na_error *err)
{
        if (wait)
                return resume_run(c, ret_started, err);
        if (ret_started)
                *ret_started = 0;
        pthread_mutex_lock(&c->resume_lock);
        int r = 0;
        if (!c->resume_running) {
                r = pthread_create(&c->resume_thread, NULL, resume_main, c);
                c->resume_running = r == 0;
        }
        pthread_mutex_unlock(&c->resume_lock);
        if (r != 0)
                return na_error_sys(err, r, "start servers after node reboot");
        return 0;
}

void vm_lv_resume_join(struct vm_conn *c)
{
        pthread_mutex_lock(&c->resume_lock);
        bool running = c->resume_running;
        c->resume_running = false;
        pthread_mutex_unlock(&c->resume_lock);
        if (running)
                pthread_join(c->resume_thread, NULL);
}

int vm_lv_upgrade(struct vm_conn *c, const char *id, const struct proto_vps_plan *plan, struct proto_vps_server *ret,
                  bool *ret_restart_required, struct na_error *err)
{
        _cleanup_virconn_ virConnectPtr conn = NULL;
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get2(c, id, &conn, &dom, err);
        if (r < 0)
                return r;
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        if ((r = vm_meta_load_required(c, id, &m, err)) < 0)
                return r;
        if (plan->storage_mb < m.plan.storage_mb)
                return na_error_field(err, "plan.storageMB", "may only grow (the server has %lld MB)",
                                      (long long)m.plan.storage_mb);
        if (m.installing) {
                na_error_set(err, EBUSY, NA_E_INVALID_STATE, "vps %s: an install is unfinished", id);
                na_error_detail(err, "state", json_string("installing"));
                return -EBUSY;
        }
        bool active = false;
        if ((r = vm_domain_state(c, id, dom, NULL, &active, err)) < 0)
                return r;

        struct proto_vps_plan old = m.plan;
        if (plan->storage_mb > old.storage_mb && (r = vm_lv_disk_grow(c, id, dom, plan->storage_mb, err)) < 0)
                return r;
        m.plan = *plan;
        if ((r = vm_meta_save(c->meta_dir, &m, err)) < 0 || (r = vm_lv_define(c, conn, &m, err)) < 0)
                return r;

        bool restart = false;
        if (active) {
                restart = plan->cpu_cores != old.cpu_cores || plan->cpu_threads != old.cpu_threads ||
                          plan->ram_mb != old.ram_mb;
                if (plan->network_speed_mbps != old.network_speed_mbps) {
                        char ifname[NA_IFNAME_LEN];
                        na_vps_ifname(id, ifname);
                        unsigned int kb = (unsigned int)(plan->network_speed_mbps * 125);
                        virTypedParameter params[2];
                        memset(params, 0, sizeof(params));
                        snprintf(params[0].field, sizeof(params[0].field), "%s", VIR_DOMAIN_BANDWIDTH_IN_AVERAGE);
                        params[0].type = VIR_TYPED_PARAM_UINT;
                        params[0].value.ui = kb;
                        snprintf(params[1].field, sizeof(params[1].field), "%s", VIR_DOMAIN_BANDWIDTH_OUT_AVERAGE);
                        params[1].type = VIR_TYPED_PARAM_UINT;
                        params[1].value.ui = kb;
                        char mac[18];
                        vm_mac_from_id(id, mac);
                        if (virDomainSetInterfaceParameters(dom, mac, params, 2, VIR_DOMAIN_AFFECT_LIVE) < 0) {
                                virResetLastError();
                                restart = true; /* the defined limit applies from the next start */
                        }
                }
        }
        if (ret_restart_required)
                *ret_restart_required = restart;
        return vm_lv_get_server(c, id, ret, err);
}

int vm_lv_remove(struct vm_conn *c, const char *id, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0 && !streq(err->code, NA_E_VPS_NOT_FOUND))
                return r;
        na_error_clear(err);
        if (dom) {
                if ((r = vm_lv_force_off(c, id, dom, err)) < 0)
                        return r;
                unsigned flags = VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | VIR_DOMAIN_UNDEFINE_MANAGED_SAVE |
                                 VIR_DOMAIN_UNDEFINE_NVRAM | VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA;
                r = virDomainUndefineFlags(dom, flags);
                if (r < 0 && vm_virt_last_code() == VIR_ERR_INVALID_ARG) {
                        /* Drivers without NVRAM or checkpoints (the test driver) refuse those flags. */
                        virResetLastError();
                        r = virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                                                                VIR_DOMAIN_UNDEFINE_MANAGED_SAVE);
                }
                if (r < 0) {
                        int code = vm_virt_last_code();
                        if (code != VIR_ERR_NO_DOMAIN)
                                return vm_virt_error(err, id, "undefine");
                        virResetLastError();
                }
        }
        static const char *const suffixes[] = { ".qcow2", ".qcow2.new", "-seed.iso", "-seed.iso.partial",
                                                ".qcow2.restore", "-console.log", "-console.log.0",
                                                "-console.log.1", "-console.log.2" };
        for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
                _cleanup_free_ char *p = na_strdupf("%s/%s%s", c->storage_dir, id, suffixes[i]);
                if (!p)
                        return na_error_sys(err, ENOMEM, "vps %s: delete", id);
                if ((r = na_unlink(p, err)) < 0)
                        return na_error_prefix(err, "vps %s: delete", id);
        }
        if ((r = vm_lv_backups_remove_all(c, id, err)) < 0)
                return r;
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        if (vm_meta_load(c->meta_dir, id, &m, err) == 0)
                vm_lv_host_network_remove(c, &m);
        na_error_clear(err);
        if ((r = vm_meta_remove(c->meta_dir, id, err)) < 0)
                return r;
        vm_mem_started(c, id, 0);
        vm_mem_installing(c, id, false);
        vm_lv_pool_refresh(c);
        return 0;
}
