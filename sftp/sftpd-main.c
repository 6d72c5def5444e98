/*
 * nodeagent-sftpd: the SFTP front end of app volumes (docs/app-sftp.md).
 *
 *   nodeagent-sftpd --listen 0.0.0.0:2022 --users-dir <storage_dir>/sftp/users \
 *                   --host-key <state_dir>/sftp/ssh_host_ed25519_key \
 *                   [--max-failures 10 --window 300 --block 600]
 *
 * The listener generates the ED25519 host key at first start (0600), accepts
 * connections and forks one process per connection (sftpd-session.c), which reports
 * each failed login over a pipe; the listener counts them per source address and per
 * user (sftp-ratelimit.h) and refuses a source address at accept, a user at login (the
 * session inherits the limiter as it was at fork). SIGTERM stops the listener and its
 * sessions. Logs go to stderr, one line each; SFTPD_LIBSSH_DEBUG=1 in the environment
 * adds libssh's own debug lines (the agent starts it with an environment of PATH only).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "sftp/sftpd.h"

static volatile sig_atomic_t stopping;
static void on_term(int sig)
{
        (void)sig;
        stopping = 1;
}

static int usage(void)
{
        fprintf(stderr, "usage: nodeagent-sftpd --listen ADDR:PORT --users-dir DIR --host-key FILE "
                        "[--max-failures N] [--window SEC] [--block SEC] [--login-grace SEC] [--max-sessions N]\n");
        return 2;
}

static bool parse_uint(const char *s, unsigned max, unsigned *out)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || end == s || *end || v > max)
                return false;
        *out = (unsigned)v;
        return true;
}

/* "host:port" or "[v6]:port". */
static bool parse_listen(char *s, const char **host, unsigned *port)
{
        char *colon = strrchr(s, ':');
        if (!colon || !parse_uint(colon + 1, 65535, port) || *port == 0)
                return false;
        *colon = '\0';
        if (s[0] == '[' && colon > s + 1 && colon[-1] == ']') {
                colon[-1] = '\0';
                s++;
        }
        *host = *s ? s : "0.0.0.0";
        return true;
}

static int host_key(const char *path)
{
        if (access(path, R_OK) == 0)
                return 0;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                struct na_error err = NA_ERROR_INIT;
                if (na_mkdir_p(dir, 0700, &err) < 0) {
                        fprintf(stderr, "sftpd: host key directory %s: %s\n", dir, err.message);
                        na_error_clear(&err);
                        return -1;
                }
        }
        ssh_key key = NULL;
        if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK) {
                fprintf(stderr, "sftpd: cannot generate an ED25519 host key\n");
                return -1;
        }
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        mode_t old = umask(077);
        (void)unlink(tmp);
        int r = ssh_pki_export_privkey_file(key, NULL, NULL, NULL, tmp);
        umask(old);
        ssh_key_free(key);
        if (r != SSH_OK || chmod(tmp, 0600) < 0 || rename(tmp, path) < 0) {
                fprintf(stderr, "sftpd: cannot write the host key %s\n", path);
                (void)unlink(tmp);
                return -1;
        }
        struct na_error err = NA_ERROR_INIT;
        (void)na_fsync_parent(path, &err);
        na_error_clear(&err);
        fprintf(stderr, "sftpd: generated the ED25519 host key %s\n", path);
        return 0;
}

