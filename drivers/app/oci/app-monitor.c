/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The agent's side of nodeagent-monitor: spawn (double fork, status pipe) and state files; connections are ring/monitor-msg.c. */
#include "drivers/app/oci/app-monitor.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include "common/spawnd.h"

#define STATUS_MAX 1024
#define SPAWN_TIMEOUT_MS 75000
#define MONITOR_NAME "nodeagent-monitor"

static bool abs_path(const char *p) { return p && p[0] == '/' && strlen(p) < PATH_MAX; }

/* Printable ASCII only, so the text is valid JSON string content whatever crun printed. */
static void sanitize(char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 ? (*s != '\n' && *s != '\t') : (unsigned char)*s > 0x7e)
                        *s = '?';
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the monitor's process, after the second fork: only async-signal-safe calls. */
static _Noreturn void exec_monitor(const char *path, char *const argv[], int status_fd)
{
        static char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (status_fd < 3)
                status_fd = fcntl(status_fd, F_DUPFD_CLOEXEC, 3);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (status_fd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                _exit(126);
        if (status_fd == 3) {
                if (fcntl(3, F_SETFD, 0) < 0)
                        _exit(126);
        } else if (dup2(status_fd, 3) < 0)
                _exit(126);
        execve(path, argv, envp);
        _exit(127);
}

/* Read the status pipe until EOF or the deadline. */
static int read_status(int fd, int timeout_ms, char *buf, size_t cap, size_t *ret_len)
{
        size_t len = 0;
        int64_t deadline = mono_ms() + timeout_ms;
        for (;;) {
                int64_t left = deadline - mono_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, (int)left);
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (r <= 0)
                        continue;
                ssize_t n = read(fd, buf + len, cap - 1 - len);
                if (n < 0 && errno != EINTR && errno != EAGAIN)
                        return -errno;
                if (n == 0 || (n > 0 && (len += (size_t)n) >= cap - 1))
                        break;
        }
        buf[len] = '\0';
        *ret_len = len;
        return 0;
}

int app_monitor_spawn(const struct app_monitor_spec *spec, pid_t *ret_monitor_pid, pid_t *ret_container_pid,
                      struct na_error *err)
{
        if (!spec || !abs_path(spec->monitor_path) || !abs_path(spec->dir) || !spec->id || !*spec->id ||
            !abs_path(spec->runtime) || !abs_path(spec->runtime_root) || !abs_path(spec->bundle))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app monitor: incomplete spec");
        const char *id = spec->id;
        if (spec->n_cgroups > 4 || (spec->n_cgroups && !spec->cgroups))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app monitor: at most 4 cgroups");
        char ring[32], rate[16], burst[16];
        snprintf(ring, sizeof(ring), "%zu", spec->ring_bytes);
        snprintf(rate, sizeof(rate), "%u", spec->lines_per_sec);
        snprintf(burst, sizeof(burst), "%u", spec->lines_burst);
        const char *argv[40];
        size_t n = 0;
        argv[n++] = spec->monitor_path;
        argv[n++] = "--dir", argv[n++] = spec->dir;
        argv[n++] = "--id", argv[n++] = id;
        argv[n++] = "--runtime", argv[n++] = spec->runtime;
        argv[n++] = "--runtime-root", argv[n++] = spec->runtime_root;
        argv[n++] = "--bundle", argv[n++] = spec->bundle;
        argv[n++] = "--status-fd", argv[n++] = "3";
        if (spec->private_cgroup_ns)
                argv[n++] = "--private-cgroup-ns";
        if (spec->started_pattern)
                argv[n++] = "--started-pattern", argv[n++] = spec->started_pattern;
        if (spec->ring_bytes)
                argv[n++] = "--ring-bytes", argv[n++] = ring;
        for (size_t i = 0; i < spec->n_cgroups; i++)
                argv[n++] = "--cgroup", argv[n++] = spec->cgroups[i];
        if (spec->lines_per_sec)
                argv[n++] = "--lines-per-sec", argv[n++] = rate;
        if (spec->lines_burst)
                argv[n++] = "--lines-burst", argv[n++] = burst;
        argv[n] = NULL;

        int status[2], pidpipe[2];
        if (pipe2(status, O_CLOEXEC) < 0)
                return na_error_sys(err, errno, "app %s: monitor: pipe", id);
        if (pipe2(pidpipe, O_CLOEXEC) < 0) {
                int e = errno;
                close(status[0]);
                close(status[1]);
                return na_error_sys(err, e, "app %s: monitor: pipe", id);
        }
        _cleanup_close_ int status_rd = status[0], pid_rd = pidpipe[0];
        pid_t mon = -1;
        if (na_spawnd_active()) {
                /* The exec helper forks it twice, outside the agent's seccomp filter. */
                close(pidpipe[1]);
                static char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
                _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                const int fds[] = { null, null, null, status[1] };
                struct na_spawnd_cmd c = { .path = spec->monitor_path, .argv = (char *const *)argv, .envp = envp,
                                           .fds = fds, .nfds = 4, .flags = NA_SPAWND_DETACH };
                int r = null < 0 ? na_error_sys(err, errno, "app %s: monitor: /dev/null", id)
                                 : na_spawnd_spawn(&c, &mon, NULL, err);
                close(status[1]);
                if (r < 0)
                        return r;
        } else {
                pid_t mid = fork();
                if (mid == 0) {
                        /* The intermediate child: fork the monitor, tell its pid, leave (so it is not our child). */
                        pid_t m = fork();
                        if (m == 0)
                                exec_monitor(spec->monitor_path, (char *const *)argv, status[1]);
                        (void)!write(pidpipe[1], &m, sizeof(m));
                        _exit(m < 0 ? 1 : 0);
                }
                int fork_errno = errno;
                close(status[1]);
                close(pidpipe[1]);
                if (mid < 0)
                        return na_error_sys(err, fork_errno, "app %s: monitor: fork", id);
                /* ECHILD: the agent's own reaper was faster; the pid pipe still says what happened. */
                RETRY_EINTR(waitpid(mid, NULL, 0));
                if (RETRY_EINTR(read(pid_rd, &mon, sizeof(mon))) != (ssize_t)sizeof(mon) || mon <= 0)
                        return na_error_set(err, EIO, NA_E_DRIVER, "app %s: could not fork the monitor", id);
        }

