/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The libvirt VM driver: the connection (opened once, replaced when lost), libvirt
 * errors turned into ours, what the driver remembers between calls, and the one
 * const struct vm_driver table.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "common/fileio.h"
#include "common/names.h"
#include "common/timeutil.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_init_result;

static void silent_error(void *userdata, virErrorPtr error)
{
        /* Libraries do not print: errors reach callers through virGetLastError(). */
}

static void global_init(void)
{
        global_init_result = virInitialize();
        virSetErrorFunc(NULL, silent_error);
}

int vm_virt_last_code(void)
{
        virErrorPtr e = virGetLastError();
        return e ? e->code : VIR_ERR_OK;
}

int vm_virt_error(struct na_error *err, const char *id, const char *fmt, ...)
{
        char what[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        virErrorPtr e = virGetLastError();
        const char *msg = e && e->message ? e->message : "unknown libvirt error";
        int code = e ? e->code : VIR_ERR_INTERNAL_ERROR;
        const char *ours = NA_E_DRIVER;
        int errnum = EIO;
        switch (code) {
        case VIR_ERR_NO_DOMAIN:
                ours = NA_E_VPS_NOT_FOUND;
                errnum = ENOENT;
                break;
        case VIR_ERR_NO_DOMAIN_SNAPSHOT:
                ours = NA_E_SNAPSHOT_NOT_FOUND;
                errnum = ENOENT;
                break;
        case VIR_ERR_AGENT_UNRESPONSIVE:
        case VIR_ERR_AGENT_UNSYNCED:
                ours = NA_E_GUEST_AGENT;
                errnum = ETIMEDOUT;
                break;
        default:
                break;
        }
        if (id)
                na_error_set(err, errnum, ours, "vps %s: %s: %s", id, what, msg);
        else
                na_error_set(err, errnum, ours, "%s: %s", what, msg);
        if (streq(ours, NA_E_DRIVER) || streq(ours, NA_E_GUEST_AGENT))
                na_error_detail(err, "reason", json_string(msg));
        virResetLastError();
        return -errnum;
}

/* Open a fresh libvirt connection and hook events on it; c->lock held. */
static int connect_locked(struct vm_conn *c, struct na_error *err)
{
        virConnectPtr conn = virConnectOpen(c->uri);
        if (!conn)
                return vm_virt_error(err, NULL, "connect to %s", c->uri);
        const char *type = virConnectGetType(conn);
        c->is_test = type && strcasecmp(type, "test") == 0;
        vm_events_register(c, conn);
        c->virconn = conn;
        atomic_store(&c->dead, false);
        if (!c->pool_ready && !c->is_test && c->pool_name[0]) {
                struct na_error perr = NA_ERROR_INIT;
                /* A pool is a convenience for operators: disks are plain files either way. */
                if (vm_lv_pool_ensure(c, conn, &perr) == 0)
                        c->pool_ready = true;
                na_error_clear(&perr);
        }
        return 0;
}

static void disconnect_locked(struct vm_conn *c)
{
        if (!c->virconn)
                return;
        vm_events_deregister(c, c->virconn);
        virConnectClose(c->virconn);
        c->virconn = NULL;
}

int vm_conn_get(struct vm_conn *c, virConnectPtr *ret, struct na_error *err)
{
        pthread_mutex_lock(&c->lock);
        if (c->virconn && (atomic_load(&c->dead) || virConnectIsAlive(c->virconn) != 1))
                disconnect_locked(c);
        int r = 0;
        if (!c->virconn) {
                if (atomic_load(&c->closing))
                        r = na_error_set(err, ESHUTDOWN, NA_E_INTERNAL, "vm driver: closing");
                else
                        r = connect_locked(c, err);
        }
        if (r == 0) {
                virConnectRef(c->virconn);
                *ret = c->virconn;
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

int vm_domain_get2(struct vm_conn *c, const char *id, virConnectPtr *ret_conn, virDomainPtr *ret,
                   struct na_error *err)
{
        char name[64];
        if (na_vps_domain_name(id, name, sizeof(name)) < 0)
                return na_error_set(err, EINVAL, NA_E_VPS_NOT_FOUND, "vps %.40s: not a server id", id);
        _cleanup_virconn_ virConnectPtr conn = NULL;
        int r = vm_conn_get(c, &conn, err);
        if (r < 0)
                return r;
        virDomainPtr dom = virDomainLookupByName(conn, name);
        if (!dom) {
                if (vm_virt_last_code() == VIR_ERR_NO_DOMAIN) {
                        virResetLastError();
                        return na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: no such server on this node",
                                            id);
                }
                return vm_virt_error(err, id, "look up domain %s", name);
        }
        *ret = dom;
        if (ret_conn)
                *ret_conn = TAKE_PTR(conn);
        return 0;
}

int vm_domain_get(struct vm_conn *c, const char *id, virDomainPtr *ret, struct na_error *err)
{
        return vm_domain_get2(c, id, NULL, ret, err);
}

enum proto_vps_state vm_state_from_virt(struct vm_conn *c, const char *id, int state, int reason)
{
        if (id && vm_mem_is_installing(c, id))
                return PROTO_VPS_INSTALLING;
        switch (state) {
        case VIR_DOMAIN_RUNNING:
        case VIR_DOMAIN_BLOCKED:
        case VIR_DOMAIN_SHUTDOWN:
                return PROTO_VPS_RUNNING;
        case VIR_DOMAIN_PAUSED:
        case VIR_DOMAIN_PMSUSPENDED:
                return PROTO_VPS_PAUSED;
        case VIR_DOMAIN_CRASHED:
                return PROTO_VPS_CRASHED;
        case VIR_DOMAIN_SHUTOFF:
                return reason == VIR_DOMAIN_SHUTOFF_CRASHED ? PROTO_VPS_CRASHED : PROTO_VPS_STOPPED;
        default:
                return PROTO_VPS_STOPPED;
        }
}

int vm_domain_state(struct vm_conn *c, const char *id, virDomainPtr dom, enum proto_vps_state *ret, bool *ret_active,
                    struct na_error *err)
{
        int state = 0, reason = 0;
        if (virDomainGetState(dom, &state, &reason, 0) < 0)
                return vm_virt_error(err, id, "read state");
        if (ret)
                *ret = vm_state_from_virt(c, id, state, reason);
        if (ret_active)
                *ret_active = state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_CRASHED &&
                              state != VIR_DOMAIN_NOSTATE;
        return 0;
}

void vm_mem_started(struct vm_conn *c, const char *id, int64_t ms)
{
        pthread_mutex_lock(&c->mem_lock);
        if (ms > 0)
                json_object_set_new(c->started_ms, id, json_integer(ms));
        else
                json_object_del(c->started_ms, id);
        pthread_mutex_unlock(&c->mem_lock);
}

int64_t vm_mem_started_get(struct vm_conn *c, const char *id)
{
        pthread_mutex_lock(&c->mem_lock);
        int64_t v = json_integer_value(json_object_get(c->started_ms, id));
        pthread_mutex_unlock(&c->mem_lock);
        return v;
}

void vm_mem_installing(struct vm_conn *c, const char *id, bool installing)
{
        pthread_mutex_lock(&c->mem_lock);
        if (installing)
                json_object_set_new(c->installing, id, json_true());
        else
                json_object_del(c->installing, id);
        pthread_mutex_unlock(&c->mem_lock);
}

bool vm_mem_is_installing(struct vm_conn *c, const char *id)
{
        pthread_mutex_lock(&c->mem_lock);
        bool v = json_object_get(c->installing, id) != NULL;
        pthread_mutex_unlock(&c->mem_lock);
        return v;
}

int vm_refuse_installing(struct vm_conn *c, const char *id, struct na_error *err)
{
        if (!vm_mem_is_installing(c, id))
                return 0;
        na_error_set(err, EBUSY, NA_E_INVALID_STATE,
                     "vps %s: an install is unfinished; run the reinstall again or delete the server", id);
        na_error_detail(err, "state", json_string("installing"));
        return -EBUSY;
}

int vm_meta_load_required(struct vm_conn *c, const char *id, struct vm_meta *m, struct na_error *err)
{
        int r = vm_meta_load(c->meta_dir, id, m, err);
        if (r == -ENOENT)
                return na_error_set(err, ENOENT, NA_E_INVALID_STATE,
                                    "vps %s: the node has no installation record for this server", id);
        return r;
}

bool vm_conn_sleep(struct vm_conn *c, unsigned ms)
{
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&c->resume_lock);
        while (!atomic_load(&c->closing))
                if (pthread_cond_timedwait(&c->resume_cond, &c->resume_lock, &until) != 0)
                        break;
        bool open = !atomic_load(&c->closing);
        pthread_mutex_unlock(&c->resume_lock);
        return open;
}

static int note_installing(const char *id, void *data)
{
        struct vm_conn *c = data;
        struct vm_meta m;
        struct na_error e = NA_ERROR_INIT;
        if (vm_meta_load(c->meta_dir, id, &m, &e) == 0) {
                if (m.installing)
                        vm_mem_installing(c, id, true);
                vm_meta_clear(&m);
        }
        na_error_clear(&e);
        return 0;
}

/* Learn which installs were left unfinished (metadata written before a crash). */
static void scan_installing(struct vm_conn *c)
{
        vm_meta_foreach_id(c->meta_dir, note_installing, c);
}

static void conn_free(struct vm_conn *c)
{
        if (!c)
                return;
        vm_templates_free(c->templates);
        free(c->uri);
        free(c->state_dir);
        free(c->meta_dir);
        free(c->storage_dir);
        free(c->backups_dir);
        free(c->pool_name);
        free(c->domain_type);
        free(c->emulator);
        free(c->qemu_img);
        free((char *)c->net.bridge);
        free((char *)c->net.gateway4);
        free((char *)c->net.gateway6);
        free((char *)c->net.uplink);
        if (c->started_ms)
                json_decref(c->started_ms);
        if (c->installing)
                json_decref(c->installing);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->mem_lock);
        pthread_mutex_destroy(&c->net_lock);
        pthread_mutex_destroy(&c->cb_lock);
        pthread_cond_destroy(&c->cb_cond);
        pthread_mutex_destroy(&c->resume_lock);
        pthread_cond_destroy(&c->resume_cond);
        free(c);
}

