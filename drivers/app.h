/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app driver: one const struct of primitives per container runtime. crun is the
 * one we have (app_oci_driver, drivers/app/oci/app-oci*.c); a test can slot in its own
 * table. The job layer never sees OCI or crun details: it reaches apps through this
 * table with job_services(ctx)->app and ->app_conn.
 *
 *   struct app_options o = { .state_dir = "/var/lib/nodeagent", .images_dir = "/var/lib/nodeagent/app-images",
 *                            .runtime = "/usr/bin/crun", .monitor = "/usr/libexec/nodeagent/nodeagent-monitor" };
 *   struct app_conn *c;
 *   app_oci_driver.open(&o, &c, &err);
 *   app_oci_driver.deploy(c, id, deploy, progress, &app_json, &err);   // stages pulling-image .. configuring
 *   app_oci_driver.power(c, id, PROTO_APP_POWER_START, 0, NULL, &state, &err);
 *   app_oci_driver.output(c, id, -1, 100, &lines_json, &err);
 *   app_oci_driver.remove(c, id, &err);
 *   app_oci_driver.close(c);
 *
 * Every function returns 0 or a negative errno and fills err: APP_NOT_FOUND for an
 * app this node does not have, INVALID_STATE (details.state), COMMAND_MANAGED,
 * IMAGE_NOT_FOUND, VALIDATION_ERROR, DRIVER_ERROR (details.reason: the runtime's or
 * kernel's own message). Functions are thread-safe; the job layer runs one job per
 * app at a time, and the driver's own thread (exits, the crash rule, restarts after a
 * node reboot) takes the same per-app lock.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "drivers/app-restart.h"
#include "common/error.h"
#include "common/progress.h"
#include "proto/app-params.h"
#include "proto/app-update.h"
#include "proto/app-backup.h"
#include "proto/app-exposure.h"

struct app_conn;
struct app_fs; /* volume/volume.h: the app's volume, every path kept beneath it */
struct app_routes; /* drivers/app-routes.h: domain verification and routing */

/* From the driver's thread: an event for the next report (type "app.state" or
 * "app.exited", data stolen). Must be thread-safe. */
typedef void (*app_event_fn)(void *userdata, const char *type, const char *app_id, json_t *data);
/* An app's cgroup appeared (started) or went (deleted): for metrics. cgroup NULL: gone. */
typedef void (*app_cgroup_fn)(void *userdata, const char *app_id, const char *cgroup, double cpu_cores,
                              int64_t memory_mb);

/*
 * File access to an app ends: reason "target-deleted" (remove, before its volume is
 * unmounted) or "file-access-disabled" (an update turned its template's fileAccess
 * off; app.update calls it once the new settings are in place). The agent ends the
 * app's live file editing sessions and lets go of the volume before it returns (it
 * waits a few seconds at most). Called without the app's locks, never on the agent's
 * loop thread.
 */
typedef void (*app_files_off_fn)(void *userdata, const char *app_id, const char *reason);

/* What nodeagent-sftpd needs of an app (app.sftp.set writes it into the app's credentials file). */
struct app_sftp_target {
        char volume_dir[4300];   /* absolute, the mounted volume */
        uint32_t uid, gid;       /* the app's mapped root */
        char sftp_username[64];  /* from app.deploy */
};

struct app_options {
        const char *state_dir;        /* required */
        const char *storage_dir;      /* [apps] storage_dir; default <state_dir>/apps */
        const char *images_dir;       /* [apps] images_dir */
        const char *runtime;          /* [apps] runtime: absolute path of crun */
        const char *monitor;          /* absolute path of nodeagent-monitor */
        const char *registry;         /* [apps] registry; NULL or "": no pulls */
        const char *registry_ca_file; /* [apps] registry_ca_file; NULL: the system's */
        const char *registry_username, *registry_password; /* optional */
        bool allow_insecure_http;     /* a loopback http:// registry, for tests */
        uint32_t id_base;             /* first subordinate id of the app ranges; 0: the default */
        unsigned start_stagger_ms;    /* node reboot: between two starts; 0: none ([apps] restart_stagger_sec) */
        unsigned start_parallel;      /* node reboot: starts at once when due together; 0: 4 (node_parallel_jobs) */
        unsigned crash_backoff_ms[APP_RESTART_MAX]; /* the crash rule's waits (drivers/app-restart.h); zeros: its defaults */
        app_event_fn on_event;
        app_cgroup_fn on_cgroup;
        app_files_off_fn on_files_off; /* may be NULL */
        void *userdata;
        const char *backups_dir;      /* [apps] backups_dir; NULL or "": <storage_dir>/backups */
        /* App networks (issue 12; drivers/app/net/app-net.h). network NULL or "": each app
         * gets an empty network namespace, as before. */
        const char *network;          /* [apps] network, "10.88.0.0/16" */
        const char *public_address;   /* [apps] public_address; NULL: every local address */
        const char *ports;            /* [apps] ports, "20000-40000" */
        const char *resolver;         /* [apps] resolver: apps' nameserver when the host's are loopback */
        const char *apps_domain;      /* [apps] apps_domain; NULL: no domain exposures */
        const char *net_table;        /* nft table of the apps; NULL: "nodeagent_apps" */
        const struct app_routes *routes; /* domain verification and routing (drivers/app-routes.h); NULL: none */
        /* What one image may cost the node (issue 20; drivers/app/image/app-image.h, app-registry.h). 0: the default. */
        uint64_t image_unpack_max_bytes;       /* [apps] image_unpack_max_mb: data one unpack writes (8 GiB) */
        uint64_t image_unpack_max_files;       /* [apps] image_unpack_max_files: entries one unpack makes (500000) */
        unsigned image_unpack_reserve_percent; /* [apps] image_unpack_reserve_percent: free space and inodes kept (5) */
        uint64_t image_pull_max_bytes;         /* [apps] image_pull_max_mb: what one pull downloads (4 GiB) */
        /* What an app's output may cost (issue 20, app-monitor.h): its monitor runs in a
         * cgroup of its own capped at the app's CPU, this memory and 16 processes, and
         * keeps at most this many lines a second (a burst of ten seconds' worth). */
        unsigned output_lines_per_sec; /* [apps] output_lines_per_sec; 0: 1000 */
        unsigned monitor_memory_mb;    /* [apps] monitor_memory_mb; 0: 32 */
        /* What one app's disk I/O may take (issue 20), applied to the device behind its
         * volume ([apps] io_*; 0: no limit). */
        struct app_io_limits {
                uint64_t read_bps, write_bps, read_iops, write_iops;
        } io;
};

