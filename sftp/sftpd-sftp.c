/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The SFTP server of nodeagent-sftpd: protocol version 3 (draft-ietf-secsh-filexfer-02,
 * what OpenSSH's sftp, FileZilla and WinSCP speak) over one channel, every path
 * through the safe path layer (volume/volume.h) after sftp_path_normalize. Runs
 * in the confined session process: the app's uid, no new privileges, seccomp.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/macro.h"
#include "volume/volume.h"
#include "sftp/sftp-path.h"
#include "sftp/sftpd-wire.h"
#include "sftp/sftpd.h"

struct handle {
        bool used;
        int fd;
        DIR *dir;
        char *path; /* of a directory: for names in READDIR */
};

struct srv {
        ssh_channel chan;
        struct app_fs *fs;
        bool read_only;
        uint32_t uid_base;
        struct handle h[HANDLES];
        struct buf out;
        struct sftpd_stats *stats;
        unsigned idle_sec;
};

static void status(struct srv *s, uint32_t id, uint32_t code, const char *msg)
{
        static const char *const texts[] = { "Success", "End of file", "No such file", "Permission denied",
                                             "Failure", "Bad message", "No connection", "Connection lost",
                                             "Operation unsupported" };
        size_t at = pkt_begin(&s->out, FXP_STATUS, id);
        put_u32(&s->out, code);
        put_cstr(&s->out, msg ? msg : texts[code < ARRAY_SIZE(texts) ? code : FX_FAILURE]);
        put_cstr(&s->out, "en");
        pkt_end(&s->out, at);
}

/* The status for a failed app-fs call. */
static void status_err(struct srv *s, uint32_t id, int r, struct na_error *err)
{
        int e = err->errnum ? err->errnum : -r;
        if (err->code && streq(err->code, NA_E_QUOTA_EXCEEDED))
                status(s, id, FX_FAILURE, "no space left (quota)");
        else if (err->code && streq(err->code, NA_E_FILE_NOT_FOUND))
                status(s, id, FX_NO_SUCH_FILE, NULL);
        else if (err->code && streq(err->code, NA_E_VALIDATION))
                status(s, id, FX_PERMISSION_DENIED, err->message);
        else if (e == EACCES || e == EPERM || e == EROFS)
                status(s, id, FX_PERMISSION_DENIED, NULL);
        else
                status(s, id, FX_FAILURE, err->message);
        na_error_clear(err);
}

static void status_errno(struct srv *s, uint32_t id, int e)
{
        if (e == ENOSPC || e == EDQUOT)
                status(s, id, FX_FAILURE, "no space left (quota)");
        else if (e == ENOENT)
                status(s, id, FX_NO_SUCH_FILE, NULL);
        else if (e == EACCES || e == EPERM)
                status(s, id, FX_PERMISSION_DENIED, NULL);
        else
                status(s, id, FX_FAILURE, strerror(e));
}

static uint32_t shown_id(const struct srv *s, uint32_t id)
{
        return id >= s->uid_base && id - s->uid_base < 65536 ? id - s->uid_base : id;
}

static void put_attrs(struct srv *s, const struct stat *st)
{
        put_u32(&s->out, ATTR_SIZE | ATTR_UIDGID | ATTR_PERMISSIONS | ATTR_ACMODTIME);
        put_u64(&s->out, st->st_size > 0 ? (uint64_t)st->st_size : 0);
        put_u32(&s->out, shown_id(s, st->st_uid));
        put_u32(&s->out, shown_id(s, st->st_gid));
        put_u32(&s->out, st->st_mode);
        put_u32(&s->out, (uint32_t)st->st_atim.tv_sec);
        put_u32(&s->out, (uint32_t)st->st_mtim.tv_sec);
}

/* "ls -l" of one entry, for clients that show it. */
static void longname(const struct srv *s, const struct stat *st, const char *name, char *out, size_t n)
{
        char mode[11] = "----------";
        mode[0] = S_ISDIR(st->st_mode) ? 'd' : S_ISLNK(st->st_mode) ? 'l' : S_ISREG(st->st_mode) ? '-' : '?';
        static const char rwx[] = "rwxrwxrwx";
        for (int i = 0; i < 9; i++)
                if (st->st_mode & (1u << (8 - i)))
                        mode[i + 1] = rwx[i];
        struct tm tm;
        time_t t = st->st_mtim.tv_sec;
        char when[32];
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%b %e %H:%M", &tm);
        snprintf(out, n, "%s %4lu %-8u %-8u %12lld %s %s", mode, (unsigned long)st->st_nlink, shown_id(s, st->st_uid),
                 shown_id(s, st->st_gid), (long long)st->st_size, when, name);
}

static int handle_new(struct srv *s)
{
        for (int i = 0; i < HANDLES; i++)
                if (!s->h[i].used) {
                        s->h[i] = (struct handle){ .used = true, .fd = -1 };
                        return i;
                }
        return -1;
}

static void handle_free(struct handle *h)
{
        if (h->dir)
                closedir(h->dir);
        else if (h->fd >= 0)
                close(h->fd);
        free(h->path);
        *h = (struct handle){ .fd = -1 };
}

static void reply_handle(struct srv *s, uint32_t id, int i)
{
        size_t at = pkt_begin(&s->out, FXP_HANDLE, id);
        uint32_t v = (uint32_t)i;
        unsigned char hb[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                                (unsigned char)v };
        put_str(&s->out, hb, 4);
        pkt_end(&s->out, at);
}

static struct handle *rd_handle(struct srv *s, struct rd *r)
{
        uint32_t n;
        const unsigned char *p = rd_str(r, &n);
        if (r->bad || n != 4)
                return NULL;
        uint32_t i = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        return i < HANDLES && s->h[i].used ? &s->h[i] : NULL;
}

static bool writes(unsigned type)
{
        return type == FXP_SETSTAT || type == FXP_FSETSTAT || type == FXP_REMOVE || type == FXP_MKDIR ||
               type == FXP_RMDIR || type == FXP_RENAME || type == FXP_SYMLINK || type == FXP_WRITE;
}

static void do_open(struct srv *s, uint32_t id, struct rd *r)
{
        char path[SFTP_PATH_MAX + 1];
        bool ok = rd_path(r, path, sizeof(path));
        uint32_t pf = rd_u32(r);
        struct attrs a;
        rd_attrs(r, &a);
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!ok)
                return status(s, id, FX_NO_SUCH_FILE, NULL);
        if (s->read_only && (pf & (PF_WRITE | PF_APPEND | PF_CREAT | PF_TRUNC)))
                return status(s, id, FX_PERMISSION_DENIED, "read-only access");
        int flags = (pf & PF_READ) && (pf & PF_WRITE) ? O_RDWR : (pf & PF_WRITE) ? O_WRONLY : O_RDONLY;
        if (pf & PF_APPEND)
                flags |= O_APPEND;
        if (pf & PF_CREAT)
                flags |= O_CREAT;
        if (pf & PF_TRUNC)
                flags |= O_TRUNC;
        if (pf & PF_EXCL)
                flags |= O_EXCL;
        mode_t mode = (a.flags & ATTR_PERMISSIONS) ? (mode_t)(a.perm & 0777) : 0644;
        int i = handle_new(s);
        if (i < 0)
                return status(s, id, FX_FAILURE, "too many open handles");
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        int rr = app_fs_open_file(s->fs, path, flags, mode, &fd, &err);
        if (rr < 0) {
                s->h[i].used = false;
                return status_err(s, id, rr, &err);
        }
        s->h[i].fd = fd;
        reply_handle(s, id, i);
}

