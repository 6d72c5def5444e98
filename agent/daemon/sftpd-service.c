/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The agent's side of nodeagent-sftpd (agent/daemon/sftpd-service.h). */
#include "agent/daemon/sftpd-service.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/base/config.h"
#include "agent/base/log.h"
#include "common/macro.h"
#include "common/spawn.h"
#include "common/spawnd.h"

struct agent_sftpd {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
        pid_t pid;
        int handle; /* the exec helper's status socket, or -1 */
        char binary[PATH_MAX];
        char listen[300], users_dir[PATH_MAX], host_key[PATH_MAX], control[PATH_MAX];
        char max_sessions[16], startups[64], per_source[16], grace[16], idle[16], memory[16];
};

static const char *storage_dir(const struct agent_config *cfg, char *buf, size_t len)
{
        if (cfg->apps_storage_dir && *cfg->apps_storage_dir)
                return cfg->apps_storage_dir;
        snprintf(buf, len, "%s/apps", cfg->state_dir);
        return buf;
}

int agent_sftp_users_dir(const struct agent_config *cfg, char *buf, size_t len)
{
        char tmp[PATH_MAX];
        int n = snprintf(buf, len, "%s/sftp/users", storage_dir(cfg, tmp, sizeof(tmp)));
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

unsigned agent_sftp_port(const struct agent_config *cfg)
{
        const char *l = cfg->apps_sftp_listen;
        const char *colon = l && *l ? strrchr(l, ':') : NULL;
        return colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0;
}

void agent_sftp_host(const struct agent_config *cfg, char *buf, size_t len)
{
        if (cfg->apps_sftp_host && *cfg->apps_sftp_host) {
                snprintf(buf, len, "%s", cfg->apps_sftp_host);
                return;
        }
        if (gethostname(buf, len) < 0 || !buf[0])
                snprintf(buf, len, "localhost");
        buf[len - 1] = '\0';
}

int agent_sftp_control_path(const struct agent_config *cfg, char *buf, size_t len)
{
        int n = snprintf(buf, len, "%s/sftp/control.sock", cfg->state_dir);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static pid_t spawn(struct agent_sftpd *d)
{
        static char o_listen[] = "--listen", o_users[] = "--users-dir", o_key[] = "--host-key",
                    o_control[] = "--control", o_sessions[] = "--max-sessions", o_startups[] = "--max-startups",
                    o_per_source[] = "--per-source-max-startups", o_grace[] = "--login-grace",
                    o_idle[] = "--idle-timeout", o_memory[] = "--session-memory-mb";
        static char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
        char *argv[] = { d->binary,    o_listen,      d->listen,   o_users,   d->users_dir,  o_key,
                         d->host_key,  o_control,     d->control,  o_sessions, d->max_sessions, o_startups,
                         d->startups,  o_per_source,  d->per_source, o_grace, d->grace,       o_idle,
                         d->idle,      o_memory,      d->memory,   NULL };
        char *envp[] = { path_env, NULL };
        d->handle = -1;
        _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        const int fds[] = { null, STDOUT_FILENO, STDERR_FILENO }; /* stdout and stderr stay the agent's */
        struct na_spawnd_cmd c = { .path = d->binary, .argv = argv, .envp = envp, .fds = fds, .nfds = 3,
                                   .flags = NA_SPAWND_SETPGROUP };
        struct na_error err = NA_ERROR_INIT;
        pid_t pid = -1;
        if (null < 0 || na_spawn_start(&c, &pid, &d->handle, &err) < 0) {
                log_warn("sftp: cannot start %s: %s", d->binary, null < 0 ? strerror(errno) : err.message);
                na_error_clear(&err);
                return -1;
        }
        return pid;
}

/* Wait up to ms for stop; true when stopping. */
static bool wait_stop(struct agent_sftpd *d, unsigned ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&d->lock);
        while (!d->stop && pthread_cond_timedwait(&d->cond, &d->lock, &ts) == 0)
                ;
        bool s = d->stop;
        pthread_mutex_unlock(&d->lock);
        return s;
}

static void *supervise(void *arg)
{
        struct agent_sftpd *d = arg;
        unsigned backoff_ms = 1000;
        for (;;) {
                pthread_mutex_lock(&d->lock);
                bool stop = d->stop;
                pid_t pid = stop ? -1 : spawn(d);
                d->pid = pid;
                pthread_mutex_unlock(&d->lock);
                if (stop)
                        break;
                time_t started = time(NULL);
                if (pid > 0) {
                        log_info("sftp: nodeagent-sftpd started (pid %d) on %s", (int)pid, d->listen);
                        int st = 0;
                        if (d->handle >= 0) {
                                if (na_spawnd_wait(d->handle, &st) < 0)
                                        st = SIGKILL; /* the helper is gone: the agent stops too */
                                close(d->handle);
                                d->handle = -1;
                        } else {
                                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                                        ;
                        }
                        pthread_mutex_lock(&d->lock);
                        d->pid = -1;
                        stop = d->stop;
                        pthread_mutex_unlock(&d->lock);
                        if (stop)
                                break;
                        if (WIFSIGNALED(st))
                                log_warn("sftp: nodeagent-sftpd was killed by signal %d; starting it again",
                                         WTERMSIG(st));
                        else
                                log_warn("sftp: nodeagent-sftpd exited with status %d; starting it again",
                                         WEXITSTATUS(st));
                }
                if (time(NULL) - started > 60)
                        backoff_ms = 1000;
                if (wait_stop(d, backoff_ms))
                        break;
                backoff_ms = backoff_ms >= 30000 ? 60000 : backoff_ms * 2;
        }
        return NULL;
}

int agent_sftpd_start(const struct agent_config *cfg, const char *binary, struct agent_sftpd **ret,
                      struct na_error *err)
{
        *ret = NULL;
        if (!cfg->apps_sftp_listen || !*cfg->apps_sftp_listen)
                return 0;
        struct agent_sftpd *d = calloc(1, sizeof(*d));
        if (!d)
                return na_error_sys(err, ENOMEM, "sftp");
        pthread_mutex_init(&d->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_cond_init(&d->cond, &ca);
        pthread_condattr_destroy(&ca);
        d->pid = -1;
        snprintf(d->binary, sizeof(d->binary), "%s", binary);
        snprintf(d->listen, sizeof(d->listen), "%s", cfg->apps_sftp_listen);
        (void)agent_sftp_users_dir(cfg, d->users_dir, sizeof(d->users_dir));
        snprintf(d->host_key, sizeof(d->host_key), "%s/sftp/ssh_host_ed25519_key", cfg->state_dir);
        (void)agent_sftp_control_path(cfg, d->control, sizeof(d->control));
        snprintf(d->max_sessions, sizeof(d->max_sessions), "%lld", (long long)cfg->apps_sftp_max_sessions);
        snprintf(d->startups, sizeof(d->startups), "%s",
                 cfg->apps_sftp_max_startups ? cfg->apps_sftp_max_startups : "64:30:256");
        snprintf(d->per_source, sizeof(d->per_source), "%lld", (long long)cfg->apps_sftp_per_source_max_startups);
        snprintf(d->grace, sizeof(d->grace), "%lld", (long long)cfg->apps_sftp_login_grace_sec);
        snprintf(d->idle, sizeof(d->idle), "%lld", (long long)cfg->apps_sftp_idle_timeout_sec);
        snprintf(d->memory, sizeof(d->memory), "%lld", (long long)cfg->apps_sftp_session_memory_mb);
        int r = pthread_create(&d->thread, NULL, supervise, d);
        if (r != 0) {
                free(d);
                return na_error_sys(err, r, "sftp: supervisor thread");
        }
        *ret = d;
        return 0;
}

int agent_sftp_end_sessions(const struct agent_config *cfg, const char *app_id, struct na_error *err)
{
        if (!cfg->apps_sftp_listen || !*cfg->apps_sftp_listen)
                return 0;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (agent_sftp_control_path(cfg, sa.sun_path, sizeof(sa.sun_path)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "sftp: control socket path too long");
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return na_error_sys(err, errno, "sftp: control socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                /* No listener, so no session: sessions die with it (PR_SET_PDEATHSIG). */
                if (errno == ENOENT || errno == ECONNREFUSED)
                        return 0;
                return na_error_sys(err, errno, "sftp: connect %s", sa.sun_path);
        }
        char line[128];
        int n = snprintf(line, sizeof(line), "K %s\n", app_id);
        if (n < 0 || (size_t)n >= sizeof(line) || write(fd, line, (size_t)n) != n)
                return na_error_sys(err, errno ? errno : EIO, "sftp: ending the sessions of app %s", app_id);
        /* The listener kills and reaps them, then answers; 30 s covers a session stuck in I/O. */
        size_t have = 0;
        while (have < sizeof(line) - 1 && !memchr(line, '\n', have)) {
                struct pollfd pf = { .fd = fd, .events = POLLIN };
                int r = poll(&pf, 1, 30000);
                if (r < 0 && errno == EINTR)
                        continue;
                ssize_t got = r > 0 ? read(fd, line + have, sizeof(line) - 1 - have) : -1;
                if (got <= 0)
                        break;
                have += (size_t)got;
        }
        line[have] = '\0';
        if (strncmp(line, "OK ", 3) != 0)
                return na_error_set(err, EIO, NA_E_INTERNAL, "sftp: nodeagent-sftpd did not end the sessions of app %s",
                                    app_id);
        return (int)strtol(line + 3, NULL, 10);
}

void agent_sftpd_stop(struct agent_sftpd *d)
{
        if (!d)
                return;
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        if (d->pid > 0)
                kill(d->pid, SIGTERM);
        pthread_cond_broadcast(&d->cond);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->cond);
        free(d);
}
