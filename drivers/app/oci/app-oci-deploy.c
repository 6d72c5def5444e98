/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.deploy and app.delete. A deploy makes everything an app needs but starts
 * nothing: the image pulled when the store lacks it and unpacked once per digest,
 * the app's id range, its disk (one hard quota for its volume and its root's
 * writable layer), and its record, written last: a deploy cut short leaves no record
 * and starts over cleanly when run again. A delete leaves nothing behind.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app/oci/app-ids.h"
#include "drivers/app/image/app-image.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/net/app-net.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-user.h"
#include "drivers/app/oci/app-volume.h"
#include "proto/app-params.h"
#include "ring/app-ring.h"
#include "volume/volume.h"

static char **strv_dup(char *const *v)
{
        if (!v)
                return NULL;
        size_t n = 0;
        while (v[n])
                n++;
        char **out = calloc(n + 1, sizeof(*out));
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        for (size_t j = 0; j < i; j++)
                                free(out[j]);
                        free(out);
                        return NULL;
                }
        NA_ANALYZER_FP_END
        return out;
}

/* A private copy of the params (the job frees its own when it ends), its strings its
 * own: the app keeps it for its life, without the JSON tree it was decoded from. */
static int deploy_copy(const struct proto_app_deploy *d, struct proto_app_deploy **ret, struct na_error *err)
{
        _cleanup_json_ json_t *canon = proto_app_deploy_canonical(d);
        if (!canon)
                return na_error_sys(err, ENOMEM, "app deploy");
        int r = proto_app_deploy_decode(canon, ret, err);
        if (r < 0)
                return r;
        if (proto_app_deploy_own(*ret) < 0) {
                proto_app_deploy_free(*ret);
                *ret = NULL;
                return na_error_sys(err, ENOMEM, "app deploy");
        }
        return 0;
}

/*
 * Volume seeding (AGENT-API 4.2): a volume that is empty when its app is made gets the
 * files its image holds at the volume's path, once, owned by the app's user, before
 * the first start; volumeSeededAt says when (never again after, and never for an
 * image with nothing there).
 */