static void do_read(struct srv *s, uint32_t id, struct rd *r)
{
        struct handle *h = rd_handle(s, r);
        uint64_t off = rd_u64(r);
        uint32_t len = rd_u32(r);
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!h || h->dir)
                return status(s, id, FX_FAILURE, "invalid handle");
        if (len > READ_MAX)
                len = READ_MAX;
        size_t at = pkt_begin(&s->out, FXP_DATA, id);
        size_t len_at = s->out.len;
        put_u32(&s->out, 0);
        if (!buf_grow(&s->out, len)) {
                s->out.len = at;
                return status(s, id, FX_FAILURE, "out of memory");
        }
        ssize_t n = RETRY_EINTR(pread(h->fd, s->out.p + s->out.len, len, (off_t)off));
        if (n <= 0) {
                int e = errno;
                s->out.len = at;
                return n == 0 ? status(s, id, FX_EOF, NULL) : status_errno(s, id, e);
        }
        s->out.len += (size_t)n;
        uint32_t v = (uint32_t)n;
        unsigned char *p = s->out.p + len_at;
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
        pkt_end(&s->out, at);
        s->stats->bytes_read += (uint64_t)n;
}

static void do_write(struct srv *s, uint32_t id, struct rd *r)
{
        struct handle *h = rd_handle(s, r);
        uint64_t off = rd_u64(r);
        uint32_t len;
        const unsigned char *data = rd_str(r, &len);
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!h || h->dir)
                return status(s, id, FX_FAILURE, "invalid handle");
        for (uint32_t done = 0; done < len;) {
                ssize_t n = RETRY_EINTR(pwrite(h->fd, data + done, len - done, (off_t)(off + done)));
                if (n < 0)
                        return status_errno(s, id, errno);
                done += (uint32_t)n;
        }
        s->stats->bytes_written += len;
        status(s, id, FX_OK, NULL);
}

