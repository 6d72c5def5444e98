/* SPDX-License-Identifier: GPL-2.0-or-later */
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
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "volume/volume.h"
#include "sftp/sftp-auth.h"
#include "sftp/sftp-creds.h"
#include "sftp/sftpd.h"

#define AUTH_TRIES_MAX 6
#define NOBODY 65534

/* One request to the monitor (sftpd-monitor.c): kind and NUL-separated fields; its answer in reply. */
static bool ask(int mon, char kind, const char *const *f, size_t n, char *reply, size_t reply_len, int *ret_fd)
{
        char buf[SFTP_KEY_LINE_MAX + 256];
        size_t len = 0;
        buf[len++] = kind;
        for (size_t i = 0; i < n; i++) {
                size_t l = strlen(f[i]) + 1;
                if (len + 1 + l > sizeof(buf))
                        return false;
                buf[len++] = '\0';
                memcpy(buf + len, f[i], l - 1);
                len += l - 1;
        }
        bool sent = send(mon, buf, len, MSG_NOSIGNAL) == (ssize_t)len;
        explicit_bzero(buf, sizeof(buf)); /* a password */
        if (!sent)
                return false;
        union {
                char b[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = reply, .iov_len = reply_len - 1 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
        ssize_t got;
        while ((got = recvmsg(mon, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
                ;
        if (got <= 0)
                return false;
        reply[got] = '\0';
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (ret_fd && c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return reply[0] == '1';
}

/* A key as the monitor reads it: its type name and base64 blob. */
static bool ask_key(int mon, char kind, const char *user, ssh_key key)
{
        char *b64 = NULL;
        const char *type = key ? ssh_key_type_to_char(ssh_key_type(key)) : NULL;
        if (!user || !type || ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK)
                return false;
        const char *f[] = { user, type, b64 };
        char reply[16];
        bool yes = ask(mon, kind, f, 3, reply, sizeof(reply), NULL);
        ssh_string_free_char(b64);
        return yes;
}

/*
 * libssh 0.10 marks the message getters of the login deprecated in favour of server
 * callbacks driven by an ssh_event loop; they remain supported and keep this one
 * blocking session a straight sequence, so their warning is silenced here only.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int authenticate(ssh_session session, int mon)
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
                int sub = ssh_message_subtype(m);
                bool yes = false;
                if (sub == SSH_AUTH_METHOD_PASSWORD) {
                        tries++;
                        const char *password = ssh_message_auth_password(m);
                        const char *f[] = { user ? user : "", password ? password : "" };
                        char reply[16];
                        yes = ask(mon, 'P', f, 2, reply, sizeof(reply), NULL);
                } else if (sub == SSH_AUTH_METHOD_PUBLICKEY) {
                        int state = ssh_message_auth_publickey_state(m);
                        ssh_key key = ssh_message_auth_pubkey(m);
                        if (state == SSH_PUBLICKEY_STATE_NONE) {
                                if (ask_key(mon, 'Q', user, key)) {
                                        ssh_message_auth_reply_pk_ok_simple(m); /* the client then signs */
                                        ssh_message_free(m);
                                        continue;
                                }
                        } else {
                                tries++;
                                yes = ask_key(mon, state == SSH_PUBLICKEY_STATE_VALID ? 'V' : 'W', user, key);
                        }
                }
                if (yes) {
                        ssh_message_auth_reply_success(m, 0);
                        ssh_message_free(m);
                        return 0;
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
 * The network half, from the fork on: nobody (65534) in a user and mount namespace of
 * its own, its root an empty directory, the allow-list filter; the host key it holds
 * (libssh's copy, for the key exchange) is all it knows. Logged in, it gets the
 * volume's root fd and the app's ids mapped from the monitor and becomes that uid.
 */
static int drop(int empty_fd, char *why, size_t why_len)
{
        if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0 ||
            unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 || fchdir(empty_fd) < 0 || chroot(".") < 0 || chdir("/") < 0) {
                snprintf(why, why_len, "privilege separation: %s", strerror(errno));
                return -errno;
        }
        close(empty_fd);
        return sftpd_confine_net(why, why_len);
}

static int network(const struct sftpd_config *cfg, ssh_session session, const char *peer, int mon, int empty_fd)
{
        char why[256] = "";
        if (drop(empty_fd, why, sizeof(why)) < 0) {
                sftpd_say("sftpd: connection from %s refused: %s", peer, why);
                return 1;
        }
        alarm(cfg->login_grace_sec); /* key exchange and login: SIGALRM ends the process */
        /* Replies are small packets after each batch of requests: no Nagle delay on them. */
        int one = 1;
        (void)setsockopt(ssh_get_fd(session), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (ssh_handle_key_exchange(session) != SSH_OK) {
                sftpd_say("sftpd: key exchange with %s failed: %s", peer, ssh_get_error(session));
                return 1;
        }
        if (authenticate(session, mon) < 0)
                return 1;
        ssh_channel chan = open_sftp(session);
        if (!chan) {
                sftpd_say("sftpd: from=%s: no sftp subsystem request; closed", peer);
                return 1;
        }
        alarm(0);
        char reply[256];
        int root_fd = -1;
        bool started = ask(mon, 'S', NULL, 0, reply, sizeof(reply), &root_fd);
        close(mon);
        unsigned uid = 0, gid = 0;
        int ro = 0;
        char app[64] = "", user[64] = "";
        if (!started || sscanf(reply, "1 %u %u %d %63s %63s", &uid, &gid, &ro, app, user) != 5 || root_fd < 0) {
                if (root_fd >= 0)
                        close(root_fd);
                ssh_channel_close(chan);
                ssh_channel_free(chan);
                return 1; /* the monitor said why */
        }
        struct app_fs *fs = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = app_fs_adopt(root_fd, uid, gid, &fs, &err);
        if (r >= 0 && sftpd_confine(uid, gid, why, sizeof(why)) < 0)
                r = na_error_set(&err, EPERM, NA_E_INTERNAL, "confinement: %s", why);
        if (r < 0) {
                sftpd_say("sftpd: app=%s user=%s from=%s: session refused: %s", app, user, peer, err.message);
                na_error_clear(&err);
                app_fs_close(fs);
                ssh_channel_close(chan);
                ssh_channel_free(chan);
                return 1;
        }
        int n = snprintf(idle_line, sizeof(idle_line), "sftpd: logout app=%s user=%s from=%s: idle for %u s; closed\n",
                         app, user, peer, cfg->idle_sec);
        idle_len = n > 0 ? (size_t)n < sizeof(idle_line) ? (size_t)n : sizeof(idle_line) - 1 : 0;
        struct sigaction sa = { .sa_handler = on_idle };
        sigaction(SIGALRM, &sa, NULL);
        struct sftpd_stats st = { 0 };
        r = sftpd_serve(session, chan, fs, ro != 0, uid, cfg->idle_sec, &st);
        alarm(0);
        sftpd_say("sftpd: logout app=%s user=%s from=%s read=%llu written=%llu%s", app, user, peer,
                  (unsigned long long)st.bytes_read, (unsigned long long)st.bytes_written,
                  r < 0 ? " (connection lost)" : "");
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
        return 0;
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
                sftpd_say("sftpd: connection from %s refused: limits: %s", peer, strerror(errno));
                return 1;
        }
        int sp[2];
        int empty_fd = open(cfg->empty_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (empty_fd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                sftpd_say("sftpd: connection from %s refused: %s: %s", peer, empty_fd < 0 ? cfg->empty_dir : "socketpair",
                          strerror(errno));
                return 1;
        }
        pid_t net = fork();
        if (net == 0) {
                close(sp[0]);
                close(report_fd);
                int code = network(cfg, session, peer, sp[1], empty_fd);
                /* After a served session the client closes the connection itself (as with
                 * OpenSSH's sshd); a refused one gets a disconnect message. */
                if (code != 0)
                        ssh_disconnect(session);
                _exit(code);
        }
        close(sp[1]);
        close(empty_fd);
        if (net < 0) {
                sftpd_say("sftpd: connection from %s refused: fork: %s", peer, strerror(errno));
                return 1;
        }
        /* The monitor: its copy of the connection closed, never spoken on. */
        close(ssh_get_fd(session));
        if (sftpd_confine_preauth(why, sizeof(why)) < 0) {
                sftpd_say("sftpd: connection from %s: monitor: %s", peer, why);
                kill(net, SIGKILL);
        }
        return sftpd_monitor(cfg, peer, users, report_fd, sp[0], net);
}