static int set_algorithms(ssh_bind b, const struct sftpd_config *cfg)
{
        static const char kex[] = "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256";
        static const char ciphers[] = "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,"
                                      "aes256-ctr,aes128-ctr";
        static const char macs[] = "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha2-256,"
                                   "hmac-sha2-512";
        static const char pubkeys[] = "ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,"
                                      "rsa-sha2-512,rsa-sha2-256";
        int verbosity = getenv("SFTPD_LIBSSH_DEBUG") ? SSH_LOG_FUNCTIONS : SSH_LOG_NOLOG;
        if (ssh_bind_options_set(b, SSH_BIND_OPTIONS_BINDADDR, cfg->listen_addr) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_BINDPORT, &cfg->port) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_HOSTKEY, cfg->host_key) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_PROCESS_CONFIG, &(bool){ false }) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_KEY_EXCHANGE, kex) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_CIPHERS_C_S, ciphers) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_CIPHERS_S_C, ciphers) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_HMAC_C_S, macs) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_HMAC_S_C, macs) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_HOSTKEY_ALGORITHMS, "ssh-ed25519") < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_PUBKEY_ACCEPTED_KEY_TYPES, pubkeys) < 0 ||
            ssh_bind_options_set(b, SSH_BIND_OPTIONS_LOG_VERBOSITY, &verbosity) < 0) {
                fprintf(stderr, "sftpd: ssh options: %s\n", ssh_get_error(b));
                return -1;
        }
        return 0;
}

static void peer_of(ssh_session s, char *buf, size_t len)
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        snprintf(buf, len, "?");
        if (getpeername(ssh_get_fd(s), (struct sockaddr *)&ss, &sl) < 0)
                return;
        if (ss.ss_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)len);
        else if (ss.ss_family == AF_INET6) {
                const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(a))
                        inet_ntop(AF_INET, &a->s6_addr[12], buf, (socklen_t)len);
                else
                        inet_ntop(AF_INET6, a, buf, (socklen_t)len);
        }
}

/* Lines "F <key>\n" from sessions; a partial line waits in buf. */
static void read_reports(int fd, struct sftp_ratelimit *rl, char *buf, size_t *have, size_t cap)
{
        ssize_t n = read(fd, buf + *have, cap - *have - 1);
        if (n <= 0)
                return;
        *have += (size_t)n;
        buf[*have] = '\0';
        char *p = buf;
        for (char *nl; (nl = strchr(p, '\n'));) {
                *nl = '\0';
                if (p[0] == 'F' && p[1] == ' ' && sftp_ratelimit_fail(rl, p + 2, time(NULL)))
                        fprintf(stderr, "sftpd: %s refused for %u s after too many failed logins\n", p + 2,
                                rl->block_sec);
                p = nl + 1;
        }
        *have = (size_t)(buf + *have - p);
        memmove(buf, p, *have);
        if (*have == cap - 1)
                *have = 0; /* garbage: drop it */
}

