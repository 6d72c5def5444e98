/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The extractor of app.backup.restore (drivers/app/backup/app-backup-parts.h): every entry of a
 * hostile archive made beneath one fresh directory and nowhere else. Names are
 * checked as text first (relative, no "." / ".." / empty component, bounded); the
 * parent is then resolved beneath the destination with RESOLVE_NO_SYMLINKS, so a link
 * an earlier entry made is never passed through, and the entry is made with
 * O_CREAT|O_EXCL|O_NOFOLLOW, mkdirat, symlinkat or linkat (which does not follow),
 * never replacing anything.
 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "drivers/app/app-archive-dl.h"
#include "drivers/app/backup/app-backup-parts.h"

#define X_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define NAME_BYTES 4096
#define COMPONENT_BYTES 255
#define CHECK_EVERY_BYTES (16u << 20)

struct x {
        int dest;
        uint32_t base, count;
        const char *what;
        uint64_t archive_size; /* for percent: compressed bytes read of it */
        const struct na_progress *progress;
        int reported;          /* the last percent reported + 2 (0: none yet) */
        struct na_error *err;
};

/* Stage "restoring" with how far into the archive the reader is; it also carries a cancel back. */
static void report(struct x *x, struct archive *a)
{
        int pct = -1;
        if (x->archive_size > 0) {
                la_int64_t done = archive_filter_bytes(a, -1);
                pct = done > 0 ? (int)((uint64_t)done * 100 / x->archive_size) : 0;
                pct = pct > 99 ? 99 : pct;
        }
        if (pct + 2 == x->reported)
                return; /* only when it moved */
        x->reported = pct + 2;
        na_progress_stage(x->progress, "restoring", pct, NULL);
}

static int refuse(struct x *x, const char *name, const char *why)
{
        char shown[128];
        snprintf(shown, sizeof(shown), "%.100s%s", name, strlen(name) > 100 ? "..." : "");
        na_error_field(x->err, "backupId", "entry \"%s\": %s", shown, why);
        snprintf(x->err->message, sizeof(x->err->message), "%s: refused: entry \"%s\": %s", x->what, shown, why);
        return -EINVAL;
}

static int fail_io(struct x *x, int e, const char *name, const char *what)
{
        if (e == ENOSPC || e == EDQUOT)
                return na_error_set(x->err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                    "%s: the app's volume has no room for the backup's contents (at \"%s\")", x->what,
                                    name);
        if (e == ELOOP || e == EXDEV || e == ENOTDIR)
                return refuse(x, name, "its parent is a symbolic link or leaves the volume");
        if (e == EEXIST)
                return refuse(x, name, "appears twice or exists already");
        if (e == ENOENT)
                return refuse(x, name, "its parent directory is not in the archive before it");
        return na_error_sys(x->err, e, "%s: %s \"%s\"", x->what, what, name);
}

/* NULL when name is acceptable; trailing "/" removed in place. */
static const char *name_problem(char *name)
{
        size_t len = strlen(name);
        if (len == 0)
                return "has an empty name";
        if (len > NAME_BYTES)
                return "its name is over 4096 bytes";
        if (name[0] == '/')
                return "its name is absolute";
        while (len > 1 && name[len - 1] == '/')
                name[--len] = '\0';
        for (const char *c = name;;) {
                const char *slash = strchr(c, '/');
                size_t n = slash ? (size_t)(slash - c) : strlen(c);
                if (n == 0)
                        return "its name has an empty component";
                if (n > COMPONENT_BYTES)
                        return "a component of its name is over 255 bytes";
                if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return "its name has a \".\" or \"..\" component";
                if (!slash)
                        return NULL;
                c = slash + 1;
        }
}

static int open_parent(struct x *x, char *name, const char **ret_last)
{
        char *slash = strrchr(name, '/');
        if (!slash) {
                *ret_last = name;
                return fcntl(x->dest, F_DUPFD_CLOEXEC, 3);
        }
        *slash = '\0';
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, .resolve = X_RESOLVE };
        int fd = (int)syscall(SYS_openat2, x->dest, name, &how, sizeof(how));
        int e = errno;
        *slash = '/';
        *ret_last = slash + 1;
        errno = e;
        return fd;
}

static uid_t to_host(struct x *x, int64_t id)
{
        return x->base + (id >= 0 && id < (int64_t)x->count ? (uint32_t)id : 0);
}

static int write_file(struct x *x, struct archive *a, int fd, const char *name, const struct na_progress *progress,
                      uint64_t *since)
{
        const void *buf;
        size_t len;
        la_int64_t off;
        for (;;) {
                int k = archive_read_data_block(a, &buf, &len, &off);
                if (k == ARCHIVE_EOF)
                        return 0;
                if (k != ARCHIVE_OK)
                        return refuse(x, name, archive_error_string(a) ? archive_error_string(a) : "damaged data");
                const char *p = buf;
                while (len > 0) {
                        ssize_t n = pwrite(fd, p, len, off);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return fail_io(x, errno, name, "write");
                        p += n;
                        off += n;
                        len -= (size_t)n;
                        *since += (uint64_t)n;
                }
                if (*since >= CHECK_EVERY_BYTES) {
                        *since = 0;
                        report(x, a);
                }
                /* The stop flag after every block, however small: a cancel ends a restore at once. */
                int r = na_progress_checkpoint(progress, x->err);
                if (r < 0)
                        return r;
        }
}