static void do_stat(struct srv *s, uint32_t id, struct rd *r, unsigned type)
{
        struct stat st;
        if (type == FXP_FSTAT) {
                struct handle *h = rd_handle(s, r);
                if (r->bad)
                        return status(s, id, FX_BAD_MESSAGE, NULL);
                if (!h)
                        return status(s, id, FX_FAILURE, "invalid handle");
                if (fstat(h->dir ? dirfd(h->dir) : h->fd, &st) < 0)
                        return status_errno(s, id, errno);
        } else {
                char path[SFTP_PATH_MAX + 1];
                bool ok = rd_path(r, path, sizeof(path));
                if (r->bad)
                        return status(s, id, FX_BAD_MESSAGE, NULL);
                if (!ok)
                        return status(s, id, FX_NO_SUCH_FILE, NULL);
                struct na_error err = NA_ERROR_INIT;
                int rr = type == FXP_LSTAT ? app_fs_lstat(s->fs, path, &st, &err)
                                           : app_fs_stat_follow(s->fs, path, &st, &err);
                if (rr < 0)
                        return status_err(s, id, rr, &err);
        }
        size_t at = pkt_begin(&s->out, FXP_ATTRS, id);
        put_attrs(s, &st);
        pkt_end(&s->out, at);
}

/* SETSTAT and FSETSTAT: size, permissions (no setuid/setgid), times; owners are never changed. */
static void do_setstat(struct srv *s, uint32_t id, struct rd *r, unsigned type)
{
        struct handle *h = NULL;
        char path[SFTP_PATH_MAX + 1];
        bool ok = true;
        if (type == FXP_FSETSTAT)
                h = rd_handle(s, r);
        else
                ok = rd_path(r, path, sizeof(path));
        struct attrs a;
        rd_attrs(r, &a);
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (type == FXP_FSETSTAT ? !h : !ok)
                return type == FXP_FSETSTAT ? status(s, id, FX_FAILURE, "invalid handle")
                                            : status(s, id, FX_NO_SUCH_FILE, NULL);
        struct na_error err = NA_ERROR_INIT;
        int rr = 0;
        int fd = h ? (h->dir ? dirfd(h->dir) : h->fd) : -1;
        if (a.flags & ATTR_SIZE) {
                if (h ? ftruncate(fd, (off_t)a.size) < 0 : (rr = app_fs_truncate(s->fs, path, a.size, &err)) < 0)
                        return h ? status_errno(s, id, errno) : status_err(s, id, rr, &err);
        }
        if (a.flags & ATTR_PERMISSIONS) {
                mode_t m = (mode_t)(a.perm & 01777);
                if (h ? fchmod(fd, m) < 0 : (rr = app_fs_chmod(s->fs, path, m, &err)) < 0)
                        return h ? status_errno(s, id, errno) : status_err(s, id, rr, &err);
        }
        if (a.flags & ATTR_ACMODTIME) {
                struct timespec ts[2] = { { .tv_sec = a.atime }, { .tv_sec = a.mtime } };
                if (h ? futimens(fd, ts) < 0 : (rr = app_fs_utimens(s->fs, path, ts, &err)) < 0)
                        return h ? status_errno(s, id, errno) : status_err(s, id, rr, &err);
        }
        status(s, id, FX_OK, NULL);
}