struct app_driver {
        const char *name; /* "crun": capabilities.appDriver */

        int (*open)(const struct app_options *opts, struct app_conn **ret, struct na_error *err);
        void (*close)(struct app_conn *conn); /* NULL-safe; the apps keep running */
        /* hello inventory: a new JSON array of {id, state} for every app. Thread-safe. */
        int (*inventory)(struct app_conn *conn, json_t **ret, struct na_error *err);
        bool (*exists)(struct app_conn *conn, const char *app_id);
        /*
         * After the loop is up: re-attach to every running app's monitor, take the exits
         * that happened while the agent was away (the crash rule applies), and start
         * again, staggered, the apps that ran before a node reboot.
         */
        void (*resume)(struct app_conn *conn);

        /* app.deploy: stages pulling-image, unpacking, creating-volume, configuring; the
         * app ends stopped. Converges: the same params again give the same app. *ret: App. */
        int (*deploy)(struct app_conn *conn, const char *app_id, const struct proto_app_deploy *d,
                      const struct na_progress *progress, json_t **ret, struct na_error *err);
        /* app.power: converging (starting a running app succeeds). */
        int (*power)(struct app_conn *conn, const char *app_id, enum proto_app_power_action action, unsigned grace_sec,
                     const struct na_progress *progress, enum proto_app_state *ret_state, struct na_error *err);
        int (*status)(struct app_conn *conn, const char *app_id, struct proto_app_status *ret, struct na_error *err);
        /* app.command.set: command NULL restores the template's; *ret: App. */
        int (*command_set)(struct app_conn *conn, const char *app_id, char *const *command, json_t **ret,
                           struct na_error *err);
        int (*console_send)(struct app_conn *conn, const char *app_id, const char *line, struct na_error *err);
        /* app.output: since_seq < 0: the last `limit` lines. *ret: {lines, nextSeq}. */
        int (*output)(struct app_conn *conn, const char *app_id, int64_t since_seq, int64_t limit, json_t **ret,
                      struct na_error *err);
        /* app.delete: container, root layer, volume, output, ids: nothing left. Unknown id: 0. */
        int (*remove)(struct app_conn *conn, const char *app_id, struct na_error *err);
        /*
         * The app's volume for app.files.*: FILE_ACCESS_DISABLED (403) when its template
         * refuses file access. Close *ret with app_fs_close(); every path given to it
         * stays inside the volume by construction (openat2 beneath its root).
         */
        int (*files)(struct app_conn *conn, const char *app_id, struct app_fs **ret, struct na_error *err);
        /* The app's cgroup path relative to the hierarchies (for metrics), into buf. */
        int (*cgroup)(struct app_conn *conn, const char *app_id, char *buf, size_t len, struct na_error *err);

        /* Images (target node). */
        int (*image_pull)(struct app_conn *conn, const struct proto_image_ref *ref, const struct na_progress *progress,
                          json_t **ret, struct na_error *err);
        int (*image_list)(struct app_conn *conn, json_t **ret, struct na_error *err);
        int (*image_delete)(struct app_conn *conn, const struct proto_image_ref *ref, struct na_error *err);