/* A copy of a setting that is set (NULL when absent or empty); *oom when out of memory. */
static char *dup_set(const char *v, bool *oom)
{
        char *d = v && *v ? strdup(v) : NULL;
        if (v && *v && !d)
                *oom = true;
        return d;
}

static char *dup_or(const char *v, const char *def)
{
        return strdup(v ? v : def);
}

static int vm_open(const struct vm_options *o, struct vm_conn **ret, struct na_error *err)
{
        pthread_once(&global_once, global_init);
        if (global_init_result < 0)
                return na_error_set(err, EIO, NA_E_DRIVER, "libvirt: initialisation failed");
        if (!o || !o->state_dir)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vm driver: state_dir is required");
        if (o->domain_type && !streq(o->domain_type, "kvm") && !streq(o->domain_type, "qemu"))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vm driver: domain_type must be kvm or qemu, not %s",
                                    o->domain_type);

        struct vm_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return na_error_sys(err, ENOMEM, "vm driver");
        pthread_mutex_init(&c->lock, NULL);
        pthread_mutex_init(&c->mem_lock, NULL);
        pthread_mutex_init(&c->net_lock, NULL);
        pthread_mutex_init(&c->cb_lock, NULL);
        pthread_cond_init(&c->cb_cond, NULL);
        pthread_mutex_init(&c->resume_lock, NULL);
        pthread_cond_init(&c->resume_cond, NULL);
        c->lifecycle_id = -1;
        c->reconnect_timer = -1;
        c->uri = dup_or(o->uri, "qemu:///system");
        c->state_dir = strdup(o->state_dir);
        c->meta_dir = na_strdupf("%s/vps", o->state_dir);
        c->storage_dir = o->storage_dir ? strdup(o->storage_dir) : na_strdupf("%s/vps/disks", o->state_dir);
        c->backups_dir = o->backups_dir ? strdup(o->backups_dir) : na_strdupf("%s/vps/backups", o->state_dir);
        c->pool_name = dup_or(o->storage_pool, "nodeagent");
        c->domain_type = dup_or(o->domain_type, "kvm");
        c->emulator = o->emulator ? strdup(o->emulator) : NULL;
        c->qemu_img = dup_or(o->qemu_img, "/usr/bin/qemu-img");
        c->stagger_ms = o->start_stagger_ms ? o->start_stagger_ms : 2000;
        c->ga_timeout_sec = o->guest_agent_timeout_sec ? o->guest_agent_timeout_sec : 10;
        c->reconnect_ms = o->reconnect_interval_ms ? o->reconnect_interval_ms : 5000;
        c->on_state = o->on_state;
        c->on_network = o->on_network;
        c->userdata = o->userdata;
        c->started_ms = json_object();
        c->installing = json_object();
        c->net.mode = o->network.mode;
        bool net_oom = false;
        c->net.bridge = dup_set(o->network.bridge, &net_oom);
        c->net.gateway4 = dup_set(o->network.gateway4, &net_oom);
        c->net.gateway6 = dup_set(o->network.gateway6, &net_oom);
        c->net.uplink = dup_set(o->network.uplink, &net_oom);
        if (c->net.mode == VM_NET_BRIDGED && !c->net.bridge) {
                conn_free(c);
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vm driver: network_mode bridged needs a bridge");
        }
        if (net_oom || !c->uri || !c->state_dir || !c->meta_dir || !c->storage_dir || !c->backups_dir || !c->pool_name ||
            !c->domain_type || (o->emulator && !c->emulator) || !c->qemu_img || !c->started_ms ||
            !c->installing) {
                conn_free(c);
                return na_error_sys(err, ENOMEM, "vm driver");
        }

        int r;
        _cleanup_free_ char *cache = na_strdupf("%s/template-cache.json", c->meta_dir);
        if ((r = na_mkdir_p(c->meta_dir, 0711, err)) < 0 || (r = na_mkdir_p(c->storage_dir, 0711, err)) < 0 ||
            (r = na_mkdir_p(c->backups_dir, 0700, err)) < 0 ||
            (r = vm_templates_new(o->templates_file, o->images_dir, cache, &c->templates, err)) < 0) {
                conn_free(c);
                return na_error_prefix(err, "vm driver");
        }
        scan_installing(c);

        if ((r = vm_events_acquire(err)) < 0) {
                conn_free(c);
                return r;
        }
        pthread_mutex_lock(&c->lock);
        r = connect_locked(c, err);
        pthread_mutex_unlock(&c->lock);
        if (r < 0 && o->connect_later) {
                na_error_clear(err);
                atomic_store(&c->dead, true); /* the reconnect timer keeps trying */
                r = 0;
        }
        if (r < 0) {
                vm_events_release();
                conn_free(c);
                return r;
        }
        vm_events_start_reconnect_timer(c);
        *ret = c;
        return 0;
}

