/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX-like calls over a volume for nodeagent-sftpd (volume/volume.h): open with
 * flags, opendir, stat, truncate, remove, rmdir, mkdir of one level, readlink, symlink
 * (only a target that stays inside), rename. Paths go through the same text check and
 * openat2 beneath the root as every other call of the layer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "volume/volume-internal.h"

bool app_fs_symlink_target_inside(const char *link_path, const char *target)
{
        if (!target[0] || target[0] == '/')
                return false;
        /* Depth of the link's directory below "/". */
        long depth = 0;
        const char *last = strrchr(link_path, '/');
        for (const char *p = link_path; p && p < last; p++)
                if (*p == '/' && p[1] && p[1] != '/')
                        depth++;
        for (const char *p = target; *p;) {
                while (*p == '/')
                        p++;
                const char *s = p;
                while (*p && *p != '/')
                        p++;
                size_t n = (size_t)(p - s);
                if (n == 0 || (n == 1 && s[0] == '.'))
                        continue;
                if (n == 2 && s[0] == '.' && s[1] == '.') {
                        if (--depth < 0)
                                return false;
                } else
                        depth++;
        }
        return true;
}

static int openat2_mode(int dirfd, const char *path, int flags, mode_t mode)
{
        struct open_how how = { .flags = (unsigned long long)flags | O_CLOEXEC, .resolve = APP_FS_RESOLVE };
        if (flags & O_CREAT)
                how.mode = mode & 0777;
        for (int i = 0;; i++) {
                int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd >= 0 || errno != EAGAIN || i == 16)
                        return fd;
        }
}

/* err from errno e, keeping e as err->errnum so callers can map the kernel's answer. */
static int fail(struct na_error *err, int e, const char *field, const char *path, const char *what)
{
        int r = app_fs_fail(err, e, field, path, what);
        if (e == EACCES || e == EPERM || e == EROFS) {
                r = na_error_set(err, e, NA_E_INVALID_STATE, "%s %s: %s", what, path, strerror(e));
                return r;
        }
        err->errnum = e;
        return -e;
}

int app_fs_open_file(struct app_fs *fs, const char *path, int flags, mode_t mode, int *ret_fd, struct na_error *err)
{
        const int allowed = O_ACCMODE | O_APPEND | O_CREAT | O_TRUNC | O_EXCL;
        if (flags & ~allowed)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "open %s: unsupported flags", path);
        const char *rel = NULL;
        int r = app_fs_check("path", path, &rel, err);
        if (r < 0)
                return r;
        bool root = geteuid() == 0;
        /* As root a new file must be handed to uid:gid: create it with O_EXCL to know it is ours. */
        int fd = -1;
        bool created = false;
        if ((flags & O_CREAT) && root && !(flags & O_EXCL)) {
                fd = openat2_mode(fs->root_fd, rel, (flags & ~(O_CREAT | O_EXCL)) | O_NONBLOCK | O_NOCTTY, mode);
                if (fd < 0 && errno == ENOENT) {
                        fd = openat2_mode(fs->root_fd, rel, flags | O_EXCL | O_NONBLOCK | O_NOCTTY, mode);
                        created = fd >= 0;
                }
        } else {
                fd = openat2_mode(fs->root_fd, rel, flags | O_NONBLOCK | O_NOCTTY, mode);
                created = fd >= 0 && (flags & O_EXCL);
        }
        if (fd < 0)
                return fail(err, errno, "path", path, "open");
        _cleanup_close_ int owned = fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "open %s: stat", path);
        if (S_ISDIR(st.st_mode))
                return fail(err, EISDIR, "path", path, "open");
        if (!S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file", path);
        if (created && root && fchown(fd, fs->uid, fs->gid) < 0)
                return na_error_sys(err, errno, "open %s: chown", path);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return na_error_sys(err, errno, "open %s", path);
        *ret_fd = TAKE_FD(owned);
        return 0;
}

