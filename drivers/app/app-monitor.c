/* The agent's side of nodeagent-monitor: spawn (double fork, status pipe), client connections, state files. */
#include "drivers/app/app-monitor.h"

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
#define REQUEST_TIMEOUT_MS 2000
#define LINE_MAX_BYTES 4096
#define SYSTEM_MAX_BYTES 8192 /* APP_RING_TEXT_MAX: the monitor takes a system line up to one ring record */
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

static int sock_addr(const char *dir, struct sockaddr_un *sa, struct na_error *err)
{
        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/monitor.sock", dir) >= sizeof(sa->sun_path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s/monitor.sock: path too long", dir);
        return 0;
}

static int connect_to(const char *dir, int flags, int *ret_fd, struct na_error *err)
{
        struct sockaddr_un sa;
        int r = sock_addr(dir, &sa, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | flags, 0);
        if (fd < 0)
                return na_error_sys(err, errno, "socket");
        if (RETRY_EINTR(connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0) {
                if (errno == ENOENT || errno == ECONNREFUSED)
                        return na_error_set(err, errno, NA_E_INVALID_STATE, "%s: no monitor runs (the app is not running)",
                                            dir);
                return na_error_sys(err, errno, "connect to %s", sa.sun_path);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int app_monitor_connect(const char *dir, int *ret_fd, struct na_error *err)
{
        return connect_to(dir, SOCK_NONBLOCK, ret_fd, err);
}

int app_monitor_send(int fd, char type, const char *text, size_t len, struct na_error *err)
{
        if (type != 'L' && type != 'S')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app monitor: unknown message type %c", type);
        if (len > (type == 'L' ? LINE_MAX_BYTES : SYSTEM_MAX_BYTES))
                return na_error_set(err, EMSGSIZE, NA_E_VALIDATION, "app monitor: message too long");
        char msg[1 + SYSTEM_MAX_BYTES];
        msg[0] = type;
        memcpy(msg + 1, text, len);
        ssize_t n = RETRY_EINTR(send(fd, msg, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT));
        if (n < 0 && errno == EAGAIN)
                return -EAGAIN;
        if (n != (ssize_t)(len + 1))
                return na_error_sys(err, n < 0 ? errno : EIO, "app monitor: send");
        return 0;
}

static int request(const char *dir, char type, const char *text, size_t len, struct na_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = connect_to(dir, 0, &fd, err);
        if (r < 0)
                return r;
        struct timeval tv = { .tv_sec = REQUEST_TIMEOUT_MS / 1000, .tv_usec = (REQUEST_TIMEOUT_MS % 1000) * 1000 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        r = app_monitor_send(fd, type, text, len, err);
        if (r == -EAGAIN)
                return na_error_set(err, EAGAIN, NA_E_INVALID_STATE, "%s: the monitor is not reading", dir);
        if (r < 0)
                return r;
        int64_t deadline = mono_ms() + REQUEST_TIMEOUT_MS;
        while (mono_ms() < deadline) {
                char buf[512];
                ssize_t n = RETRY_EINTR(recv(fd, buf, sizeof(buf), 0));
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0)
                        return na_error_set(err, EPIPE, NA_E_INVALID_STATE, "%s: the monitor went away (the app ended)",
                                            dir);
                struct app_monitor_msg msg;
                if (app_monitor_parse_message(buf, (size_t)n, &msg, err) < 0)
                        return -EBADMSG;
                if (msg.type == APP_MONITOR_MSG_ACK)
                        return 0;
                if (msg.type == APP_MONITOR_MSG_REFUSED)
                        return na_error_set(err, EAGAIN, NA_E_INVALID_STATE, "%s", msg.reason);
        }
        return na_error_set(err, ETIMEDOUT, NA_E_DRIVER, "%s: the monitor did not answer", dir);
}

int app_monitor_send_line(const char *dir, const char *line, struct na_error *err)
{
        size_t len = line ? strlen(line) : 0;
        if (!line || len > LINE_MAX_BYTES)
                return na_error_field(err, "line", "at most %d bytes", LINE_MAX_BYTES);
        if (memchr(line, '\n', len))
                return na_error_field(err, "line", "must not hold a newline");
        return request(dir, 'L', line, len, err);
}

int app_monitor_send_system(const char *dir, const char *text, struct na_error *err)
{
        return request(dir, 'S', text, strlen(text), err);
}

static bool parse_i64(const char *s, const char *end, int64_t *ret)
{
        char tmp[32];
        size_t n = (size_t)(end - s);
        if (n == 0 || n >= sizeof(tmp))
                return false;
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        char *e = NULL;
        errno = 0;
        long long v = strtoll(tmp, &e, 10);
        if (errno || *e)
                return false;
        *ret = v;
        return true;
}

int app_monitor_parse_message(const void *buf, size_t len, struct app_monitor_msg *ret, struct na_error *err)
{
        const char *p = buf, *end = p + len;
        *ret = (struct app_monitor_msg){ 0 };
        if (len == 0)
                goto bad;
        ret->type = (enum app_monitor_msg_type)p[0];
        int64_t a, b;
        switch (p[0]) {
        case 'O':
                if (!parse_i64(p + 1, end, &a) || a < 1)
                        goto bad;
                ret->next_seq = (uint64_t)a;
                return 0;
        case 'R':
        case 'K':
                return len == 1 ? 0 : na_error_set(err, EBADMSG, NA_E_DRIVER, "app monitor: bad message");
        case 'X': {
                const char *sp = memchr(p + 1, ' ', len - 1);
                if (!sp || !parse_i64(p + 1, sp, &a) || !parse_i64(sp + 1, end, &b) || a < 0 || a > 255 + 128 ||
                    b < 0 || b > 64)
                        goto bad;
                ret->exit_code = (int)a;
                ret->exit_signal = (int)b;
                return 0;
        }
        case 'E':
                snprintf(ret->reason, sizeof(ret->reason), "%.*s", (int)(len - 1), p + 1);
                sanitize(ret->reason);
                return 0;
        default:
                break;
        }
bad:
        return na_error_set(err, EBADMSG, NA_E_DRIVER, "app monitor: bad message");
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