static void do_opendir(struct srv *s, uint32_t id, struct rd *r)
{
        char path[SFTP_PATH_MAX + 1];
        bool ok = rd_path(r, path, sizeof(path));
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!ok)
                return status(s, id, FX_NO_SUCH_FILE, NULL);
        int i = handle_new(s);
        if (i < 0)
                return status(s, id, FX_FAILURE, "too many open handles");
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        int rr = app_fs_opendir(s->fs, path, &fd, &err);
        if (rr >= 0 && !(s->h[i].dir = fdopendir(fd))) {
                close(fd);
                rr = na_error_sys(&err, errno, "opendir %s", path);
        }
        if (rr < 0) {
                s->h[i].used = false;
                return status_err(s, id, rr, &err);
        }
        reply_handle(s, id, i);
}

static void do_readdir(struct srv *s, uint32_t id, struct rd *r)
{
        struct handle *h = rd_handle(s, r);
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!h || !h->dir)
                return status(s, id, FX_FAILURE, "invalid handle");
        size_t at = pkt_begin(&s->out, FXP_NAME, id);
        size_t count_at = s->out.len;
        put_u32(&s->out, 0);
        uint32_t count = 0;
        for (struct dirent *de; count < READDIR_BATCH && (de = readdir(h->dir));) {
                struct stat st;
                /* ".." of the volume's root is outside it: "." and ".." both show the directory itself. */
                bool dots = streq(de->d_name, ".") || streq(de->d_name, "..");
                if (dots ? fstat(dirfd(h->dir), &st) < 0 : fstatat(dirfd(h->dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                char ln[600];
                longname(s, &st, de->d_name, ln, sizeof(ln));
                put_cstr(&s->out, de->d_name);
                put_cstr(&s->out, ln);
                put_attrs(s, &st);
                count++;
        }
        if (count == 0) {
                s->out.len = at;
                return status(s, id, FX_EOF, NULL);
        }
        unsigned char *p = s->out.p + count_at;
        p[0] = (unsigned char)(count >> 24);
        p[1] = (unsigned char)(count >> 16);
        p[2] = (unsigned char)(count >> 8);
        p[3] = (unsigned char)count;
        pkt_end(&s->out, at);
}

static void do_path_op(struct srv *s, uint32_t id, struct rd *r, unsigned type)
{
        char path[SFTP_PATH_MAX + 1], path2[SFTP_PATH_MAX + 1];
        bool ok = rd_path(r, path, sizeof(path));
        struct attrs a = { 0 };
        bool ok2 = true;
        if (type == FXP_MKDIR)
                rd_attrs(r, &a);
        else if (type == FXP_RENAME)
                ok2 = rd_path(r, path2, sizeof(path2));
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!ok || !ok2)
                return status(s, id, FX_NO_SUCH_FILE, NULL);
        struct na_error err = NA_ERROR_INIT;
        int rr = 0;
        switch (type) {
        case FXP_REMOVE:
                rr = app_fs_remove(s->fs, path, &err);
                break;
        case FXP_RMDIR:
                rr = app_fs_rmdir(s->fs, path, &err);
                break;
        case FXP_MKDIR:
                rr = app_fs_mkdir1(s->fs, path, (a.flags & ATTR_PERMISSIONS) ? (mode_t)(a.perm & 0777) : 0755, &err);
                break;
        case FXP_RENAME:
                rr = app_fs_rename(s->fs, path, path2, RENAME_NOREPLACE, &err);
                break;
        default:
                return status(s, id, FX_OP_UNSUPPORTED, NULL);
        }
        if (rr < 0)
                return status_err(s, id, rr, &err);
        status(s, id, FX_OK, NULL);
}

/* OpenSSH's order: the first string is the target (kept as text), the second the new link. */
static void do_symlink(struct srv *s, uint32_t id, struct rd *r)
{
        uint32_t tlen, llen;
        const unsigned char *t = rd_str(r, &tlen);
        const unsigned char *l = rd_str(r, &llen);
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        char target[SFTP_PATH_MAX + 1], link[SFTP_PATH_MAX + 1];
        if (tlen == 0 || tlen > SFTP_PATH_MAX || memchr(t, '\0', tlen) ||
            sftp_path_normalize((const char *)l, llen, link, sizeof(link)) < 0)
                return status(s, id, FX_FAILURE, "invalid symbolic link");
        memcpy(target, t, tlen);
        target[tlen] = '\0';
        struct na_error err = NA_ERROR_INIT;
        int rr = app_fs_symlink(s->fs, target, link, &err);
        if (rr < 0)
                return status_err(s, id, rr, &err);
        status(s, id, FX_OK, NULL);
}

static void reply_name(struct srv *s, uint32_t id, const char *name)
{
        size_t at = pkt_begin(&s->out, FXP_NAME, id);
        put_u32(&s->out, 1);
        put_cstr(&s->out, name);
        put_cstr(&s->out, name);
        put_u32(&s->out, 0); /* no attributes */
        pkt_end(&s->out, at);
}

static void do_realpath(struct srv *s, uint32_t id, struct rd *r)
{
        char path[SFTP_PATH_MAX + 1];
        bool ok = rd_path(r, path, sizeof(path));
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!ok)
                return status(s, id, FX_NO_SUCH_FILE, NULL);
        reply_name(s, id, path);
}

