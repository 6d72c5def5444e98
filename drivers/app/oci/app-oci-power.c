/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Starting and stopping an app's container (app.power; the start the crash rule and
 * a node's restart ask for). What is read of a running one is in app-oci-status.c,
 * app-oci-output.c and app-oci-files.c; its command in app-oci-command.c.
 *
 * An app's files: <dir>/app.json, <dir>/disk.img (the hard quota: a sparse ext4
 * image, app-volume.h) mounted at <dir>/disk, holding both the volume
 * (<dir>/disk/volume, bind-mounted at template.volumePath) and the writable layer of
 * the root (<dir>/disk/layer), so that one quota bounds everything the app writes;
 * <dir>/rootfs (the overlay of the shared image under that layer), <dir>/bundle
 * (config.json), and the monitor's files (app-monitor.h): output ring, exit record.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/net/app-net.h"
#include "volume/volume.h"
#include "drivers/app/oci/app-oci-spec.h"
#include "ring/app-ring.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-user.h"
#include "drivers/app/oci/app-volume.h"

static void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

/*
 * The app's directory and its disk's mount point: root's, searchable by the app's own
 * group (its ids' base: crun, inside the app's user namespace, traverses them to the
 * root and the volume) and by nobody else, so no other uid of the node (a service
 * account, another app's) walks into a volume. Applied at deploy and at every mount,
 * so apps made by an earlier agent (mode 0711) are closed too.
 */
int app_dirs_private(const struct app *a, struct na_error *err)
{
        char disk[4200];
        app_path_in(a, "disk", disk, sizeof(disk));
        const char *dirs[] = { a->dir, disk };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                _cleanup_close_ int fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && i > 0)
                        continue;
                if (fd < 0)
                        return na_error_sys(err, errno, "app %s: open %s", a->id, dirs[i]);
                if (fchown(fd, 0, (gid_t)a->uid_base) < 0 || fchmod(fd, 0710) < 0)
                        return na_error_sys(err, errno, "app %s: make %s private to the app", a->id, dirs[i]);
        }
        return 0;
}

int app_ensure_mounts(struct app_conn *c, struct app *a, struct na_error *err)
{
        (void)c;
        char img[4200], disk[4200], layer[4300];
        app_path_in(a, "disk.img", img, sizeof(img));
        app_path_in(a, "disk", disk, sizeof(disk));
        snprintf(layer, sizeof(layer), "%s/layer", disk);
        bool mounted = false;
        int r = app_volume_is_mounted(disk, &mounted, err);
        if (r >= 0 && !mounted)
                r = app_volume_mount(img, disk, err);
        if (r >= 0)
                r = app_dirs_private(a, err);
        if (r < 0)
                return na_error_prefix(err, "app %s: volume", a->id);
        r = app_rootfs_is_mounted(a->dir, &mounted, err);
        if (r >= 0 && !mounted)
                r = app_rootfs_mount_at(a->lower, a->dir, layer, a->uid_base, a->uid_base, err);
        return r < 0 ? na_error_prefix(err, "app %s: root file system", a->id) : 0;
}

/* NAME=value lists: the image's, then the template's replacing a name they share. */
static char **merge_env(char *const *image_env, char *const *tmpl_env)
{
        size_t n = 0;
        for (char *const *p = image_env; p && *p; p++)
                n++;
        for (char *const *p = tmpl_env; p && *p; p++)
                n++;
        char **out = calloc(n + 1, sizeof(*out));
        if (!out)
                return NULL;
        size_t k = 0;
        for (char *const *p = image_env; p && *p; p++) {
                size_t nl = strcspn(*p, "=");
                bool replaced = false;
                for (char *const *q = tmpl_env; q && *q && !replaced; q++)
                        replaced = strncmp(*p, *q, nl + 1) == 0;
                if (!replaced)
                        out[k++] = *p;
        }
        for (char *const *p = tmpl_env; p && *p; p++)
                out[k++] = *p;
        return out;
}