static void vm_close(struct vm_conn *c)
{
        if (!c)
                return;
        pthread_mutex_lock(&c->resume_lock);
        atomic_store(&c->closing, true);
        pthread_cond_broadcast(&c->resume_cond);
        pthread_mutex_unlock(&c->resume_lock);
        vm_lv_resume_join(c);
        vm_events_stop_reconnect_timer(c);
        pthread_mutex_lock(&c->lock);
        disconnect_locked(c);
        pthread_mutex_unlock(&c->lock);
        bool unreferenced = vm_events_wait_unreferenced(c);
        vm_events_release();
        if (unreferenced)
                conn_free(c); /* else libvirt may still call back with c: leaking it is the safe choice */
}

static const char *vm_uri(const struct vm_conn *c)
{
        return c->uri;
}

/* Entry points that normalise the server id first. */
#define WITH_ID(id, buf, err)                                     \
        char buf[PROTO_VPS_ID_LEN + 1];                           \
        do {                                                      \
                int _r = vm_id_normalize(id, buf, err);           \
                if (_r < 0)                                       \
                        return _r;                                \
        } while (0)

static bool vm_exists(struct vm_conn *c, const char *id)
{
        char buf[PROTO_VPS_ID_LEN + 1];
        struct na_error e = NA_ERROR_INIT;
        bool ok = vm_id_normalize(id, buf, &e) == 0 && vm_lv_exists(c, buf);
        na_error_clear(&e);
        return ok;
}