static int seed_volume(struct app *a, const char *volume_path, struct na_error *err)
{
        if (a->seeded_ms)
                return 0;
        char volume[4300];
        snprintf(volume, sizeof(volume), "%s/disk/volume", a->dir);
        _cleanup_close_ int vfd = open(volume, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (vfd < 0)
                return na_error_sys(err, errno, "app %s: open %s", a->id, volume);
        _cleanup_close_ int image = open(a->lower, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (image < 0)
                return na_error_sys(err, errno, "app %s: open the image's root %s", a->id, a->lower);
        uint64_t n = 0;
        int r = app_fs_seed(image, volume_path, vfd, (uid_t)(a->uid_base + a->run_uid),
                            (gid_t)(a->uid_base + a->run_gid), &n, err);
        if (r < 0)
                return na_error_prefix(err, "app %s", a->id);
        if (n > 0)
                a->seeded_ms = (int64_t)na_now_real_ms();
        return 0;
}

/* The disk: made once, mounted, with its two directories. */
static int make_disk(struct app *a, int64_t quota_mb, struct na_error *err)
{
        char img[4200], disk[4200], sub[4300];
        snprintf(img, sizeof(img), "%s/disk.img", a->dir);
        snprintf(disk, sizeof(disk), "%s/disk", a->dir);
        int r = 0;
        if (access(img, F_OK) < 0)
                r = app_volume_create(img, (uint64_t)quota_mb, a->uid_base, a->uid_base, err);
        bool mounted = false;
        if (r >= 0)
                r = app_volume_is_mounted(disk, &mounted, err);
        if (r >= 0 && !mounted)
                r = app_volume_mount(img, disk, err);
        if (r < 0)
                return r;
        if ((r = app_dirs_private(a, err)) < 0)
                return r;
        snprintf(sub, sizeof(sub), "%s/volume", disk);
        if (mkdir(sub, 0755) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "mkdir %s", sub);
        /* The volume's root is the app's user's (AGENT-API 4.2). */
        if (chown(sub, a->uid_base + a->run_uid, a->uid_base + a->run_gid) < 0)
                return na_error_sys(err, errno, "chown %s", sub);
        snprintf(sub, sizeof(sub), "%s/layer", disk);
        if (mkdir(sub, 0711) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "mkdir %s", sub);
        if (chown(sub, 0, 0) < 0)
                return na_error_sys(err, errno, "chown %s", sub);
        return 0;
}

int app_image_user(const struct proto_app_template *t, const struct app_image *img, const char *lower,
                   struct app_user *ret, struct na_error *err)
{
        const char *spec = t->user ? t->user : img->user;
        int r = app_user_resolve(lower, spec, ret, err);
        if (r >= 0 || !err->code || !streq(err->code, NA_E_VALIDATION))
                return r;
        char msg[sizeof(err->message)];
        snprintf(msg, sizeof(msg), "%s", err->message);
        na_error_clear(err);
        if (t->user)
                return na_error_field(err, "template.user", "%s", msg);
        /* The image's own User is not the caller's input: the image is broken. */
        char label[PROTO_APP_IMAGE_REF_MAX + 1];
        return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: its User: %s",
                            proto_image_ref_format(&t->image, label, sizeof(label)), msg);
}

/* Device nodes the unpack skipped (<cache>/<hex>/skipped-devices beside the root): one system line. */
static void say_skipped(struct app *a, const char *lower)
{
        char path[4300];
        const char *slash = strrchr(lower, '/');
        if (!slash)
                return;
        snprintf(path, sizeof(path), "%.*s/" APP_IMAGE_SKIPPED_FILE, (int)(slash - lower), lower);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char buf[1024];
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (n <= 0)
                return;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        char msg[1600], label[PROTO_APP_IMAGE_REF_MAX + 1];
        snprintf(msg, sizeof(msg), "image %s: %s", proto_image_ref_format(&a->deploy->tmpl.image, label, sizeof(label)),
                 buf);
        struct na_error e = NA_ERROR_INIT;
        (void)app_ring_append_once(a->dir, APP_RING_SYSTEM, msg, strlen(msg), NULL, &e);
        na_error_clear(&e);
}

/* Everything of the app on this node, whatever state a cut-short deploy left. */
static int remove_files(struct app_conn *c, const char *id, const char *dir, struct na_error *err)
{
        char disk[4200], img[4200], layer[4300];
        snprintf(disk, sizeof(disk), "%s/disk", dir);
        snprintf(img, sizeof(img), "%s/disk.img", dir);
        snprintf(layer, sizeof(layer), "%s/layer", disk);
        int r = 0;
        bool mounted = false;
        if (app_volume_is_mounted(disk, &mounted, err) >= 0 && mounted)
                r = app_rootfs_remove_at(dir, layer, err);
        else
                r = app_rootfs_umount(dir, err);
        if (r >= 0)
                r = app_volume_remove(img, disk, err);
        if (r >= 0)
                r = app_ids_free(c->storage_dir, id, err);
        if (r >= 0)
                r = app_net_forget(c->net, id, err); /* exposures, rules, namespace, link, address */
        if (r >= 0)
                r = app_backup_forget(c->backups_dir, id, err); /* its local backups too (AGENT-API 4.2, Delete) */
        if (r < 0)
                return r;
        if (c->have_layout)
                app_monitor_cgroup_remove(NULL, c->layout, id);
        int dfd = open(c->apps_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return na_error_sys(err, errno, "open %s", c->apps_dir);
        r = app_fs_rm_rf(dfd, id, err);
        close(dfd);
        return r;
}

/*
 * An app's hostname (its managed domain <hostname>.<apps_domain>) and its sftpUsername
 * are its own on this node (issue 20: a second app deployed with another's hostname
 * took over its domain, and deleting it left the domain unrouted). INVALID_STATE
 * naming the owner (details.owner, details.field) when another app has one of them.
 * conn->lock held.
 */
static int check_unique_locked(struct app_conn *c, const char *id, const struct proto_app_deploy *d,
                               struct na_error *err)
{
        for (struct app *p = c->apps; p; p = p->next) {
                if (p->removed || !p->deploy || streq(p->id, id))
                        continue;
                const char *field = NULL, *value = NULL;
                if (d->hostname && p->deploy->hostname && strcasecmp(d->hostname, p->deploy->hostname) == 0)
                        field = "hostname", value = d->hostname;
                else if (d->sftp_username && p->deploy->sftp_username &&
                         strcmp(d->sftp_username, p->deploy->sftp_username) == 0)
                        field = "sftpUsername", value = d->sftp_username;
                if (!field)
                        continue;
                int r = na_error_set(err, EEXIST, NA_E_INVALID_STATE, "app %s: %s %s is app %s's on this node", id,
                                     field, value, p->id);
                na_error_detail(err, "state", json_string("in use"));
                na_error_detail(err, "field", json_string(field));
                na_error_detail(err, "owner", json_string(p->id));
                return r;
        }
        return 0;
}

static int check_unique(struct app_conn *c, const char *id, const struct proto_app_deploy *d, struct na_error *err)
{
        pthread_mutex_lock(&c->lock);
        int r = check_unique_locked(c, id, d, err);
        pthread_mutex_unlock(&c->lock);
        return r;
}

int app_oci_deploy(struct app_conn *c, const char *id, const struct proto_app_deploy *d,
                   const struct na_progress *progress, json_t **ret, struct na_error *err)
{
        struct app *old = app_find(c, id);
        if (old) {
                pthread_mutex_lock(&old->op_lock);
                int r = 0;
                if (proto_app_deploy_same(old->deploy, d)) {
                        if (!(*ret = app_record_json(old)))
                                r = na_error_sys(err, ENOMEM, "app %s", id);
                } else {
                        pthread_mutex_lock(&old->st_lock);
                        const char *st = proto_app_state_name(old->state);
                        pthread_mutex_unlock(&old->st_lock);
                        r = na_error_set(err, EEXIST, NA_E_INVALID_STATE,
                                         "app %s: deployed already with other params; delete it first", id);
                        na_error_detail(err, "state", json_string(st));
                }
                pthread_mutex_unlock(&old->op_lock);
                return r;
        }

        na_progress_stage(progress, "pulling-image", 0, NULL);
        struct app_image img = { 0 };
        _cleanup_free_ char *lower = NULL;
        int r = app_oci_image_ready(c, &d->tmpl.image, progress, &img, &lower, err);
        if (r < 0)
                return na_error_prefix(err, "app %s", id);
        /* Before anything of the app is made (and again when it is added: see below). */
        if ((r = check_unique(c, id, d, err)) < 0) {
                app_image_clear(&img);
                return r;
        }

        /* The app's user, checked before anything of the app is made. */
        struct app_user user;
        if ((r = app_image_user(&d->tmpl, &img, lower, &user, err)) < 0) {
                app_image_clear(&img);
                return na_error_prefix(err, "app %s", id);
        }
        struct app *a = app_new(c, id);
        if (!a) {
                app_image_clear(&img);
                return na_error_sys(err, ENOMEM, "app %s", id);
        }
        a->run_uid = user.uid;
        a->run_gid = user.gid;
        a->image_stop_signal = proto_app_signal_parse(img.stop_signal);
        snprintf(a->image_digest, sizeof(a->image_digest), "%s", img.manifest_digest);
        free(a->lower);
        a->lower = TAKE_PTR(lower);
        app_image_clear(&img);

        na_progress_stage(progress, "creating-volume", 0, NULL);
        struct app_ids ids;
        r = na_mkdir_p(a->dir, 0700, err);
        if (r >= 0 && chmod(a->dir, 0700) < 0) /* the app's ids reach it once it has them (app_dirs_private) */
                r = na_error_sys(err, errno, "chmod %s", a->dir);
        if (r >= 0)
                r = na_progress_checkpoint(progress, err);
        if (r >= 0)
                r = app_ids_allocate(c->storage_dir, c->o.id_base ? c->o.id_base : APP_IDS_DEFAULT_BASE, id, &ids, err);
        if (r >= 0) {
                a->uid_base = ids.uid_base;
                r = make_disk(a, d->plan.volume_quota_mb, err);
        }
        if (r >= 0)
                r = seed_volume(a, d->tmpl.volume_path ? d->tmpl.volume_path : PROTO_APP_VOLUME_PATH_DEFAULT, err);

        if (r >= 0) {
                na_progress_stage(progress, "configuring", 0, NULL);
                r = deploy_copy(d, &a->deploy, err);
        }
        if (r >= 0 && d->command && !(a->command = strv_dup(d->command)))
                r = na_error_sys(err, ENOMEM, "app %s", id);
        if (r >= 0) {
                a->created_ms = a->updated_ms = (int64_t)na_now_real_ms();
                r = app_meta_save(a, err); /* from here on the app exists */
        }
        if (r >= 0)
                r = app_net_register(c->net, id, a->deploy->hostname, a->deploy->group_id, err);
        if (r >= 0)
                say_skipped(a, a->lower);
        if (r >= 0 && !(*ret = app_record_json(a)))
                r = na_error_sys(err, ENOMEM, "app %s", id);
        /* Again where it counts: two deploys of one hostname may have run side by side. */
        bool clash = false;
        if (r >= 0) {
                pthread_mutex_lock(&c->lock);
                if ((r = check_unique_locked(c, id, d, err)) >= 0) {
                        a->next = c->apps;
                        c->apps = a;
                }
                pthread_mutex_unlock(&c->lock);
                if (r < 0) {
                        clash = true; /* its message names the app already */
                        json_decref(*ret);
                        *ret = NULL;
                }
        }
        if (r < 0) {
                struct na_error e = NA_ERROR_INIT;
                (void)remove_files(c, id, a->dir, &e); /* nothing half-made stays */
                na_error_clear(&e);
                app_free(a);
                return clash ? r : na_error_prefix(err, "app %s", id);
        }
        return 0;
}

int app_oci_remove(struct app_conn *c, const char *id, struct na_error *err)
{
        struct app *a = app_find(c, id);
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/%s", c->apps_dir, id);
        if (!a) {
                /* Converging: unknown, or what a deploy cut short left. */
                if (access(dir, F_OK) < 0)
                        return 0;
                return remove_files(c, id, dir, err) < 0 ? na_error_prefix(err, "app %s: delete", id) : 0;
        }
        /* Live file sessions let go of the volume before it is unmounted (outside op_lock:
         * the agent's loop, which ends them, may ask the driver for this app meanwhile). */
        if (c->o.on_files_off)
                c->o.on_files_off(c->o.userdata, id, "target-deleted");
        pthread_mutex_lock(&a->op_lock);
        int r = app_stop_locked(c, a, true, 0, err);
        if (r >= 0) {
                pthread_mutex_lock(&a->st_lock);
                a->removed = true; /* kept in the list until close: the watcher may hold it */
                pthread_mutex_unlock(&a->st_lock);
                app_oci_managed_route(c, a, false);
                r = remove_files(c, id, a->dir, err);
                if (c->o.on_cgroup)
                        c->o.on_cgroup(c->o.userdata, id, NULL, 0, 0);
        }
        pthread_mutex_unlock(&a->op_lock);
        return r < 0 ? na_error_prefix(err, "app %s: delete", id) : 0;
}
