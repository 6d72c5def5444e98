/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The file operations over a volume (volume/volume.h): list, read_text, mkdir,
 * move, delete, stat and open for export. write is in app-fs-write.c, rm -rf in
 * app-fs-rmrf.c.
 */
#include <dirent.h>
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
#include "proto/text.h"

static void entry_from_stat(const struct stat *st, const char *name, struct proto_app_file_entry *e)
{
        e->name = name;
        e->type = S_ISREG(st->st_mode)   ? PROTO_APP_FILE
                  : S_ISDIR(st->st_mode) ? PROTO_APP_FILE_DIRECTORY
                  : S_ISLNK(st->st_mode) ? PROTO_APP_FILE_SYMLINK
                                         : PROTO_APP_FILE_OTHER;
        e->bytes = st->st_size > 0 ? (uint64_t)st->st_size : 0;
        e->modified_ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
        e->mode = st->st_mode & 07777;
}

void app_fs_listing_clear(struct app_fs_listing *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                free((char *)l->entries[i].name);
        free(l->entries);
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 reports app_fs_list's names here, freed just above (with the hardening flags it inlines the cleanup) */
        *l = (struct app_fs_listing){0};
        NA_ANALYZER_FP_END
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct proto_app_file_entry *)a)->name, ((const struct proto_app_file_entry *)b)->name);
}

int app_fs_list(struct app_fs *fs, const char *path, size_t max, struct app_fs_listing *ret, struct na_error *err)
{
        if (max == 0)
                max = PROTO_APP_FILES_LIST_MAX;
        int fd;
        int r = app_fs_resolve(fs, "path", path, O_RDONLY | O_DIRECTORY, &fd, err);
        if (r < 0)
                return r;
        DIR *d = fdopendir(fd);
        if (!d) {
                r = na_error_sys(err, errno, "list %s", path);
                close(fd);
                return r;
        }
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* the names belong to l, released by its cleanup (app_fs_listing_clear) or handed to *ret */
        _cleanup_(app_fs_listing_clear) struct app_fs_listing l = {0};
        NA_ANALYZER_FP_END
        size_t cap = 0;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (l.n == max) {
                        l.cut = true;
                        break;
                }
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue; /* removed while listed */
                        r = na_error_sys(err, errno, "list %s: stat %s", path, de->d_name);
                        goto out;
                }
                if (l.n == cap) {
                        size_t ncap = cap ? cap * 2 : 64;
                        struct proto_app_file_entry *ne = realloc(l.entries, ncap * sizeof(*ne));
                        if (!ne) {
                                r = na_error_sys(err, ENOMEM, "list %s", path);
                                goto out;
                        }
                        l.entries = ne;
                        cap = ncap;
                }
                char *name = strdup(de->d_name);
                if (!name) {
                        r = na_error_sys(err, ENOMEM, "list %s", path);
                        goto out;
                }
                entry_from_stat(&st, name, &l.entries[l.n++]);
        }
        if (errno != 0 && !l.cut) {
                r = na_error_sys(err, errno, "list %s", path);
                goto out;
        }
        if (l.n > 1)
                qsort(l.entries, l.n, sizeof(*l.entries), by_name);
        *ret = l;
        l = (struct app_fs_listing){0};
        r = 0;
out:
        closedir(d);
        return r;
}

void app_fs_text_clear(struct app_fs_text *t)
{
        if (!t)
                return;
        free(t->content);
        *t = (struct app_fs_text){0};
}

