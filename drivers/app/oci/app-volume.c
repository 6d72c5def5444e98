/* SPDX-License-Identifier: GPL-2.0-or-later */
/* App data volumes: sparse ext4 images on loop devices (see app-volume.h). */
#include "drivers/app/oci/app-volume.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "common/fileio.h"
#include "common/spawn.h"
#include "drivers/app/oci/app-mountinfo.h"
#include "drivers/app/oci/app-names.h"

#define MOUNTINFO "/proc/self/mountinfo"
#define MKFS "/usr/sbin/mkfs.ext4"
#define RESIZE2FS "/usr/sbin/resize2fs"
#define E2FSCK "/usr/sbin/e2fsck"
#define LOOP_MAJOR 7
#define GET_FREE_TRIES 64
#define MB (1ull << 20)

static int check_path(const char *what, const char *p, struct na_error *err)
{
        if (!app_path_clean(p) || streq(p, "/"))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume: %s must be an absolute clean path", what);
        return 0;
}

/* ---- what the storage file system offers ---- */

struct probe_ctx {
        const char *path;
        size_t best;
        char fstype[32], options[512], point[PATH_MAX];
};

static int probe_one(const struct app_mount *m, void *userdata)
{
        struct probe_ctx *c = userdata;
        size_t n = strlen(m->point);
        bool under = streq(m->point, "/") || (strncmp(c->path, m->point, n) == 0 &&
                                               (c->path[n] == '/' || c->path[n] == '\0'));
        if (under && n >= c->best) {
                c->best = n;
                snprintf(c->fstype, sizeof(c->fstype), "%s", m->fstype);
                snprintf(c->options, sizeof(c->options), ",%s,", m->options ? m->options : "");
                snprintf(c->point, sizeof(c->point), "%s", m->point);
        }
        return 0;
}

int app_volume_probe(const char *storage_dir, struct app_volume_support *ret, struct na_error *err)
{
        _cleanup_free_ char *real = realpath(storage_dir, NULL);
        if (!real)
                return na_error_sys(err, errno, "volume: %s", storage_dir);
        struct probe_ctx c = { .path = real };
        int r = app_mountinfo_foreach(MOUNTINFO, probe_one, &c, err);
        if (r < 0)
                return na_error_prefix(err, "volume: probe");
        *ret = (struct app_volume_support){ 0 };
        snprintf(ret->fstype, sizeof(ret->fstype), "%s", c.fstype);
        bool ext4 = streq(c.fstype, "ext4"), xfs = streq(c.fstype, "xfs");
        bool prj = strstr(c.options, ",prjquota,") || (xfs && (strstr(c.options, ",pquota,") ||
                                                               strstr(c.options, ",pqnoenforce,")));
        if ((ext4 || xfs) && prj)
                ret->project_quota = true;
        else if (!ext4 && !xfs)
                snprintf(ret->why, sizeof(ret->why), "%s at %s has no project quota (only ext4 and XFS do)",
                         c.fstype, c.point);
        else
                snprintf(ret->why, sizeof(ret->why), "%s at %s is not mounted with prjquota", c.fstype, c.point);
        return 0;
}

int app_volume_require_project_quota(const char *storage_dir, struct na_error *err)
{
        struct app_volume_support s;
        int r = app_volume_probe(storage_dir, &s, err);
        if (r < 0)
                return r;
        return na_error_set(err, EOPNOTSUPP, NA_E_INTERNAL,
                            "volume: project quota volumes are not implemented (%s): app volumes use a "
                            "loop-mounted ext4 image",
                            s.project_quota ? "the storage file system offers them" : s.why);
}

/* ---- create ---- */

static uint64_t journal_mb(uint64_t quota_mb)
{
        uint64_t j = quota_mb / 64;
        return j < 4 ? 4 : j > 128 ? 128 : j;
}

static uint64_t image_mb(uint64_t quota_mb)
{
        /* ext4 metadata beyond the journal: inode tables (256 B per 16 KiB = 1/64), bitmaps,
         * group descriptors and the reserved GDT blocks of online resize. */
        return quota_mb + journal_mb(quota_mb) + quota_mb / 60 + 2;
}

/*
 * Allocate every block of the image up to size (issue 20): a sparse image shares the
 * host's free space with everything else, and when that runs out the volume's next
 * write fails below its file system (I/O errors, an aborted journal, data lost). With
 * its blocks its own, a full host can no longer reach into it. ENOSPC and EDQUOT say
 * how much was missing. The file's size becomes size (fallocate mode 0 extends it).
 */
