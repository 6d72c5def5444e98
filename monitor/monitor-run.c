/* SPDX-License-Identifier: GPL-2.0-or-later */
/* nodeagent-monitor: running crun (run --detach, delete --force), the container's memory cgroup, state files. */
#include "monitor/monitor.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>

#define UNIFIED_MOUNT "/sys/fs/cgroup/unified"

static const char *const child_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };

static void child_fail(const char *what)
{
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "nodeagent-monitor: %s: %s\n", what, strerror(errno));
        if (n > 0)
                (void)!write(2, msg, (size_t)n);
        _exit(125);
}

/* In the forked child, before exec: default signals, the private mount namespace when asked, stdio. */
static _Noreturn void child_exec(const struct monitor *m, const char *const argv[], int fd_in, int fd_out, int fd_err)
{
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        static const int sigs[] = { SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD };
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
                signal(sigs[i], SIG_DFL);
        if (dup2(fd_in, 0) < 0 || dup2(fd_out, 1) < 0 || dup2(fd_err, 2) < 0)
                _exit(125);
        if (m->private_cgroup_ns) {
                if (unshare(CLONE_NEWNS) < 0)
                        child_fail("unshare(CLONE_NEWNS)");
                if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        child_fail("make / private");
                if (umount2(UNIFIED_MOUNT, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
                        child_fail("umount " UNIFIED_MOUNT);
        }
        execve(m->runtime, (char *const *)argv, (char *const *)child_env);
        child_fail(m->runtime);
        _exit(127);
}

/* Wait for pid to end (SIGCHLD is blocked and read through m->sigfd); kill it after timeout_ms. */
static int wait_child(struct monitor *m, pid_t pid, int timeout_ms, int *ret_status)
{
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                int status;
                pid_t r = waitpid(pid, &status, WNOHANG);
                if (r == pid) {
                        *ret_status = status;
                        return 0;
                }
                if (r < 0 && errno != EINTR)
                        return -errno;
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
                if (elapsed >= timeout_ms) {
                        kill(pid, SIGKILL);
                        RETRY_EINTR(waitpid(pid, &status, 0));
                        return -ETIMEDOUT;
                }
                struct pollfd p = { .fd = m->sigfd, .events = POLLIN };
                if (poll(&p, 1, (int)(timeout_ms - elapsed)) > 0) {
                        struct signalfd_siginfo si;
                        while (read(m->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                                ;
                }
        }
}

static int run_runtime(struct monitor *m, const char *const argv[], int fd_in, int fd_out, int fd_err, int timeout_ms,
                       int *ret_status)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                child_exec(m, argv, fd_in, fd_out, fd_err);
        return wait_child(m, pid, timeout_ms, ret_status);
}

static void describe_status(int status, char *buf, size_t len)
{
        if (WIFEXITED(status))
                snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
        else
                snprintf(buf, len, "ended with wait status %d", status);
}

int mon_run_container(struct monitor *m, int fd_in, int fd_out, int fd_err, char *errbuf, size_t errlen)
{
        char pidfile[4096];
        snprintf(pidfile, sizeof(pidfile), "%s/container.pid", m->dir);
        const char *const argv[] = {
                m->runtime, "--root", m->runtime_root, "--cgroup-manager=cgroupfs", "run",
                "--detach", "--pid-file", pidfile, "--bundle", m->bundle, m->id, NULL,
        };
        int status;
        int r = run_runtime(m, argv, fd_in, fd_out, fd_err, MON_START_TIMEOUT_MS, &status);
        if (r == -ETIMEDOUT) {
                snprintf(errbuf, errlen, "%s run did not finish within %d s", m->runtime, MON_START_TIMEOUT_MS / 1000);
                return r;
        }
        if (r < 0) {
                snprintf(errbuf, errlen, "run %s: %s", m->runtime, strerror(-r));
                return r;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                char how[64];
                describe_status(status, how, sizeof(how));
                snprintf(errbuf, errlen, "%s run %s", m->runtime, how);
                return -EIO;
        }

        char text[32] = "";
        int fd = openat(m->dirfd, "container.pid", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
        if (fd >= 0)
                close(fd);
        char *end = NULL;
        long pid = n > 0 ? strtol(text, &end, 10) : 0;
        if (pid <= 1 || !end || (*end && *end != '\n')) {
                snprintf(errbuf, errlen, "%s run left no valid pid file %s", m->runtime, pidfile);
                return -EIO;
        }
        m->container_pid = (pid_t)pid;
        return 0;
}

/*
 * The delete helper, forked before the seccomp filter (which children would inherit,
 * and crun needs far more than the monitor): it keeps only its end of a pipe, waits,
 * and on a byte becomes `crun delete --force ID`; on end of file (the monitor died)
 * it exits without deleting anything.
 */
int mon_delete_helper_start(struct monitor *m)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(p[0]);
                close(p[1]);
                return -e;
        }
        if (pid == 0) {
                prctl(PR_SET_NAME, "na-monitor-del", 0, 0, 0);
                close(p[1]);
                if (p[0] > 3)
                        close_range(3, (unsigned)p[0] - 1, 0);
                close_range((unsigned)p[0] + 1, ~0u, 0);
                char c;
                if (RETRY_EINTR(read(p[0], &c, 1)) != 1)
                        _exit(0);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0)
                        _exit(125);
                const char *const argv[] = { m->runtime, "--root", m->runtime_root, "delete", "--force", m->id, NULL };
                child_exec(m, argv, null, null, null);
        }
        close(p[0]);
        m->delete_pid = pid;
        m->delete_fd = p[1];
        return 0;
}

