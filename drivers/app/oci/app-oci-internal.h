/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The crun implementation of drivers/app.h, shared by its files:
 *   app-oci.c         open/close, the apps table, inventory, the table of functions
 *   app-oci-meta.c    <storage>/apps/<id>/app.json: what the node keeps of an app
 *   app-oci-deploy.c  deploy and delete
 *   app-oci-power.c   start, stop, kill
 *   app-oci-status.c  app.status          app-oci-command.c  app.command.set
 *   app-oci-output.c  app.output          app-oci-console.c  live consoles, app.console.send
 *   app-oci-files.c   the volume for the files kinds
 *   app-oci-backup.c, app-oci-net.c, app-oci-sftp.c: backups, networks, SFTP's view
 *   app-oci-watch.c   the driver's thread: exits from monitors, asking the crash rule, resume
 *   app-oci-images.c  image.pull, image.list, image.delete
 *   app-oci-update.c  app.update: live plan changes, new versions with a health watch and rollback
 *
 * Locks: conn->lock guards the list of apps (short). Each app has op_lock, held by
 * whoever changes it (a job, or the driver's thread restarting it), and st_lock, held
 * briefly around its state fields, so the watcher can record an exit while a job
 * holds op_lock waiting for that very exit. Order: conn->lock, op_lock, st_lock.
 */
#pragma once

#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>

#include "drivers/app.h"
#include "drivers/app-restart.h"
#include "drivers/app/oci/app-crun.h"
#include "drivers/app/image/app-image.h"
#include "drivers/app/oci/app-monitor.h"
#include "ring/monitor-msg.h"
#include "drivers/app/image/app-registry.h"
#include "proto/app-params.h"

#define APP_ID_LEN 36

struct app {
        char id[APP_ID_LEN + 1];
        char *dir;                       /* <storage>/apps/<id> */
        pthread_mutex_t op_lock, st_lock;

        /* op_lock: what app.json says. */
        struct proto_app_deploy *deploy; /* decoded from the stored canonical params */
        char **command;                  /* the app's own command (app.command.set); NULL: the template's */
        char image_digest[80];
        char *lower;                     /* the unpacked image root */
        uint32_t uid_base;
        uint32_t run_uid, run_gid;       /* the app's user inside (app-user.h); on the host uid_base + these */
        int image_stop_signal;           /* the image's StopSignal; 0: none (SIGTERM) */
        int64_t created_ms, updated_ms;
        int64_t seeded_ms;               /* when the volume was seeded from the image; 0: never (AGENT-API 4.2) */
        bool want_running;               /* ran before a node reboot: start again */
        json_t *update;                  /* an app.update under way (app-oci-update.c): its intent; NULL: none */

        /* st_lock. */
        enum proto_app_state state;
        bool stopping;                   /* an asked-for stop or kill: its exit is no crash */
        int64_t started_ms;
        bool has_exit;
        bool exit_reported;              /* this run's app.exited went out (watcher or stop, once) */
        int exit_code, exit_signal;
        int64_t restarts;                /* automatic restarts since the last start asked for */
        struct app_restart_history crashes; /* the last unasked exits, for the crash rule (drivers/app-restart.h) */
        int64_t restart_at_ms;           /* a restart the crash rule or resume scheduled; 0: none */
        bool restart_resume;             /* that restart is a node reboot's, not a crash's */
        int monitor_fd;                  /* the watcher's connection; -1 */
        bool removed;

        struct app *next;
};

struct app_conn {
        struct app_options o;
        char storage_dir[4096], apps_dir[4096], cache_dir[4096], crun_root[4096];
        char runtime[4096], monitor[4096], images_dir[4096], state_dir[4096];
        char registry[2048], registry_ca[4096];
        char backups_dir[4096];            /* app-oci-backup.c */
        struct app_registry_options reg;
        struct app_crun crun;
        bool private_ns;
        bool have_layout;                  /* a cgroup hierarchy was found: monitors get their own cgroup */
        enum app_cgroup_layout layout;
        pthread_mutex_t lock;
        struct app *apps;

        /* The watcher (app-oci-watch.c). */
        pthread_t thread;
        bool thread_started;
        int epfd, wakefd;
        bool quit;
        bool resumed;

        struct app_net *net; /* app-net.h: namespaces, addresses, groups, exposures */
};

/* app-oci.c */
struct app *app_find(struct app_conn *c, const char *id);        /* takes and drops conn->lock */
struct app *app_get(struct app_conn *c, const char *id, struct na_error *err); /* APP_NOT_FOUND */
void app_emit_state(struct app_conn *c, struct app *a, enum proto_app_state st);
void app_set_state(struct app_conn *c, struct app *a, enum proto_app_state st); /* st_lock held */
void app_cgroup_path(const char *id, char *buf, size_t len);
void app_container_id(const char *id, char *buf, size_t len);
struct app *app_new(struct app_conn *c, const char *id);
void app_free(struct app *a);
json_t *app_record_json(struct app *a); /* the App object; op_lock held */
void app_report_cgroup(struct app_conn *c, struct app *a); /* it runs: metrics follow its cgroup */

/* app-oci-meta.c */
int app_meta_save(struct app *a, struct na_error *err);
int app_meta_load(struct app_conn *c, const char *id, struct app **ret, struct na_error *err);
/* A command as the record keeps it: a JSON array (null for NULL), and back (NULL when not an array or out of memory). */
json_t *app_strv_json(char *const *v);
char **app_strv_from_json(json_t *a);

/* app-oci-power.c */
int app_start_locked(struct app_conn *c, struct app *a, bool automatic, struct na_error *err);
int app_stop_locked(struct app_conn *c, struct app *a, bool kill_now, unsigned grace_sec, struct na_error *err);
/* The app's directory and disk: root's, searchable by the app's group only (app-oci-power.c). */
int app_dirs_private(const struct app *a, struct na_error *err);
int app_ensure_mounts(struct app_conn *c, struct app *a, struct na_error *err);

/* app-oci-deploy.c: the app's user in its image (template.user, else the image's User); VALIDATION_ERROR on
 * template.user when the image lacks it. */
struct app_user;
int app_image_user(const struct proto_app_template *t, const struct app_image *img, const char *lower,
                   struct app_user *ret, struct na_error *err);

/* app-oci-power.c: the table's functions */
int app_oci_power(struct app_conn *c, const char *id, enum proto_app_power_action action, unsigned grace_sec,
                  const struct na_progress *progress, enum proto_app_state *ret_state, struct na_error *err);
int app_oci_status(struct app_conn *c, const char *id, struct proto_app_status *ret, struct na_error *err);
int app_oci_command_set(struct app_conn *c, const char *id, char *const *command, json_t **ret, struct na_error *err);
int app_oci_console_send(struct app_conn *c, const char *id, const char *line, struct na_error *err);
int app_oci_output(struct app_conn *c, const char *id, int64_t since_seq, int64_t limit, json_t **ret,
                   struct na_error *err);
int app_oci_files(struct app_conn *c, const char *id, struct app_fs **ret, struct na_error *err);
int app_oci_sftp_target(struct app_conn *c, const char *id, struct app_sftp_target *ret, struct na_error *err);
bool app_oci_sftp_enabled(const struct app *a); /* the App object's sftpEnabled: its credentials file says so */

/* app-oci-watch.c */
void app_oci_resume(struct app_conn *c);
/* This run's end, once: app.exited and the exit fields (the stop path calls it when
 * the watcher has not yet read the monitor's X). */
/* <app dir>/name (the app's files: app-oci-power.c says which). */
static inline void app_path_in(const struct app *a, const char *name, char *buf, size_t len)
{
        snprintf(buf, len, "%s/%s", a->dir, name);
}

void app_report_exit(struct app_conn *c, struct app *a, int code, int sig, bool crash_loop);
int app_watch_start(struct app_conn *c, struct na_error *err);
void app_watch_stop(struct app_conn *c);
void app_watch_attach(struct app_conn *c, struct app *a);   /* after a start or at resume */
void app_watch_detach(struct app_conn *c, struct app *a);
void app_watch_wake(struct app_conn *c);

/* app-oci-net.c: the table's group and exposure functions */
int app_oci_group_set(struct app_conn *c, const char *id, const char *group_id, bool leave, json_t **ret,
                      struct na_error *err);
int app_oci_exposure_add(struct app_conn *c, const char *id, const struct proto_exposure_add *p, json_t **ret,
                         struct na_error *err);
int app_oci_exposure_remove(struct app_conn *c, const char *id, const char *exposure_id, struct na_error *err);
int app_oci_exposure_list(struct app_conn *c, const char *id, json_t **ret, struct na_error *err);
int app_oci_exposure_verify(struct app_conn *c, const char *id, const char *exposure_id, json_t **ret,
                            struct na_error *err);
int app_oci_net_open(struct app_conn *c, struct na_error *err);
int app_oci_address(struct app_conn *c, const char *id, char buf[16], struct na_error *err);
/* The app's managed hostname <hostname>.<apps_domain> routed to its first template port
 * (add) or no longer (remove), through the routes hook when there is one. Best effort. */
void app_oci_managed_route(struct app_conn *c, const struct app *a, bool add);

/* app-oci-deploy.c, app-oci-images.c */
int app_oci_deploy(struct app_conn *c, const char *id, const struct proto_app_deploy *d,
                   const struct na_progress *progress, json_t **ret, struct na_error *err);
int app_oci_remove(struct app_conn *c, const char *id, struct na_error *err);
int app_oci_image_pull(struct app_conn *c, const struct proto_image_ref *ref, const struct na_progress *progress,
                       json_t **ret, struct na_error *err);
int app_oci_image_list(struct app_conn *c, json_t **ret, struct na_error *err);
int app_oci_image_delete(struct app_conn *c, const struct proto_image_ref *ref, struct na_error *err);
/* Resolve the image (pulling it when the store lacks it and a registry is set) and unpack it. */
int app_oci_image_ready(struct app_conn *c, const struct proto_image_ref *ref, const struct na_progress *progress,
                        struct app_image *ret_img, char **ret_rootfs, struct na_error *err);

/* app-oci-update.c: app.update, and an update the agent's death cut short put back (op_lock held; 0 when none). */
int app_oci_update(struct app_conn *c, const char *id, const struct proto_app_update *u, uint64_t budget_ms,
                   const struct na_progress *progress, json_t **ret, struct na_error *err);
int app_update_recover_locked(struct app_conn *c, struct app *a, struct na_error *err);

/* app-oci-backup.c: app.backup.* (drivers/app.h) */
/* At open: an app (cgroup, disk) a backup froze when the agent died is thawed, its snapshot dropped. */
void app_backup_thaw_left(const char *id, const char *dir);
int app_oci_backup_create(struct app_conn *c, const char *id, const struct proto_app_backup_create *p,
                          const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err);
int app_oci_backup_restore(struct app_conn *c, const char *id, const char *backup_id,
                           const struct na_progress *progress, struct na_error *err);
/* The same, op_lock held by the caller (app.update's safety backup and its rollback). */
int app_backup_create_locked(struct app_conn *c, struct app *a, const struct proto_app_backup_create *p,
                             const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err);
int app_backup_restore_locked(struct app_conn *c, struct app *a, const char *backup_id,
                              const struct na_progress *progress, struct na_error *err);
int app_oci_backup_list(struct app_conn *c, const char *id, struct proto_app_backup **ret, size_t *ret_n,
                        struct na_error *err);
int app_oci_backup_delete(struct app_conn *c, const char *id, const char *backup_id, struct na_error *err);
int app_oci_backup_open(struct app_conn *c, const char *id, const char *backup_id, int *ret_fd,
                        struct proto_app_backup *ret_info, struct na_error *err);
int app_oci_backup_tmpfile(struct app_conn *c, const char *id, int *ret_fd, uint64_t *ret_max_bytes,
                           struct na_error *err);
int app_oci_backup_adopt(struct app_conn *c, const char *id, const char *backup_id, int fd, const char *sha256,
                         const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err);
/* app-oci-console.c: a live console's connection to the app's monitor. */
int app_oci_console_attach(struct app_conn *c, const char *id, int *ret_fd, struct na_error *err);