static void do_readlink(struct srv *s, uint32_t id, struct rd *r)
{
        char path[SFTP_PATH_MAX + 1];
        bool ok = rd_path(r, path, sizeof(path));
        if (r->bad)
                return status(s, id, FX_BAD_MESSAGE, NULL);
        if (!ok)
                return status(s, id, FX_NO_SUCH_FILE, NULL);
        struct na_error err = NA_ERROR_INIT;
        char *target = NULL;
        int rr = app_fs_readlink(s->fs, path, &target, &err);
        if (rr < 0)
                return status_err(s, id, rr, &err);
        reply_name(s, id, target);
        free(target);
}

/* One request; false when the session must end (a malformed packet). */
static bool dispatch(struct srv *s, const unsigned char *pkt, size_t len, bool *inited)
{
        struct rd r = { .p = pkt + 1, .left = len - 1 };
        unsigned type = pkt[0];
        if (type == FXP_INIT) {
                rd_u32(&r);
                size_t at = s->out.len;
                put_u32(&s->out, 0);
                if (buf_grow(&s->out, 1))
                        s->out.p[s->out.len++] = FXP_VERSION;
                put_u32(&s->out, 3);
                pkt_end(&s->out, at);
                *inited = true;
                return true;
        }
        if (!*inited)
                return false;
        uint32_t id = rd_u32(&r);
        if (r.bad)
                return false;
        if (s->read_only && writes(type))
                return status(s, id, FX_PERMISSION_DENIED, "read-only access"), true;
        switch (type) {
        case FXP_OPEN:
                do_open(s, id, &r);
                break;
        case FXP_CLOSE: {
                struct handle *h = rd_handle(s, &r);
                if (!h)
                        status(s, id, FX_FAILURE, "invalid handle");
                else {
                        bool was_file = !h->dir;
                        int fd = h->fd;
                        int e = was_file && fd >= 0 && close(fd) < 0 ? errno : 0;
                        if (was_file)
                                h->fd = -1;
                        handle_free(h);
                        if (e && e != EINTR)
                                status_errno(s, id, e);
                        else
                                status(s, id, FX_OK, NULL);
                }
                break;
        }
        case FXP_READ:
                do_read(s, id, &r);
                break;
        case FXP_WRITE:
                do_write(s, id, &r);
                break;
        case FXP_LSTAT:
        case FXP_STAT:
        case FXP_FSTAT:
                do_stat(s, id, &r, type);
                break;
        case FXP_SETSTAT:
        case FXP_FSETSTAT:
                do_setstat(s, id, &r, type);
                break;
        case FXP_OPENDIR:
                do_opendir(s, id, &r);
                break;
        case FXP_READDIR:
                do_readdir(s, id, &r);
                break;
        case FXP_REMOVE:
        case FXP_MKDIR:
        case FXP_RMDIR:
        case FXP_RENAME:
                do_path_op(s, id, &r, type);
                break;
        case FXP_SYMLINK:
                do_symlink(s, id, &r);
                break;
        case FXP_REALPATH:
                do_realpath(s, id, &r);
                break;
        case FXP_READLINK:
                do_readlink(s, id, &r);
                break;
        default:
                status(s, id, FX_OP_UNSUPPORTED, NULL);
                break;
        }
        return true;
}

