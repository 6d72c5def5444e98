/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the libvirt VM driver: the connection object and what its files share.
 * Only drivers/vm/vm-libvirt*.c include libvirt headers; the helpers of
 * drivers/vm/vm-*.c without "libvirt" in their name never touch libvirt.
 */
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <stdatomic.h>

#include "drivers/vm/vm-util.h"
#include "drivers/vm.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(virConnectPtr, virConnectClose)
DEFINE_TRIVIAL_CLEANUP_FUNC(virDomainPtr, virDomainFree)
DEFINE_TRIVIAL_CLEANUP_FUNC(virDomainSnapshotPtr, virDomainSnapshotFree)
DEFINE_TRIVIAL_CLEANUP_FUNC(virStoragePoolPtr, virStoragePoolFree)
#define _cleanup_virconn_ _cleanup_(virConnectClosep)
#define _cleanup_virdom_ _cleanup_(virDomainFreep)
#define _cleanup_virsnap_ _cleanup_(virDomainSnapshotFreep)
#define _cleanup_virpool_ _cleanup_(virStoragePoolFreep)

struct vm_conn {
        /* Options, copied and defaulted at open. */
        char *uri;
        char *state_dir;
        char *meta_dir;      /* <state_dir>/vps: <id>.json */
        char *storage_dir;   /* <id>.qcow2, <id>-seed.iso */
        char *backups_dir;   /* <id>/<backupId>.qcow2.zst + .json */
        char *pool_name;     /* "" for none */
        char *domain_type;
        char *emulator;
        char *qemu_img;
        unsigned stagger_ms;
        unsigned ga_timeout_sec;
        unsigned reconnect_ms;
        vm_state_fn on_state;
        void *userdata;
        struct vm_netcfg net;  /* [vm] network_mode and its keys (strings owned) */
        vm_network_fn on_network;

        struct vm_templates *templates;

        /* The libvirt connection, replaced when lost. */
        pthread_mutex_t lock;
        virConnectPtr virconn;
        atomic_bool dead;
        atomic_bool closing;
        bool is_test;        /* the in-memory test driver: no processes touch the disks */
        bool pool_ready;
        int lifecycle_id;    /* -1 when not registered */
        pthread_mutex_t cb_lock;
        pthread_cond_t cb_cond;
        int cb_refs;         /* registrations whose free callback has not run yet */
        int reconnect_timer; /* -1 when none */

        /* Held around "no other server holds these addresses" and the save that claims them. */
        pthread_mutex_t net_lock;

        /* What the driver remembers between calls. */
        pthread_mutex_t mem_lock;
        json_t *started_ms;  /* id -> CLOCK_REALTIME ms of the last start we saw */
        json_t *installing;  /* id -> true while a create/reinstall is unfinished */

        /* Node-reboot starts on a driver thread. */
        pthread_t resume_thread;
        bool resume_running;
        pthread_mutex_t resume_lock;
        pthread_cond_t resume_cond;
};

/* ---- vm-libvirt.c: the connection and errors ---- */

/* A referenced connection (reconnecting when it was lost); virConnectClose() it. */
int vm_conn_get(struct vm_conn *c, virConnectPtr *ret, struct na_error *err);
/* Look a server's domain up ("vps-<id>"): VPS_NOT_FOUND when there is none. */
int vm_domain_get(struct vm_conn *c, const char *id, virDomainPtr *ret, struct na_error *err);
/* The same, also handing out the connection it came from. */
int vm_domain_get2(struct vm_conn *c, const char *id, virConnectPtr *ret_conn, virDomainPtr *ret,
                   struct na_error *err);
/*
 * libvirt's last error as ours: "vps <id>: <what>: <libvirt message>", code by
 * libvirt's code (no domain: VPS_NOT_FOUND, no snapshot: SNAPSHOT_NOT_FOUND,
 * guest agent: GUEST_AGENT_UNAVAILABLE, otherwise DRIVER_ERROR with details.reason).
 */
int vm_virt_error(struct na_error *err, const char *id, const char *fmt, ...) _printf_(3, 4);
/* The last libvirt error code of this thread (VIR_ERR_OK when none). */
int vm_virt_last_code(void);

/* The state of a domain as the agent API names it (installing from our own records). */
enum proto_vps_state vm_state_from_virt(struct vm_conn *c, const char *id, int state, int reason);
int vm_domain_state(struct vm_conn *c, const char *id, virDomainPtr dom, enum proto_vps_state *ret, bool *ret_active,
                    struct na_error *err);