static int allocate_image(int fd, const char *image, uint64_t size, struct na_error *err)
{
        struct stat st;
        struct statvfs sv;
        if (fstat(fd, &st) < 0 || fstatvfs(fd, &sv) < 0)
                return na_error_sys(err, errno, "volume: allocate %s", image);
        uint64_t have = (uint64_t)st.st_blocks * 512, avail = (uint64_t)sv.f_bavail * sv.f_frsize;
        uint64_t need = size > have ? size - have : 0;
        /* Asked first: a fallocate that fails half-way holds what it took until the caller gives it back. */
        int r = need > avail ? ENOSPC : posix_fallocate(fd, 0, (off_t)size);
        if (r == 0)
                return 0;
        if (r == ENOSPC || r == EDQUOT) {
                r = na_error_set(err, ENOSPC, NA_E_DRIVER,
                                 "volume %s: the node's storage has not the %llu MB this volume needs "
                                 "(%llu MB free): nothing was changed",
                                 image, (unsigned long long)((need + MB - 1) / MB), (unsigned long long)(avail / MB));
                na_error_detail(err, "reason", json_string("node-storage-full"));
                return r;
        }
        return na_error_sys(err, r, "volume: allocate %s", image);
}

int app_volume_create(const char *image, uint64_t quota_mb, uid_t uid, gid_t gid, struct na_error *err)
{
        int r = check_path("image", image, err);
        if (r < 0)
                return r;
        if (quota_mb < APP_VOLUME_MIN_MB || quota_mb > APP_VOLUME_MAX_MB)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume %s: quota %llu MB outside %d..%llu", image,
                                    (unsigned long long)quota_mb, APP_VOLUME_MIN_MB, APP_VOLUME_MAX_MB);
        _cleanup_close_ int fd = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "volume: create %s", image);
        if ((r = allocate_image(fd, image, image_mb(quota_mb) * MB, err)) < 0) {
                unlink(image);
                return r;
        }
        char journal[32], ext[96];
        snprintf(journal, sizeof(journal), "size=%llu", (unsigned long long)journal_mb(quota_mb));
        snprintf(ext, sizeof(ext), "root_owner=%u:%u,lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                 (unsigned)uid, (unsigned)gid);
        char *const argv[] = { (char *)MKFS, (char *)"-q", (char *)"-F", (char *)"-m", (char *)"0",
                               (char *)"-b", (char *)"4096", (char *)"-i", (char *)"16384", (char *)"-I",
                               (char *)"256", (char *)"-J", journal, (char *)"-E", ext, (char *)"-L",
                               (char *)"app-volume", (char *)image, NULL };
        if ((r = na_spawn(argv, NULL, NULL, 0, err)) < 0) {
                unlink(image);
                return na_error_prefix(err, "volume %s", image);
        }
        /* mkfs may punch what it zeroes where the file system cannot zero a range: allocate again. */
        if ((r = allocate_image(fd, image, image_mb(quota_mb) * MB, err)) < 0) {
                unlink(image);
                return r;
        }
        return 0;
}

/* ---- loop devices ---- */

static int open_loop(int n, char dev[32], struct na_error *err)
{
        snprintf(dev, 32, "/dev/loop%d", n);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                /* No udev here (a container host): make the node the kernel just announced. */
                if (mknod(dev, S_IFBLK | 0660, makedev(LOOP_MAJOR, (unsigned)n)) < 0 && errno != EEXIST)
                        return na_error_sys(err, errno, "volume: mknod %s", dev);
                fd = open(dev, O_RDWR | O_CLOEXEC);
        }
        if (fd < 0)
                return na_error_sys(err, errno, "volume: open %s", dev);
        return fd;
}

/* LOOP_SET_FD + LOOP_SET_STATUS64, for kernels before 5.8; -EBUSY when taken meanwhile. */
static int configure_legacy(int loop_fd, int image_fd, const struct loop_info64 *info)
{
        if (ioctl(loop_fd, LOOP_SET_FD, image_fd) < 0)
                return -errno;
        if (ioctl(loop_fd, LOOP_SET_STATUS64, info) < 0) {
                int e = errno;
                ioctl(loop_fd, LOOP_CLR_FD, 0);
                return -e;
        }
        return 0;
}

