/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.backup.* of the crun driver (drivers/app.h): create (the volume archived while
 * the app's cgroup is frozen), restore (the app stopped, the archive extracted next to
 * the volume and swapped in with one renameat2(RENAME_EXCHANGE)), list, delete, and
 * the two hooks export and import build on: open (a backup's file for reading) and
 * tmpfile + adopt (a downloaded archive made a listed backup once its sha256 holds).
 * Each takes the app's op_lock, as the other driver functions do. The parts are in
 * drivers/app/backup/app-backup*.c (app-backup.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "volume/volume.h"
#include "drivers/app/oci/app-ids.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/oci/app-volume.h"

#define MB (1ull << 20)
#define STOP_GRACE_SEC 30
#define RESTORE_DIR "volume.restore"

static int check_bid(const char *bid, struct na_error *err)
{
        if (!bid || !proto_vps_object_id_valid(bid))
                return na_error_field(err, "backupId", "must be 1..64 letters, digits, hyphens or underscores");
        return 0;
}

static const char *backups_root(struct app_conn *c)
{
        return c->backups_dir;
}

/* The app, locked, and its backups directory. */
static int begin(struct app_conn *c, const char *id, const char *bid, bool create_dir, struct app **ret_app,
                 char **ret_dir, struct na_error *err)
{
        if (bid && check_bid(bid, err) < 0)
                return -EINVAL;
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        int r = app_backup_dir(backups_root(c), a->id, create_dir, ret_dir, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&a->op_lock);
        *ret_app = a;
        return 0;
}

static int not_found(const char *id, const char *bid, struct na_error *err)
{
        return na_error_set(err, ENOENT, NA_E_BACKUP_NOT_FOUND, "app %s: no backup %s", id, bid);
}

static int mount_disk(struct app *a, char *disk, size_t len, struct na_error *err)
{
        char img[4200];
        app_path_in(a, "disk.img", img, sizeof(img));
        app_path_in(a, "disk", disk, len);
        bool mounted = false;
        int r = app_volume_is_mounted(disk, &mounted, err);
        if (r >= 0 && !mounted)
                r = app_volume_mount(img, disk, err);
        return r;
}

static bool is_running(struct app *a)
{
        pthread_mutex_lock(&a->st_lock);
        bool run = a->state == PROTO_APP_RUNNING || a->state == PROTO_APP_STARTING;
        pthread_mutex_unlock(&a->st_lock);
        return run;
}

void app_backup_thaw_left(const char *id, const char *dir)
{
        char cg[128], disk[4200], clone[4300], mnt[4300];
        snprintf(disk, sizeof(disk), "%s/disk", dir);
        snprintf(clone, sizeof(clone), "%s/backup-snapshot.img", dir);
        snprintf(mnt, sizeof(mnt), "%s/backup-snapshot", dir);
        bool mounted = false;
        struct na_error e = NA_ERROR_INIT;
        if (app_volume_is_mounted(disk, &mounted, &e) == 0 && mounted)
                app_backup_fs_thaw(disk); /* never the file system under an unmounted disk */
        na_error_clear(&e);
        app_backup_snapshot_drop(clone, mnt);
        app_cgroup_path(id, cg, sizeof(cg));
        (void)app_backup_thaw(cg, &e);
        na_error_clear(&e);
}

/* ---- create ---- */

/* Whether the file system holding path may have reflinks (XFS, btrfs): only there is a snapshot tried. */
static bool may_reflink(const char *path)
{
        struct statfs sf;
        return statfs(path, &sf) == 0 && (sf.f_type == XFS_SUPER_MAGIC || sf.f_type == BTRFS_SUPER_MAGIC);
}

static int thaw(const char *cg, int r, struct na_error *err)
{
        struct na_error te = NA_ERROR_INIT;
        int t = app_backup_thaw(cg, &te);
        if (t < 0 && r >= 0) {
                na_error_move(err, &te);
                r = na_error_prefix(err, "thaw the app");
        }
        na_error_clear(&te);
        return r;
}

/*
 * Consistency: a running app's cgroup is frozen; where the storage has reflinks the
 * disk image is cloned (app-backup-snapshot.c) and the app thawed at once, the clone
 * archived; elsewhere the live volume is archived with the app frozen throughout.
 */
static int archive_volume(struct app_conn *c, struct app *a, const struct proto_app_backup_create *p, int out_fd,
                          const struct na_progress *progress, struct app_backup_written *w, struct na_error *err)
{
        (void)c;
        char disk[4200], img[4200], src[4400], clone[4300], mnt[4300];
        int r = mount_disk(a, disk, sizeof(disk), err);
        if (r < 0)
                return r;
        app_path_in(a, "disk.img", img, sizeof(img));
        app_path_in(a, "backup-snapshot.img", clone, sizeof(clone));
        app_path_in(a, "backup-snapshot", mnt, sizeof(mnt));
        /* What a restore cut short by the agent's death left next to the volume takes quota: gone. */
        _cleanup_close_ int dfd = open(disk, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return na_error_sys(err, errno, "open %s", disk);
        if ((r = app_fs_rm_rf(dfd, RESTORE_DIR, err)) < 0)
                return r;
        struct app_backup_ignore *ig = NULL;
        if ((r = app_backup_ignore_new(p->ignore, &ig, err)) < 0)
                return r;
        struct app_volume_usage u = { 0 };
        struct na_error e = NA_ERROR_INIT;
        (void)app_volume_usage(disk, &u, &e);
        na_error_clear(&e);
        struct app_backup_write_opts o = { .id_base = a->uid_base, .id_count = APP_IDS_RANGE, .ignore = ig,
                                           .total_bytes = u.used_mb * MB, .max_file_bytes = u.size_mb * MB,
                                           .progress = progress };
        char cg[128];
        app_cgroup_path(a->id, cg, sizeof(cg));
        bool frozen = false;
        if (is_running(a)) {
                r = app_backup_freeze(cg, err);
                frozen = true; /* thawed whatever the freeze said */
                if (r < 0)
                        na_error_prefix(err, "freeze the app");
        }
        int snap = 0;
        if (r >= 0 && may_reflink(a->dir) && (snap = app_backup_snapshot(img, disk, clone, mnt, err)) < 0)
                r = snap;
        if (snap > 0 && frozen) {
                r = thaw(cg, r, err); /* the snapshot holds the instant: the app runs on */
                frozen = false;
        }
        snprintf(src, sizeof(src), "%s/volume", snap > 0 ? mnt : disk);
        if (r >= 0) {
                _cleanup_close_ int vfd = open(src, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = vfd < 0 ? na_error_sys(err, errno, "open %s", src) : app_backup_write(vfd, out_fd, &o, w, err);
        }
        if (frozen)
                r = thaw(cg, r, err);
        if (snap > 0)
                app_backup_snapshot_drop(clone, mnt);
        app_backup_ignore_free(ig);
        return r;
}

int app_backup_create_locked(struct app_conn *c, struct app *a, const struct proto_app_backup_create *p,
                             const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err)
{
        _cleanup_free_ char *dir = NULL;
        int r = check_bid(p->backup_id, err);
        if (r >= 0)
                r = app_backup_dir(backups_root(c), a->id, true, &dir, err);
        if (r < 0)
                return r;
        r = app_backup_record_load(dir, p->backup_id, ret, err);
        if (r != -ENOENT) /* made before: the same backup */
                return r;
        r = 0;
        app_backup_sweep(dir);
        _cleanup_free_ char *tmp = na_strdupf("%s/%s" APP_BACKUP_SUFFIX ".partial", dir, p->backup_id);
        if (!tmp)
                return na_error_sys(err, ENOMEM, "app %s: backup %s", a->id, p->backup_id);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                r = na_error_sys(err, errno, "create %s", tmp);
        struct app_backup_written w = { 0 };
        if (r >= 0)
                r = archive_volume(c, a, p, fd, progress, &w, err);
        if (r >= 0) {
                na_progress_stage(progress, "compressing", 100, NULL);
                r = app_backup_commit(dir, a->id, p->backup_id, fd, tmp, w.size_bytes, w.sha256, ret, err);
        }
        if (r < 0 && fd >= 0)
                (void)unlink(tmp);
        if (r >= 0 && (r = app_backup_retain(dir, &p->limits, err)) < 0)
                na_error_prefix(err, "backup made; retention");
        return r < 0 ? na_error_prefix(err, "app %s: backup %s", a->id, p->backup_id) : 0;
}

int app_oci_backup_create(struct app_conn *c, const char *id, const struct proto_app_backup_create *p,
                          const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, p->backup_id, true, &a, &dir, err);
        if (r < 0)
                return r;
        r = app_backup_create_locked(c, a, p, progress, ret, err);
        pthread_mutex_unlock(&a->op_lock);
        return r;
}

/* ---- restore ---- */

/* Extract into disk/volume.restore and swap it with disk/volume; the old tree is removed. */
static int replace_volume(struct app *a, const char *disk, int archive_fd, const struct na_progress *progress,
                          const char *what, struct na_error *err)
{
        _cleanup_close_ int dfd = open(disk, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return na_error_sys(err, errno, "open %s", disk);
        int r = app_fs_rm_rf(dfd, RESTORE_DIR, err); /* a restore cut short */
        if (r < 0)
                return r;
        struct stat old;
        if (fstatat(dfd, "volume", &old, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(old.st_mode))
                return na_error_sys(err, errno ? errno : ENOTDIR, "%s/volume", disk);
        if (mkdirat(dfd, RESTORE_DIR, 0700) < 0)
                return na_error_sys(err, errno, "mkdir %s/" RESTORE_DIR, disk);
        _cleanup_close_ int nfd = openat(dfd, RESTORE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 || fchown(nfd, old.st_uid, old.st_gid) < 0 || fchmod(nfd, old.st_mode & 07777) < 0)
                r = na_error_sys(err, errno, "set up %s/" RESTORE_DIR, disk);
        if (r >= 0)
                r = app_backup_extract(archive_fd, nfd, a->uid_base, APP_IDS_RANGE, progress, what, err);
        if (r >= 0 && syncfs(nfd) < 0)
                r = na_error_sys(err, errno, "sync the volume");
        if (r >= 0 && renameat2(dfd, RESTORE_DIR, dfd, "volume", RENAME_EXCHANGE) < 0)
                r = na_error_sys(err, errno, "swap the restored tree in");
        /* Either the partial new tree (failure) or the old one (success) goes. */
        struct na_error e = NA_ERROR_INIT;
        if (app_fs_rm_rf(dfd, RESTORE_DIR, &e) < 0 && r >= 0) {
                na_error_move(err, &e);
                r = na_error_prefix(err, "remove the old contents");
        }
        na_error_clear(&e);
        return r;
}

int app_backup_restore_locked(struct app_conn *c, struct app *a, const char *backup_id,
                              const struct na_progress *progress, struct na_error *err)
{
        _cleanup_free_ char *dir = NULL;
        int r = check_bid(backup_id, err);
        if (r >= 0)
                r = app_backup_dir(backups_root(c), a->id, false, &dir, err);
        if (r < 0)
                return r;
        char what[160];
        snprintf(what, sizeof(what), "app %s: backup %s", a->id, backup_id);
        struct proto_app_backup b;
        _cleanup_close_ int fd = -1;
        r = app_backup_record_load(dir, backup_id, &b, err);
        if (r == -ENOENT)
                r = not_found(a->id, backup_id, err);
        if (r >= 0) {
                _cleanup_free_ char *data = na_strdupf("%s/%s" APP_BACKUP_SUFFIX, dir, backup_id);
                fd = data ? open(data, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
                if (fd < 0)
                        r = na_error_sys(err, data ? errno : ENOMEM, "%s: open", what);
        }
        /* The archive is checked before anything changes. */
        char sha[65];
        uint64_t size = 0;
        if (r >= 0)
                r = app_backup_hash_fd(fd, progress, sha, &size, err);
        if (r >= 0 && (!streq(sha, b.sha256) || size != (uint64_t)b.size_bytes)) {
                na_error_field(err, "backupId", "the backup is damaged: its sha256 differs from its record");
                snprintf(err->message, sizeof(err->message), "%s: refused: the file's sha256 differs from its record",
                         what);
                r = -EBADMSG;
        }
        bool was_running = false;
        if (r >= 0) {
                na_progress_stage(progress, "stopping", 0, NULL);
                was_running = is_running(a);
                if (was_running)
                        r = app_stop_locked(c, a, false, STOP_GRACE_SEC, err);
        }
        char disk[4200];
        if (r >= 0)
                r = mount_disk(a, disk, sizeof(disk), err);
        if (r >= 0) {
                na_progress_stage(progress, "restoring", 0, NULL);
                r = replace_volume(a, disk, fd, progress, what, err);
        }
        if (was_running) {
                /* Started again whatever happened: a failed restore left the old contents. */
                na_progress_stage(progress, "starting", 0, NULL);
                struct na_error e = NA_ERROR_INIT;
                int s = app_start_locked(c, a, false, &e);
                if (s < 0 && r >= 0) {
                        na_error_move(err, &e);
                        r = s;
                }
                na_error_clear(&e);
        }
        if (r < 0 && !strstr(err->message, what))
                na_error_prefix(err, "%s: restore", what);
        return r;
}

int app_oci_backup_restore(struct app_conn *c, const char *id, const char *backup_id,
                           const struct na_progress *progress, struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, backup_id, false, &a, &dir, err);
        if (r < 0)
                return r;
        r = app_backup_restore_locked(c, a, backup_id, progress, err);
        pthread_mutex_unlock(&a->op_lock);
        return r;
}

/* ---- list, delete, and the hooks of export and import ---- */

int app_oci_backup_list(struct app_conn *c, const char *id, struct proto_app_backup **ret, size_t *ret_n,
                        struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, NULL, false, &a, &dir, err);
        if (r < 0)
                return r;
        r = app_backup_records(dir, ret, ret_n, err);
        pthread_mutex_unlock(&a->op_lock);
        return r < 0 ? na_error_prefix(err, "app %s: backups", id) : 0;
}

int app_oci_backup_delete(struct app_conn *c, const char *id, const char *backup_id, struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, backup_id, false, &a, &dir, err);
        if (r < 0)
                return r;
        struct proto_app_backup b;
        r = app_backup_record_load(dir, backup_id, &b, err);
        if (r == -ENOENT)
                r = not_found(id, backup_id, err);
        if (r >= 0 && (r = app_backup_remove(dir, backup_id, err)) < 0)
                na_error_prefix(err, "app %s", id);
        pthread_mutex_unlock(&a->op_lock);
        return r;
}

int app_oci_backup_open(struct app_conn *c, const char *id, const char *backup_id, int *ret_fd,
                        struct proto_app_backup *ret_info, struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, backup_id, false, &a, &dir, err);
        if (r < 0)
                return r;
        r = app_backup_record_load(dir, backup_id, ret_info, err);
        if (r == -ENOENT)
                r = not_found(id, backup_id, err);
        if (r >= 0) {
                _cleanup_free_ char *data = na_strdupf("%s/%s" APP_BACKUP_SUFFIX, dir, backup_id);
                int fd = data ? open(data, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
                if (fd < 0)
                        r = na_error_sys(err, data ? errno : ENOMEM, "app %s: backup %s: open", id, backup_id);
                else
                        *ret_fd = fd;
        }
        pthread_mutex_unlock(&a->op_lock);
        return r;
}

/* The largest archive of this app's backups: what its volume quota can restore (see drivers/app.h). */
static uint64_t max_archive_bytes(const struct app *a)
{
        uint64_t quota = (uint64_t)a->deploy->plan.volume_quota_mb * MB;
        return quota + quota / 64 + MB;
}

int app_oci_backup_tmpfile(struct app_conn *c, const char *id, int *ret_fd, uint64_t *ret_max_bytes,
                           struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, NULL, true, &a, &dir, err);
        if (r < 0)
                return r;
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = na_error_sys(err, errno, "app %s: backups: a temporary file in %s", id, dir);
        } else {
                *ret_fd = fd;
                *ret_max_bytes = max_archive_bytes(a);
        }
        pthread_mutex_unlock(&a->op_lock);
        return r;
}

int app_oci_backup_adopt(struct app_conn *c, const char *id, const char *backup_id, int fd, const char *sha256,
                         const struct na_progress *progress, struct proto_app_backup *ret, struct na_error *err)
{
        struct app *a;
        _cleanup_free_ char *dir = NULL;
        int r = begin(c, id, backup_id, true, &a, &dir, err);
        if (r < 0)
                return r;
        struct proto_app_backup old;
        r = app_backup_record_load(dir, backup_id, &old, err);
        if (r == 0)
                r = na_error_set(err, EEXIST, NA_E_INVALID_STATE, "app %s: backup %s exists already", id, backup_id);
        else if (r == -ENOENT)
                r = 0;
        char sha[65];
        uint64_t size = 0;
        struct stat st;
        if (r >= 0 && fstat(fd, &st) < 0)
                r = na_error_sys(err, errno, "app %s: stat the imported file", id);
        if (r >= 0 && (uint64_t)st.st_size > max_archive_bytes(a)) {
                r = na_error_set(err, EFBIG, NA_E_QUOTA_EXCEEDED,
                                 "the file (%llu bytes) is larger than the app's volume quota can restore "
                                 "(%llu bytes)",
                                 (unsigned long long)st.st_size, (unsigned long long)max_archive_bytes(a));
                na_error_detail(err, "limitBytes", json_integer((json_int_t)max_archive_bytes(a)));
        }
        if (r >= 0)
                r = app_backup_hash_fd(fd, progress, sha, &size, err);
        unsigned char magic[4] = { 0 };
        if (r >= 0 && (pread(fd, magic, 4, 0) != 4 || magic[0] != 0x28 || magic[1] != 0xb5 || magic[2] != 0x2f ||
                       magic[3] != 0xfd)) {
                na_error_field(err, "backupId", "the file is not a zstd-compressed backup");
                snprintf(err->message, sizeof(err->message), "the file is not a zstd-compressed backup");
                r = -EBADMSG;
        }
        if (r >= 0 && sha256 && strcasecmp(sha, sha256) != 0) {
                na_error_field(err, "transfer.sha256", "the file's sha256 is %s, not %s", sha, sha256);
                snprintf(err->message, sizeof(err->message), "sha256 mismatch: the file's is %s, not %s", sha, sha256);
                r = -EBADMSG;
        }
        if (r >= 0)
                r = app_backup_commit(dir, a->id, backup_id, fd, NULL, size, sha, ret, err);
        pthread_mutex_unlock(&a->op_lock);
        return r < 0 ? na_error_prefix(err, "app %s: adopt backup %s", id, backup_id) : 0;
}
