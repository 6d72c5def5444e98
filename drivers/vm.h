/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The VM driver: one const struct of primitives per backend. libvirt is the one we
 * have (vm_libvirt_driver, drivers/vm/vm-libvirt*.c); a test can slot in its own
 * table. The job layer never includes libvirt headers: it reaches servers through
 * this table with job_services(ctx)->vm and ->vm_conn.
 *
 * How to use it (what tests/drivers/vm-real does against a real libvirtd):
 *
 *   struct vm_options o = {
 *           .uri = "qemu:///system",            // or "test:///abs/path/node.xml"
 *           .state_dir = "/var/lib/nodeagent",  // per-server metadata, disks, backups
 *           .templates_file = "/etc/nodeagent/templates.json",
 *           .images_dir = "/var/lib/nodeagent/images",
 *           .domain_type = "qemu",              // TCG; "kvm" is the default
 *   };
 *   const struct vm_driver *vm = &vm_libvirt_driver;
 *   struct vm_conn *c;
 *   struct na_error err = NA_ERROR_INIT;
 *   if (vm->open(&o, &c, &err) < 0) { ... err.message ... }
 *   struct vm_create_spec spec = {
 *           .id = "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", .name = "demo", .hostname = "demo",
 *           .plan = { .cpu_cores = 1, .cpu_threads = 1, .ram_mb = 256, .storage_mb = 1024,
 *                     .max_snapshots = 5 },
 *           .tmpl = { .id = "busybox", .image_slug = "1", .os = PROTO_VPS_OS_LINUX },
 *           .password = "Secret#123",
 *   };
 *   // the addresses, as vps.create's "network" decodes them
 *   proto_vps_network_decode(json_pack("{s:[{s:s, s:i}]}", "ipv4", "address", "192.0.2.10", "prefix", 24),
 *                            "network", &spec.network, &err);
 *   struct proto_vps_server srv;
 *   vm->create(c, &spec, NULL, &srv, &err);      // disk, seed, define, start; converges
 *   enum proto_vps_state st;
 *   vm->power(c, spec.id, PROTO_VPS_POWER_STOP, 60, NULL, &st, &err);
 *   struct proto_vps_status status;
 *   vm->status(c, spec.id, &status, &err);
 *   struct proto_vps_snapshot snap;
 *   vm->snapshot_create(c, spec.id, "s1", "before upgrade", 5, &snap, &err);
 *   vm->snapshot_revert(c, spec.id, "s1", &err);
 *   vm->snapshot_delete(c, spec.id, "s1", &err);
 *   vm->remove(c, spec.id, &err);
 *   vm->close(c);
 *
 * A templates file is a JSON array of
 *   {"id": "busybox", "imageSlug": "1", "os": "linux", "format": "qcow2"|"raw",
 *    "path": "busybox.qcow2", "sha256": "<64 hex>", "inputs": {<schema>}?,
 *    "kernel": "vmlinuz"?, "initrd": "initrd.img"?, "cmdline": "console=ttyS0"?}
 * with paths relative to images_dir (a path that leaves it is refused). kernel,
 * initrd and cmdline select direct kernel boot. The inputs schema maps an input
 * name to {"type": "string"|"integer"|"boolean", "required": bool?,
 * "maxLength": n?, "min": n?, "max": n?, "enum": [..]?}.
 *
 * Every function returns 0 or a negative errno and fills err: VPS_NOT_FOUND for an
 * unknown server, INVALID_STATE (details.state) where the action is impossible,
 * SNAPSHOT_NOT_FOUND, BACKUP_NOT_FOUND, SNAPSHOT_LIMIT_REACHED,
 * GUEST_AGENT_UNAVAILABLE, VALIDATION_ERROR for an unknown template or image, and
 * DRIVER_ERROR (details.reason: libvirt's own message) when libvirt refuses.
 * Functions are thread-safe; the caller runs one operation per server at a time.
 * Server ids are UUIDs; the domain is "vps-<id>" with UUID <id>, the tap device
 * na_vps_ifname(id), the MAC 52:54:00 + three bytes derived from the id.
 *
 * Files: the disk <storage_dir>/<id>.qcow2 (an overlay of the template image), the
 * seed <storage_dir>/<id>-seed.iso, the serial console's log
 * <storage_dir>/<id>-console.log (written by virtlogd), the metadata
 * <state_dir>/vps/<id>.json and the backups <backups_dir>/<id>/. A plan's
 * networkSpeedLimitMbps > 0 becomes <bandwidth>, which libvirt applies with tc
 * (htb, sfq): on a kernel without those qdiscs (some CI containers) the domain
 * does not start; use 0 there.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"
#include "proto/vps.h"

struct vm_conn;

/* Called from the driver's event thread on every lifecycle change; must be thread-safe. */
typedef void (*vm_state_fn)(void *userdata, const char *vps_id, enum proto_vps_state state);

/*
 * How the node carries its servers' traffic ([vm] network_mode, AGENT-API 4.1):
 * routed (the default) keeps each tap an L3 port of the node: the tap gets the
 * fixed link-local next hop (VM_ROUTED_GW4, VM_ROUTED_GW6), each address of the
 * server a host route to it, and the uplink (when set) a proxy ARP/NDP entry per
 * address; bridged puts the tap in the bridge and gives the guest the operator's
 * gateways. Either way the guest gets its addresses as a static network-config.
 */
enum vm_network_mode { VM_NET_ROUTED, VM_NET_BRIDGED };
#define VM_ROUTED_GW4 "169.254.0.1"
#define VM_ROUTED_GW6 "fe80::1"
struct vm_netcfg {
        enum vm_network_mode mode;
        const char *bridge;   /* bridged: required */
        const char *gateway4; /* bridged: NULL for none */
        const char *gateway6;
        const char *uplink;   /* routed: NULL for no neighbour answers (the upstream routes to the node) */
};

/*
 * Called (from a job's thread or the event thread) with a server's MAC address and
 * network before it first starts, at every start (its tap exists then) and whenever
 * its network changes: the agent puts its anti-spoofing guard in place there
 * (firewall/fw-guard.c). A failure fails the job, before the server first starts.
 * Must be thread-safe.
 */
typedef int (*vm_network_fn)(void *userdata, const char *vps_id, const char *mac, const struct proto_vps_network *net,
                             struct na_error *err);

struct vm_options {
        const char *uri;               /* [vm] uri; default "qemu:///system" */
        const char *state_dir;         /* required: metadata in <state_dir>/vps/<id>.json */
        const char *templates_file;    /* [vm] templates_file; NULL: no templates (create refuses) */
        const char *images_dir;        /* [vm] images_dir; template paths are relative to it */
        const char *storage_dir;       /* [vm] storage_dir; default <state_dir>/vps/disks */
        const char *backups_dir;       /* [vm] backups_dir; default <state_dir>/vps/backups */
        const char *storage_pool;      /* [vm] storage_pool; default "nodeagent" (a dir pool over
                                        * storage_dir, where the driver has pools); "" for none */
        const char *domain_type;       /* [vm] domain_type: "kvm" (default) or "qemu" (TCG) */
        const char *emulator;          /* [vm] emulator; NULL: libvirt's default */
        const char *qemu_img;          /* [vm] qemu_img; default "/usr/bin/qemu-img" */
        unsigned start_stagger_ms;     /* [vm] start_stagger_ms; 0: default 2000 (node reboot) */
        unsigned guest_agent_timeout_sec; /* [vm] guest_agent_timeout_sec; 0: default 10 */
        unsigned reconnect_interval_ms;   /* 0: default 5000 */
        vm_state_fn on_state;          /* NULL: no lifecycle events */
        void *userdata;
        struct vm_netcfg network; /* zero: routed, no uplink */
        vm_network_fn on_network;      /* NULL: no guard */
        bool connect_later;            /* open succeeds while the hypervisor cannot be reached; calls
                                        * fail with DRIVER_ERROR until the reconnect timer gets through */
};

struct vm_create_spec {
        const char *id;
        const char *name;
        const char *hostname;
        struct proto_vps_plan plan;
        struct proto_vps_template_ref tmpl;
        const char *password;       /* plain; only its SHA-512 crypt hash is kept; NULL: none */
        char *const *ssh_keys;      /* NULL-terminated; NULL: none */
        json_t *inputs;             /* borrowed; NULL: none */
        struct proto_vps_network network; /* required: at least one address (4.1) */
        bool no_start;              /* define only (create still ends at stage booting) */
        const char *restore_backup_id; /* the disk from this backup of the server, not the template; NULL: none */
};

/* Field names used for template errors (create: "template.id", reinstall: "templateId"). */
struct vm_template_fields {
        const char *id;
        const char *image_slug;
        const char *os;     /* NULL: the caller does not state an os */
        const char *inputs;
};

/* The current installation of a server (for the reinstall rules). */
struct vm_install_info {
        char hostname[PROTO_VPS_HOSTNAME_MAX + 1];
        char template_id[PROTO_VPS_TEMPLATE_ID_MAX * 4 + 1];
        char image_slug[PROTO_VPS_TEMPLATE_ID_MAX * 4 + 1];
        enum proto_vps_os os;
        json_t *inputs;             /* owned; NULL: none */
        bool has_password;
        size_t n_ssh_keys;
        char ssh_key_id[PROTO_VPS_ID_LEN + 1]; /* "" when none */
};
static inline void vm_install_info_clear(struct vm_install_info *i)
{
        if (i->inputs)
                json_decref(i->inputs);
        i->inputs = NULL;
}

enum vm_console_kind { VM_CONSOLE_SERIAL, VM_CONSOLE_VNC };

struct vm_driver {
        const char *name; /* "libvirt": capabilities.vmDriver */

        int (*open)(const struct vm_options *opts, struct vm_conn **ret, struct na_error *err);
        void (*close)(struct vm_conn *conn); /* NULL-safe; stops the event thread */
        const char *(*uri)(const struct vm_conn *conn); /* capabilities.vmDriverUri */

        /* Cheap: is there a domain for this server. */
        bool (*exists)(struct vm_conn *conn, const char *vps_id);
        /* hello inventory: a new JSON array of {id, state} for every "vps-<uuid>" domain. */
        int (*inventory)(struct vm_conn *conn, json_t **ret, struct na_error *err);
        /*
         * Node reboot: start, staggered by start_stagger_ms, the servers whose wanted
         * state is running but are not running. wait=false runs it on a driver thread
         * (joined by close) and returns at once; wait=true runs it in the caller.
         * *ret_started (may be NULL) counts the starts asked for (wait=true only).
         */
        int (*resume_servers)(struct vm_conn *conn, bool wait, unsigned *ret_started, struct na_error *err);

        /*
         * Check that template id/image exist (and os matches, when os is given) and
         * that inputs fit the template's schema; VALIDATION_ERROR on fields otherwise.
         */
        int (*template_lookup)(struct vm_conn *conn, const char *template_id, const char *image_slug,
                               const enum proto_vps_os *os, json_t *inputs, const struct vm_template_fields *fields,
                               enum proto_vps_os *ret_os, struct na_error *err);

        /* vps.create: stages preparing-disk, writing-image, configuring, booting. Converges. */
        int (*create)(struct vm_conn *conn, const struct vm_create_spec *spec, const struct na_progress *progress,
                      struct proto_vps_server *ret, struct na_error *err);
        int (*get_server)(struct vm_conn *conn, const char *vps_id, struct proto_vps_server *ret, struct na_error *err);
        int (*get_install)(struct vm_conn *conn, const char *vps_id, struct vm_install_info *ret, struct na_error *err);

        /* vps.power: converging (starting a running server succeeds). *ret_state: the state after. */
        int (*power)(struct vm_conn *conn, const char *vps_id, enum proto_vps_power_action action,
                     unsigned grace_sec, const struct na_progress *progress, enum proto_vps_state *ret_state,
                     struct na_error *err);
        int (*status)(struct vm_conn *conn, const char *vps_id, struct proto_vps_status *ret, struct na_error *err);
        /* vps.exec through the QEMU guest agent; output capped (truncated set). */
        int (*exec)(struct vm_conn *conn, const char *vps_id, char *const *argv, unsigned timeout_sec,
                    const struct na_progress *progress, struct proto_vps_exec_result *ret, struct na_error *err);

        /*
         * vps.reinstall with the installation proto_vps_reinstall_resolve() produced:
         * stages stopping, preparing-disk, writing-image, configuring, booting. The new
         * disk is made beside the old one and renamed over it, so the domain always
         * points at a bootable disk; a run again after a crash starts over cleanly.
         */
        int (*reinstall)(struct vm_conn *conn, const char *vps_id, const struct proto_vps_install *inst,
                         const struct na_progress *progress, struct na_error *err);
        /* vps.upgrade: storage only grows; *ret_restart_required when a change waits for a restart. */
        int (*upgrade)(struct vm_conn *conn, const char *vps_id, const struct proto_vps_plan *plan,
                       struct proto_vps_server *ret, bool *ret_restart_required, struct na_error *err);
        /*
         * vps.network.set: replace the server's addresses (refused with INVALID_STATE,
         * details.field and details.owner, when another server of the node holds one);
         * the node's routes and neighbour answers change at once, the seed is rewritten
         * for the guest's next boot (*ret_restart_required: the server runs).
         */
        int (*network_set)(struct vm_conn *conn, const char *vps_id, const struct proto_vps_network *net,
                           struct proto_vps_server *ret, bool *ret_restart_required, struct na_error *err);
        /* vps.delete: domain, disks, seed, snapshots, backups, metadata. Idempotent (unknown id: 0). */
        int (*remove)(struct vm_conn *conn, const char *vps_id, struct na_error *err);

        /* Snapshots: "snap-<snapshotId>" in libvirt; a repeated create returns the existing one. */
        int (*snapshot_create)(struct vm_conn *conn, const char *vps_id, const char *snapshot_id, const char *name,
                               int64_t max_snapshots, struct proto_vps_snapshot *ret, struct na_error *err);
        /* *ret: a new array (free()) of *ret_n snapshots, oldest first. */
        int (*snapshot_list)(struct vm_conn *conn, const char *vps_id, struct proto_vps_snapshot **ret, size_t *ret_n,
                             struct na_error *err);
        int (*snapshot_revert)(struct vm_conn *conn, const char *vps_id, const char *snapshot_id,
                               struct na_error *err);
        int (*snapshot_delete)(struct vm_conn *conn, const char *vps_id, const char *snapshot_id,
                               struct na_error *err);

        /*
         * Backups: zstd-compressed flat qcow2 files with their sha256, written under a
         * temporary name and renamed, listed only once complete. create: stages
         * exporting, compressing; retention by limits applied after it; a repeated
         * create of an existing backupId returns it.
         */
        int (*backup_create)(struct vm_conn *conn, const char *vps_id, const char *backup_id,
                             const struct proto_vps_backup_limits *limits, const struct na_progress *progress,
                             struct proto_vps_backup *ret, struct na_error *err);
        /* *ret: a new array (free()) of *ret_n backups, oldest first. */
        int (*backup_list)(struct vm_conn *conn, const char *vps_id, struct proto_vps_backup **ret, size_t *ret_n,
                           struct na_error *err);
        /* Stops the server, verifies the sha256, replaces the disk; starts it again if it ran. */
        int (*backup_restore)(struct vm_conn *conn, const char *vps_id, const char *backup_id,
                              const struct na_progress *progress, struct na_error *err);
        int (*backup_delete)(struct vm_conn *conn, const char *vps_id, const char *backup_id, struct na_error *err);
        /*
         * Moving a server between nodes (vps.backup.export and .import, AGENT-API 4.1);
         * the server itself need not be on the node. open: the backup's archive,
         * read-only, and its record (BACKUP_NOT_FOUND). tmpfile: an unnamed file in the
         * server's backups directory for an import to download into. adopt: fd's bytes
         * become backup backup_id once they are a whole zstd stream whose sha256 is the
         * one given (if given; else 422 on "transfer.sha256") holding a standalone qcow2
         * (no backing or data file: 422 on "transfer"); INVALID_STATE when the id
         * exists. Nothing is kept on failure; the caller closes fd.
         */
        int (*backup_open)(struct vm_conn *conn, const char *vps_id, const char *backup_id, int *ret_fd,
                           struct proto_vps_backup *ret, struct na_error *err);
        int (*backup_tmpfile)(struct vm_conn *conn, const char *vps_id, int *ret_fd, struct na_error *err);
        int (*backup_adopt)(struct vm_conn *conn, const char *vps_id, const char *backup_id, int fd,
                            const char *sha256, const struct na_progress *progress, struct proto_vps_backup *ret,
                            struct na_error *err);

        /*
         * Live consoles (agent/console/consoles.c): a running server's serial console (its pty)
         * or VNC display (a socket) as a new non-blocking, close-on-exec descriptor
         * carrying its bytes both ways (RFB as it is for VNC); closing it ends the
         * console; end-of-file: the server stopped. INVALID_STATE
         * (details.state) when the server does not run. May be NULL.
         */
        int (*console_open)(struct vm_conn *conn, const char *vps_id, enum vm_console_kind kind, int *ret_fd,
                            struct na_error *err);
};

extern const struct vm_driver vm_libvirt_driver;