/* Bytes a complete sequence starting with lead needs, when p[0..left) is a valid start of it; else 0. */
static size_t utf8_incomplete(const unsigned char *p, size_t left)
{
        size_t need;
        unsigned char lo = 0x80, hi = 0xbf;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                need = 2;
        else if (p[0] >= 0xe0 && p[0] <= 0xef) {
                need = 3;
                if (p[0] == 0xe0)
                        lo = 0xa0;
                else if (p[0] == 0xed)
                        hi = 0x9f;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                need = 4;
                if (p[0] == 0xf0)
                        lo = 0x90;
                else if (p[0] == 0xf4)
                        hi = 0x8f;
        } else
                return 0;
        if (left >= need)
                return 0;
        for (size_t i = 1; i < left; i++) {
                unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
                if (p[i] < l || p[i] > h)
                        return 0;
        }
        return need;
}

static int pread_full(int fd, unsigned char *buf, size_t len, uint64_t off, size_t *ret)
{
        size_t n = 0;
        while (n < len) {
                ssize_t k = RETRY_EINTR(pread(fd, buf + n, len - n, (off_t)(off + n)));
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t)k;
        }
        *ret = n;
        return 0;
}

int app_fs_read_text(struct app_fs *fs, const char *path, uint64_t offset, uint32_t limit, struct app_fs_text *ret,
                     struct na_error *err)
{
        if (limit < 1 || limit > PROTO_APP_FILES_READ_MAX)
                return app_fs_invalid(err, "limit", "must be between 1 and 524288");
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r = app_fs_open_read(fs, path, &fd, &st, err);
        if (r < 0)
                return r;
        if (offset > (uint64_t)st.st_size) {
                char msg[128];
                snprintf(msg, sizeof(msg), "is past the end of the file (%lld bytes)", (long long)st.st_size);
                return app_fs_invalid(err, "offset", msg);
        }
        _cleanup_free_ unsigned char *buf = malloc((size_t)limit + 1);
        if (!buf)
                return na_error_sys(err, ENOMEM, "read %s", path);
        size_t n = 0;
        if ((r = pread_full(fd, buf, limit, offset, &n)) < 0)
                return na_error_sys(err, -r, "read %s", path);
        bool more = false;
        if (n == limit) {
                unsigned char probe;
                size_t k;
                if ((r = pread_full(fd, &probe, 1, offset + n, &k)) < 0)
                        return na_error_sys(err, -r, "read %s", path);
                more = k == 1;
        }
        struct app_fs_text t = { .bytes = n, .truncated = more };
        for (size_t i = 0; i < n;) {
                /* ASCII eight bytes at a time: most text is (bench/app-files: 1.5 ms -> 0.08 ms for 512 KB). */
                uint64_t w;
                while (i + sizeof(w) <= n && (memcpy(&w, buf + i, sizeof(w)), !(w & 0x8080808080808080ULL)))
                        i += sizeof(w);
                if (i >= n)
                        break;
                size_t s = buf[i] < 0x80 ? 1 : proto_utf8_seq(buf + i, n - i);
                if (s > 0) {
                        i += s;
                        continue;
                }
                if (more && utf8_incomplete(buf + i, n - i) && i > 0) {
                        t.bytes = i; /* end before the sequence the limit cut */
                        break;
                }
                t.binary = true;
                break;
        }
        if (!t.binary) {
                buf[t.bytes] = '\0';
                t.content = (char *)TAKE_PTR(buf);
        }
        *ret = t;
        return 0;
}

int app_fs_open_read(struct app_fs *fs, const char *path, int *ret_fd, struct stat *ret_st, struct na_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = app_fs_resolve(fs, "path", path, O_RDONLY | O_NONBLOCK | O_NOCTTY, &fd, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "open %s: stat", path);
        if (S_ISDIR(st.st_mode))
                return app_fs_fail(err, EISDIR, "path", path, "open");
        if (!S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE, "%s: not a regular file", path);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return na_error_sys(err, errno, "open %s", path);
        *ret_fd = TAKE_FD(fd);
        *ret_st = st;
        return 0;
}

int app_fs_stat(struct app_fs *fs, const char *path, struct proto_app_file_entry *ret, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0)
                return app_fs_fail(err, errno, "path", path, "stat");
        entry_from_stat(&st, streq(name, ".") ? "/" : name, ret);
        return 0;
}