int mon_delete_container(struct monitor *m)
{
        if (m->delete_fd < 0 || m->delete_pid <= 0)
                return -ECHILD;
        ssize_t n = RETRY_EINTR(write(m->delete_fd, "d", 1));
        closep(&m->delete_fd);
        m->delete_fd = -1;
        if (n != 1)
                return -EPIPE; /* the helper is gone */
        int status;
        int r = wait_child(m, m->delete_pid, MON_DELETE_TIMEOUT_MS, &status);
        m->delete_pid = 0;
        if (r < 0)
                return r;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* The memory cgroup directory of the container's init, from /proc/<pid>/cgroup (v1 "memory" or v2 "0::"). */
void mon_find_memory_cgroup(struct monitor *m)
{
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)m->container_pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return;
        buf[n] = '\0';
        const char *v2 = NULL;
        for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2 || strstr(c2 + 1, ".."))
                        continue;
                *c2 = '\0';
                const char *ctrls = c1 + 1, *cg = c2 + 1;
                if (streq(line, "0") && *ctrls == '\0')
                        v2 = cg;
                for (char *s2 = NULL, *c = strtok_r((char *)ctrls, ",", &s2); c; c = strtok_r(NULL, ",", &s2))
                        if (streq(c, "memory")) {
                                snprintf(m->memory_cgroup, sizeof(m->memory_cgroup), "/sys/fs/cgroup/memory%s", cg);
                                return;
                        }
        }
        if (v2)
                snprintf(m->memory_cgroup, sizeof(m->memory_cgroup), "/sys/fs/cgroup%s", v2);
}

static long read_counter(const char *dir, const char *file, const char *key)
{
        char path[640], buf[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        size_t klen = strlen(key);
        for (char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, klen) == 0 && p[klen] == ' ')
                        return strtol(p + klen + 1, NULL, 10);
        return -1;
}

/* Did the kernel's OOM killer kill a process of the container's cgroup? */
bool mon_oom_killed(const struct monitor *m)
{
        if (!m->memory_cgroup[0])
                return false;
        return read_counter(m->memory_cgroup, "memory.events", "oom_kill") > 0 ||
               read_counter(m->memory_cgroup, "memory.oom_control", "oom_kill") > 0;
}

/* Replace dir/name with text atomically (temporary file, fsync, rename, fsync of the directory). */
int mon_write_file(int dirfd, const char *name, const char *text)
{
        char tmp[256];
        snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        ssize_t n = RETRY_EINTR(write(fd, text, len));
        int r = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dirfd, tmp, 0);
                return r;
        }
        fsync(dirfd);
        return 0;
}

int mon_join_cgroups(struct monitor *m, char *errbuf, size_t errlen)
{
        char pid[24];
        int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        for (size_t i = 0; i < m->n_cgroups; i++) {
                char path[PATH_MAX];
                if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", m->cgroups[i]) >= sizeof(path)) {
                        snprintf(errbuf, errlen, "join cgroup %s: path too long", m->cgroups[i]);
                        return -ENAMETOOLONG;
                }
                int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                ssize_t w = fd >= 0 ? RETRY_EINTR(write(fd, pid, (size_t)n)) : -1;
                int e = errno;
                if (fd >= 0)
                        close(fd);
                if (w != n) {
                        snprintf(errbuf, errlen, "join cgroup %s: %s", m->cgroups[i], strerror(w < 0 ? e : EIO));
                        return w < 0 ? -e : -EIO;
                }
        }
        return 0;
}