static int vm_get_server(struct vm_conn *c, const char *id, struct proto_vps_server *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_get_server(c, lid, ret, err);
}

static int vm_get_install(struct vm_conn *c, const char *id, struct vm_install_info *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_get_install(c, lid, ret, err);
}

static int vm_power(struct vm_conn *c, const char *id, enum proto_vps_power_action action, unsigned grace_sec,
                    const struct na_progress *progress, enum proto_vps_state *ret_state, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_power(c, lid, action, grace_sec, progress, ret_state, err);
}

static int vm_status(struct vm_conn *c, const char *id, struct proto_vps_status *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_status(c, lid, ret, err);
}

static int vm_exec(struct vm_conn *c, const char *id, char *const *argv, unsigned timeout_sec,
                   const struct na_progress *progress, struct proto_vps_exec_result *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_exec(c, lid, argv, timeout_sec, progress, ret, err);
}

static int vm_reinstall(struct vm_conn *c, const char *id, const struct proto_vps_install *inst,
                        const struct na_progress *progress, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_reinstall(c, lid, inst, progress, err);
}

static int vm_upgrade(struct vm_conn *c, const char *id, const struct proto_vps_plan *plan,
                      struct proto_vps_server *ret, bool *ret_restart_required, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_upgrade(c, lid, plan, ret, ret_restart_required, err);
}