/* Remembered start times (uptime) and the unfinished installs. */
void vm_mem_started(struct vm_conn *c, const char *id, int64_t ms); /* ms 0 forgets */
int64_t vm_mem_started_get(struct vm_conn *c, const char *id);
void vm_mem_installing(struct vm_conn *c, const char *id, bool installing);
bool vm_mem_is_installing(struct vm_conn *c, const char *id);
/* INVALID_STATE (details.state "installing") while an install of id is unfinished. */
int vm_refuse_installing(struct vm_conn *c, const char *id, struct na_error *err);
/* id's installation record; INVALID_STATE when the node has none. */
struct vm_meta;
int vm_meta_load_required(struct vm_conn *c, const char *id, struct vm_meta *m, struct na_error *err);

/* Wait ms, waking early when the connection closes; false when it is closing. */
bool vm_conn_sleep(struct vm_conn *c, unsigned ms);

/* ---- vm-libvirt-events.c ---- */
int vm_events_acquire(struct na_error *err); /* the process-wide event loop thread */
void vm_events_release(void);
/* Register lifecycle and close callbacks on a fresh connection (lock held). */
void vm_events_register(struct vm_conn *c, virConnectPtr conn);
void vm_events_deregister(struct vm_conn *c, virConnectPtr conn);
int vm_events_start_reconnect_timer(struct vm_conn *c);
void vm_events_stop_reconnect_timer(struct vm_conn *c);
/* After everything is deregistered: wait (bounded) until libvirt holds no reference to c. */
bool vm_events_wait_unreferenced(struct vm_conn *c);

/* ---- vm-libvirt-domain.c ---- */
int vm_lv_power(struct vm_conn *c, const char *id, enum proto_vps_power_action action, unsigned grace_sec,
                const struct na_progress *progress, enum proto_vps_state *ret_state, struct na_error *err);
int vm_lv_status(struct vm_conn *c, const char *id, struct proto_vps_status *ret, struct na_error *err);
int vm_lv_inventory(struct vm_conn *c, json_t **ret, struct na_error *err);
bool vm_lv_exists(struct vm_conn *c, const char *id);
int vm_lv_resume_servers(struct vm_conn *c, bool wait, unsigned *ret_started, struct na_error *err);
void vm_lv_resume_join(struct vm_conn *c);
int vm_lv_get_server(struct vm_conn *c, const char *id, struct proto_vps_server *ret, struct na_error *err);
int vm_lv_upgrade(struct vm_conn *c, const char *id, const struct proto_vps_plan *plan, struct proto_vps_server *ret,
                  bool *ret_restart_required, struct na_error *err);
int vm_lv_remove(struct vm_conn *c, const char *id, struct na_error *err);
/* Force a domain off (destroy) when it is active. */
int vm_lv_force_off(struct vm_conn *c, const char *id, virDomainPtr dom, struct na_error *err);
/* Start a domain that is not running (resume a paused one); remembers the start. */
int vm_lv_start(struct vm_conn *c, const char *id, virDomainPtr dom, struct na_error *err);
/* Persist the wanted power state in the metadata, when the server has metadata. */
int vm_lv_want_running(struct vm_conn *c, const char *id, bool running, struct na_error *err);

/* ---- vm-libvirt-install.c ---- */
int vm_lv_template_lookup(struct vm_conn *c, const char *template_id, const char *image_slug,
                          const enum proto_vps_os *os, json_t *inputs, const struct vm_template_fields *fields,
                          enum proto_vps_os *ret_os, struct na_error *err);
int vm_lv_create(struct vm_conn *c, const struct vm_create_spec *spec, const struct na_progress *progress,
                 struct proto_vps_server *ret, struct na_error *err);
int vm_lv_get_install(struct vm_conn *c, const char *id, struct vm_install_info *ret, struct na_error *err);
int vm_lv_reinstall(struct vm_conn *c, const char *id, const struct proto_vps_install *inst,
                    const struct na_progress *progress, struct na_error *err);
/* Generate and define the domain XML from the metadata. */
int vm_lv_define(struct vm_conn *c, virConnectPtr conn, const struct vm_meta *m, struct na_error *err);

/* ---- vm-libvirt-network.c ---- */
/*
 * Save m (with its network) after checking, under net_lock, that no other server's
 * metadata holds one of its addresses: INVALID_STATE naming the field and the owner.
 */
int vm_lv_meta_save_claiming(struct vm_conn *c, struct vm_meta *m, struct na_error *err);
int vm_lv_network_set(struct vm_conn *c, const char *id, const struct proto_vps_network *net,
                      struct proto_vps_server *ret, bool *ret_restart_required, struct na_error *err);
/*
 * Routed mode: put the server's host side in place (tap next hop, routes, proxy
 * entries) when its tap exists; old (may be NULL) is what was there before, whose
 * proxy entries not in m's network are taken away. Nothing to do in bridged mode
 * or for a server without a network.
 */
int vm_lv_host_network(struct vm_conn *c, const struct vm_meta *m, const struct proto_vps_network *old,
                       struct na_error *err);
