/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rm -rf inside a volume a running app may change at the same time, and of the
 * node's private trees (an unpacked image, a stopped app's directory): one
 * implementation serves both (volume/volume.h, app_fs_rm_rf). It never follows a link
 * and never climbs with "..": an app that moves a directory being deleted up to the
 * volume's root would otherwise lead ".." out of the mount. Each
 * level is opened again from the top directory's fd with RESOLVE_BENEATH and
 * RESOLVE_NO_SYMLINKS, so whatever is renamed meanwhile, only what lies below the top
 * directory is ever removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "volume/volume-internal.h"

#define RMRF_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define RMRF_RESTARTS 64

static int open_below(int top, const char *rel)
{
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, .resolve = RMRF_RESOLVE };
        return (int)syscall(SYS_openat2, top, rel, &how, sizeof(how));
}

/*
 * Remove what cur holds that is not a non-empty directory. 1 with *ret_sub the name of
 * a non-empty subdirectory, 0 when cur is empty, or -errno.
 */
static int clear_dir(int cur, char **ret_sub)
{
        int dfd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        DIR *d = fdopendir(dfd);
        if (!d) {
                int e = errno;
                close(dfd);
                return -e;
        }
        int r = 0;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (unlinkat(cur, de->d_name, 0) == 0 || errno == ENOENT)
                        continue;
                if (errno != EISDIR && errno != EPERM) {
                        r = -errno;
                        break;
                }
                /* A directory (unlink says EISDIR on Linux; EPERM elsewhere). */
                if (unlinkat(cur, de->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        continue;
                if (errno != ENOTEMPTY && errno != EEXIST) {
                        r = -errno;
                        break;
                }
                r = (*ret_sub = strdup(de->d_name)) ? 1 : -ENOMEM;
                break;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

/* rel without its last component, or NULL for a top-level name; rel is changed in place. */
static char *drop_last(char *rel)
{
        char *slash = strrchr(rel, '/');
        if (!slash) {
                free(rel);
                return NULL;
        }
        *slash = '\0';
        return rel;
}

int app_fs_rm_rf(int dir_fd, const char *name, struct na_error *err)
{
        struct stat st;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "remove %s: stat", name);
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
                        return na_error_sys(err, errno, "remove %s", name);
                return 0;
        }
        _cleanup_close_ int top = open_below(dir_fd, name);
        if (top < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "remove %s: open", name);
        _cleanup_free_ char *rel = NULL; /* below top; NULL: top itself */
        unsigned restarts = 0;
        for (;;) {
                _cleanup_close_ int cur = rel ? open_below(top, rel) : fcntl(top, F_DUPFD_CLOEXEC, 3);
                if (cur < 0) {
                        int e = errno;
                        if (!rel)
                                return na_error_sys(err, e, "remove %s", name);
                        if (e == ENAMETOOLONG)
                                return na_error_sys(err, e, "remove %s: the tree is too deep", name);
                        /* Renamed, replaced by a link or by a file meanwhile: start from the top. */
                        if (++restarts > RMRF_RESTARTS)
                                return na_error_sys(err, EAGAIN, "remove %s: the tree keeps changing", name);
                        free(rel);
                        rel = NULL;
                        continue;
                }
                _cleanup_free_ char *sub = NULL;
                int r = clear_dir(cur, &sub);
                if (r < 0)
                        return na_error_sys(err, -r, "remove %s", name);
                if (r > 0) {
                        char *nrel = rel ? na_strdupf("%s/%s", rel, sub) : strdup(sub);
                        if (!nrel)
                                return na_error_sys(err, ENOMEM, "remove %s", name);
                        free(rel);
                        rel = nrel;
                        continue;
                }
                if (!rel)
                        break; /* top is empty */
                /* cur is empty: remove it from its parent, opened again from the top. */
                const char *slash = strrchr(rel, '/');
                _cleanup_close_ int parent = -1;
                if (slash) {
                        _cleanup_free_ char *p = strndup(rel, (size_t)(slash - rel));
                        parent = p ? open_below(top, p) : -1;
                } else
                        parent = fcntl(top, F_DUPFD_CLOEXEC, 3);
                if (parent >= 0 && unlinkat(parent, slash ? slash + 1 : rel, AT_REMOVEDIR) < 0 && errno != ENOENT &&
                    errno != ENOTEMPTY && errno != EEXIST)
                        return na_error_sys(err, errno, "remove %s: rmdir", name);
                rel = drop_last(rel);
        }
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "remove %s: rmdir", name);
        return 0;
}