        /*
         * Backups (drivers/app/backup/app-backup-parts.h): <backups_dir>/<app id>/<backupId>.tar.zst and
         * its record. BACKUP_NOT_FOUND for an unknown backupId; VALIDATION_ERROR on
         * "backupId" for a malformed one or for an archive a restore refuses.
         * create: stages archiving, compressing; the app's cgroup frozen while its volume
         * is read; retention after. The same backupId again answers the backup made.
         */
        int (*backup_create)(struct app_conn *conn, const char *app_id, const struct proto_app_backup_create *p,
                             const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err);
        /* restore: stages stopping, restoring, starting; QUOTA_EXCEEDED when it does not fit
         * (old contents kept). Any failure leaves the old contents. */
        int (*backup_restore)(struct app_conn *conn, const char *app_id, const char *backup_id,
                              const struct na_progress *progress, struct na_error *err);
        /* list: oldest first; *ret freed with free(). */
        int (*backup_list)(struct app_conn *conn, const char *app_id, struct proto_app_backup **ret, size_t *ret_n,
                           struct na_error *err);
        int (*backup_delete)(struct app_conn *conn, const char *app_id, const char *backup_id, struct na_error *err);
        /* export: a read-only fd of the backup's file (from offset 0; close it) and its Backup. */
        int (*backup_open)(struct app_conn *conn, const char *app_id, const char *backup_id, int *ret_fd,
                           struct proto_app_backup *ret_info, struct na_error *err);
        /* import, 1: an unnamed O_TMPFILE (O_RDWR) in the app's backups directory to download
         * into; closing it without adopt leaves nothing behind. *ret_max_bytes: the largest
         * archive adopt takes (what the app's volume quota can restore: the quota, plus
         * 1/64 and 1 MiB for tar headers and zstd frames); the download stops there. */
        int (*backup_tmpfile)(struct app_conn *conn, const char *app_id, int *ret_fd, uint64_t *ret_max_bytes,
                              struct na_error *err);
        /* import, 2: hash fd (from backup_tmpfile) from offset 0, check it is zstd and, when
         * sha256 is not NULL, that it matches (else 422 VALIDATION_ERROR on "transfer.sha256", nothing kept),
         * then make it the listed backup backup_id (INVALID_STATE when that id exists). The
         * caller still closes fd. */
        int (*backup_adopt)(struct app_conn *conn, const char *app_id, const char *backup_id, int fd,
                            const char *sha256, const struct na_progress *progress, struct proto_app_backup *ret,
                            struct na_error *err);
        /*
         * app.sftp.set: the app's volume (mounted, as for files: FILE_ACCESS_DISABLED when
         * its template refuses file access), ids and SFTP user name. May be NULL.
         */
        int (*sftp_target)(struct app_conn *conn, const char *app_id, struct app_sftp_target *ret,
                           struct na_error *err);
        /* App networks (issue 12). group_set: app.group.join (leave false) and
         * app.group.leave (leave true: the app leaves group_id when it is in it, else nothing
         * changes); *ret: App. The exposure functions answer Exposure objects (list: an array). */
        int (*group_set)(struct app_conn *conn, const char *app_id, const char *group_id, bool leave, json_t **ret,
                         struct na_error *err);
        int (*exposure_add)(struct app_conn *conn, const char *app_id, const struct proto_exposure_add *p,
                            json_t **ret, struct na_error *err);
        int (*exposure_remove)(struct app_conn *conn, const char *app_id, const char *exposure_id,
                               struct na_error *err);
        int (*exposure_list)(struct app_conn *conn, const char *app_id, json_t **ret, struct na_error *err);
        int (*exposure_verify)(struct app_conn *conn, const char *app_id, const char *exposure_id, json_t **ret,
                               struct na_error *err);
        /* The app's private address (dotted IPv4, into buf of 16): for routing its managed
         * hostname. APP_NOT_FOUND for an unknown app; -ENOENT without app networks. */
        int (*address)(struct app_conn *conn, const char *app_id, char buf[16], struct na_error *err);
        /*
         * Live consoles (agent/console/console-app.c): a new non-blocking, close-on-exec
         * connection to the running app's monitor (drivers/app/oci/app-monitor.h wire
         * format: O<seq> when output grows, X at the end; L<text> sends a console
         * line). INVALID_STATE (details.state) when the app does not run; may be NULL
         * in a driver without consoles.
         */
        int (*console_attach)(struct app_conn *conn, const char *app_id, int *ret_fd, struct na_error *err);
        /*
         * app.update (AGENT-API 4.2; what it does where the contract is silent: proto/README.md,
         * "app.update"). Stages pulling-image, unpacking, backing-up, restarting, verifying.
         * The plan alone is applied live (QUOTA_EXCEEDED below the data in use); a version
         * or template change pulls first, takes the safety backup, restarts on the new
         * settings and watches them for healthySec, and otherwise puts everything back and
         * fails with ROLLED_BACK (details.reason, details.lastLines). budget_ms: what is left
         * of the job's time; JOB_TIMEOUT before the app is touched when the watch and a
         * rollback would not fit. The intent is kept in the app's record, so an agent that
         * dies half-way puts the previous version back when it comes up again. Emits
         * app.updated. *ret: App with rolledBack false. May be NULL.
         */
        int (*update)(struct app_conn *conn, const char *app_id, const struct proto_app_update *u, uint64_t budget_ms,
                      const struct na_progress *progress, json_t **ret, struct na_error *err);
};

extern const struct app_driver app_oci_driver;
