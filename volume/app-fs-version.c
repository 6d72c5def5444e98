/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One file of a volume as live file editing sees it (volume/volume.h, app_fs_file_*):
 * its version, its content when it is small UTF-8 text, and a replace that happens
 * only if the version is still the one the writer saw.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/fault.h"
#include "common/macro.h"
#include "proto/text.h"
#include "volume/volume-internal.h"

void app_fs_file_clear(struct app_fs_file *f)
{
        if (!f)
                return;
        free(f->content);
        memset(f, 0, sizeof(*f));
}

static bool utf8_valid(const unsigned char *p, size_t n)
{
        for (size_t i = 0; i < n;) {
                size_t k = proto_utf8_seq(p + i, n - i);
                if (!k)
                        return false;
                i += k;
        }
        return true;
}

static void meta_version(const struct stat *st, char *out, size_t len)
{
        snprintf(out, len, "meta:%llu-%llu-%lld.%09ld", (unsigned long long)st->st_ino,
                 (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

static int content_version(const void *data, size_t len, char *out, size_t outlen)
{
        char hex[65];
        if (na_sha256_buf(data, len, hex) < 0)
                return -ENOMEM;
        snprintf(out, outlen, "sha256:%s", hex);
        return 0;
}

/* The file name in dir: *ret filled (exists false when nothing regular is there). */
static int get_in(int dir, const char *name, const char *path, size_t content_max, struct app_fs_file *ret,
                  struct na_error *err)
{
        struct app_fs_file f = { 0 };
        struct stat st;
        if (fstat(dir, &st) == 0) {
                f.dir_dev = st.st_dev;
                f.dir_ino = st.st_ino;
        }
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return app_fs_fail(err, errno, "path", path, "read");
                *ret = f;
                return 0;
        }
        if (!S_ISREG(st.st_mode)) {
                f.not_regular = S_ISDIR(st.st_mode) ? EISDIR : S_ISLNK(st.st_mode) ? ELOOP : EINVAL;
                *ret = f;
                return 0;
        }
        _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT || errno == ELOOP) {
                        f.not_regular = errno == ELOOP ? ELOOP : 0;
                        *ret = f;
                        return 0;
                }
                return app_fs_fail(err, errno, "path", path, "read");
        }
        if (fstat(fd, &st) < 0)
                return app_fs_fail(err, errno, "path", path, "read");
        if (!S_ISREG(st.st_mode)) {
                f.not_regular = EINVAL;
                *ret = f;
                return 0;
        }
        f.exists = true;
        if ((uint64_t)st.st_size > content_max) {
                f.bytes = (uint64_t)st.st_size;
                f.binary = true;
                meta_version(&st, f.version, sizeof(f.version));
                *ret = f;
                return 0;
        }
        /* One byte more than allowed tells a file that grew since fstat. */
        _cleanup_free_ char *buf = malloc(content_max + 2);
        if (!buf)
                return na_error_sys(err, ENOMEM, "read %s", path);
        size_t n = 0;
        while (n < content_max + 1) {
                ssize_t k = RETRY_EINTR(read(fd, buf + n, content_max + 1 - n));
                if (k < 0)
                        return app_fs_fail(err, errno, "path", path, "read");
                if (k == 0)
                        break;
                n += (size_t)k;
        }
        if (n > content_max) {
                if (fstat(fd, &st) < 0)
                        return app_fs_fail(err, errno, "path", path, "read");
                f.bytes = (uint64_t)st.st_size;
                f.binary = true;
                meta_version(&st, f.version, sizeof(f.version));
                *ret = f;
                return 0;
        }
        buf[n] = 0;
        f.bytes = n;
        if (content_version(buf, n, f.version, sizeof(f.version)) < 0)
                return na_error_sys(err, ENOMEM, "read %s", path);
        if (utf8_valid((const unsigned char *)buf, n))
                f.content = TAKE_PTR(buf);
        else
                f.binary = true;
        *ret = f;
        return 0;
}

