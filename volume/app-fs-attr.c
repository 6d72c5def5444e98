/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Attributes of what a volume holds (volume/volume.h): chmod and utimens, never through a link. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "volume/volume-internal.h"

int app_fs_chmod(struct app_fs *fs, const char *path, mode_t mode, struct na_error *err)
{
        if (mode & ~(mode_t)01777)
                return app_fs_invalid(err, "mode", "must be permission bits 0..01777 (no setuid or setgid)");
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        _cleanup_close_ int pfd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0)
                return app_fs_fail(err, errno, "path", path, "chmod");
        struct stat st;
        if (fstat(pfd, &st) < 0)
                return na_error_sys(err, errno, "chmod %s: stat", path);
        if (S_ISLNK(st.st_mode))
                return na_error_set(err, ELOOP, NA_E_INVALID_STATE, "%s: is a symbolic link", path);
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file or directory", path);
        int flags = S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK | O_NOCTTY;
        _cleanup_close_ int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
        struct stat again;
        if (fd >= 0 && fstat(fd, &again) < 0)
                return na_error_sys(err, errno, "chmod %s: stat", path);
        if (fd < 0 && errno != ELOOP && errno != ENOTDIR)
                return app_fs_fail(err, errno, "path", path, "chmod");
        if (fd < 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev)
                return na_error_set(err, EAGAIN, NA_E_INVALID_STATE, "%s: replaced while it was changed; try again",
                                    path);
        if (fchmod(fd, mode) < 0)
                return app_fs_fail(err, errno, "path", path, "chmod");
        return 0;
}

int app_fs_utimens(struct app_fs *fs, const char *path, const struct timespec times[2], struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (utimensat(dir, name, times, AT_SYMLINK_NOFOLLOW) < 0)
                return app_fs_fail(err, errno, "path", path, "set the times of");
        return 0;
}
