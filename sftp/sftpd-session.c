/*
 * One SFTP connection in its own process (sftpd.h, sftpd_session): the key exchange,
 * the login (password or public key, against the user's credentials file read at
 * this moment), the session channel and its "sftp" subsystem request (nothing else:
 * no shell, exec, pty, forwarding), then the login is reported to the listener, the
 * credentials file checked once more, the volume's root opened, the process confined
 * (sftpd-confine.c) and SFTP served until the client leaves or is idle too long. The
 * process' data is capped (RLIMIT_DATA, --session-memory-mb) from the fork on. Every
 * failure is reported to the listener for its limits; logins, refusals and logouts
 * are one stderr line each.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "drivers/app/app-fs.h"
#include "sftp/sftp-auth.h"
#include "sftp/sftp-creds.h"
#include "sftp/sftpd.h"

#define AUTH_TRIES_MAX 6

/* A hash of nothing anyone knows, so an unknown user costs the same time as a known one. */
static const char dummy_hash[] = "$6$nodeagentsftpd"
                                 "$rzOiEBn7Gbf/vKgZslp/7bRCgK7TPC/Q8RG6uZWVS.VUYhzXS9Hl/mymzpYFDMWrcd3chrer8k0VSlcB135Z5.";

void sftpd_report_failure(int report_fd, const char *key)
{
        char line[160];
        int n = snprintf(line, sizeof(line), "F %s\n", key);
        if (n > 0 && (size_t)n < sizeof(line))
                (void)!write(report_fd, line, (size_t)n); /* one write below PIPE_BUF: atomic */
}

static void say(const char *fmt, ...) _printf_(1, 2);
static void say(const char *fmt, ...)
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

struct login {
        char user[64];
        struct sftp_user u;
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
static void delay_user(const struct sftp_ratelimit *users, const char *peer, const char *user)
{
        if (!printable_user(user))
                return;
        char key[96];
        snprintf(key, sizeof(key), "user:%s", user);
        unsigned wait = sftp_ratelimit_wait(users, key, time(NULL));
        if (!wait)
                return;
        say("sftpd: user=%s from=%s: login delayed %u s after too many failed logins", user, peer, wait);
        struct timespec ts = { .tv_sec = wait };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/*
 * Whether user may log in now (file present, enabled, file access); fills l->u when
 * present. why says what was refused.
 */
static bool user_allowed(const struct sftpd_config *cfg, const char *user, struct login *l, const char **why)
{
        sftp_user_clear(&l->u);
        if (!printable_user(user)) {
                *why = "not a valid user name";
                return false;
        }
        struct na_error err = NA_ERROR_INIT;
        int r = sftp_user_load(cfg->users_dir, user, &l->u, &err);
        na_error_clear(&err);
        if (r < 0) {
                *why = "no such user";
                return false;
        }
        if (!l->u.file_access) {
                *why = "the app's template does not allow file access";
                return false;
        }
        if (!l->u.enabled) {
                *why = "SFTP is disabled for this app";
                return false;
        }
        return true;
}

static void failed(struct sftp_ratelimit *users, int report_fd, const char *peer, const char *user, const char *app,
                   const char *why)
{
        say("sftpd: refused app=%s user=%s from=%s: %s", app ? app : "-", printable_user(user) ? user : "?", peer,
            why);
        char key[96], source[INET6_ADDRSTRLEN + 8];
        (void)sftp_admit_source(peer, source, sizeof(source));
        snprintf(key, sizeof(key), "addr:%s", source);
        sftpd_report_failure(report_fd, key);
        if (printable_user(user)) {
                snprintf(key, sizeof(key), "user:%s", user);
                sftpd_report_failure(report_fd, key);
                (void)sftp_ratelimit_fail(users, key, time(NULL)); /* this process' next try waits too */
        }
}

/*
 * libssh 0.10 marks the message getters of the login deprecated in favour of server
 * callbacks driven by an ssh_event loop; they remain supported and keep this one
 * blocking session a straight sequence, so their warning is silenced here only.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int authenticate(const struct sftpd_config *cfg, ssh_session session, const char *peer,
                        struct sftp_ratelimit *users, int report_fd, struct login *l, const char **method)
{
        int tries = 0;
        ssh_set_auth_methods(session, SSH_AUTH_METHOD_PASSWORD | SSH_AUTH_METHOD_PUBLICKEY);
        while (tries < AUTH_TRIES_MAX) {
                ssh_message m = ssh_message_get(session);
                if (!m)
                        return -ECONNRESET;
                if (ssh_message_type(m) != SSH_REQUEST_AUTH) {
                        ssh_message_reply_default(m);
                        ssh_message_free(m);
                        continue;
                }
                const char *user = ssh_message_auth_user(m);
                const char *why = NULL;
                int sub = ssh_message_subtype(m);
                if (sub == SSH_AUTH_METHOD_PASSWORD) {
                        tries++;
                        delay_user(users, peer, user);
                        bool allowed = user_allowed(cfg, user, l, &why);
                        const char *hash = allowed && l->u.password_hash ? l->u.password_hash : dummy_hash;
                        bool match = sftp_password_matches(ssh_message_auth_password(m), hash);
                        if (allowed && l->u.password_hash && match) {
                                snprintf(l->user, sizeof(l->user), "%s", user);
                                *method = "password";
                                ssh_message_auth_reply_success(m, 0);
                                ssh_message_free(m);
                                return 0;
                        }
                        failed(users, report_fd, peer, user, allowed ? l->u.app_id : NULL,
                               why ? why : l->u.password_hash ? "wrong password" : "no password set");
                } else if (sub == SSH_AUTH_METHOD_PUBLICKEY) {
                        int state = ssh_message_auth_publickey_state(m);
                        if (state != SSH_PUBLICKEY_STATE_NONE) /* a signed attempt, not a question */
                                delay_user(users, peer, user);
                        bool allowed = user_allowed(cfg, user, l, &why);
                        ssh_key key = ssh_message_auth_pubkey(m);
                        bool listed = allowed && key && sftp_key_listed(key, l->u.public_keys, l->u.n_keys);
                        if (listed && state == SSH_PUBLICKEY_STATE_NONE) {
                                ssh_message_auth_reply_pk_ok_simple(m); /* the client then signs */
                                ssh_message_free(m);
                                continue;
                        }
                        if (listed && state == SSH_PUBLICKEY_STATE_VALID) {
                                snprintf(l->user, sizeof(l->user), "%s", user);
                                *method = "publickey";
                                ssh_message_auth_reply_success(m, 0);
                                ssh_message_free(m);
                                return 0;
                        }
                        tries++;
                        if (!allowed || state == SSH_PUBLICKEY_STATE_WRONG)
                                failed(users, report_fd, peer, user, allowed ? l->u.app_id : NULL,
                                       why ? why : "bad key signature");
                        else
                                say("sftpd: key not accepted app=%s user=%s from=%s", l->u.app_id, user, peer);
                }
                ssh_message_auth_set_methods(m, SSH_AUTH_METHOD_PASSWORD | SSH_AUTH_METHOD_PUBLICKEY);
                ssh_message_reply_default(m);
                ssh_message_free(m);
        }
        return -EACCES;
}