int app_fs_file_get(struct app_fs *fs, const char *path, size_t content_max, struct app_fs_file *ret,
                    struct na_error *err)
{
        _cleanup_close_ int dir = -1;
        const char *name = NULL;
        struct na_error e = NA_ERROR_INIT;
        int r = app_fs_resolve_parent(fs, "path", path, &dir, &name, &e);
        if (r < 0) {
                if (e.code && streq(e.code, NA_E_FILE_NOT_FOUND)) { /* its directory is gone: so is the file */
                        na_error_clear(&e);
                        *ret = (struct app_fs_file){ 0 };
                        return 0;
                }
                na_error_move(err, &e);
                return r;
        }
        if (streq(name, "."))
                return app_fs_fail(err, EISDIR, "path", path, "read");
        return get_in(dir, name, path, content_max, ret, err);
}

static bool same_version(const struct app_fs_file *f, const char *base)
{
        return base ? f->exists && streq(f->version, base) : !f->exists && !f->not_regular;
}

static int write_all(int fd, const unsigned char *data, size_t len)
{
        if (len && NA_FAULT("app-fs.reserve"))
                return -ENOSPC;
        if (len && fallocate(fd, 0, 0, (off_t)len) < 0 && errno != EOPNOTSUPP && errno != ENOSYS)
                return -errno;
        for (size_t n = 0; n < len;) {
                if (NA_FAULT("app-fs.write"))
                        return -ENOSPC;
                ssize_t k = RETRY_EINTR(pwrite(fd, data + n, len - n, (off_t)n));
                if (k < 0)
                        return -errno;
                n += (size_t)k;
        }
        return 0;
}

int app_fs_file_replace_if(struct app_fs *fs, const char *path, const char *base_version, const void *data,
                           size_t len, size_t content_max, struct app_fs_file *ret_now, bool *ret_conflict,
                           struct na_error *err)
{
        struct app_fs_file cur = { 0 };
        int r = app_fs_file_get(fs, path, content_max, &cur, err);
        if (r < 0)
                return r;
        if (!same_version(&cur, base_version)) {
                *ret_now = cur;
                *ret_conflict = true;
                return 0;
        }
        app_fs_file_clear(&cur);
        struct app_fs_tmp t;
        if ((r = app_fs_tmp_open(fs, path, &t, err)) < 0)
                return r;
        if ((r = write_all(t.fd, data, len)) < 0) {
                app_fs_tmp_abort(&t);
                if (r == -ENOSPC || r == -EDQUOT)
                        return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                            "%s: the app's volume has no room for %zu bytes; nothing was written", path,
                                            len);
                return app_fs_fail(err, -r, "path", path, "write");
        }
        struct app_fs_file now = { 0 };
        if (len <= content_max)
                r = content_version(data, len, now.version, sizeof(now.version)) < 0
                            ? na_error_sys(err, ENOMEM, "write %s", path)
                            : 0;
        else {
                struct stat st;
                r = fstat(t.fd, &st) < 0 ? app_fs_fail(err, errno, "path", path, "write") : 0;
                if (r >= 0)
                        meta_version(&st, now.version, sizeof(now.version));
        }
        /* Again just before the rename: a writer of the agent cannot come between (the
         * caller's lock), the app or SFTP may have. */
        if (r >= 0 && (r = app_fs_file_get(fs, path, content_max, &cur, err)) >= 0 && !same_version(&cur, base_version)) {
                app_fs_tmp_abort(&t);
                *ret_now = cur;
                *ret_conflict = true;
                return 0;
        }
        app_fs_file_clear(&cur);
        if (r < 0) {
                app_fs_tmp_abort(&t);
                return r;
        }
        r = app_fs_tmp_commit_flags(&t, base_version ? 0 : RENAME_NOREPLACE, err);
        if (r == -EEXIST) { /* created meanwhile: what is there now */
                na_error_clear(err);
                if ((r = app_fs_file_get(fs, path, content_max, ret_now, err)) < 0)
                        return r;
                *ret_conflict = true;
                return 0;
        }
        if (r < 0)
                return r;
        now.exists = true;
        now.bytes = len;
        *ret_now = now;
        *ret_conflict = false;
        return 0;
}
