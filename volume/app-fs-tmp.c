/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Files that replace their target only when complete (volume/volume.h): an
 * O_TMPFILE in the target's directory (resolved beneath the volume's root), linked
 * under a hidden random name and renamed over the target on commit.
 */
#include "volume/volume.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/macro.h"
#include "volume/volume-internal.h"

static void release(struct app_fs_tmp *t)
{
        if (t->fd >= 0)
                close(t->fd);
        if (t->dir_fd >= 0)
                close(t->dir_fd);
        t->fd = t->dir_fd = -1;
        t->named = false;
}

static int random_name(char *buf, size_t len)
{
        uint64_t rnd;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        snprintf(buf, len, ".na-import-%016llx", (unsigned long long)rnd);
        return 0;
}

int app_fs_tmp_open(struct app_fs *fs, const char *path, struct app_fs_tmp *ret, struct na_error *err)
{
        struct app_fs_tmp t = { .fd = -1, .dir_fd = -1, .path = path };
        int r = app_fs_resolve_parent(fs, "path", path, &t.dir_fd, &t.name, err);
        if (r < 0)
                return r;
        struct stat st;
        bool exists = false;
        if (streq(t.name, "."))
                r = app_fs_fail(err, EISDIR, "path", path, "import");
        else if (!(exists = fstatat(t.dir_fd, t.name, &st, AT_SYMLINK_NOFOLLOW) == 0) && errno != ENOENT)
                r = app_fs_fail(err, errno, "path", path, "import");
        else if (exists && S_ISDIR(st.st_mode))
                r = app_fs_fail(err, EISDIR, "path", path, "import");
        else if (exists && S_ISLNK(st.st_mode))
                r = na_error_set(err, ELOOP, NA_E_INVALID_STATE, "%s: is a symbolic link; import to the file it points to",
                                 path);
        else if (exists && !S_ISREG(st.st_mode))
                r = na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file", path);
        if (r < 0) {
                release(&t);
                return r;
        }
        /* openat on an O_PATH directory fd works for creation: the kernel resolves beneath it. */
        if (NA_FAULT("app-fs.tmpfile")) /* tests: the path of file systems without O_TMPFILE */
                errno = EOPNOTSUPP;
        else
                t.fd = openat(t.dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (t.fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
                if ((r = random_name(t.tmp, sizeof(t.tmp))) < 0) {
                        release(&t);
                        return na_error_sys(err, -r, "import %s: getrandom", path);
                }
                t.fd = openat(t.dir_fd, t.tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                t.named = t.fd >= 0;
        }
        if (t.fd < 0) {
                r = app_fs_fail(err, errno, "path", path, "import");
                release(&t);
                return r;
        }
        uid_t uid = exists ? st.st_uid : fs->uid;
        gid_t gid = exists ? st.st_gid : fs->gid;
        mode_t mode = exists ? (st.st_mode & 0777) : 0644;
        if (fchown(t.fd, uid, gid) < 0 || fchmod(t.fd, mode) < 0) {
                r = app_fs_fail(err, errno, "path", path, "import (owner)");
                app_fs_tmp_abort(&t);
                return r;
        }
        *ret = t;
        return 0;
}

int app_fs_tmp_commit(struct app_fs_tmp *t, struct na_error *err)
{
        return app_fs_tmp_commit_flags(t, 0, err);
}

int app_fs_tmp_commit_flags(struct app_fs_tmp *t, unsigned rename_flags, struct na_error *err)
{
        int e = 0;
        const char *step = "import (fsync)";
        if (fsync(t->fd) < 0)
                e = errno;
        /* Name the unnamed file: linkat through the fd (AT_EMPTY_PATH; the agent runs as root). */
        for (int tries = 0; !e && !t->named; tries++) {
                int r = random_name(t->tmp, sizeof(t->tmp));
                if (r < 0)
                        e = -r, step = "import (getrandom)";
                else if (linkat(t->fd, "", t->dir_fd, t->tmp, AT_EMPTY_PATH) == 0)
                        t->named = true;
                else if (errno != EEXIST || tries >= 8)
                        e = errno, step = "import (link)";
        }
        if (!e && renameat2(t->dir_fd, t->tmp, t->dir_fd, t->name, rename_flags) < 0)
                e = errno, step = "import (rename)";
        if (e) {
                app_fs_tmp_abort(t);
                if (e == ENOSPC || e == EDQUOT)
                        return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                            "%s: the app's volume is full; nothing was kept", t->path);
                int r = app_fs_fail(err, e, "path", t->path, step);
                return e == EEXIST ? -EEXIST : r;
        }
        t->named = false;
        int dfd = openat(t->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                (void)fsync(dfd);
                close(dfd);
        }
        release(t);
        return 0;
}

void app_fs_tmp_abort(struct app_fs_tmp *t)
{
        if (!t)
                return;
        if (t->named && t->dir_fd >= 0)
                (void)unlinkat(t->dir_fd, t->tmp, 0);
        release(t);
}
