/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The privileged half of one SFTP connection (sftpd.h, sftpd_monitor), OpenSSH's
 * monitor: root, never touching the network. The network half (sftpd-session.c), an
 * unprivileged process in an empty root, asks it over a SOCK_SEQPACKET pair:
 *
 *   "P\0user\0password"        a password attempt            -> "1" or "0"
 *   "Q\0user\0type\0base64"    is this key listed?           -> "1" or "0"
 *   "V\0user\0type\0base64"    libssh verified its signature -> "1" or "0"
 *   "W\0user\0type\0base64"    a bad signature               -> "0"
 *   "S"                         the sftp subsystem was asked  -> "1 uid gid ro app user" and the
 *                                                                volume's root fd, or "0 why"
 *
 * It reads the credentials file, delays a user with failures (sftp-ratelimit.h),
 * checks the password itself, counts the attempts, reports failures and the login to
 * the listener, and at "S" reads the file once more, opens the volume, checks it is
 * mounted, maps the app's uid and gid into the network half's user namespace and sends
 * it the root fd. Then it waits for the network half; SIGTERM (the listener ending the
 * session) kills it, so both are gone when the listener has reaped this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "volume/volume.h"
#include "sftp/sftp-auth.h"
#include "sftp/sftp-creds.h"
#include "sftp/sftpd.h"

#define AUTH_TRIES_MAX 6

/* SIGTERM (the listener ending the session, or stopping): the network half is killed, then reaped. */
static volatile sig_atomic_t net_pid, terminating, chan_fd = -1;
static void on_term(int sig)
{
        (void)sig;
        terminating = 1;
        if (net_pid > 0)
                kill(net_pid, SIGKILL);
        if (chan_fd >= 0)
                shutdown(chan_fd, SHUT_RDWR); /* a recv about to block returns at once */
}
#define QUESTIONS_MAX 64

/* A hash of nothing anyone knows, so an unknown user costs the same time as a known one. */
static const char dummy_hash[] = "$6$nodeagentsftpd"
                                 "$rzOiEBn7Gbf/vKgZslp/7bRCgK7TPC/Q8RG6uZWVS.VUYhzXS9Hl/mymzpYFDMWrcd3chrer8k0VSlcB135Z5.";

void sftpd_say(const char *fmt, ...)
{
        char line[768];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n > sizeof(line) - 2)
                n = (int)sizeof(line) - 2;
        line[n++] = '\n';
        (void)!write(STDERR_FILENO, line, (size_t)n);
}

void sftpd_report_failure(int report_fd, const char *key)
{
        char line[160];
        int n = snprintf(line, sizeof(line), "F %s\n", key);
        if (n > 0 && (size_t)n < sizeof(line))
                (void)!write(report_fd, line, (size_t)n); /* one write below PIPE_BUF: atomic */
}

struct monitor {
        const struct sftpd_config *cfg;
        const char *peer;
        struct sftp_ratelimit *users;
        int report_fd, chan;
        pid_t net;
        unsigned tries, questions;
        char user[64];
        struct sftp_user u;
        const char *method;
        bool ok;
};

static bool printable_user(const char *s)
{
        return s && sftp_username_valid(s);
}

/*
 * A user with too many failed logins is delayed, never refused (sftp-ratelimit.h): the
 * attempt waits here (within the login grace time) before it is checked.
 */
static void delay_user(struct monitor *m, const char *user)
{
        if (!printable_user(user))
                return;
        char key[96];
        snprintf(key, sizeof(key), "user:%s", user);
        unsigned wait = sftp_ratelimit_wait(m->users, key, time(NULL));
        if (!wait)
                return;
        sftpd_say("sftpd: user=%s from=%s: login delayed %u s after too many failed logins", user, m->peer, wait);
        struct timespec ts = { .tv_sec = wait };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !terminating)
                ;
}

/* Whether user may log in now (file present, enabled, file access); fills m->u. why says what was refused. */
static bool user_allowed(struct monitor *m, const char *user, const char **why)
{
        sftp_user_clear(&m->u);
        if (!printable_user(user)) {
                *why = "not a valid user name";
                return false;
        }
        struct na_error err = NA_ERROR_INIT;
        int r = sftp_user_load(m->cfg->users_dir, user, &m->u, &err);
        na_error_clear(&err);
        if (r < 0) {
                *why = "no such user";
                return false;
        }
        if (!m->u.file_access) {
                *why = "the app's template does not allow file access";
                return false;
        }
        if (!m->u.enabled) {
                *why = "SFTP is disabled for this app";
                return false;
        }
        return true;
}