int app_fs_mkdir(struct app_fs *fs, const char *path, struct na_error *err)
{
        const char *rel = NULL;
        int r = app_fs_check("path", path, &rel, err);
        if (r < 0)
                return r;
        if (streq(rel, "."))
                return 0;
        _cleanup_free_ char *buf = strdup(rel);
        if (!buf)
                return na_error_sys(err, ENOMEM, "mkdir %s", path);
        _cleanup_close_ int cur = fcntl(fs->root_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return na_error_sys(err, errno, "mkdir %s", path);
        for (char *comp = buf;;) {
                char *slash = strchr(comp, '/');
                if (slash)
                        *slash = '\0';
                /* The prefix so far, resolved from the root so links that stay inside are followed. */
                struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = APP_FS_RESOLVE };
                int next = -1;
                for (int tries = 0; tries < 8; tries++) {
                        next = (int)syscall(SYS_openat2, fs->root_fd, buf, &how, sizeof(how));
                        if (next >= 0 || (errno != ENOENT && errno != EAGAIN))
                                break;
                        if (errno == EAGAIN)
                                continue;
                        if (mkdirat(cur, comp, 0755) < 0) {
                                if (errno == EEXIST)
                                        continue; /* made meanwhile: open it */
                                int e = errno;
                                if (slash)
                                        *slash = '/';
                                return app_fs_fail(err, e, "path", path, "mkdir");
                        }
                        int dfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (dfd >= 0) {
                                int rr = fchown(dfd, fs->uid, fs->gid) < 0 || fchmod(dfd, 0755) < 0 ? -errno : 0;
                                close(dfd);
                                if (rr < 0)
                                        return na_error_sys(err, -rr, "mkdir %s: chown", path);
                        }
                }
                if (next < 0) {
                        int e = errno;
                        if (slash)
                                *slash = '/';
                        return app_fs_fail(err, e, "path", path, "mkdir");
                }
                close(cur);
                cur = next;
                if (!slash)
                        return 0;
                *slash = '/';
                comp = slash + 1;
        }
}

int app_fs_move(struct app_fs *fs, const char *from, const char *to, struct na_error *err)
{
        _cleanup_close_ int from_dir = -1, to_dir = -1;
        const char *from_name = NULL, *to_name = NULL;
        int r = app_fs_resolve_parent(fs, "from", from, &from_dir, &from_name, err);
        if (r < 0)
                return r;
        if ((r = app_fs_resolve_parent(fs, "to", to, &to_dir, &to_name, err)) < 0)
                return r;
        if (streq(from_name, "."))
                return na_error_set(err, EBUSY, NA_E_INVALID_STATE, "%s: the volume's root cannot be moved", from);
        if (streq(to_name, "."))
                return app_fs_fail(err, EEXIST, "to", to, "move");
        if (renameat2(from_dir, from_name, to_dir, to_name, RENAME_NOREPLACE) == 0)
                return 0;
        switch (errno) {
        case ENOENT:
                return app_fs_fail(err, ENOENT, "from", from, "move");
        case EEXIST:
        case ENOTEMPTY:
                return app_fs_fail(err, EEXIST, "to", to, "move");
        case EINVAL:
                return app_fs_invalid(err, "to", "cannot move a directory into itself");
        default:
                return app_fs_fail(err, errno, "to", to, "move to");
        }
}

int app_fs_delete(struct app_fs *fs, const char *path, struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, err);
        if (r < 0)
                return r;
        if (streq(name, "."))
                return na_error_set(err, EBUSY, NA_E_INVALID_STATE, "%s: the volume's root cannot be deleted", path);
        struct stat st;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return app_fs_fail(err, errno, "path", path, "delete");
        if ((r = app_fs_rm_rf(dir, name, err)) < 0)
                return na_error_prefix(err, "delete %s", path);
        return 0;
}