int app_fs_opendir(struct app_fs *fs, const char *path, int *ret_fd, struct na_error *err)
{
        const char *rel = NULL;
        int r = app_fs_check("path", path, &rel, err);
        if (r < 0)
                return r;
        int fd = openat2_mode(fs->root_fd, rel, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fail(err, errno, "path", path, "open directory");
        *ret_fd = fd;
        return 0;
}

int app_fs_lstat(struct app_fs *fs, const char *path, struct stat *ret, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (fstatat(dir, streq(name, ".") ? "" : name, ret, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0)
                return fail(err, errno, "path", path, "stat");
        return 0;
}

int app_fs_stat_follow(struct app_fs *fs, const char *path, struct stat *ret, struct na_error *err)
{
        const char *rel = NULL;
        int r = app_fs_check("path", path, &rel, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = openat2_mode(fs->root_fd, rel, O_PATH, 0);
        if (fd < 0)
                return fail(err, errno, "path", path, "stat");
        if (fstat(fd, ret) < 0)
                return fail(err, errno, "path", path, "stat");
        return 0;
}

int app_fs_truncate(struct app_fs *fs, const char *path, uint64_t size, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (streq(name, "."))
                return fail(err, EISDIR, "path", path, "truncate");
        _cleanup_close_ int fd = openat(dir, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return fail(err, errno == ELOOP ? EPERM : errno, "path", path, "truncate");
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file", path);
        if (ftruncate(fd, (off_t)size) < 0)
                return fail(err, errno, "path", path, "truncate");
        return 0;
}

static int unlink_one(struct app_fs *fs, const char *path, int flags, const char *what, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (streq(name, "."))
                return na_error_set(err, EBUSY, NA_E_INVALID_STATE, "%s: the volume's root cannot be removed", path);
        if (unlinkat(dir, name, flags) < 0)
                return fail(err, errno, "path", path, what);
        return 0;
}

int app_fs_remove(struct app_fs *fs, const char *path, struct na_error *err)
{
        return unlink_one(fs, path, 0, "remove", err);
}

int app_fs_rmdir(struct app_fs *fs, const char *path, struct na_error *err)
{
        return unlink_one(fs, path, AT_REMOVEDIR, "remove directory", err);
}

int app_fs_mkdir1(struct app_fs *fs, const char *path, mode_t mode, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (streq(name, "."))
                return fail(err, EEXIST, "path", path, "mkdir");
        if (mkdirat(dir, name, mode & 0777) < 0)
                return fail(err, errno, "path", path, "mkdir");
        if (geteuid() == 0) {
                _cleanup_close_ int d = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (d < 0 || fchown(d, fs->uid, fs->gid) < 0)
                        return na_error_sys(err, errno, "mkdir %s: chown", path);
        }
        return 0;
}

int app_fs_readlink(struct app_fs *fs, const char *path, char **ret, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        char buf[PATH_MAX];
        ssize_t n = readlinkat(dir, name, buf, sizeof(buf) - 1);
        if (n < 0)
                return fail(err, errno, "path", path, "readlink");
        buf[n] = '\0';
        if (!(*ret = strdup(buf)))
                return na_error_sys(err, ENOMEM, "readlink %s", path);
        return 0;
}

int app_fs_symlink(struct app_fs *fs, const char *target, const char *path, struct na_error *err)
{
        const char *rel = NULL;
        int r = app_fs_check("path", path, &rel, err);
        if (r < 0)
                return r;
        char abs[PROTO_APP_FILES_PATH_MAX + 2];
        snprintf(abs, sizeof(abs), "/%s", streq(rel, ".") ? "" : rel);
        if (!target || strlen(target) >= PATH_MAX || !app_fs_symlink_target_inside(abs, target)) {
                r = app_fs_invalid(err, "target", "a symbolic link must point inside the app's volume (relative, "
                                                  "never above its root)");
                err->errnum = EPERM;
                return -EPERM;
        }
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        if ((r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err)) < 0)
                return r;
        if (streq(name, "."))
                return fail(err, EEXIST, "path", path, "symlink");
        if (symlinkat(target, dir, name) < 0)
                return fail(err, errno, "path", path, "symlink");
        if (geteuid() == 0 && fchownat(dir, name, fs->uid, fs->gid, AT_SYMLINK_NOFOLLOW) < 0)
                return na_error_sys(err, errno, "symlink %s: chown", path);
        return 0;
}

int app_fs_rename(struct app_fs *fs, const char *from, const char *to, unsigned flags, struct na_error *err)
{
        _cleanup_close_ int from_dir = -1, to_dir = -1;
        const char *from_name = NULL, *to_name = NULL;
        int r = app_fs_resolve_parent(fs, "from", from, &from_dir, &from_name, err);
        if (r < 0)
                return r;
        if ((r = app_fs_resolve_parent(fs, "to", to, &to_dir, &to_name, err)) < 0)
                return r;
        if (streq(from_name, ".") || streq(to_name, "."))
                return na_error_set(err, EBUSY, NA_E_INVALID_STATE, "%s: the volume's root cannot be renamed", from);
        if (renameat2(from_dir, from_name, to_dir, to_name, flags) < 0)
                return fail(err, errno, errno == ENOENT ? "from" : "to", errno == ENOENT ? from : to, "rename");
        return 0;
}