static int vm_network_set(struct vm_conn *c, const char *id, const struct proto_vps_network *net,
                          struct proto_vps_server *ret, bool *ret_restart_required, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_network_set(c, lid, net, ret, ret_restart_required, err);
}

static int vm_remove(struct vm_conn *c, const char *id, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_remove(c, lid, err);
}

static int vm_snapshot_create(struct vm_conn *c, const char *id, const char *snapshot_id, const char *name,
                              int64_t max_snapshots, struct proto_vps_snapshot *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_snapshot_create(c, lid, snapshot_id, name, max_snapshots, ret, err);
}

static int vm_snapshot_list(struct vm_conn *c, const char *id, struct proto_vps_snapshot **ret, size_t *ret_n,
                            struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_snapshot_list(c, lid, ret, ret_n, err);
}

static int vm_snapshot_revert(struct vm_conn *c, const char *id, const char *snapshot_id, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_snapshot_revert(c, lid, snapshot_id, err);
}

static int vm_snapshot_delete(struct vm_conn *c, const char *id, const char *snapshot_id, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_snapshot_delete(c, lid, snapshot_id, err);
}

static int vm_backup_create(struct vm_conn *c, const char *id, const char *backup_id,
                            const struct proto_vps_backup_limits *limits, const struct na_progress *progress,
                            struct proto_vps_backup *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_create(c, lid, backup_id, limits, progress, ret, err);
}

static int vm_backup_list(struct vm_conn *c, const char *id, struct proto_vps_backup **ret, size_t *ret_n,
                          struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_list(c, lid, ret, ret_n, err);
}

static int vm_backup_restore(struct vm_conn *c, const char *id, const char *backup_id,
                             const struct na_progress *progress, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_restore(c, lid, backup_id, progress, err);
}

static int vm_backup_delete(struct vm_conn *c, const char *id, const char *backup_id, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_delete(c, lid, backup_id, err);
}

static int vm_backup_open(struct vm_conn *c, const char *id, const char *backup_id, int *ret_fd,
                          struct proto_vps_backup *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_open(c, lid, backup_id, ret_fd, ret, err);
}

static int vm_backup_tmpfile(struct vm_conn *c, const char *id, int *ret_fd, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_tmpfile(c, lid, ret_fd, err);
}

static int vm_backup_adopt(struct vm_conn *c, const char *id, const char *backup_id, int fd, const char *sha256,
                           const struct na_progress *progress, struct proto_vps_backup *ret, struct na_error *err)
{
        WITH_ID(id, lid, err);
        return vm_lv_backup_adopt(c, lid, backup_id, fd, sha256, progress, ret, err);
}

const struct vm_driver vm_libvirt_driver = {
        .name = "libvirt",
        .open = vm_open,
        .close = vm_close,
        .uri = vm_uri,
        .exists = vm_exists,
        .inventory = vm_lv_inventory,
        .resume_servers = vm_lv_resume_servers,
        .template_lookup = vm_lv_template_lookup,
        .create = vm_lv_create,
        .get_server = vm_get_server,
        .get_install = vm_get_install,
        .power = vm_power,
        .status = vm_status,
        .exec = vm_exec,
        .reinstall = vm_reinstall,
        .upgrade = vm_upgrade,
        .network_set = vm_network_set,
        .remove = vm_remove,
        .snapshot_create = vm_snapshot_create,
        .snapshot_list = vm_snapshot_list,
        .snapshot_revert = vm_snapshot_revert,
        .snapshot_delete = vm_snapshot_delete,
        .backup_create = vm_backup_create,
        .backup_list = vm_backup_list,
        .backup_restore = vm_backup_restore,
        .backup_delete = vm_backup_delete,
        .backup_open = vm_backup_open,
        .backup_tmpfile = vm_backup_tmpfile,
        .backup_adopt = vm_backup_adopt,
        .console_open = vm_libvirt_console_open,
};