static char **image_argv(const struct app_image *img)
{
        size_t n = 0;
        for (char **p = img->entrypoint; p && *p; p++)
                n++;
        for (char **p = img->cmd; p && *p; p++)
                n++;
        if (n == 0)
                return NULL;
        char **out = calloc(n + 1, sizeof(*out));
        size_t k = 0;
        for (char **p = img->entrypoint; out && p && *p; p++)
                out[k++] = *p;
        for (char **p = img->cmd; out && p && *p; p++)
                out[k++] = *p;
        return out;
}

static int write_bundle(struct app_conn *c, struct app *a, const char *netns, const char *net_dir,
                        struct na_error *err)
{
        const struct proto_app_deploy *d = a->deploy;
        struct app_image img = { 0 };
        int r = app_image_resolve(c->images_dir, &d->tmpl.image, false, &img, err);
        if (r < 0)
                return na_error_prefix(err, "app %s", a->id);
        _cleanup_free_ char **from_image = image_argv(&img);
        char *const *argv = a->command ? a->command : d->tmpl.command ? d->tmpl.command : from_image;
        _cleanup_free_ char **env = merge_env(img.env, d->tmpl.env);
        if (!argv || !env) {
                app_image_clear(&img);
                return argv ? na_error_sys(err, ENOMEM, "app %s", a->id)
                            : na_error_set(err, EINVAL, NA_E_INVALID_STATE,
                                           "app %s: no start command: the template has none and image %s:%s has no "
                                           "Entrypoint or Cmd",
                                           a->id, d->tmpl.image.name, d->tmpl.image.tag);
        }
        /* The user, from the image's own files each time (its groups are not kept). */
        struct app_user user;
        r = app_image_user(&d->tmpl, &img, a->lower, &user, err);
        if (r < 0) {
                app_image_clear(&img);
                return na_error_prefix(err, "app %s", a->id);
        }
        a->run_uid = user.uid; /* op_lock held: an app deployed before users were kept gets them now */
        a->run_gid = user.gid;
        char rootfs[4200], volume[4200], cgroup[128], bundle[4200];
        app_path_in(a, "rootfs", rootfs, sizeof(rootfs));
        app_path_in(a, "disk/volume", volume, sizeof(volume));
        app_path_in(a, "bundle", bundle, sizeof(bundle));
        snprintf(cgroup, sizeof(cgroup), "/");
        app_cgroup_path(a->id, cgroup + 1, sizeof(cgroup) - 1);
        /* The device behind the volume (its mounted disk image's loop device), for the I/O limits. */
        struct stat vst;
        bool io_dev = (c->o.io.read_bps || c->o.io.write_bps || c->o.io.read_iops || c->o.io.write_iops) &&
                      stat(volume, &vst) == 0;
        struct app_oci_input in = {
                .io_major = io_dev ? major(vst.st_dev) : 0,
                .io_minor = io_dev ? minor(vst.st_dev) : 0,
                .io_read_bps = c->o.io.read_bps,
                .io_write_bps = c->o.io.write_bps,
                .io_read_iops = c->o.io.read_iops,
                .io_write_iops = c->o.io.write_iops,
                .id = a->id,
                .hostname = d->hostname,
                .argv = argv,
                .env = env,
                .cwd = img.working_dir && *img.working_dir ? img.working_dir : d->tmpl.volume_path,
                .rootfs = rootfs,
                .volume_src = volume,
                .volume_dst = d->tmpl.volume_path,
                .uid_base = a->uid_base,
                .id_count = 65536,
                .uid = user.uid,
                .gid = user.gid,
                .groups = user.groups,
                .n_groups = user.n_groups,
                .cpu_cores = (double)d->plan.cpu_millis / 1000.0,
                .memory_mb = (uint64_t)d->plan.memory_mb,
                .pids = d->plan.pids,
                .cgroup_path = cgroup,
                .netns_path = netns && *netns ? netns : NULL,
                .net_dir = net_dir && *net_dir ? net_dir : NULL,
        };
        _cleanup_json_ json_t *cfg = NULL;
        r = app_oci_config(&in, &cfg, err);
        app_image_clear(&img);
        if (r >= 0)
                r = na_mkdir_p(bundle, 0700, err);
        if (r >= 0)
                r = app_oci_write(bundle, cfg, err);
        return r < 0 ? na_error_prefix(err, "app %s: container configuration", a->id) : 0;
}