/* Attach image_fd to a free loop device: its fd, and its path in dev. */
static int loop_attach(int image_fd, const char *image, char dev[32], struct na_error *err)
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return na_error_sys(err, errno, "volume: open /dev/loop-control");
        struct loop_config cfg = { .fd = (uint32_t)image_fd };
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", image);
        for (int attempt = 0; attempt < GET_FREE_TRIES; attempt++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return na_error_sys(err, errno, "volume: no free loop device");
                _cleanup_close_ int fd = open_loop(n, dev, err);
                if (fd < 0)
                        return fd;
                int r = ioctl(fd, LOOP_CONFIGURE, &cfg) < 0 ? -errno : 0;
                if (r == -EINVAL || r == -ENOTTY)
                        r = configure_legacy(fd, image_fd, &cfg.info);
                if (r == 0)
                        return TAKE_FD(fd);
                if (r != -EBUSY)
                        return na_error_sys(err, -r, "volume: attach %s to %s", image, dev);
                /* Another process took the device between GET_FREE and our call: ask again. */
        }
        return na_error_set(err, EBUSY, NA_E_INTERNAL, "volume: attach %s: every free loop device was taken",
                            image);
}

/* ---- mount, state ---- */

int app_volume_is_mounted(const char *dir, bool *ret, struct na_error *err)
{
        int r = app_mount_is(dir, "ext4", EXT4_SUPER_MAGIC, ret, err);
        return r < 0 ? na_error_prefix(err, "volume %s", dir) : 0;
}