/* Tell the agent m's network (its guard): 0 when m has none or nobody listens. */
int vm_lv_network_notify(struct vm_conn *c, const struct vm_meta *m, struct na_error *err);
/* The guard and the same from id's metadata (a start, a started event); 0 for a server without one. */
int vm_lv_host_network_of(struct vm_conn *c, const char *id, struct na_error *err);
/* vps.delete: the proxy entries of its addresses (the routes go with the tap). */
void vm_lv_host_network_remove(struct vm_conn *c, const struct vm_meta *m);

/* ---- vm-libvirt-storage.c ---- */
char *vm_lv_disk_path(struct vm_conn *c, const char *id); /* <storage_dir>/<id>.qcow2 */
char *vm_lv_seed_path(struct vm_conn *c, const char *id); /* <storage_dir>/<id>-seed.iso */
/* A qcow2 overlay backed by the template image at path; VALIDATION_ERROR on size_field when too small. */
int vm_lv_overlay_create(struct vm_conn *c, const char *id, const struct vm_template *t, const char *path,
                         int64_t size_mb, const char *size_field, struct na_error *err);
int vm_lv_pool_ensure(struct vm_conn *c, virConnectPtr conn, struct na_error *err);
void vm_lv_pool_refresh(struct vm_conn *c);
/* Grow a server's disk to size_mb (live through libvirt when a real domain runs). */
int vm_lv_disk_grow(struct vm_conn *c, const char *id, virDomainPtr dom, int64_t size_mb, struct na_error *err);

/* ---- vm-libvirt-snapshot.c ---- */
int vm_lv_snapshot_create(struct vm_conn *c, const char *id, const char *snapshot_id, const char *name,
                          int64_t max_snapshots, struct proto_vps_snapshot *ret, struct na_error *err);
int vm_lv_snapshot_list(struct vm_conn *c, const char *id, struct proto_vps_snapshot **ret, size_t *ret_n,
                        struct na_error *err);
int vm_lv_snapshot_revert(struct vm_conn *c, const char *id, const char *snapshot_id, struct na_error *err);
int vm_lv_snapshot_delete(struct vm_conn *c, const char *id, const char *snapshot_id, struct na_error *err);
/* Forget every snapshot's libvirt metadata (the disk they lived in is being replaced). */
int vm_lv_snapshots_forget(struct vm_conn *c, const char *id, virDomainPtr dom, struct na_error *err);

/* ---- vm-libvirt-backup.c ---- */
int vm_lv_backup_create(struct vm_conn *c, const char *id, const char *backup_id,
                        const struct proto_vps_backup_limits *limits, const struct na_progress *progress,
                        struct proto_vps_backup *ret, struct na_error *err);
int vm_lv_backup_list(struct vm_conn *c, const char *id, struct proto_vps_backup **ret, size_t *ret_n,
                      struct na_error *err);
int vm_lv_backup_restore(struct vm_conn *c, const char *id, const char *backup_id,
                         const struct na_progress *progress, struct na_error *err);
int vm_lv_backup_delete(struct vm_conn *c, const char *id, const char *backup_id, struct na_error *err);
int vm_lv_backup_open(struct vm_conn *c, const char *id, const char *backup_id, int *ret_fd,
                      struct proto_vps_backup *ret, struct na_error *err);
int vm_lv_backup_tmpfile(struct vm_conn *c, const char *id, int *ret_fd, struct na_error *err);
int vm_lv_backup_adopt(struct vm_conn *c, const char *id, const char *backup_id, int fd, const char *sha256,
                       const struct na_progress *progress, struct proto_vps_backup *ret, struct na_error *err);
/* vps.create with restoreBackupId: the generation the backup's record keeps (0: none
 * kept), BACKUP_NOT_FOUND; then its disk unpacked, checked and grown to storage_mb in
 * place of the server's disk (VALIDATION_ERROR on plan.storageMB when smaller). */
int vm_lv_backup_generation(struct vm_conn *c, const char *id, const char *backup_id, int64_t *ret,
                            struct na_error *err);
int vm_lv_backup_unpack_disk(struct vm_conn *c, const char *id, const char *backup_id, int64_t storage_mb,
                             const struct na_progress *progress, struct na_error *err);
/* What the head of a backup's archive says it is (vm_archive_meta): {format, vpsId, generation, ...}. */
#define VM_BACKUP_FORMAT "nodeagent-vps-backup/1"
/* Every backup of a server (vps.delete). */
int vm_lv_backups_remove_all(struct vm_conn *c, const char *id, struct na_error *err);

/* ---- vm-libvirt-exec.c ---- */
int vm_lv_exec(struct vm_conn *c, const char *id, char *const *argv, unsigned timeout_sec,
               const struct na_progress *progress, struct proto_vps_exec_result *ret, struct na_error *err);

/* ---- vm-libvirt-console.c ---- */
int vm_libvirt_console_open(struct vm_conn *c, const char *id, enum vm_console_kind kind, int *ret_fd,
                            struct na_error *err);