int app_start_locked(struct app_conn *c, struct app *a, bool automatic, struct na_error *err)
{
        if (app_monitor_alive(a->dir, NULL))
                return 0; /* converging: it runs */
        char cid[64], bundle[4200];
        app_container_id(a->id, cid, sizeof(cid));
        app_path_in(a, "bundle", bundle, sizeof(bundle));
        char netns[4200], net_dir[4200], rootfs[4200];
        app_path_in(a, "rootfs", rootfs, sizeof(rootfs));
        int r = app_ensure_mounts(c, a, err);
        /* Its network: registered again (an app deployed before networks came gets its
         * address now), then namespace, link, hosts files; all idempotent. */
        if (r >= 0)
                r = app_net_register(c->net, a->id, a->deploy->hostname, a->deploy->group_id, err);
        if (r >= 0)
                r = app_net_prepare(c->net, a->id, rootfs, a->uid_base, netns, sizeof(netns), net_dir,
                                    sizeof(net_dir), err);
        if (r >= 0)
                r = write_bundle(c, a, netns, net_dir, err);
        if (r < 0)
                return r;
        app_oci_managed_route(c, a, true);
        struct na_error e = NA_ERROR_INIT;
        (void)app_crun_delete(&c->crun, cid, &e); /* a container a killed monitor left behind */
        na_error_clear(&e);
        /* The monitor's own cgroup, capped at the app's CPU: its output costs the app, not the node. */
        struct app_monitor_cgroup mcg = { 0 };
        const char *mcg_dirs[4];
        if (c->have_layout) {
                struct app_monitor_caps caps = {
                        .cpu_period_us = APP_OCI_CPU_PERIOD,
                        .cpu_quota_us = app_oci_cpu_quota(a->deploy->plan.cpu_millis / 1000.0),
                        .memory_bytes = (int64_t)(c->o.monitor_memory_mb ? c->o.monitor_memory_mb
                                                                         : APP_MONITOR_MEMORY_MB_DEFAULT) << 20,
                        .pids = APP_MONITOR_PIDS,
                };
                r = app_monitor_cgroup_make(NULL, c->layout, a->id, &caps, &mcg, err);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < mcg.n; i++)
                        mcg_dirs[i] = mcg.dirs[i];
        }
        struct app_monitor_spec spec = {
                .cgroups = mcg_dirs,
                .n_cgroups = mcg.n,
                .lines_per_sec = c->o.output_lines_per_sec,
                .monitor_path = c->monitor,
                .dir = a->dir,
                .id = cid,
                .runtime = c->runtime,
                .runtime_root = c->crun_root,
                .bundle = bundle,
                .private_cgroup_ns = c->private_ns,
                .started_pattern = a->deploy->tmpl.started_pattern,
        };
        /* Stamped before the spawn: an app that ends at once has an exit record newer than it. */
        int64_t started = (int64_t)na_now_real_ms();
        r = app_monitor_spawn(&spec, NULL, NULL, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&a->st_lock);
        a->stopping = false;
        a->has_exit = false;
        a->exit_reported = false;
        a->restart_at_ms = 0;
        a->started_ms = started;
        if (!automatic) {
                a->restarts = 0;
                app_restart_forget(&a->crashes);
        }
        app_set_state(c, a, a->deploy->tmpl.started_pattern && !app_monitor_started(a->dir) ? PROTO_APP_STARTING
                                                                                            : PROTO_APP_RUNNING);
        pthread_mutex_unlock(&a->st_lock);
        a->want_running = true;
        if (app_meta_save(a, &e) < 0)
                na_error_clear(&e); /* the app runs; its record catches up at the next change */
        app_watch_attach(c, a);
        app_report_cgroup(c, a);
        return 0;
}

static bool wait_gone(struct app *a, long ms)
{
        for (long t = 0; t < ms; t += 50) {
                if (!app_monitor_alive(a->dir, NULL))
                        return true;
                sleep_ms(50);
        }
        return !app_monitor_alive(a->dir, NULL);
}

