/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.files.write over a volume (volume/volume.h, app_fs_write): room checked
 * with fstatvfs and reserved with fallocate before a byte is written, a whole-file
 * replace through a temporary name renamed over the target, in-place writes on an fd
 * opened O_NOFOLLOW under the resolved parent.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/macro.h"
#include "volume/volume-internal.h"

/* QUOTA_EXCEEDED when the volume lacks room for need more bytes (one block of slack for metadata). */
static int check_room(int fd, const char *path, uint64_t need, struct na_error *err)
{
        if (need == 0)
                return 0;
        struct statvfs sv;
        if (fstatvfs(fd, &sv) < 0)
                return na_error_sys(err, errno, "write %s: statvfs", path);
        uint64_t bs = sv.f_frsize ? sv.f_frsize : 4096;
        uint64_t blocks = (need + bs - 1) / bs + 1;
        if (blocks > sv.f_bavail)
                return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                    "%s: the app's volume has %llu bytes free, the write needs %llu", path,
                                    (unsigned long long)(sv.f_bavail * bs), (unsigned long long)(blocks * bs));
        return 0;
}

/* Reserve [off, off+len) so that ENOSPC comes now, not halfway; file systems without fallocate are let be. */
static int reserve(int fd, uint64_t off, size_t len, int mode)
{
        if (len == 0)
                return 0;
        if (NA_FAULT("app-fs.reserve"))
                return -ENOSPC;
        if (fallocate(fd, mode, (off_t)off, (off_t)len) < 0 && errno != EOPNOTSUPP && errno != ENOSYS)
                return -errno;
        return 0;
}

static int pwrite_all(int fd, const unsigned char *data, size_t len, uint64_t off)
{
        for (size_t n = 0; n < len;) {
                if (NA_FAULT("app-fs.write"))
                        return -ENOSPC;
                ssize_t k = RETRY_EINTR(pwrite(fd, data + n, len - n, (off_t)(off + n)));
                if (k < 0)
                        return -errno;
                n += (size_t)k;
        }
        return 0;
}

static int fsync_dir(int dir)
{
        int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = fsync(fd) < 0 ? -errno : 0;
        close(fd);
        return r;
}

static bool is_full(int e)
{
        return e == ENOSPC || e == EDQUOT;
}

static int write_replace(struct app_fs *fs, int dir, const char *name, const char *path, const struct stat *old,
                         const unsigned char *data, size_t len, struct na_error *err)
{
        int r = check_room(dir, path, len, err);
        if (r < 0)
                return r;
        uint64_t rnd;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return na_error_sys(err, errno, "write %s: getrandom", path);
        char tmp[64];
        snprintf(tmp, sizeof(tmp), ".na-write-%016llx", (unsigned long long)rnd);
        int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return app_fs_fail(err, errno, "path", path, "write");
        uid_t uid = old ? old->st_uid : fs->uid;
        gid_t gid = old ? old->st_gid : fs->gid;
        mode_t mode = old ? (old->st_mode & 0777) : 0644;
        int e = 0;
        const char *step = "write";
        if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
                e = errno, step = "write (owner)";
        else if ((r = reserve(fd, 0, len, 0)) < 0 || (r = pwrite_all(fd, data, len, 0)) < 0)
                e = -r;
        else if (fsync(fd) < 0)
                e = errno, step = "write (fsync)";
        if (close(fd) < 0 && !e)
                e = errno, step = "write (close)";
        if (!e && renameat(dir, tmp, dir, name) < 0)
                e = errno, step = "write (rename)";
        if (e) {
                (void)unlinkat(dir, tmp, 0);
                if (is_full(e))
                        return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                            "%s: the app's volume is full; nothing was written", path);
                return app_fs_fail(err, e, "path", path, step);
        }
        (void)fsync_dir(dir);
        return 0;
}

static int write_in_place(struct app_fs *fs, int dir, const char *name, const char *path, const struct stat *old,
                          const unsigned char *data, size_t len, const struct app_fs_write_opts *o,
                          struct na_error *err)
{
        uint64_t size = old ? (uint64_t)old->st_size : 0;
        if (o->offset > size) {
                char msg[128];
                snprintf(msg, sizeof(msg), "is past the end of the file (%llu bytes)", (unsigned long long)size);
                return app_fs_invalid(err, "offset", msg);
        }
        if (old && old->st_nlink > 1)
                return na_error_set(err, EMLINK, NA_E_INVALID_STATE,
                                    "%s: has other hard links; write the whole file instead", path);
        uint64_t end = o->offset + len;
        int r = check_room(dir, path, end > size ? end - size : 0, err);
        if (r < 0)
                return r;
        int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
        _cleanup_close_ int fd = openat(dir, name, old ? flags : flags | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno == ELOOP)
                return na_error_set(err, ELOOP, NA_E_INVALID_STATE, "%s: is a symbolic link", path);
        if (fd < 0)
                return app_fs_fail(err, errno, "path", path, "write");
        bool created = !old;
        struct stat st;
        int e = 0;
        const char *step = "write";
        if (fstat(fd, &st) < 0)
                e = errno, step = "write (stat)";
        else if (!S_ISREG(st.st_mode))
                e = EINVAL, step = "write (not a regular file)";
        else if (!created && (st.st_ino != old->st_ino || st.st_dev != old->st_dev))
                e = EAGAIN, step = "write (replaced meanwhile)";
        else if (created && (fchown(fd, fs->uid, fs->gid) < 0 || fchmod(fd, 0644) < 0))
                e = errno, step = "write (owner)";
        else if ((r = reserve(fd, o->offset, len, FALLOC_FL_KEEP_SIZE)) < 0)
                e = -r;
        else if ((r = pwrite_all(fd, data, len, o->offset)) < 0)
                e = -r;
        else if (o->truncate && ftruncate(fd, (off_t)end) < 0)
                e = errno, step = "write (truncate)";
        else if (fsync(fd) < 0)
                e = errno, step = "write (fsync)";
        if (!e)
                return 0;
        if (created)
                (void)unlinkat(dir, name, 0);
        else if (S_ISREG(st.st_mode)) {
                /* The old size back, which also frees blocks reserved past it; bytes overwritten in place stay. */
                int tr = ftruncate(fd, (off_t)size);
                (void)tr;
        }
        if (is_full(e))
                return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED, "%s: the app's volume is full", path);
        if (e == EINVAL)
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file", path);
        return app_fs_fail(err, e, "path", path, step);
}

int app_fs_write(struct app_fs *fs, const char *path, const void *data, size_t len,
                 const struct app_fs_write_opts *opts, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (streq(name, "."))
                return app_fs_fail(err, EISDIR, "path", path, "write");
        struct stat st;
        bool exists = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!exists && errno != ENOENT)
                return app_fs_fail(err, errno, "path", path, "write");
        if (exists && S_ISDIR(st.st_mode))
                return app_fs_fail(err, EISDIR, "path", path, "write");
        if (exists && S_ISLNK(st.st_mode))
                return na_error_set(err, ELOOP, NA_E_INVALID_STATE,
                                    "%s: is a symbolic link; write to the file it points to", path);
        if (exists && !S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file", path);
        if (opts && opts->in_place)
                return write_in_place(fs, dir, name, path, exists ? &st : NULL, data, len, opts, err);
        return write_replace(fs, dir, name, path, exists ? &st : NULL, data, len, err);
}