        char buf[STATUS_MAX];
        size_t len = 0;
        int r = read_status(status_rd, spec->timeout_ms > 0 ? spec->timeout_ms : SPAWN_TIMEOUT_MS, buf, sizeof(buf),
                            &len);
        if (r == -ETIMEDOUT) {
                kill(mon, SIGKILL);
                return na_error_set(err, ETIMEDOUT, NA_E_DRIVER, "app %s: the container did not start in time", id);
        }
        if (r < 0)
                return na_error_sys(err, -r, "app %s: monitor: read its status", id);
        unsigned long long cpid = 0;
        char tail = 0;
        if (sscanf(buf, "ok %llu%c", &cpid, &tail) == 1 && cpid > 1 && cpid <= INT_MAX) {
                if (ret_monitor_pid)
                        *ret_monitor_pid = mon;
                if (ret_container_pid)
                        *ret_container_pid = (pid_t)cpid;
                return 0;
        }
        char text[STATUS_MAX];
        if (strncmp(buf, "err ", 4) == 0)
                snprintf(text, sizeof(text), "%s", buf + 4);
        else if (len == 0)
                snprintf(text, sizeof(text), "%s ended without a word (missing, not executable, or killed)",
                         spec->monitor_path);
        else
                snprintf(text, sizeof(text), "%s said: %s", spec->monitor_path, buf);
        sanitize(text);
        r = na_error_set(err, EIO, NA_E_DRIVER, "app %s: start failed: %s", id, text);
        na_error_detail(err, "reason", json_string(text));
        return r;
}

static int read_small(const char *dir, const char *name, char *buf, size_t cap)
{
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
                return -ENAMETOOLONG;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        ssize_t n = RETRY_EINTR(read(fd, buf, cap - 1));
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return 0;
}

int app_monitor_read_exit(const char *dir, struct app_exit *ret, struct na_error *err)
{
        char buf[256];
        int r = read_small(dir, "exit", buf, sizeof(buf));
        if (r == -ENOENT)
                return r;
        if (r < 0)
                return na_error_sys(err, -r, "%s/exit", dir);
        int code, sig, oom;
        long long at;
        if (sscanf(buf, "code=%d signal=%d oom=%d at_ms=%lld", &code, &sig, &oom, &at) != 4)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "%s/exit: unreadable", dir);
        *ret = (struct app_exit){ .code = code, .signal = sig, .oom = oom != 0, .at_ms = at };
        return 0;
}

bool app_monitor_started(const char *dir)
{
        char buf[64];
        return read_small(dir, "started", buf, sizeof(buf)) == 0;
}

/* Is pid nodeagent-monitor? Its executable's name (a replaced binary reads "… (deleted)"), else its comm. */
static bool is_monitor(pid_t pid)
{
        char path[64], exe[PATH_MAX];
        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        ssize_t n = readlink(path, exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                char *del = strstr(exe, " (deleted)");
                if (del && del[10] == '\0')
                        *del = '\0';
                const char *base = strrchr(exe, '/');
                return streq(base ? base + 1 : exe, MONITOR_NAME);
        }
        char comm[32];
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
        if (n <= 0)
                return false;
        comm[n] = '\0';
        return strncmp(comm, MONITOR_NAME, 15) == 0; /* comm is cut at 15 characters */
}

bool app_monitor_alive(const char *dir, pid_t *ret_pid)
{
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/monitor.pid", dir) >= sizeof(path))
                return false;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return false;
        /* Getting the lock means nobody holds it: no monitor. */
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
                flock(fd, LOCK_UN);
                return false;
        }
        char buf[32];
        ssize_t n = RETRY_EINTR(pread(fd, buf, sizeof(buf) - 1, 0));
        if (n <= 0)
                return false;
        buf[n] = '\0';
        char *end = NULL;
        long pid = strtol(buf, &end, 10);
        if (pid <= 1 || pid > INT_MAX || (*end && *end != '\n'))
                return false;
        if (kill((pid_t)pid, 0) < 0 && errno != EPERM)
                return false;
        if (!is_monitor((pid_t)pid))
                return false;
        if (ret_pid)
                *ret_pid = (pid_t)pid;
        return true;
}