/* mkfs makes lost+found root's (host 0, nobody in the app): give it to the volume root's owner. */
static void give_lost_found(const char *dir)
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat root, lf;
        if (fd < 0 || fstat(fd, &root) < 0 || fstatat(fd, "lost+found", &lf, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        if (S_ISDIR(lf.st_mode) && lf.st_uid == 0 && root.st_uid != 0)
                if (fchownat(fd, "lost+found", root.st_uid, root.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return; /* cosmetic: the app can live without it */
}

static int mount_image(const char *image, const char *dir, bool read_only, struct na_error *err);

int app_volume_mount(const char *image, const char *dir, struct na_error *err)
{
        return mount_image(image, dir, false, err);
}

int app_volume_mount_ro(const char *image, const char *dir, struct na_error *err)
{
        return mount_image(image, dir, true, err);
}

static int mount_image(const char *image, const char *dir, bool read_only, struct na_error *err)
{
        int r = check_path("image", image, err);
        if (r < 0 || (r = check_path("mount directory", dir, err)) < 0)
                return r;
        bool mounted;
        if ((r = app_volume_is_mounted(dir, &mounted, err)) < 0)
                return r;
        if (mounted)
                return na_error_set(err, EBUSY, NA_E_INTERNAL, "volume %s: already mounted", dir);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "volume: mkdir %s", dir);
        _cleanup_close_ int image_fd = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (image_fd < 0)
                return na_error_sys(err, errno, "volume: open %s", image);
        struct stat st;
        if (fstat(image_fd, &st) < 0 || !S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume: %s is not a regular file", image);
        /* An image made before volumes were allocated in full gets its holes filled when
         * there is the space (its data is kept); without it, it mounts as it was. */
        if (!read_only && (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) {
                struct na_error e = NA_ERROR_INIT;
                (void)allocate_image(image_fd, image, (uint64_t)st.st_size, &e);
                na_error_clear(&e);
        }
        char dev[32];
        _cleanup_close_ int loop_fd = loop_attach(image_fd, image, dev, err);
        if (loop_fd < 0)
                return loop_fd;
        unsigned long flags = MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY | MS_NOEXEC : 0);
        if (mount(dev, dir, "ext4", flags, "errors=remount-ro") < 0) {
                r = na_error_sys(err, errno, "volume: mount %s (%s) at %s", image, dev, dir);
                ioctl(loop_fd, LOOP_CLR_FD, 0);
                return r;
        }
        /* Closing loop_fd leaves the device to the mount; autoclear detaches it at the last umount. */
        if (!read_only)
                give_lost_found(dir);
        return 0;
}

int app_volume_usage(const char *dir, struct app_volume_usage *ret, struct na_error *err)
{
        bool mounted;
        int r = app_volume_is_mounted(dir, &mounted, err);
        if (r < 0)
                return r;
        if (!mounted)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "volume %s: not mounted", dir);
        struct statfs sf;
        if (statfs(dir, &sf) < 0)
                return na_error_sys(err, errno, "volume: statfs %s", dir);
        uint64_t bs = (uint64_t)sf.f_bsize;
        ret->used_mb = ((uint64_t)(sf.f_blocks - sf.f_bfree) * bs + MB - 1) / MB;
        ret->size_mb = (uint64_t)sf.f_blocks * bs / MB;
        ret->avail_mb = (uint64_t)sf.f_bavail * bs / MB;
        return 0;
}

/* Offline, the image already grown: check the file system (resize2fs wants a fresh check), resize it. */
static int grow_offline(const char *image, struct na_error *err)
{
        char *const fsck[] = { (char *)E2FSCK, (char *)"-f", (char *)"-y", (char *)image, NULL };
        /* e2fsck exits 1 when it corrected something (free counts the kernel leaves to it):
         * a second run that finds nothing proves the file system is clean. */
        struct na_error first = NA_ERROR_INIT;
        int r = na_spawn(fsck, NULL, NULL, 0, &first);
        na_error_clear(&first);
        if (r < 0 && (r = na_spawn(fsck, NULL, NULL, 0, err)) < 0)
                return na_error_prefix(err, "volume %s: grow", image);
        char *const resize[] = { (char *)RESIZE2FS, (char *)image, NULL };
        if ((r = na_spawn(resize, NULL, NULL, 0, err)) < 0)
                return na_error_prefix(err, "volume %s: grow", image);
        return 0;
}

/* Online: the loop device must be backed by this image (not another app's). */
static int grow_online(const char *image, const struct stat *st, const char *dir, char *dev,
                       struct na_error *err)
{
        _cleanup_close_ int loop_fd = open(dev, O_RDWR | O_CLOEXEC);
        struct loop_info64 info;
        if (loop_fd < 0 || ioctl(loop_fd, LOOP_GET_STATUS64, &info) < 0)
                return na_error_sys(err, errno, "volume: %s", dev);
        if (info.lo_inode != st->st_ino || info.lo_device != st->st_dev)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume %s: %s is not backed by %s", dir, dev, image);
        if (ioctl(loop_fd, LOOP_SET_CAPACITY, 0) < 0)
                return na_error_sys(err, errno, "volume: capacity of %s", dev);
        char *const argv[] = { (char *)RESIZE2FS, dev, NULL };
        int r = na_spawn(argv, NULL, NULL, 0, err);
        return r < 0 ? na_error_prefix(err, "volume %s: grow online (needs CAP_SYS_RESOURCE)", image) : 0;
}

int app_volume_grow(const char *image, const char *dir, uint64_t quota_mb, struct na_error *err)
{
        int r = check_path("image", image, err);
        if (r < 0 || (r = check_path("mount directory", dir, err)) < 0)
                return r;
        if (quota_mb < APP_VOLUME_MIN_MB || quota_mb > APP_VOLUME_MAX_MB)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume %s: bad quota", image);
        _cleanup_free_ char *fstype = NULL, *dev = NULL;
        r = app_mountinfo_find(MOUNTINFO, dir, &fstype, &dev, err);
        if (r < 0 && r != -ENOENT)
                return na_error_prefix(err, "volume %s", dir);
        bool mounted = r == 0;
        if (mounted && (!streq(fstype, "ext4") || strncmp(dev, "/dev/loop", 9) != 0))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume %s: not a loop-mounted ext4", dir);
        _cleanup_close_ int image_fd = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (image_fd < 0 || fstat(image_fd, &st) < 0)
                return na_error_sys(err, errno, "volume: open %s", image);
        uint64_t want = image_mb(quota_mb) * MB;
        /* Equal is allowed: it finishes a grow whose resize failed after the image grew. */
        if (want < (uint64_t)st.st_size)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "volume %s: cannot shrink to %llu MB", image,
                                    (unsigned long long)quota_mb);
        /* The new blocks first, all of them, or nothing changes. */
        if ((r = allocate_image(image_fd, image, want, err)) < 0) {
                /* Back to the old size; should that fail, the extra bytes lie past the file system, unused. */
                if (ftruncate(image_fd, st.st_size) < 0)
                        na_error_detail(err, "truncate", json_string(strerror(errno)));
                return r;
        }
        return mounted ? grow_online(image, &st, dir, dev, err) : grow_offline(image, err);
}

int app_volume_umount(const char *dir, struct na_error *err)
{
        int r = check_path("mount directory", dir, err);
        if (r < 0)
                return r;
        bool mounted;
        if ((r = app_volume_is_mounted(dir, &mounted, err)) < 0)
                return r;
        if (!mounted)
                return 0;
        r = app_umount(dir, 0);
        if (r < 0 && r != -ENOENT)
                return na_error_sys(err, -r, "volume: unmount %s", dir);
        return 0;
}

int app_volume_remove(const char *image, const char *dir, struct na_error *err)
{
        int r = check_path("image", image, err);
        if (r < 0 || (r = app_volume_umount(dir, err)) < 0)
                return r;
        if ((r = na_unlink(image, err)) < 0)
                return na_error_prefix(err, "volume");
        if (rmdir(dir) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "volume: remove %s", dir);
        return 0;
}
