/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-sftpd: the SFTP front end of app volumes (docs/app-sftp.md).
 *
 *   nodeagent-sftpd --listen 0.0.0.0:2022 --users-dir <storage_dir>/sftp/users \
 *                   --host-key <state_dir>/sftp/ssh_host_ed25519_key \
 *                   [--control <state_dir>/sftp/control.sock] [--max-failures 10 --window 300
 *                   --block 600 --user-delay-max 30] [--login-grace 60] [--idle-timeout 900]
 *                   [--max-sessions 256] [--per-source-max-startups 8] [--max-startups 64:30:256]
 *                   [--session-memory-mb 128]
 *
 * The listener generates the ED25519 host key at first start (0600), accepts
 * connections and forks one process per connection (sftpd-session.c: a root monitor,
 * sftpd-monitor.c, and an unprivileged network half it forks), which reports each
 * failed login and its own login over a pipe. Unauthenticated connections are
 * counted apart from logged-in sessions: per source (an IPv4 address, an IPv6 /64) and
 * in all with random early drop (sftp-admit.h); logged-in sessions up to
 * --max-sessions. Failures are counted per source and per user (sftp-ratelimit.h): a
 * source is refused at accept, a user only delayed at login (the session inherits the
 * users' table as it was at fork). The agent ends an app's sessions through the control
 * socket (control_one). SIGTERM stops the listener and its sessions. Logs go to stderr, one line each; SFTPD_LIBSSH_DEBUG=1 in the environment
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
#include <sys/un.h>
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
                        "[--control SOCKET] [--max-failures N] [--window SEC] [--block SEC] [--user-delay-max SEC] "
                        "[--login-grace SEC] [--idle-timeout SEC] [--max-sessions N] [--per-source-max-startups N] "
                        "[--max-startups START:RATE:FULL] [--session-memory-mb MB]\n");
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

/* The listener's sessions: unauthenticated ones counted apart from logged-in ones. */
struct slot {
        pid_t pid;
        bool authed;
        char source[INET6_ADDRSTRLEN + 8];
        char app[64];
};

struct listener {
        const struct sftpd_config *cfg;
        struct sftp_ratelimit *addrs, *users;
        struct slot *slots;
        unsigned n_slots;
        int report_fd;
        char rbuf[4096];
        size_t rhave;
};

static struct slot *slot_of(struct listener *L, pid_t pid)
{
        for (unsigned i = 0; i < L->n_slots; i++)
                if (L->slots[i].pid == pid)
                        return &L->slots[i];
        return NULL;
}

static unsigned count(const struct listener *L, bool authed, const char *source)
{
        unsigned n = 0;
        for (unsigned i = 0; i < L->n_slots; i++)
                n += L->slots[i].pid > 0 && L->slots[i].authed == authed &&
                     (!source || streq(L->slots[i].source, source));
        return n;
}

/* "A <pid> <app>": the session logged in; past max_sessions it is ended. */
static void logged_in(struct listener *L, char *line)
{
        char *end;
        long pid = strtol(line, &end, 10);
        struct slot *sl = pid > 0 && *end == ' ' ? slot_of(L, (pid_t)pid) : NULL;
        if (!sl)
                return;
        if (count(L, true, NULL) >= L->cfg->max_sessions) {
                fprintf(stderr, "sftpd: app=%s from=%s: too many sessions (%u); closed\n", end + 1, sl->source,
                        L->cfg->max_sessions);
                kill(sl->pid, SIGTERM);
        }
        sl->authed = true;
        snprintf(sl->app, sizeof(sl->app), "%s", end + 1);
}

static void one_report(struct listener *L, char *p)
{
        if (p[0] == 'A' && p[1] == ' ') {
                logged_in(L, p + 2);
                return;
        }
        if (p[0] != 'F' || p[1] != ' ')
                return;
        const char *key = p + 2;
        if (strncmp(key, "user:", 5) == 0) {
                if (sftp_ratelimit_fail(L->users, key, time(NULL)))
                        fprintf(stderr, "sftpd: %s: logins delayed up to %u s after too many failed logins\n", key,
                                L->users->delay_max_sec);
        } else if (sftp_ratelimit_fail(L->addrs, key, time(NULL)))
                fprintf(stderr, "sftpd: %s refused for %u s after too many failed logins\n", key,
                        L->addrs->block_sec);
}

