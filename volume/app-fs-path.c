/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The safe path layer's core (volume/volume.h): the volume root fd, the text
 * check, and resolution with openat2 beneath it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "volume/volume-internal.h"

static int sys_openat2(int dirfd, const char *path, int flags, unsigned long long resolve)
{
        struct open_how how = { .flags = (unsigned long long)flags | O_CLOEXEC, .resolve = resolve };
        if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
                how.mode = 0600;
        /* EAGAIN: a rename elsewhere on the file system raced the lookup; try again a few times. */
        for (int i = 0;; i++) {
                int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd >= 0 || errno != EAGAIN || i == 16)
                        return fd;
        }
}

int app_fs_invalid(struct na_error *err, const char *field, const char *msg)
{
        int r = na_error_field(err, field, "%s", msg);
        snprintf(err->message, sizeof(err->message), "%s: %s", field, msg);
        return r;
}

int app_fs_fail(struct na_error *err, int e, const char *field, const char *path, const char *what)
{
        switch (e) {
        case EXDEV:
                return app_fs_invalid(err, field, "the path leaves the app's volume");
        case ELOOP:
                return app_fs_invalid(err, field, "too many levels of symbolic links");
        case ENAMETOOLONG:
                return app_fs_invalid(err, field, "the path is too long once its links are followed");
        case ENOENT:
                return na_error_set(err, ENOENT, NA_E_FILE_NOT_FOUND, "%s: no such file or directory", path);
        case ENOTDIR:
                return na_error_set(err, ENOTDIR, NA_E_INVALID_STATE, "%s: not a directory (or a component of it is not)", path);
        case EISDIR:
                return na_error_set(err, EISDIR, NA_E_INVALID_STATE, "%s: is a directory", path);
        case EEXIST:
        case ENOTEMPTY:
                return na_error_set(err, EEXIST, NA_E_INVALID_STATE, "%s: already exists", path);
        case ENOSPC:
        case EDQUOT:
                return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED, "%s: the app's volume is full", path);
        default:
                return na_error_sys(err, e, "%s %s", what, path);
        }
}

int app_fs_check(const char *field, const char *path, const char **ret_rel, struct na_error *err)
{
        const char *problem = path ? proto_app_files_path_problem(path, strlen(path)) : "is required";
        if (problem)
                return app_fs_invalid(err, field, problem);
        *ret_rel = proto_app_files_path_relative(path);
        return 0;
}

int app_fs_open(const char *volume_dir, uid_t uid, gid_t gid, struct app_fs **ret, struct na_error *err)
{
        if (!volume_dir || volume_dir[0] != '/')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app volume: not an absolute path");
        _cleanup_close_ int fd = open(volume_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "app volume %s: open", volume_dir);
        struct app_fs *fs = calloc(1, sizeof(*fs));
        if (!fs)
                return na_error_sys(err, ENOMEM, "app volume %s", volume_dir);
        fs->root_fd = TAKE_FD(fd);
        fs->uid = uid;
        fs->gid = gid;
        *ret = fs;
        return 0;
}

int app_fs_adopt(int root_fd, uid_t uid, gid_t gid, struct app_fs **ret, struct na_error *err)
{
        _cleanup_close_ int fd = root_fd;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
                return na_error_set(err, ENOTDIR, NA_E_INTERNAL, "app volume: not a directory");
        struct app_fs *fs = calloc(1, sizeof(*fs));
        if (!fs)
                return na_error_sys(err, ENOMEM, "app volume");
        fs->root_fd = TAKE_FD(fd);
        fs->uid = uid;
        fs->gid = gid;
        *ret = fs;
        return 0;
}

void app_fs_close(struct app_fs *fs)
{
        if (!fs)
                return;
        if (fs->root_fd >= 0)
                close(fs->root_fd);
        free(fs);
}

int app_fs_root_fd(const struct app_fs *fs)
{
        return fs->root_fd;
}

int app_fs_resolve(struct app_fs *fs, const char *field, const char *path, int flags, int *ret_fd,
                   struct na_error *err)
{
        const char *rel = NULL;
        int r = app_fs_check(field, path, &rel, err);
        if (r < 0)
                return r;
        int fd = sys_openat2(fs->root_fd, rel, flags, APP_FS_RESOLVE);
        if (fd < 0)
                return app_fs_fail(err, errno, field, path, "open");
        *ret_fd = fd;
        return 0;
}

int app_fs_resolve_parent(struct app_fs *fs, const char *field, const char *path, int *ret_dir_fd,
                          const char **ret_name, struct na_error *err)
{
        const char *rel = NULL;
        int r = app_fs_check(field, path, &rel, err);
        if (r < 0)
                return r;
        NA_ANALYZER_FP("-Wanalyzer-null-argument") /* GCC 12 does not see that the callee sets its out-parameter whenever it returns 0 (app_fs_check sets rel) */
        const char *slash = strrchr(rel, '/');
        NA_ANALYZER_FP_END
        if (!slash) {
                int fd = fcntl(fs->root_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return na_error_sys(err, errno, "dup volume root");
                *ret_dir_fd = fd;
                *ret_name = rel;
                return 0;
        }
        _cleanup_free_ char *parent = strndup(rel, (size_t)(slash - rel));
        if (!parent)
                return na_error_sys(err, ENOMEM, "%s", path);
        int fd = sys_openat2(fs->root_fd, parent, O_PATH | O_DIRECTORY, APP_FS_RESOLVE);
        if (fd < 0)
                return app_fs_fail(err, errno, field, path, "open parent of");
        *ret_dir_fd = fd;
        *ret_name = slash + 1;
        return 0;
}