static void failed(struct monitor *m, const char *user, const char *app, const char *why)
{
        sftpd_say("sftpd: refused app=%s user=%s from=%s: %s", app ? app : "-", printable_user(user) ? user : "?",
                  m->peer, why);
        char key[96], source[64];
        (void)sftp_admit_source(m->peer, source, sizeof(source));
        snprintf(key, sizeof(key), "addr:%s", source);
        sftpd_report_failure(m->report_fd, key);
        if (printable_user(user)) {
                snprintf(key, sizeof(key), "user:%s", user);
                sftpd_report_failure(m->report_fd, key);
                (void)sftp_ratelimit_fail(m->users, key, time(NULL)); /* this connection's next try waits too */
        }
}

static void granted(struct monitor *m, const char *user, const char *method)
{
        snprintf(m->user, sizeof(m->user), "%s", user);
        m->method = method;
        m->ok = true;
}

static bool on_password(struct monitor *m, const char *user, const char *password)
{
        /* Once logged in, nothing else is asked: a later request would replace m->u. */
        if (m->ok || ++m->tries > AUTH_TRIES_MAX)
                return false;
        delay_user(m, user);
        const char *why = NULL;
        bool allowed = user_allowed(m, user, &why);
        const char *hash = allowed && m->u.password_hash ? m->u.password_hash : dummy_hash;
        bool match = sftp_password_matches(password, hash);
        if (allowed && m->u.password_hash && match) {
                granted(m, user, "password");
                return true;
        }
        failed(m, user, allowed ? m->u.app_id : NULL,
               why ? why : m->u.password_hash ? "wrong password" : "no password set");
        return false;
}

static bool on_key(struct monitor *m, char kind, const char *user, const char *type, const char *b64)
{
        if (m->ok || (kind == 'Q' ? ++m->questions > QUESTIONS_MAX : ++m->tries > AUTH_TRIES_MAX))
                return false;
        if (kind != 'Q')
                delay_user(m, user);
        const char *why = NULL;
        bool allowed = user_allowed(m, user, &why);
        ssh_key key = NULL;
        bool listed = allowed && ssh_pki_import_pubkey_base64(b64, ssh_key_type_from_name(type), &key) == SSH_OK &&
                      sftp_key_listed(key, m->u.public_keys, m->u.n_keys);
        ssh_key_free(key);
        if (kind == 'Q')
                return listed;
        if (listed && kind == 'V') {
                granted(m, user, "publickey");
                return true;
        }
        if (!allowed || kind == 'W')
                failed(m, user, allowed ? m->u.app_id : NULL, why ? why : "bad key signature");
        else
                sftpd_say("sftpd: key not accepted app=%s user=%s from=%s", m->u.app_id, user, m->peer);
        return false;
}

/* The volume must be the mounted quota file system, never the directory beneath it. */
static int volume_mounted(int root_fd, const char *dir)
{
        struct statfs sf;
        if (fstatfs(root_fd, &sf) < 0)
                return -errno;
        if (sf.f_type != EXT4_SUPER_MAGIC)
                return -ENOTDIR;
        char parent[4200];
        snprintf(parent, sizeof(parent), "%s/../..", dir);
        struct stat a, b;
        if (fstat(root_fd, &a) < 0 || stat(parent, &b) < 0)
                return -errno;
        return a.st_dev != b.st_dev ? 0 : -ENOTDIR;
}

/*
 * After the login is reported to the listener, the credentials file once more: the
 * agent writes it before it asks the listener to end the app's sessions, so a session
 * that read it before a change either sees the change here or was reported in time
 * to be ended (sftpd-main.c, control_one).
 */
static bool still_granted(struct monitor *m)
{
        struct sftp_user now = { 0 };
        struct na_error err = NA_ERROR_INIT;
        bool same = sftp_user_load(m->cfg->users_dir, m->user, &now, &err) == 0 && sftp_user_equal(&now, &m->u);
        na_error_clear(&err);
        sftp_user_clear(&now);
        return same;
}