/* Every line sessions wrote so far ("F <key>", "A <pid> <app>"); a partial line waits in rbuf. */
static void read_reports(struct listener *L)
{
        for (;;) {
                ssize_t n = read(L->report_fd, L->rbuf + L->rhave, sizeof(L->rbuf) - L->rhave - 1);
                if (n <= 0)
                        return;
                L->rhave += (size_t)n;
                L->rbuf[L->rhave] = '\0';
                char *p = L->rbuf;
                for (char *nl; (nl = strchr(p, '\n'));) {
                        *nl = '\0';
                        one_report(L, p);
                        p = nl + 1;
                }
                L->rhave = (size_t)(L->rbuf + L->rhave - p);
                memmove(L->rbuf, p, L->rhave);
                if (L->rhave == sizeof(L->rbuf) - 1)
                        L->rhave = 0; /* garbage: drop it */
        }
}

static void reap(struct listener *L)
{
        for (pid_t pid; (pid = waitpid(-1, NULL, WNOHANG)) > 0;) {
                struct slot *sl = slot_of(L, pid);
                if (sl)
                        *sl = (struct slot){ 0 };
        }
}

/*
 * The agent's control socket (root only, beside the host key): one request a
 * connection, "K <app id>\n": every session of the app is ended and reaped before
 * the answer "OK <n>\n" (its monitor, on SIGTERM, kills and reaps its network half
 * first, so the session's files are closed). Sessions report their login before they
 * read their credentials file a last time, so one that read it before the agent
 * changed it is known here when the agent asks (sftpd-session.c).
 */