/*
 * Replies are sent before more requests are taken once this much waits: a client that
 * pipelines requests and reads no reply holds the session in flush() (until its idle
 * timeout), never makes it buffer more than this and one reply.
 */
#define OUT_HIGH (1024u * 1024)

/* Send what the replies hold; every bit the client takes restarts the idle timer. */
static int flush(struct srv *s)
{
        size_t off = 0;
        while (off < s->out.len) {
                int n = ssh_channel_write(s->chan, s->out.p + off, (uint32_t)(s->out.len - off));
                if (n == SSH_ERROR)
                        return -EIO;
                if (n > 0 && s->idle_sec)
                        alarm(s->idle_sec);
                off += (size_t)n;
        }
        s->out.len = 0;
        return 0;
}

int sftpd_serve(ssh_session session, ssh_channel chan, struct app_fs *fs, bool read_only, uint32_t uid_base,
                unsigned idle_sec, struct sftpd_stats *stats)
{
        (void)session;
        struct srv s = { .chan = chan, .fs = fs, .read_only = read_only, .uid_base = uid_base, .stats = stats,
                         .idle_sec = idle_sec };
        for (int i = 0; i < HANDLES; i++)
                s.h[i].fd = -1;
        size_t cap = 2 * PACKET_MAX, have = 0;
        unsigned char *in = malloc(cap);
        if (!in)
                return -ENOMEM;
        bool inited = false;
        int r = 0;
        for (;;) {
                if (idle_sec)
                        alarm(idle_sec); /* SIGALRM ends the session (sftpd-session.c) */
                int n = ssh_channel_read(chan, in + have, (uint32_t)(cap - have), 0);
                if (n == SSH_ERROR) {
                        r = -EIO;
                        break;
                }
                if (n == 0 && (ssh_channel_is_eof(chan) || !ssh_channel_is_open(chan)))
                        break;
                have += (size_t)n;
                size_t off = 0;
                while (have - off >= 4) {
                        const unsigned char *p = in + off;
                        uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
                        if (len < 1 || len > PACKET_MAX) {
                                r = -EBADMSG;
                                goto out;
                        }
                        if (have - off - 4 < len)
                                break;
                        if (!dispatch(&s, p + 4, len, &inited)) {
                                r = -EBADMSG;
                                goto out;
                        }
                        off += 4 + len;
                        /* Over the bound: the replies go out before the next request is read. */
                        if (s.out.len >= OUT_HIGH && flush(&s) < 0) {
                                r = -EIO;
                                goto out;
                        }
                }
                memmove(in, in + off, have - off);
                have -= off;
                if (flush(&s) < 0) {
                        r = -EIO;
                        break;
                }
        }
out:
        (void)flush(&s);
        for (int i = 0; i < HANDLES; i++)
                if (s.h[i].used)
                        handle_free(&s.h[i]);
        free(s.out.p);
        free(in);
        return r;
}