static int write_map(pid_t pid, const char *which, uint32_t id)
{
        char path[64], line[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
        int n = snprintf(line, sizeof(line), "%u %u 1\n", id, id);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = write(fd, line, (size_t)n) == n ? 0 : -errno;
        close(fd);
        return r;
}

static int send_reply(int chan, const char *text, int fd)
{
        struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (fd >= 0) {
                msg.msg_control = u.buf;
                msg.msg_controllen = sizeof(u.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        return sendmsg(chan, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/*
 * "S": the session starts: the volume's root fd and the app's ids in the network half's
 * namespace. True when it started: the monitor then answers nothing more.
 */
static bool on_start(struct monitor *m)
{
        char reply[256];
        struct app_fs *fs = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = m->ok ? 0 : na_error_set(&err, EACCES, NA_E_INVALID_STATE, "not logged in");
        if (r >= 0) {
                char line[160];
                int len = snprintf(line, sizeof(line), "A %d %s\n", (int)getpid(), m->u.app_id);
                if (len > 0 && (size_t)len < sizeof(line))
                        (void)!write(m->report_fd, line, (size_t)len); /* one write below PIPE_BUF: atomic */
                if (!still_granted(m))
                        r = na_error_set(&err, EACCES, NA_E_INVALID_STATE,
                                         "the app's SFTP access changed during the login");
        }
        if (r >= 0)
                r = app_fs_open(m->u.volume_dir, m->u.uid, m->u.gid, &fs, &err);
        if (r >= 0 && volume_mounted(app_fs_root_fd(fs), m->u.volume_dir) < 0)
                r = na_error_set(&err, ENOTDIR, NA_E_INTERNAL, "the app's volume is not mounted (start the app)");
        if (r >= 0 && ((r = write_map(m->net, "uid_map", m->u.uid)) < 0 || (r = write_map(m->net, "gid_map", m->u.gid)) < 0))
                r = na_error_sys(&err, -r, "the session's id maps");
        if (r < 0) {
                sftpd_say("sftpd: app=%s user=%s from=%s: session refused: %s", m->ok ? m->u.app_id : "-",
                          m->ok ? m->user : "?", m->peer, err.message);
                snprintf(reply, sizeof(reply), "0 %s", err.message);
                na_error_clear(&err);
                app_fs_close(fs);
                (void)send_reply(m->chan, reply, -1);
                m->ok = false;
                return false;
        }
        snprintf(reply, sizeof(reply), "1 %u %u %d %s %s", m->u.uid, m->u.gid, m->u.read_only ? 1 : 0, m->u.app_id,
                 m->user);
        if (send_reply(m->chan, reply, app_fs_root_fd(fs)) == 0)
                sftpd_say("sftpd: login app=%s user=%s from=%s method=%s%s", m->u.app_id, m->user, m->peer,
                          m->method, m->u.read_only ? " read-only" : "");
        app_fs_close(fs);
        return true;
}


/* The fields of a request, NUL-separated after its kind; false when fewer than n. */
static bool fields(char *p, size_t len, const char **out, size_t n)
{
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
                if (at >= len)
                        return false;
                out[i] = p + at;
                char *end = memchr(p + at, '\0', len - at);
                if (!end)
                        return false;
                at = (size_t)(end - p) + 1;
        }
        return true;
}

int sftpd_monitor(const struct sftpd_config *cfg, const char *peer, struct sftp_ratelimit *users, int report_fd,
                  int chan, pid_t net)
{
        struct monitor m = { .cfg = cfg, .peer = peer, .users = users, .report_fd = report_fd, .chan = chan,
                             .net = net };
        net_pid = net;
        chan_fd = chan;
        struct sigaction sa = { .sa_handler = on_term };
        sigaction(SIGTERM, &sa, NULL);
        static char buf[SFTP_KEY_LINE_MAX + 256];
        for (;;) {
                ssize_t n = recv(chan, buf, sizeof(buf) - 1, 0);
                if (n < 0 && errno == EINTR && !terminating)
                        continue;
                if (n <= 0)
                        break;
                buf[n] = '\0'; /* the last field ends here whatever was sent */
                const char *f[3];
                const char *answer = "0";
                char kind = buf[0];
                if (n >= 2 && buf[1] == '\0') {
                        if (kind == 'P' && fields(buf + 2, (size_t)n - 1, f, 2))
                                answer = on_password(&m, f[0], f[1]) ? "1" : "0";
                        else if ((kind == 'Q' || kind == 'V' || kind == 'W') && fields(buf + 2, (size_t)n - 1, f, 3))
                                answer = on_key(&m, kind, f[0], f[1], f[2]) ? "1" : "0";
                } else if (kind == 'S' && n == 1) {
                        if (on_start(&m))
                                break; /* one session per connection; then only wait for it */
                        continue;
                }
                if (send_reply(chan, answer, -1) < 0)
                        break;
        }
        explicit_bzero(buf, sizeof(buf));
        sftp_user_clear(&m.u);
        chan_fd = -1;
        close(chan);
        int st = 0;
        while (waitpid(net, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
