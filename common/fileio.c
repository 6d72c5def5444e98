/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/fileio.h"
#include "common/timeutil.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

int na_fsync_parent(const char *path, struct na_error *err)
{
        _cleanup_free_ char *copy = strdup(path);
        if (!copy)
                return na_error_sys(err, ENOMEM, "fsync parent of %s", path);
        const char *dir = dirname(copy);
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open directory %s", dir);
        if (fsync(fd) < 0)
                return na_error_sys(err, errno, "fsync directory %s", dir);
        return 0;
}

int na_write_all(int fd, const void *data, size_t len, const char *path, struct na_error *err)
{
        const char *p = data;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return na_error_sys(err, errno, "write %s", path);
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int na_pwrite_all(int fd, const void *data, size_t len, off_t off, const char *what, struct na_error *err)
{
        const char *p = data;
        while (len > 0) {
                ssize_t n = pwrite(fd, p, len, off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return na_error_sys(err, n < 0 ? errno : EIO, "write %s", what);
                p += n;
                len -= (size_t)n;
                off += n;
        }
        return 0;
}

int na_atomic_write(const char *path, const void *data, size_t len, mode_t mode, struct na_error *err)
{
        char tmp[4096];
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= sizeof(tmp))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s: path too long", path);

        /* A unique name: two threads replacing the same file never share a temporary. */
        _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "create %s", tmp);
        int r = na_write_all(fd, data, len, tmp, err);
        if (r < 0) {
                unlink(tmp);
                return r;
        }
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
                r = errno;
                unlink(tmp);
                return na_error_sys(err, r, "fsync %s", tmp);
        }
        if (rename(tmp, path) < 0) {
                r = errno;
                unlink(tmp);
                return na_error_sys(err, r, "rename %s to %s", tmp, path);
        }
        return na_fsync_parent(path, err);
}

int na_read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "stat %s", path);
        if (S_ISREG(st.st_mode) && (size_t)st.st_size > max)
                return na_error_set(err, EFBIG, NA_E_INTERNAL, "%s: larger than %zu bytes", path, max);

        /* procfs and sysfs files say size 0: one read of a page, not one byte per read (a
         * /proc/PID/cmdline read in pieces mixes two programs when PID execs between them). */
        size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, len = 0;
        _cleanup_free_ char *buf = malloc(cap);
        if (!buf)
                return na_error_sys(err, ENOMEM, "read %s", path);
        for (;;) {
                if (len + 1 >= cap) {
                        if (cap > max + 1)
                                return na_error_set(err, EFBIG, NA_E_INTERNAL, "%s: larger than %zu bytes", path, max);
                        size_t ncap = cap * 2;
                        char *n = realloc(buf, ncap);
                        if (!n)
                                return na_error_sys(err, ENOMEM, "read %s", path);
                        buf = n;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return na_error_sys(err, errno, "read %s", path);
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        if (len > max)
                return na_error_set(err, EFBIG, NA_E_INTERNAL, "%s: larger than %zu bytes", path, max);
        buf[len] = '\0';
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

int na_mkdir_p(const char *path, mode_t mode, struct na_error *err)
{
        char buf[4096];
        if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s: path too long", path);
        for (char *p = buf + 1;; p++) {
                if (*p == '/' || *p == '\0') {
                        char c = *p;
                        *p = '\0';
                        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                                return na_error_sys(err, errno, "create directory %s", buf);
                        *p = c;
                        if (c == '\0')
                                break;
                }
        }
        struct stat st;
        if (stat(path, &st) < 0)
                return na_error_sys(err, errno, "stat %s", path);
        if (!S_ISDIR(st.st_mode))
                return na_error_set(err, ENOTDIR, NA_E_INTERNAL, "%s: not a directory", path);
        return 0;
}

int na_statedir_lock(const char *dir, int *ret_fd, struct na_error *err)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/lock", dir);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "state directory %s: open lock", dir);

        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        if (fcntl(fd, F_SETLK, &fl) < 0) {
                if (errno != EACCES && errno != EAGAIN)
                        return na_error_sys(err, errno, "state directory %s: lock", dir);
                struct flock probe = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
                int pid = (fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) ? (int)probe.l_pid : -1;
                return na_error_set(err, EBUSY, NA_E_INTERNAL,
                                    "state directory %s is in use by another nodeagentd (pid %d)", dir, pid);
        }
        char pid[32];
        int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
                return na_error_sys(err, errno, "state directory %s: write lock", dir);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

char *na_strdupf(const char *fmt, ...)
{
        char *s = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

int na_unlink(const char *path, struct na_error *err)
{
        if (unlink(path) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "remove %s", path);
        return 0;
}

json_t *na_json_load(const char *path, size_t max)
{
        _cleanup_free_ char *text = NULL;
        struct na_error e = NA_ERROR_INIT;
        int r = na_read_file(path, max, &text, NULL, &e);
        na_error_clear(&e);
        return r < 0 ? NULL : json_loads(text, 0, NULL);
}

int na_fsync_path(const char *path, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        if (fsync(fd) < 0)
                return na_error_sys(err, errno, "fsync %s", path);
        return 0;
}

int na_wait_fd(int fd, short events, long long deadline_ms)
{
        for (;;) {
                long long left = deadline_ms - na_now_mono_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { fd, events, 0 };
                int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n > 0)
                        return 0;
        }
}