static int one_entry(struct x *x, struct archive *a, struct archive_entry *e, const struct na_progress *progress,
                     uint64_t *since)
{
        const char *orig = archive_entry_pathname(e);
        if (!orig)
                return refuse(x, "", "has no name");
        _cleanup_free_ char *name = strdup(orig);
        if (!name)
                return na_error_sys(x->err, ENOMEM, "%s", x->what);
        const char *problem = name_problem(name);
        if (problem)
                return refuse(x, orig, problem);
        const char *hard = archive_entry_hardlink(e);
        mode_t type = archive_entry_filetype(e);
        if (!hard && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
                return refuse(x, orig, "devices, fifos and sockets are not restored");
        const char *last;
        _cleanup_close_ int parent = open_parent(x, name, &last);
        if (parent < 0)
                return fail_io(x, errno, orig, "open the parent of");
        uid_t uid = to_host(x, archive_entry_uid(e));
        gid_t gid = to_host(x, archive_entry_gid(e));
        mode_t perm = archive_entry_perm(e) & 07777;
        struct timespec times[2] = { { .tv_nsec = UTIME_OMIT },
                                     { .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) } };

        if (hard) {
                _cleanup_free_ char *target = strdup(hard);
                if (!target)
                        return na_error_sys(x->err, ENOMEM, "%s", x->what);
                if ((problem = name_problem(target)))
                        return refuse(x, orig, "a hard link whose target is outside the archive");
                const char *tlast;
                _cleanup_close_ int tparent = open_parent(x, target, &tlast);
                if (tparent < 0)
                        return fail_io(x, errno, orig, "open the target of");
                struct stat st;
                if (fstatat(tparent, tlast, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        return refuse(x, orig, "a hard link whose target is not a file restored before it");
                if (linkat(tparent, tlast, parent, last, 0) < 0)
                        return fail_io(x, errno, orig, "link");
                return 0;
        }
        if (type == AE_IFDIR) {
                if (mkdirat(parent, last, 0700) < 0)
                        return fail_io(x, errno, orig, "mkdir");
                struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, .resolve = X_RESOLVE };
                _cleanup_close_ int fd = (int)syscall(SYS_openat2, parent, last, &how, sizeof(how));
                if (fd < 0 || fchown(fd, uid, gid) < 0 || fchmod(fd, perm) < 0 || futimens(fd, times) < 0)
                        return fail_io(x, errno, orig, "set up the directory");
                return 0;
        }
        if (type == AE_IFLNK) {
                const char *target = archive_entry_symlink(e);
                if (!target || !*target)
                        return refuse(x, orig, "a symbolic link without a target");
                if (symlinkat(target, parent, last) < 0)
                        return fail_io(x, errno, orig, "symlink");
                if (fchownat(parent, last, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
                    utimensat(parent, last, times, AT_SYMLINK_NOFOLLOW) < 0)
                        return fail_io(x, errno, orig, "set up the link");
                return 0;
        }
        struct open_how how = { .flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, .mode = 0600,
                                .resolve = X_RESOLVE };
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, parent, last, &how, sizeof(how));
        if (fd < 0)
                return fail_io(x, errno, orig, "create");
        int r = write_file(x, a, fd, orig, progress, since);
        if (r < 0)
                return r;
        la_int64_t size = archive_entry_size(e);
        if (size > 0 && ftruncate(fd, size) < 0) /* a sparse tail */
                return fail_io(x, errno, orig, "size");
        if (fchown(fd, uid, gid) < 0 || fchmod(fd, perm) < 0 || futimens(fd, times) < 0)
                return fail_io(x, errno, orig, "set up the file");
        return 0;
}

int app_backup_extract(int archive_fd, int dest_fd, uint32_t id_base, uint32_t id_count,
                       const struct na_progress *progress, const char *what, struct na_error *err)
{
        struct x x = { .dest = dest_fd, .base = id_base, .count = id_count, .what = what, .progress = progress,
                       .err = err };
        struct stat ast;
        if (fstat(archive_fd, &ast) == 0)
                x.archive_size = (uint64_t)ast.st_size;
        if (lseek(archive_fd, 0, SEEK_SET) < 0)
                return na_error_sys(err, errno, "%s: seek", what);
        struct archive *a = archive_read_new();
        if (!a)
                return app_archive_failed(err, what);
        archive_read_support_filter_zstd(a);
        archive_read_support_format_tar(a);
        int r = 0;
        uint64_t since = 0;
        unsigned n = 0;
        if (archive_read_open_fd(a, archive_fd, 64 * 1024) != ARCHIVE_OK) {
                na_error_field(err, "backupId", "not a tar+zstd archive");
                snprintf(err->message, sizeof(err->message), "%s: not a tar+zstd archive: %s", what,
                         archive_error_string(a));
                r = -EINVAL;
                goto out;
        }
        for (;;) {
                struct archive_entry *e;
                int k = archive_read_next_header(a, &e);
                if (k == ARCHIVE_EOF)
                        break;
                if (k != ARCHIVE_OK && k != ARCHIVE_WARN) {
                        na_error_field(err, "backupId", "the archive is damaged");
                        snprintf(err->message, sizeof(err->message), "%s: the archive is damaged: %s", what,
                                 archive_error_string(a));
                        r = -EINVAL;
                        break;
                }
                if ((r = one_entry(&x, a, e, progress, &since)) < 0)
                        break;
                if (++n % 64 == 0)
                        report(&x, a);
                if ((r = na_progress_checkpoint(progress, err)) < 0)
                        break;
        }
out:
        archive_read_free(a);
        return r;
}