static int control_open(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "sftpd: control socket path too long: %s\n", path);
                return -1;
        }
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        (void)unlink(path);
        mode_t old = umask(077);
        int r = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(fd, 16) < 0) {
                fprintf(stderr, "sftpd: control socket %s: %s\n", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

static void control_one(struct listener *L, int lfd)
{
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return;
        char line[128];
        size_t have = 0;
        while (have < sizeof(line) - 1 && !memchr(line, '\n', have)) {
                struct pollfd pf = { .fd = c, .events = POLLIN };
                if (poll(&pf, 1, 2000) <= 0)
                        break;
                ssize_t n = read(c, line + have, sizeof(line) - 1 - have);
                if (n <= 0)
                        break;
                have += (size_t)n;
        }
        line[have] = '\0';
        char *nl = strchr(line, '\n');
        if (!nl || line[0] != 'K' || line[1] != ' ' || nl == line + 2) {
                (void)!write(c, "ERR\n", 4);
                close(c);
                return;
        }
        *nl = '\0';
        const char *app = line + 2;
        read_reports(L); /* every login reported so far counts */
        unsigned n = 0;
        for (unsigned i = 0; i < L->n_slots; i++) {
                struct slot *sl = &L->slots[i];
                if (sl->pid <= 0 || !sl->authed || !streq(sl->app, app))
                        continue;
                /* SIGTERM: the monitor kills its network half and reaps it before it exits. */
                kill(sl->pid, SIGTERM);
                while (waitpid(sl->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                fprintf(stderr, "sftpd: app=%s from=%s: session ended (credentials changed, disabled or deleted)\n",
                        app, sl->source);
                *sl = (struct slot){ 0 };
                n++;
        }
        char reply[32];
        int len = snprintf(reply, sizeof(reply), "OK %u\n", n);
        (void)!write(c, reply, (size_t)len);
        close(c);
}

/*
 * One log line per refused connection, but at most one a second: a flood of
 * connections would otherwise write the agent's log full. How many were not logged is
 * said a second later (refused_flush, from the loop).
 */
static struct timespec refused_last;
static unsigned refused_quiet;

static void refused_flush(bool force)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (refused_quiet && (force || now.tv_sec != refused_last.tv_sec)) {
                fprintf(stderr, "sftpd: %u more connections refused (not logged one by one)\n", refused_quiet);
                refused_quiet = 0;
                refused_last = now;
        }
}

static void refused_line(const char *peer, const char *why)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (refused_last.tv_sec && now.tv_sec == refused_last.tv_sec) {
                refused_quiet++;
                return;
        }
        refused_flush(true);
        fprintf(stderr, "sftpd: refused from=%s: %s\n", peer, why);
        refused_last = now;
}

/* Why a new connection from source is refused, or NULL. */
static const char *admit(struct listener *L, const char *key, const char *source)
{
        if (sftp_ratelimit_blocked(L->addrs, key, time(NULL)))
                return "too many failed logins from this address";
        if (count(L, false, source) >= L->cfg->per_source)
                return "too many unauthenticated connections from this source";
        unsigned unauth = count(L, false, NULL);
        if (sftp_admit_drop(&L->cfg->startups, unauth, (unsigned)(random() % 100)))
                return "too many unauthenticated connections (random early drop)";
        if (count(L, true, NULL) >= L->cfg->max_sessions || !slot_of(L, 0))
                return "too many sessions";
        return NULL;
}

int main(int argc, char **argv)
{
        struct sftpd_config cfg = { .max_failures = 10, .window_sec = 300, .block_sec = 600,
                                    .user_delay_max_sec = 30, .login_grace_sec = 60, .idle_sec = 900,
                                    .max_sessions = 256, .per_source = 8, .startups = { 64, 30, 256 },
                                    .memory_mb = 128 };
        char *listen_arg = NULL;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!v)
                        return usage();
                bool ok = true;
                if (streq(a, "--listen"))
                        listen_arg = argv[i + 1];
                else if (streq(a, "--users-dir"))
                        cfg.users_dir = v;
                else if (streq(a, "--host-key"))
                        cfg.host_key = v;
                else if (streq(a, "--control"))
                        cfg.control = v;
                else if (streq(a, "--max-failures"))
                        ok = parse_uint(v, SFTP_RATELIMIT_MAX_FAILURES, &cfg.max_failures) && cfg.max_failures > 0;
                else if (streq(a, "--window"))
                        ok = parse_uint(v, 86400, &cfg.window_sec);
                else if (streq(a, "--block"))
                        ok = parse_uint(v, 86400 * 7, &cfg.block_sec);
                else if (streq(a, "--user-delay-max"))
                        ok = parse_uint(v, 3600, &cfg.user_delay_max_sec) && cfg.user_delay_max_sec > 0;
                else if (streq(a, "--login-grace"))
                        ok = parse_uint(v, 3600, &cfg.login_grace_sec) && cfg.login_grace_sec > 0;
                else if (streq(a, "--idle-timeout"))
                        ok = parse_uint(v, 7 * 86400, &cfg.idle_sec);
                else if (streq(a, "--max-sessions"))
                        ok = parse_uint(v, 65536, &cfg.max_sessions) && cfg.max_sessions > 0;
                else if (streq(a, "--per-source-max-startups"))
                        ok = parse_uint(v, SFTP_STARTUPS_MAX, &cfg.per_source) && cfg.per_source > 0;
                else if (streq(a, "--max-startups"))
                        ok = sftp_startups_parse(v, &cfg.startups) == 0;
                else if (streq(a, "--session-memory-mb"))
                        ok = parse_uint(v, 1 << 20, &cfg.memory_mb) && cfg.memory_mb >= 16;
                else
                        ok = false;
                if (!ok)
                        return usage();
                i++;
        }
        if (!listen_arg || !cfg.users_dir || !cfg.host_key || cfg.users_dir[0] != '/' || cfg.host_key[0] != '/' ||
            (cfg.control && cfg.control[0] != '/') || !parse_listen(listen_arg, &cfg.listen_addr, &cfg.port))
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
        /* The network halves' root: an empty directory beside the host key (0700 above it). */
        static char empty[PATH_MAX];
        snprintf(empty, sizeof(empty), "%s", cfg.host_key);
        char *slash = strrchr(empty, '/');
        snprintf(slash + 1, sizeof(empty) - (size_t)(slash + 1 - empty), "empty");
        if (mkdir(empty, 0755) < 0 && errno != EEXIST) {
                fprintf(stderr, "sftpd: %s: %s\n", empty, strerror(errno));
                return 1;
        }
        cfg.empty_dir = empty;
        ssh_init();
        ssh_bind b = ssh_bind_new();
        if (!b || set_algorithms(b, &cfg) < 0)
                return 1;
        if (ssh_bind_listen(b) < 0) {
                fprintf(stderr, "sftpd: listen on %s:%u: %s\n", cfg.listen_addr, cfg.port, ssh_get_error(b));
                return 1;
        }
        /* libssh listens with a backlog of 10: under a flood of connections a client's SYN
         * would wait for the kernel's retransmission (1 s, then 3) rather than the accept. */
        (void)listen(ssh_bind_get_fd(b), SOMAXCONN);
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
                perror("sftpd: pipe");
                return 1;
        }
        int control = cfg.control ? control_open(cfg.control) : -1;
        if (cfg.control && control < 0)
                return 1;
        static struct sftp_ratelimit addrs, users;
        sftp_ratelimit_init(&addrs, cfg.max_failures, cfg.window_sec, cfg.block_sec, 0);
        sftp_ratelimit_init(&users, cfg.max_failures, cfg.window_sec, 0, cfg.user_delay_max_sec);
        struct listener L = { .cfg = &cfg, .addrs = &addrs, .users = &users, .report_fd = pipefd[0],
                              .n_slots = cfg.max_sessions + cfg.startups.full };
        if (!(L.slots = calloc(L.n_slots, sizeof(*L.slots))))
                return 1;
        srandom((unsigned)time(NULL) ^ (unsigned)getpid());
        fprintf(stderr, "sftpd: listening on %s:%u\n", cfg.listen_addr, cfg.port);
        while (!stopping) {
                struct pollfd p[3] = { { .fd = ssh_bind_get_fd(b), .events = POLLIN },
                                       { .fd = pipefd[0], .events = POLLIN },
                                       { .fd = control, .events = POLLIN } };
                int n = poll(p, control >= 0 ? 3 : 2, 1000);
                reap(&L);
                refused_flush(false);
                if (n < 0)
                        continue;
                if (p[1].revents & POLLIN)
                        read_reports(&L);
                if (control >= 0 && (p[2].revents & POLLIN))
                        control_one(&L, control);
                if (!(p[0].revents & POLLIN))
                        continue;
                ssh_session s = ssh_new();
                if (!s)
                        continue;
                if (ssh_bind_accept(b, s) != SSH_OK) {
                        ssh_free(s);
                        continue;
                }
                char peer[INET6_ADDRSTRLEN + 1], source[INET6_ADDRSTRLEN + 8];
                peer_of(s, peer, sizeof(peer));
                (void)sftp_admit_source(peer, source, sizeof(source));
                /* Reports that arrived meanwhile count before this connection is judged. */
                read_reports(&L);
                char key[96];
                snprintf(key, sizeof(key), "addr:%s", source);
                const char *why = admit(&L, key, source);
                if (why) {
                        refused_line(peer, why);
                        ssh_free(s); /* closed at once: no banner, nothing read */
                        continue;
                }
                pid_t pid = fork();
                if (pid == 0) {
                        signal(SIGTERM, SIG_DFL);
                        signal(SIGINT, SIG_DFL);
                        close(pipefd[0]);
                        if (control >= 0)
                                close(control);
                        ssh_bind_free(b);
                        _exit(sftpd_session(&cfg, s, peer, &users, pipefd[1]));
                }
                struct slot *sl = pid > 0 ? slot_of(&L, 0) : NULL; /* admit() saw a free one */
                if (sl) {
                        *sl = (struct slot){ .pid = pid };
                        snprintf(sl->source, sizeof(sl->source), "%s", source);
                } else if (pid < 0)
                        fprintf(stderr, "sftpd: fork: %s\n", strerror(errno));
                /* The parent's copy of the session: its socket closed, no disconnect message sent. */
                ssh_free(s);
        }
        fprintf(stderr, "sftpd: stopping\n");
        ssh_bind_free(b);
        if (control >= 0) {
                close(control);
                (void)unlink(cfg.control);
        }
        signal(SIGTERM, SIG_IGN);
        for (unsigned i = 0; i < L.n_slots; i++)
                if (L.slots[i].pid > 0)
                        kill(L.slots[i].pid, SIGTERM);
        while (wait(NULL) > 0)
                ;
        free(L.slots);
        ssh_finalize();
        return 0;
}