#pragma GCC diagnostic pop

/* The session channel and its sftp subsystem request. */
static ssh_channel open_sftp(ssh_session session)
{
        ssh_channel chan = NULL;
        for (int i = 0; i < 32; i++) {
                ssh_message m = ssh_message_get(session);
                if (!m)
                        break;
                int type = ssh_message_type(m), sub = ssh_message_subtype(m);
                if (type == SSH_REQUEST_CHANNEL_OPEN && sub == SSH_CHANNEL_SESSION && !chan) {
                        chan = ssh_message_channel_request_open_reply_accept(m);
                } else if (type == SSH_REQUEST_CHANNEL && chan && sub == SSH_CHANNEL_REQUEST_SUBSYSTEM &&
                           ssh_message_channel_request_subsystem(m) &&
                           streq(ssh_message_channel_request_subsystem(m), "sftp")) {
                        ssh_message_channel_request_reply_success(m);
                        ssh_message_free(m);
                        return chan;
                } else if (type == SSH_REQUEST_CHANNEL && sub == SSH_CHANNEL_REQUEST_ENV) {
                        ssh_message_channel_request_reply_success(m); /* accepted and ignored */
                } else
                        ssh_message_reply_default(m);
                ssh_message_free(m);
        }
        return NULL;
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

/* What SIGALRM writes when a logged-in session has been idle too long (set before it is armed). */
static char idle_line[512];
static size_t idle_len;

static void on_idle(int sig)
{
        (void)sig;
        (void)!write(STDERR_FILENO, idle_line, idle_len);
        _exit(0);
}

/*
 * After the login is reported to the listener, the credentials file once more: the
 * agent writes it before it asks the listener to end the app's sessions, so a session
 * that read it before a change either sees the change here or was reported in time
 * to be ended (sftpd-main.c, control_one).
 */
static bool still_granted(const struct sftpd_config *cfg, const struct login *l)
{
        struct sftp_user now = { 0 };
        struct na_error err = NA_ERROR_INIT;
        bool same = sftp_user_load(cfg->users_dir, l->user, &now, &err) == 0 && sftp_user_equal(&now, &l->u);
        na_error_clear(&err);
        sftp_user_clear(&now);
        return same;
}

int sftpd_session(const struct sftpd_config *cfg, ssh_session session, const char *peer,
                  struct sftp_ratelimit *users, int report_fd)
{
        char why[256] = "";
        /*
         * Whatever a client makes it hold (libssh's buffers, replies) stays under this.
         * Not in AddressSanitizer builds: its shadow memory, mapped at start, is already
         * far over any such limit.
         */
        struct rlimit lim = { .rlim_cur = (rlim_t)cfg->memory_mb << 20, .rlim_max = (rlim_t)cfg->memory_mb << 20 };
#ifdef __SANITIZE_ADDRESS__
        (void)lim;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
#else
        if (setrlimit(RLIMIT_DATA, &lim) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
#endif
                say("sftpd: connection from %s refused: limits: %s", peer, strerror(errno));
                return 1;
        }
        if (sftpd_confine_preauth(why, sizeof(why)) < 0) {
                say("sftpd: connection from %s refused: %s", peer, why);
                return 1;
        }
        alarm(cfg->login_grace_sec); /* key exchange and login: SIGALRM ends the process */
        /* Replies are small packets after each batch of requests: no Nagle delay on them. */
        int one = 1;
        (void)setsockopt(ssh_get_fd(session), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (ssh_handle_key_exchange(session) != SSH_OK) {
                say("sftpd: key exchange with %s failed: %s", peer, ssh_get_error(session));
                return 1;
        }
        struct login l = { 0 };
        const char *method = "?";
        if (authenticate(cfg, session, peer, users, report_fd, &l, &method) < 0) {
                sftp_user_clear(&l.u);
                return 1;
        }
        ssh_channel chan = open_sftp(session);
        if (!chan) {
                say("sftpd: app=%s user=%s from=%s: no sftp subsystem request; closed", l.u.app_id, l.user, peer);
                sftp_user_clear(&l.u);
                return 1;
        }
        alarm(0);
        char line[160];
        int len = snprintf(line, sizeof(line), "A %d %s\n", (int)getpid(), l.u.app_id);
        if (len > 0 && (size_t)len < sizeof(line))
                (void)!write(report_fd, line, (size_t)len); /* one write below PIPE_BUF: atomic */
        struct app_fs *fs = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = still_granted(cfg, &l) ? 0
                                       : na_error_set(&err, EACCES, NA_E_INVALID_STATE,
                                                      "the app's SFTP access changed during the login");
        if (r >= 0)
                r = app_fs_open(l.u.volume_dir, l.u.uid, l.u.gid, &fs, &err);
        if (r >= 0 && volume_mounted(app_fs_root_fd(fs), l.u.volume_dir) < 0)
                r = na_error_set(&err, ENOTDIR, NA_E_INTERNAL, "the app's volume is not mounted (start the app)");
        if (r >= 0 && sftpd_confine(l.u.uid, l.u.gid, why, sizeof(why)) < 0)
                r = na_error_set(&err, EPERM, NA_E_INTERNAL, "confinement: %s", why);
        if (r < 0) {
                say("sftpd: app=%s user=%s from=%s: session refused: %s", l.u.app_id, l.user, peer, err.message);
                na_error_clear(&err);
                app_fs_close(fs);
                ssh_channel_close(chan);
                ssh_channel_free(chan);
                sftp_user_clear(&l.u);
                return 1;
        }
        say("sftpd: login app=%s user=%s from=%s method=%s%s", l.u.app_id, l.user, peer, method,
            l.u.read_only ? " read-only" : "");
        int n = snprintf(idle_line, sizeof(idle_line), "sftpd: logout app=%s user=%s from=%s: idle for %u s; closed\n",
                         l.u.app_id, l.user, peer, cfg->idle_sec);
        idle_len = n > 0 ? (size_t)n < sizeof(idle_line) ? (size_t)n : sizeof(idle_line) - 1 : 0;
        struct sigaction sa = { .sa_handler = on_idle };
        sigaction(SIGALRM, &sa, NULL);
        struct sftpd_stats st = { 0 };
        r = sftpd_serve(session, chan, fs, l.u.read_only, l.u.uid, cfg->idle_sec, &st);
        alarm(0);
        say("sftpd: logout app=%s user=%s from=%s read=%llu written=%llu%s", l.u.app_id, l.user, peer,
            (unsigned long long)st.bytes_read, (unsigned long long)st.bytes_written, r < 0 ? " (connection lost)" : "");
        ssh_channel_request_send_exit_status(chan, r < 0 ? 1 : 0);
        ssh_channel_send_eof(chan);
        ssh_channel_close(chan);
        /* Let the client close its side first, as after OpenSSH's sftp-server (a few seconds at most). */
        char sink[256];
        for (int i = 0; i < 20 && !ssh_channel_is_closed(chan) && ssh_is_connected(session); i++)
                if (ssh_channel_read_timeout(chan, sink, sizeof(sink), 0, 250) == SSH_ERROR)
                        break;
        /* Then until the client drops the connection (5 s at most); what it still sends is dropped. */
        ssh_blocking_flush(session, 1000);
        int sock = ssh_get_fd(session);
        for (int i = 0; i < 20 && sock >= 0; i++) {
                struct pollfd pf = { .fd = sock, .events = POLLIN };
                if (poll(&pf, 1, 250) > 0 && read(sock, sink, sizeof(sink)) <= 0)
                        break;
        }
        ssh_channel_free(chan);
        app_fs_close(fs);
        sftp_user_clear(&l.u);
        return 0;
}