int main(int argc, char **argv)
{
        struct sftpd_config cfg = { .max_failures = 10, .window_sec = 300, .block_sec = 600, .login_grace_sec = 60,
                                    .max_sessions = 256 };
        char *listen = NULL;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!v)
                        return usage();
                bool ok = true;
                if (streq(a, "--listen"))
                        listen = argv[i + 1];
                else if (streq(a, "--users-dir"))
                        cfg.users_dir = v;
                else if (streq(a, "--host-key"))
                        cfg.host_key = v;
                else if (streq(a, "--max-failures"))
                        ok = parse_uint(v, SFTP_RATELIMIT_MAX_FAILURES, &cfg.max_failures) && cfg.max_failures > 0;
                else if (streq(a, "--window"))
                        ok = parse_uint(v, 86400, &cfg.window_sec);
                else if (streq(a, "--block"))
                        ok = parse_uint(v, 86400 * 7, &cfg.block_sec);
                else if (streq(a, "--login-grace"))
                        ok = parse_uint(v, 3600, &cfg.login_grace_sec) && cfg.login_grace_sec > 0;
                else if (streq(a, "--max-sessions"))
                        ok = parse_uint(v, 65536, &cfg.max_sessions) && cfg.max_sessions > 0;
                else
                        ok = false;
                if (!ok)
                        return usage();
                i++;
        }
        if (!listen || !cfg.users_dir || !cfg.host_key || cfg.users_dir[0] != '/' || cfg.host_key[0] != '/' ||
            !parse_listen(listen, &cfg.listen_addr, &cfg.port))
                return usage();
        /* Ends with the agent that started it (its supervisor thread): a new agent starts a new one. */
        pid_t parent = getppid();
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
                return 1;
        umask(022);
        signal(SIGPIPE, SIG_IGN);
        struct sigaction sa = { .sa_handler = on_term };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        if (host_key(cfg.host_key) < 0)
                return 1;
        ssh_init();
        ssh_bind b = ssh_bind_new();
        if (!b || set_algorithms(b, &cfg) < 0)
                return 1;
        if (ssh_bind_listen(b) < 0) {
                fprintf(stderr, "sftpd: listen on %s:%u: %s\n", cfg.listen_addr, cfg.port, ssh_get_error(b));
                return 1;
        }
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
                perror("sftpd: pipe");
                return 1;
        }
        static struct sftp_ratelimit rl;
        sftp_ratelimit_init(&rl, cfg.max_failures, cfg.window_sec, cfg.block_sec);
        fprintf(stderr, "sftpd: listening on %s:%u\n", cfg.listen_addr, cfg.port);
        char rbuf[4096];
        size_t rhave = 0;
        unsigned sessions = 0;
        pid_t *pids = calloc(cfg.max_sessions, sizeof(pid_t));
        if (!pids)
                return 1;
        while (!stopping) {
                struct pollfd p[2] = { { .fd = ssh_bind_get_fd(b), .events = POLLIN }, { .fd = pipefd[0], .events = POLLIN } };
                int n = poll(p, 2, 1000);
                for (pid_t pid; (pid = waitpid(-1, NULL, WNOHANG)) > 0;) {
                        sessions -= sessions > 0;
                        for (unsigned i = 0; i < cfg.max_sessions; i++)
                                if (pids[i] == pid)
                                        pids[i] = 0;
                }
                if (n < 0)
                        continue;
                if (p[1].revents & POLLIN)
                        read_reports(pipefd[0], &rl, rbuf, &rhave, sizeof(rbuf));
                if (!(p[0].revents & POLLIN))
                        continue;
                ssh_session s = ssh_new();
                if (!s)
                        continue;
                if (ssh_bind_accept(b, s) != SSH_OK) {
                        ssh_free(s);
                        continue;
                }
                char peer[INET6_ADDRSTRLEN + 1];
                peer_of(s, peer, sizeof(peer));
                /* Reports that arrived meanwhile count before this connection is judged. */
                read_reports(pipefd[0], &rl, rbuf, &rhave, sizeof(rbuf));
                char key[96];
                snprintf(key, sizeof(key), "addr:%s", peer);
                const char *why = sftp_ratelimit_blocked(&rl, key, time(NULL)) ? "too many failed logins from this address"
                                  : sessions >= cfg.max_sessions                 ? "too many sessions"
                                                                                 : NULL;
                if (why) {
                        fprintf(stderr, "sftpd: refused from=%s: %s\n", peer, why);
                        ssh_disconnect(s);
                        ssh_free(s);
                        continue;
                }
                pid_t pid = fork();
                if (pid == 0) {
                        signal(SIGTERM, SIG_DFL);
                        signal(SIGINT, SIG_DFL);
                        close(pipefd[0]);
                        ssh_bind_free(b);
                        int code = sftpd_session(&cfg, s, peer, &rl, pipefd[1]);
                        /* After a served session the client closes the connection itself (as with
                         * OpenSSH's sshd); a refused one gets a disconnect message. */
                        if (code != 0)
                                ssh_disconnect(s);
                        _exit(code);
                }
                if (pid > 0) {
                        for (unsigned i = 0; i < cfg.max_sessions; i++)
                                if (!pids[i]) {
                                        pids[i] = pid;
                                        break;
                                }
                        sessions++;
                }
                else
                        fprintf(stderr, "sftpd: fork: %s\n", strerror(errno));
                /* The parent's copy of the session: its socket closed, no disconnect message sent. */
                ssh_free(s);
        }
        fprintf(stderr, "sftpd: stopping\n");
        ssh_bind_free(b);
        signal(SIGTERM, SIG_IGN);
        for (unsigned i = 0; i < cfg.max_sessions; i++)
                if (pids[i] > 0)
                        kill(pids[i], SIGTERM);
        while (wait(NULL) > 0)
                ;
        free(pids);
        ssh_finalize();
        return 0;
}