int app_stop_locked(struct app_conn *c, struct app *a, bool kill_now, unsigned grace_sec, struct na_error *err)
{
        char cid[64];
        app_container_id(a->id, cid, sizeof(cid));
        struct na_error e = NA_ERROR_INIT;
        pthread_mutex_lock(&a->st_lock);
        a->restart_at_ms = 0;
        bool alive = app_monitor_alive(a->dir, NULL);
        if (alive) {
                a->stopping = true;
                app_set_state(c, a, PROTO_APP_STOPPING);
        }
        pthread_mutex_unlock(&a->st_lock);
        if (alive) {
                const struct proto_app_stop *stop = &a->deploy->tmpl.stop;
                bool asked = false;
                if (!kill_now && stop->kind == PROTO_APP_STOP_LINE) {
                        /* Said before it is sent: the app's answer comes after it in the output. */
                        char msg[PROTO_APP_LINE_MAX + 64];
                        snprintf(msg, sizeof(msg), "stopping: sending the line '%s'", stop->line);
                        (void)app_ring_append_once(a->dir, APP_RING_SYSTEM, msg, strlen(msg), NULL, &e);
                        na_error_clear(&e);
                        asked = app_monitor_send_line(a->dir, stop->line, &e) == 0;
                        na_error_clear(&e);
                }
                /* template.stop, else the image's StopSignal, else SIGTERM. */
                int sig = stop->kind == PROTO_APP_STOP_LINE ? SIGTERM
                          : a->deploy->tmpl.stop_given       ? stop->signal
                          : a->image_stop_signal > 0         ? a->image_stop_signal
                                                             : SIGTERM;
                if (!kill_now && !asked) {
                        char msg[96];
                        snprintf(msg, sizeof(msg), "stopping: sending %s", proto_app_signal_name(sig));
                        (void)app_ring_append_once(a->dir, APP_RING_SYSTEM, msg, strlen(msg), NULL, &e);
                        na_error_clear(&e);
                }
                if (!kill_now && !asked) {
                        (void)app_crun_kill(&c->crun, cid, sig, &e);
                        na_error_clear(&e);
                }
                if (kill_now || !wait_gone(a, (long)grace_sec * 1000)) {
                        (void)app_crun_kill(&c->crun, cid, SIGKILL, &e);
                        na_error_clear(&e);
                        if (!wait_gone(a, 10000))
                                return na_error_set(err, EBUSY, NA_E_DRIVER,
                                                    "app %s: the container did not end 10 s after SIGKILL", a->id);
                }
        }
        (void)app_crun_delete(&c->crun, cid, &e);
        na_error_clear(&e);
        if (alive) {
                /* The watcher may not have read the monitor's X yet: the exit is said once,
                 * by whichever of us comes first. */
                struct app_exit ex;
                if (app_monitor_read_exit(a->dir, &ex, &e) == 0)
                        app_report_exit(c, a, ex.code, ex.signal, false);
                na_error_clear(&e);
        }
        app_watch_detach(c, a);
        pthread_mutex_lock(&a->st_lock);
        a->stopping = false;
        app_set_state(c, a, PROTO_APP_STOPPED);
        pthread_mutex_unlock(&a->st_lock);
        a->want_running = false;
        if (app_meta_save(a, &e) < 0)
                na_error_clear(&e);
        return 0;
}

int app_oci_power(struct app_conn *c, const char *id, enum proto_app_power_action action, unsigned grace_sec,
                  const struct na_progress *progress, enum proto_app_state *ret_state, struct na_error *err)
{
        (void)progress;
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        pthread_mutex_lock(&a->op_lock);
        int r = 0;
        switch (action) {
        case PROTO_APP_POWER_START:
                r = app_start_locked(c, a, false, err);
                break;
        case PROTO_APP_POWER_STOP:
                r = app_stop_locked(c, a, false, grace_sec, err);
                break;
        case PROTO_APP_POWER_RESTART:
                r = app_stop_locked(c, a, false, grace_sec, err);
                if (r >= 0)
                        r = app_start_locked(c, a, false, err);
                break;
        case PROTO_APP_POWER_KILL:
                r = app_stop_locked(c, a, true, 0, err);
                break;
        }
        pthread_mutex_lock(&a->st_lock);
        *ret_state = a->state;
        pthread_mutex_unlock(&a->st_lock);
        pthread_mutex_unlock(&a->op_lock);
        return r;
}
