/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-monitor: the small process that owns one running app's stdin, stdout
 * and stderr (like podman's conmon). It detaches from the agent, runs
 * `crun run --detach` with pipes as the container's stdio, stays the container's
 * reaper, writes every output line to the app's ring, serves APPDIR/monitor.sock,
 * records the exit in APPDIR/exit and deletes the container. The agent may restart
 * at any time and re-attach. Links only libc (no jansson, curl, OpenSSL).
 *
 *   nodeagent-monitor --dir APPDIR --id ID --runtime /usr/bin/crun --runtime-root DIR
 *       --bundle DIR [--private-cgroup-ns] [--started-pattern REGEX] [--ring-bytes N]
 *       [--status-fd FD] [--seccomp on|log] [--cgroup DIR]... [--lines-per-sec N]
 *       [--lines-burst N]
 *
 * --cgroup: once crun has started the container, the monitor moves itself into each
 * DIR (a cgroup directory the agent made and capped, beside the app's own; one per v1
 * controller or one v2 group), so that what the app's output costs counts against
 * limits made from the app's plan, not the agent's (issue 20). crun itself runs
 * before the move, in the agent's cgroup.
 * --lines-per-sec (default 1000, 0: no bound) and --lines-burst (default ten
 * seconds' worth): output lines past the bound are dropped, and one `system` line a
 * second says how many (monitor-rate.h).
 *
 * Once crun has started the container, the monitor loads its own seccomp allow-list
 * (monitor-seccomp.h); `--seccomp log` lets every call through and logs the ones not
 * on the list (kernel audit lines, type=1326): for finding the list, never production.
 */
#include "monitor/monitor.h"
#include "monitor/monitor-seccomp.h"

#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <linux/seccomp.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>

#define STATUS_ERR_MAX 512

static struct monitor mon;

int mon_epoll_mod(struct monitor *m, int op, int fd, uint32_t events, uint64_t tag)
{
        struct epoll_event ev = { .events = events, .data.u64 = tag };
        return epoll_ctl(m->epfd, op, fd, &ev) < 0 ? -errno : 0;
}

static void status_report(struct monitor *m, const char *text)
{
        if (m->status_fd < 0)
                return;
        (void)!RETRY_EINTR(write(m->status_fd, text, strlen(text)));
        closep(&m->status_fd);
        m->status_fd = -1;
}

static _Noreturn void fail(struct monitor *m, const char *fmt, ...) _printf_(2, 3);
static _Noreturn void fail(struct monitor *m, const char *fmt, ...)
{
        char msg[STATUS_ERR_MAX + 64] = "err ";
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + 4, sizeof(msg) - 4, fmt, ap);
        va_end(ap);
        if (m->ring)
                mon_system_line(m, msg + 4, strlen(msg + 4));
        if (m->dirfd >= 0 && m->listen_fd >= 0)
                unlinkat(m->dirfd, "monitor.sock", 0);
        if (m->dirfd >= 0 && m->pidfile_fd >= 0)
                unlinkat(m->dirfd, "monitor.pid", 0);
        status_report(m, msg); /* last: when the spawner hears of the failure, no trace of a live monitor is left */
        exit(1);
}

static bool abs_path_ok(const char *p) { return p && p[0] == '/' && strlen(p) < PATH_MAX && !strstr(p, "/../"); }

static bool id_ok(const char *id)
{
        size_t n = id ? strlen(id) : 0;
        if (n == 0 || n > 128 || id[0] == '.' || id[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                      (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_' || id[i] == '.'))
                        return false;
        return true;
}

static void parse_args(struct monitor *m, int argc, char **argv)
{
        enum { O_DIR = 256, O_ID, O_RUNTIME, O_ROOT, O_BUNDLE, O_PRIVNS, O_PATTERN, O_RING, O_STATUS, O_SECCOMP,
               O_CGROUP, O_RATE, O_BURST };
        static const struct option opts[] = {
                { "dir", required_argument, NULL, O_DIR },
                { "id", required_argument, NULL, O_ID },
                { "runtime", required_argument, NULL, O_RUNTIME },
                { "runtime-root", required_argument, NULL, O_ROOT },
                { "bundle", required_argument, NULL, O_BUNDLE },
                { "private-cgroup-ns", no_argument, NULL, O_PRIVNS },
                { "started-pattern", required_argument, NULL, O_PATTERN },
                { "ring-bytes", required_argument, NULL, O_RING },
                { "status-fd", required_argument, NULL, O_STATUS },
                { "seccomp", required_argument, NULL, O_SECCOMP },
                { "cgroup", required_argument, NULL, O_CGROUP },
                { "lines-per-sec", required_argument, NULL, O_RATE },
                { "lines-burst", required_argument, NULL, O_BURST },
                { 0 },
        };
        const char *bad = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                char *end = NULL;
                switch (c) {
                case O_DIR: m->dir = optarg; break;
                case O_ID: m->id = optarg; break;
                case O_RUNTIME: m->runtime = optarg; break;
                case O_ROOT: m->runtime_root = optarg; break;
                case O_BUNDLE: m->bundle = optarg; break;
                case O_PRIVNS: m->private_cgroup_ns = true; break;
                case O_PATTERN: m->started_pattern = optarg; break;
                case O_RING: {
                        unsigned long long v = strtoull(optarg, &end, 10);
                        if (!*optarg || *end || v < APP_RING_SEGMENT_MIN || v > APP_RING_SEGMENT_MAX)
                                bad = bad ? bad : "--ring-bytes";
                        else
                                m->ring_bytes = (size_t)v;
                        break;
                }
                case O_STATUS: {
                        long v = strtol(optarg, &end, 10);
                        if (!*optarg || *end || v < 3 || v > INT_MAX || fcntl((int)v, F_GETFD) < 0)
                                bad = bad ? bad : "--status-fd";
                        else
                                m->status_fd = (int)v;
                        break;
                }
                case O_SECCOMP:
                        if (streq(optarg, "log"))
                                m->seccomp_refused = SECCOMP_RET_LOG;
                        else if (!streq(optarg, "on"))
                                bad = bad ? bad : "--seccomp (on or log)";
                        break;
                case O_CGROUP:
                        if (m->n_cgroups == MON_CGROUPS_MAX || !abs_path_ok(optarg))
                                bad = bad ? bad : "--cgroup (at most 4 absolute paths)";
                        else
                                m->cgroups[m->n_cgroups++] = optarg;
                        break;
                case O_RATE:
                case O_BURST: {
                        unsigned long long v = strtoull(optarg, &end, 10);
                        unsigned long long max = c == O_RATE ? MON_LINES_PER_SEC_MAX : MON_LINES_BURST_MAX;
                        if (!*optarg || *end || *optarg == '-' || v > max)
                                bad = bad ? bad : c == O_RATE ? "--lines-per-sec" : "--lines-burst";
                        else if (c == O_RATE)
                                m->lines_per_sec = (uint32_t)v;
                        else
                                m->lines_burst = (uint32_t)v;
                        break;
                }
                default: bad = bad ? bad : "unknown option"; break;
                }
        }
        if (!bad && optind != argc)
                bad = "unexpected argument";
        if (!bad && !abs_path_ok(m->dir))
                bad = "--dir (an absolute path)";
        if (!bad && !id_ok(m->id))
                bad = "--id";
        if (!bad && !abs_path_ok(m->runtime))
                bad = "--runtime (an absolute path)";
        if (!bad && !abs_path_ok(m->runtime_root))
                bad = "--runtime-root (an absolute path)";
        if (!bad && !abs_path_ok(m->bundle))
                bad = "--bundle (an absolute path)";
        if (bad)
                fail(m, "usage: bad or missing %s", bad);
}

/* Leave the agent's session, become the reaper of the container, keep only the status fd. */
static void detach(struct monitor *m)
{
        setsid();
        if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
                fail(m, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
        umask(077);
        if (chdir("/") < 0)
                fail(m, "chdir /: %s", strerror(errno));
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                fail(m, "/dev/null: %s", strerror(errno));
        if (null > 2)
                close(null);
        if (m->status_fd >= 0) {
                if (m->status_fd > 3)
                        close_range(3, (unsigned)m->status_fd - 1, 0);
                close_range((unsigned)m->status_fd + 1, ~0u, 0);
                fcntl(m->status_fd, F_SETFD, FD_CLOEXEC);
        } else
                close_range(3, ~0u, 0);

        static const int ignored[] = { SIGPIPE, SIGHUP, SIGTERM, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2 };
        for (size_t i = 0; i < ARRAY_SIZE(ignored); i++)
                signal(ignored[i], SIG_IGN);
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        m->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
        if (m->sigfd < 0)
                fail(m, "signalfd: %s", strerror(errno));
}

/* monitor.pid, locked for the monitor's life: a second monitor for the same app refuses to start. */
static void take_pidfile(struct monitor *m)
{
        m->dirfd = open(m->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m->dirfd < 0)
                fail(m, "open %s: %s", m->dir, strerror(errno));
        int fd = openat(m->dirfd, "monitor.pid", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                fail(m, "open %s/monitor.pid: %s", m->dir, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                fail(m, "%s: another monitor runs for app %s", m->dir, m->id);
        m->pidfile_fd = fd;
        char text[32];
        int n = snprintf(text, sizeof(text), "%d\n", (int)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n)
                fail(m, "write %s/monitor.pid: %s", m->dir, strerror(errno));
        unlinkat(m->dirfd, "exit", 0);
        unlinkat(m->dirfd, "started", 0);
        unlinkat(m->dirfd, "container.pid", 0);
}

/* The last STATUS_ERR_MAX bytes crun wrote (its stderr is the container's stderr pipe). */
static void collect_stderr(struct monitor *m, char *buf, size_t len)
{
        static char tail[STATUS_ERR_MAX * 2];
        size_t have = 0;
        char chunk[1024];
        ssize_t n;
        while ((n = read(m->out[1].fd, chunk, sizeof(chunk))) > 0) {
                for (ssize_t i = 0; i < n; i++) {
                        if (have == sizeof(tail)) {
                                memmove(tail, tail + STATUS_ERR_MAX, STATUS_ERR_MAX);
                                have = STATUS_ERR_MAX;
                        }
                        tail[have++] = chunk[i];
                }
        }
        size_t start = have > STATUS_ERR_MAX ? have - STATUS_ERR_MAX : 0;
        while (have > start && (tail[have - 1] == '\n' || tail[have - 1] == ' '))
                have--;
        snprintf(buf, len, "%.*s", (int)(have - start), tail + start);
}

static void start_container(struct monitor *m)
{
        int in[2], out[2], err[2];
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
                fail(m, "pipe: %s", strerror(errno));
        m->stdin_fd = in[1];
        m->out[0] = (struct mon_stream){ .fd = out[0], .stream = APP_RING_STDOUT };
        m->out[1] = (struct mon_stream){ .fd = err[0], .stream = APP_RING_STDERR };
        fcntl(in[1], F_SETFL, O_NONBLOCK);
        fcntl(out[0], F_SETFL, O_NONBLOCK);
        fcntl(err[0], F_SETFL, O_NONBLOCK);

        char why[256];
        int r = mon_run_container(m, in[0], out[1], err[1], why, sizeof(why));
        close(in[0]);
        close(out[1]);
        close(err[1]);
        if (r < 0) {
                char crun_err[STATUS_ERR_MAX + 1];
                collect_stderr(m, crun_err, sizeof(crun_err));
                fail(m, "%s%s%s", why, crun_err[0] ? ": " : "", crun_err);
        }
        if (mon_join_cgroups(m, why, sizeof(why)) < 0) {
                if (mon_delete_container(m) < 0)
                        fail(m, "%s; crun delete %s failed too", why, m->id);
                fail(m, "%s", why);
        }
        mon_find_memory_cgroup(m);
        if (mon_epoll_mod(m, EPOLL_CTL_ADD, m->out[0].fd, EPOLLIN, MON_TAG(MON_TAG_OUT, 0)) < 0 ||
            mon_epoll_mod(m, EPOLL_CTL_ADD, m->out[1].fd, EPOLLIN, MON_TAG(MON_TAG_OUT, 1)) < 0 ||
            mon_epoll_mod(m, EPOLL_CTL_ADD, m->stdin_fd, 0, MON_TAG(MON_TAG_STDIN, 0)) < 0)
                fail(m, "epoll_ctl: %s", strerror(errno)); /* not seen in practice: the agent stops the orphan */
}

static void setup_loop(struct monitor *m)
{
        m->epfd = epoll_create1(EPOLL_CLOEXEC);
        m->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (m->epfd < 0 || m->timerfd < 0)
                fail(m, "epoll: %s", strerror(errno));
        if (mon_epoll_mod(m, EPOLL_CTL_ADD, m->sigfd, EPOLLIN, MON_TAG(MON_TAG_SIGNAL, 0)) < 0 ||
            mon_epoll_mod(m, EPOLL_CTL_ADD, m->timerfd, EPOLLIN, MON_TAG(MON_TAG_TIMER, 0)) < 0)
                fail(m, "epoll_ctl: %s", strerror(errno));
}

/* Reap every child; the container's init ending ends the loop. */
static void reap(struct monitor *m)
{
        struct signalfd_siginfo si;
        while (read(m->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                if (pid != m->container_pid)
                        continue;
                m->exited = true;
                if (WIFSIGNALED(status)) {
                        m->exit_signal = WTERMSIG(status);
                        m->exit_code = 128 + m->exit_signal;
                } else
                        m->exit_code = WEXITSTATUS(status);
        }
}

static void loop(struct monitor *m)
{
        reap(m); /* the container may have ended before the loop started */
        while (!m->exited) {
                struct epoll_event evs[16];
                int n = epoll_wait(m->epfd, evs, (int)ARRAY_SIZE(evs), -1);
                if (n < 0 && errno != EINTR)
                        fail(m, "epoll_wait: %s", strerror(errno));
                for (int i = 0; i < n; i++) {
                        uint32_t kind = (uint32_t)(evs[i].data.u64 >> 32), index = (uint32_t)evs[i].data.u64;
                        switch (kind) {
                        case MON_TAG_OUT: mon_output_readable(m, (int)index); break;
                        case MON_TAG_STDIN: mon_stdin_event(m, evs[i].events); break;
                        case MON_TAG_SIGNAL: reap(m); break;
                        case MON_TAG_TIMER: mon_output_flush_partial(m); break;
                        case MON_TAG_LISTEN: mon_accept(m); break;
                        case MON_TAG_CLIENT: mon_client_event(m, (int)index, evs[i].events); break;
                        default: break;
                        }
                }
                if (app_ring_next_seq(m->ring) != m->notified_seq) {
                        m->notified_seq = app_ring_next_seq(m->ring);
                        mon_notify(m, MON_PEND_OUTPUT);
                }
        }
}

/* The container ended: its last output, the exit record, a system line, crun delete, the clients told. */
static void finish(struct monitor *m)
{
        mon_output_drain(m);
        bool oom = m->exit_signal == SIGKILL && mon_oom_killed(m);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char text[160];
        snprintf(text, sizeof(text), "code=%d signal=%d oom=%d at_ms=%lld\n", m->exit_code, m->exit_signal, oom,
                 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        mon_write_file(m->dirfd, "exit", text);
        int n;
        if (m->exit_signal)
                n = snprintf(text, sizeof(text), "killed by signal %d (%s)%s", m->exit_signal,
                             sigabbrev_np(m->exit_signal) ? sigabbrev_np(m->exit_signal) : "?",
                             oom ? ": out of memory" : "");
        else
                n = snprintf(text, sizeof(text), "exited with code %d", m->exit_code);
        mon_system_line(m, text, (size_t)n);
        if (mon_delete_container(m) < 0) {
                n = snprintf(text, sizeof(text), "crun delete %s failed", m->id);
                mon_system_line(m, text, (size_t)n);
        }
        unlinkat(m->dirfd, "container.pid", 0);
        m->notified_seq = app_ring_next_seq(m->ring);
        mon_notify(m, MON_PEND_OUTPUT | MON_PEND_EXIT);
        mon_clients_close(m);
        unlinkat(m->dirfd, "monitor.pid", 0);
        closep(&m->pidfile_fd);
}

int main(int argc, char **argv)
{
        struct monitor *m = &mon;
        m->status_fd = m->dirfd = m->pidfile_fd = m->epfd = m->sigfd = m->timerfd = m->listen_fd = -1;
        m->stdin_fd = m->out[0].fd = m->out[1].fd = m->delete_fd = -1;
        m->seccomp_refused = mon_seccomp_refused_default();
        m->lines_per_sec = MON_LINES_PER_SEC_DEFAULT;
        for (int i = 0; i < MON_CLIENTS_MAX; i++)
                m->clients[i].fd = -1;
        parse_args(m, argc, argv);
        detach(m);
        int r = mon_delete_helper_start(m);
        if (r < 0)
                fail(m, "fork the delete helper: %s", strerror(-r));
        take_pidfile(m);
        if (m->started_pattern) {
                r = regcomp(&m->started_re, m->started_pattern, REG_EXTENDED | REG_NOSUB);
                if (r != 0) {
                        char why[128];
                        regerror(r, &m->started_re, why, sizeof(why));
                        fail(m, "--started-pattern: %s", why);
                }
                m->have_re = true;
        }
        m->stdin_buf = malloc(MON_STDIN_BUF);
        if (!m->stdin_buf)
                fail(m, "out of memory");
        struct na_error err = NA_ERROR_INIT;
        if (app_ring_open(m->dir, m->ring_bytes, &m->ring, &err) < 0)
                fail(m, "%s", err.message);
        m->notified_seq = app_ring_next_seq(m->ring);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        mon_rate_init(&m->rate, m->lines_per_sec, m->lines_burst ? m->lines_burst : m->lines_per_sec * 10u,
                      (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);

        setup_loop(m);
        char why[256];
        if (mon_listen(m, why, sizeof(why)) < 0)
                fail(m, "%s", why);
        start_container(m);
        /* Everything the monitor starts itself is started: from here on only its loop runs. */
        if (mon_seccomp_apply(m->delete_pid, m->seccomp_refused, why, sizeof(why)) < 0) {
                if (mon_delete_container(m) < 0)
                        fail(m, "%s; crun delete %s failed too", why, m->id);
                fail(m, "%s", why);
        }
        char ok[32];
        snprintf(ok, sizeof(ok), "ok %d", (int)m->container_pid);
        status_report(m, ok);

        loop(m);
        finish(m);
        app_ring_close(m->ring);
        if (m->have_re)
                regfree(&m->started_re);
        free(m->stdin_buf);
        return 0;
}
