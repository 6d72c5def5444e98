/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-monitor end to end, with the real crun and a busybox bundle built here:
 * output into the ring (stdout, stderr, a prompt without newline), the started
 * pattern, a console line echoed back, system lines, the exit code recorded, the
 * monitor surviving its spawner's SIGKILL (and a SIGTERM), a failed start reported
 * with crun's message, no zombie and no crun state left. Needs root, /usr/bin/crun
 * (else 77) and /bin/busybox (busybox-static, from scripts/deps.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>

#include "common/fileio.h"
#include "common/spawn.h"
#include "common/unit.h"
#include "drivers/app/oci/app-monitor.h"
#include "ring/monitor-msg.h"
#include "ring/app-ring.h"

#define CRUN "/usr/bin/crun"
#define BUSYBOX "/bin/busybox"
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

struct fixture {
        char *tmp;        /* everything of this test lives below it */
        char *crun_root;
        char *rootfs;     /* shared by every bundle */
        bool private_ns;
        int serial;
};

static struct fixture fx;

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The hybrid host of MACHINE-NOTES: cgroup2 at /sys/fs/cgroup/unified, v1 (tmpfs) at /sys/fs/cgroup. */
static bool needs_private_cgroup_ns(void)
{
        struct statfs u, top;
        return statfs("/sys/fs/cgroup/unified", &u) == 0 && u.f_type == CGROUP2_SUPER_MAGIC &&
               statfs("/sys/fs/cgroup", &top) == 0 && top.f_type != CGROUP2_SUPER_MAGIC;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
        size_t len = 0;
        char *data = unit_slurp(from, &len);
        assert_non_null(data);
        free(unit_write(NULL, to, data, len, mode));
        free(data);
}

static char *path_join(const char *a, const char *b)
{
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", a, b) > 0);
        return p;
}

static int group_setup(void **state)
{
        fx.tmp = unit_tmpdir("app-monitor");
        fx.crun_root = path_join(fx.tmp, "crun-root");
        fx.rootfs = path_join(fx.tmp, "rootfs");
        fx.private_ns = needs_private_cgroup_ns();
        char *bin = path_join(fx.rootfs, "bin");
        assert_int_equal(mkdir(fx.crun_root, 0700), 0);
        assert_int_equal(mkdir(fx.rootfs, 0755), 0);
        assert_int_equal(mkdir(bin, 0755), 0);
        char *bb = path_join(bin, "busybox");
        copy_file(BUSYBOX, bb, 0755);
        const char *links[] = { "sh", "echo", "cat", "sleep", "printf", "head", "tr", "grep" };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
                char *l = path_join(bin, links[i]);
                assert_int_equal(symlink("busybox", l), 0);
                free(l);
        }
        free(bb);
        free(bin);
        return 0;
}

static int group_teardown(void **state)
{
        unit_rmrf_free(fx.tmp);
        free(fx.crun_root);
        free(fx.rootfs);
        return 0;
}

struct app {
        char id[64];
        char *dir;    /* the app directory (ring, socket, state files) */
        char *bundle; /* config.json from `crun spec`, rootfs a symlink to the shared one */
};

/* A bundle whose process is `sh -c script`. */
static void app_init(struct app *a, const char *name, const char *script)
{
        snprintf(a->id, sizeof(a->id), "na-test-%d-%d-%s", (int)getpid(), fx.serial++, name);
        a->dir = path_join(fx.tmp, a->id);
        a->bundle = path_join(a->dir, "bundle");
        assert_int_equal(mkdir(a->dir, 0700), 0);
        assert_int_equal(mkdir(a->bundle, 0700), 0);
        char *rootfs = path_join(a->bundle, "rootfs");
        assert_int_equal(symlink(fx.rootfs, rootfs), 0);
        free(rootfs);

        const char *argv[] = { CRUN, "spec", "--bundle", a->bundle, NULL };
        struct na_error err = NA_ERROR_INIT;
        if (na_spawn((char *const *)argv, NULL, NULL, 0, &err) < 0)
                fail_msg("crun spec: %s", err.message);
        char *config = path_join(a->bundle, "config.json");
        json_t *cfg = na_json_load(config, 1 << 20);
        assert_non_null(cfg);
        json_t *proc = json_object_get(cfg, "process");
        assert_non_null(proc);
        json_object_set_new(proc, "terminal", json_false());
        json_object_set_new(proc, "args", json_pack("[sss]", "/bin/sh", "-c", script));
        assert_int_equal(json_dump_file(cfg, config, JSON_INDENT(2)), 0);
        json_decref(cfg);
        free(config);
}

static bool crun_knows(const char *id)
{
        const char *argv[] = { CRUN, "--root", fx.crun_root, "state", id, NULL };
        struct na_error err = NA_ERROR_INIT;
        int r = na_spawn((char *const *)argv, NULL, NULL, 0, &err);
        na_error_clear(&err);
        return r == 0;
}

static void app_cleanup(struct app *a)
{
        if (crun_knows(a->id)) {
                const char *argv[] = { CRUN, "--root", fx.crun_root, "delete", "--force", a->id, NULL };
                struct na_error err = NA_ERROR_INIT;
                na_spawn((char *const *)argv, NULL, NULL, 0, &err);
                na_error_clear(&err);
        }
        free(a->dir);
        free(a->bundle);
}

static struct app_monitor_spec app_spec(const struct app *a, const char *pattern)
{
        return (struct app_monitor_spec){
                .monitor_path = NA_MONITOR_PATH,
                .dir = a->dir,
                .id = a->id,
                .runtime = CRUN,
                .runtime_root = fx.crun_root,
                .bundle = a->bundle,
                .private_cgroup_ns = fx.private_ns,
                .started_pattern = pattern,
                .timeout_ms = 30000,
        };
}

/* ---- reading the ring ---- */

struct find {
        const char *text;
        int stream;
        uint64_t seq;
        size_t lines;
        bool empty_line;
};

static int find_line(const struct app_ring_line *line, void *userdata)
{
        struct find *f = userdata;
        f->lines++;
        if (line->len == 0)
                f->empty_line = true;
        if (!f->seq && streq(line->text, f->text)) {
                f->seq = line->seq;
                f->stream = (int)line->stream;
        }
        return 0;
}

static struct find ring_find(const char *dir, const char *text)
{
        struct find f = { .text = text };
        struct na_error err = NA_ERROR_INIT;
        if (app_ring_read(dir, 0, 10000, 0, find_line, &f, NULL, &err) < 0)
                fail_msg("ring: %s", err.message);
        return f;
}

static struct find wait_line(const char *dir, const char *text, int timeout_ms)
{
        int64_t end = now_ms() + timeout_ms;
        for (;;) {
                struct find f = ring_find(dir, text);
                if (f.seq || now_ms() > end)
                        return f;
                usleep(20000);
        }
}

/* ---- the connection ---- */

struct seen {
        bool started, exited;
        uint64_t next_seq;
        int code, sig;
};

/* Read messages until pred holds or timeout_ms passes; false when the monitor hung up first. */
static bool pump(int fd, struct seen *s, bool (*pred)(const struct seen *), int timeout_ms)
{
        int64_t end = now_ms() + timeout_ms;
        while (!pred(s)) {
                int64_t left = end - now_ms();
                if (left <= 0)
                        return false;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, (int)left) <= 0)
                        continue;
                char buf[512];
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && errno == EAGAIN)
                        continue;
                if (n <= 0)
                        return pred(s);
                struct app_monitor_msg msg;
                struct na_error err = NA_ERROR_INIT;
                if (app_monitor_parse_message(buf, (size_t)n, &msg, &err) < 0)
                        fail_msg("bad message from the monitor: %.*s", (int)n, buf);
                if (msg.type == APP_MONITOR_MSG_OUTPUT) {
                        assert_true(msg.next_seq >= s->next_seq); /* never goes back */
                        s->next_seq = msg.next_seq;
                } else if (msg.type == APP_MONITOR_MSG_STARTED)
                        s->started = true;
                else if (msg.type == APP_MONITOR_MSG_EXIT) {
                        s->exited = true;
                        s->code = msg.exit_code;
                        s->sig = msg.exit_signal;
                }
        }
        return true;
}

static bool is_started(const struct seen *s) { return s->started; }
static bool is_exited(const struct seen *s) { return s->exited; }

static bool wait_monitor_gone(const char *dir, pid_t mpid, int timeout_ms)
{
        int64_t end = now_ms() + timeout_ms;
        while (now_ms() < end) {
                if (!app_monitor_alive(dir, NULL))
                        return true;
                usleep(20000);
        }
        (void)mpid;
        return false;
}

/* A reaped process has no /proc entry; a zombie still has one, in state Z. */
static bool process_gone_or_reaped(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        char *stat = unit_slurp(path, NULL);
        if (!stat)
                return true;
        const char *rp = strrchr(stat, ')');
        bool zombie = rp && rp[1] == ' ' && rp[2] == 'Z';
        free(stat);
        return !zombie;
}

static void report_rss(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        char *status = unit_slurp(path, NULL);
        assert_non_null(status);
        long rss = -1, anon = -1, file = -1;
        for (char *l = status; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                sscanf(l, "VmRSS: %ld", &rss);
                sscanf(l, "RssAnon: %ld", &anon);
                sscanf(l, "RssFile: %ld", &file);
        }
        print_message("nodeagent-monitor pid %d: VmRSS %ld kB (RssAnon %ld kB, RssFile %ld kB)\n", (int)pid, rss, anon,
                      file);
        free(status);
        assert_true(rss > 0);
#ifdef NA_MONITOR_RSS_MAX_KB
        assert_true(rss <= NA_MONITOR_RSS_MAX_KB);
#endif
}

static long status_field(pid_t pid, const char *field)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        char *status = unit_slurp(path, NULL);
        assert_non_null(status);
        const char *p = strstr(status, field);
        long v = p ? strtol(p + strlen(field), NULL, 10) : -1;
        free(status);
        return v;
}

/* The monitor runs under its own filter (monitor-seccomp.h); the container, started
 * before it, does not: it forks and execs (calls the monitor's list lacks) and sees no
 * filter. The delete helper, forked before the filter too, is unfiltered. */
static void check_seccomp(const char *dir, pid_t mpid, pid_t cpid)
{
        assert_int_equal(status_field(mpid, "\nSeccomp:"), 2);
        assert_int_equal(status_field(mpid, "\nSeccomp_filters:"), 1);
        assert_int_equal(status_field(mpid, "\nNoNewPrivs:"), 1);
        assert_int_equal(status_field(cpid, "\nSeccomp:"), 0);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_monitor_send_line(dir, "seccomp", &err), 0);
        struct find f = wait_line(dir, "Seccomp:\t0", 5000);
        assert_true(f.seq > 0);
        assert_int_equal(f.stream, APP_RING_STDOUT);
        f = wait_line(dir, "got seccomp", 5000);
        assert_true(f.seq > 0);

        char path[96];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)mpid, (int)mpid);
        char *children = unit_slurp(path, NULL);
        assert_non_null(children);
        bool helper = false;
        for (char *save = NULL, *t = strtok_r(children, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
                pid_t pid = (pid_t)atoi(t);
                snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
                char *comm = unit_slurp(path, NULL);
                if (comm && strncmp(comm, "na-monitor-del", 14) == 0) {
                        helper = true;
                        assert_int_equal(status_field(pid, "\nSeccomp:"), 0);
                        print_message("delete helper pid %d: VmRSS %ld kB (RssAnon %ld kB)\n", (int)pid,
                                      status_field(pid, "\nVmRSS:"), status_field(pid, "\nRssAnon:"));
                }
                free(comm);
        }
        free(children);
        assert_true(helper);
}

static void test_output_console_exit(void **state)
{
        char twin_id[96];
        struct app a;
        app_init(&a, "console",
                 "echo hello; echo oops >&2; printf 'prompt> '; sleep 0.4; echo; echo 'server ready'; "
                 "while read l; do [ \"$l\" = quit ] && exit 7; [ \"$l\" = seccomp ] && grep Seccomp: /proc/self/status; "
                 "echo \"got $l\"; done; exit 1");
        struct app_monitor_spec spec = app_spec(&a, "ready$");
        struct na_error err = NA_ERROR_INIT;
        pid_t mpid = 0, cpid = 0;
        if (app_monitor_spawn(&spec, &mpid, &cpid, &err) < 0)
                fail_msg("spawn: %s", err.message);
        assert_true(mpid > 1 && cpid > 1);
        pid_t alive_pid = 0;
        assert_true(app_monitor_alive(a.dir, &alive_pid));
        assert_int_equal(alive_pid, mpid);

        int fd = -1;
        assert_int_equal(app_monitor_connect(a.dir, &fd, &err), 0);
        struct seen seen = { 0 };

        /* One monitor per app directory: a second one refuses and leaves the first alone. */
        struct app_monitor_spec twin = spec;
        snprintf(twin_id, sizeof(twin_id), "%s-twin", a.id);
        twin.id = twin_id;
        assert_true(app_monitor_spawn(&twin, NULL, NULL, &err) < 0);
        assert_non_null(strstr(err.message, "another monitor runs"));
        na_error_clear(&err);
        assert_true(app_monitor_alive(a.dir, &alive_pid));
        assert_int_equal(alive_pid, mpid);
        assert_false(crun_knows(twin_id));

        struct find f = wait_line(a.dir, "server ready", 5000);
        assert_true(f.seq > 0);
        assert_int_equal(f.stream, APP_RING_STDOUT);
        f = ring_find(a.dir, "hello");
        assert_int_equal(f.stream, APP_RING_STDOUT);
        f = ring_find(a.dir, "oops");
        assert_int_equal(f.stream, APP_RING_STDERR);
        f = ring_find(a.dir, "prompt> "); /* flushed after 100 ms without its newline */
        assert_true(f.seq > 0);
        assert_false(f.empty_line);       /* and the newline that came later made no empty line */
        assert_true(pump(fd, &seen, is_started, 3000));
        assert_true(app_monitor_started(a.dir));

        report_rss(mpid);
        check_seccomp(a.dir, mpid, cpid);

        assert_int_equal(app_monitor_send_line(a.dir, "world", &err), 0);
        f = wait_line(a.dir, "got world", 5000);
        assert_int_equal(f.stream, APP_RING_STDOUT);
        assert_int_equal(app_monitor_send_line(a.dir, "two\nlines", &err), -EINVAL);
        assert_string_equal(err.code, NA_E_VALIDATION);
        na_error_clear(&err);
        assert_int_equal(app_monitor_send_system(a.dir, "stopping: sent 'quit'", &err), 0);
        f = ring_find(a.dir, "stopping: sent 'quit'");
        assert_int_equal(f.stream, APP_RING_SYSTEM);

        /* SIGTERM does not stop the monitor. */
        assert_int_equal(kill(mpid, SIGTERM), 0);
        usleep(100000);
        assert_true(app_monitor_alive(a.dir, NULL));

        assert_int_equal(app_monitor_send_line(a.dir, "quit", &err), 0);
        assert_true(pump(fd, &seen, is_exited, 10000));
        assert_int_equal(seen.code, 7);
        assert_int_equal(seen.sig, 0);
        assert_true(seen.next_seq > f.seq);
        close(fd);

        struct app_exit ex;
        assert_int_equal(app_monitor_read_exit(a.dir, &ex, &err), 0);
        assert_int_equal(ex.code, 7);
        assert_int_equal(ex.signal, 0);
        assert_false(ex.oom);
        assert_true(ex.at_ms > 0);
        f = ring_find(a.dir, "exited with code 7");
        assert_int_equal(f.stream, APP_RING_SYSTEM);

        assert_true(wait_monitor_gone(a.dir, mpid, 5000));
        assert_true(process_gone_or_reaped(cpid));
        assert_false(crun_knows(a.id));
        char *sock = path_join(a.dir, "monitor.sock");
        assert_int_equal(access(sock, F_OK), -1);
        free(sock);
        assert_int_equal(app_monitor_send_line(a.dir, "anyone?", &err), -ENOENT);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        app_cleanup(&a);
}

static void test_start_failure(void **state)
{
        struct app a;
        app_init(&a, "fail", "exit 0");
        /* A process that does not exist in the rootfs: crun run fails. */
        char *config = path_join(a.bundle, "config.json");
        json_t *cfg = na_json_load(config, 1 << 20);
        json_object_set_new(json_object_get(cfg, "process"), "args", json_pack("[s]", "/bin/no-such-program"));
        assert_int_equal(json_dump_file(cfg, config, 0), 0);
        json_decref(cfg);
        free(config);

        struct app_monitor_spec spec = app_spec(&a, NULL);
        struct na_error err = NA_ERROR_INIT;
        assert_true(app_monitor_spawn(&spec, NULL, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, a.id));
        assert_non_null(strstr(err.message, "no-such-program"));
        json_t *reason = json_object_get(err.details, "reason");
        assert_true(json_is_string(reason));
        assert_non_null(strstr(json_string_value(reason), "no-such-program"));
        na_error_clear(&err);

        assert_false(app_monitor_alive(a.dir, NULL));
        assert_false(crun_knows(a.id));
        struct find f = ring_find(a.dir, "");
        assert_true(f.lines >= 1); /* the failure is a system line in the ring too */

        /* No monitor binary. */
        spec.monitor_path = "/nonexistent/nodeagent-monitor";
        assert_true(app_monitor_spawn(&spec, NULL, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "/nonexistent/nodeagent-monitor ended without a word"));
        na_error_clear(&err);
        spec.monitor_path = NA_MONITOR_PATH;

        /* A bad pattern is refused before anything runs. */
        spec.started_pattern = "(unclosed";
        assert_true(app_monitor_spawn(&spec, NULL, NULL, &err) < 0);
        assert_non_null(strstr(err.message, "--started-pattern"));
        na_error_clear(&err);
        app_cleanup(&a);
}

/* The spawner is killed with SIGKILL right after the start: the app keeps running and its end is recorded. */
static void test_survives_spawner_kill(void **state)
{
        struct app a;
        app_init(&a, "orphan",
                 "i=0; while [ $i -lt 20 ]; do echo tick $i; i=$((i+1)); sleep 0.1; done; exit 3");
        struct app_monitor_spec spec = app_spec(&a, NULL);
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                struct na_error err = NA_ERROR_INIT;
                pid_t pids[2] = { 0, 0 };
                if (app_monitor_spawn(&spec, &pids[0], &pids[1], &err) < 0)
                        _exit(1);
                if (write(p[1], pids, sizeof(pids)) != (ssize_t)sizeof(pids))
                        _exit(1);
                pause();
                _exit(0);
        }
        close(p[1]);
        pid_t pids[2];
        assert_int_equal(read(p[0], pids, sizeof(pids)), (ssize_t)sizeof(pids));
        close(p[0]);
        assert_int_equal(kill(child, SIGKILL), 0);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));

        pid_t alive = 0;
        assert_true(app_monitor_alive(a.dir, &alive));
        assert_int_equal(alive, pids[0]);
        /* The agent comes back and re-attaches. */
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        assert_int_equal(app_monitor_connect(a.dir, &fd, &err), 0);
        struct seen seen = { 0 };
        assert_true(pump(fd, &seen, is_exited, 15000));
        assert_int_equal(seen.code, 3);
        close(fd);

        for (int i = 0; i < 20; i++) {
                char text[16];
                snprintf(text, sizeof(text), "tick %d", i);
                struct find f = ring_find(a.dir, text);
                assert_true(f.seq > 0);
        }
        struct app_exit ex;
        assert_int_equal(app_monitor_read_exit(a.dir, &ex, &err), 0);
        assert_int_equal(ex.code, 3);
        assert_true(wait_monitor_gone(a.dir, pids[0], 5000));
        assert_true(process_gone_or_reaped(pids[1]));
        assert_false(crun_knows(a.id));
        app_cleanup(&a);
}

/* Console lines are refused, not lost silently, when stdin's buffer is full or the app closed its stdin. */
static void test_stdin_refusals(void **state)
{
        struct app a;
        app_init(&a, "stdin", "echo up; sleep 2; exec 0<&-; echo closed; sleep 30");
        struct app_monitor_spec spec = app_spec(&a, NULL);
        struct na_error err = NA_ERROR_INIT;
        pid_t mpid = 0;
        if (app_monitor_spawn(&spec, &mpid, NULL, &err) < 0)
                fail_msg("spawn: %s", err.message);
        char line[4097];
        memset(line, 'x', 4096);
        line[4096] = '\0';
        int accepted = 0;
        for (; accepted < 100; accepted++)
                if (app_monitor_send_line(a.dir, line, &err) < 0)
                        break;
        /* The pipe (64 KiB) and the monitor's buffer (64 KiB) take about 31 lines of 4 KiB. */
        assert_true(accepted >= 20 && accepted <= 40);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        assert_non_null(strstr(err.message, "full"));
        na_error_clear(&err);

        assert_true(wait_line(a.dir, "closed", 10000).seq > 0);
        int64_t end = now_ms() + 3000;
        int r;
        while ((r = app_monitor_send_line(a.dir, "hello?", &err)) == 0 && now_ms() < end) {
                usleep(50000); /* the first write after the close may still find the pipe */
        }
        assert_int_equal(r, -EAGAIN);
        assert_non_null(strstr(err.message, "stdin is closed"));
        na_error_clear(&err);

        const char *argv[] = { CRUN, "--root", fx.crun_root, "kill", a.id, "KILL", NULL };
        if (na_spawn((char *const *)argv, NULL, NULL, 0, &err) < 0)
                fail_msg("crun kill: %s", err.message);
        assert_true(wait_monitor_gone(a.dir, mpid, 10000));
        struct app_exit ex;
        assert_int_equal(app_monitor_read_exit(a.dir, &ex, &err), 0);
        assert_int_equal(ex.signal, 9);
        assert_int_equal(ex.code, 137);
        assert_int_equal(ring_find(a.dir, "killed by signal 9 (KILL)").stream, APP_RING_SYSTEM);
        assert_false(crun_knows(a.id));
        app_cleanup(&a);
}

/* An app over its memory limit is killed by the kernel: the exit record and the system line say so. */
static void test_oom_recorded(void **state)
{
        struct app a;
        app_init(&a, "oom", "echo start; x=$(head -c 100000000 /dev/zero | tr '\\0' x); echo survived ${#x}");
        char *config = path_join(a.bundle, "config.json");
        json_t *cfg = na_json_load(config, 1 << 20);
        json_t *linux_ = json_object_get(cfg, "linux");
        assert_non_null(linux_);
        json_object_set_new(linux_, "resources", json_pack("{s:{s:I}}", "memory", "limit", (json_int_t)16 << 20));
        assert_int_equal(json_dump_file(cfg, config, 0), 0);
        json_decref(cfg);
        free(config);

        struct app_monitor_spec spec = app_spec(&a, NULL);
        struct na_error err = NA_ERROR_INIT;
        pid_t mpid = 0;
        if (app_monitor_spawn(&spec, &mpid, NULL, &err) < 0)
                fail_msg("spawn: %s", err.message);
        assert_true(wait_monitor_gone(a.dir, mpid, 30000));
        struct app_exit ex;
        assert_int_equal(app_monitor_read_exit(a.dir, &ex, &err), 0);
        assert_int_equal(ex.signal, 9);
        assert_true(ex.oom);
        assert_int_equal(ring_find(a.dir, "killed by signal 9 (KILL): out of memory").stream, APP_RING_SYSTEM);
        assert_int_equal(ring_find(a.dir, "survived 100000000").seq, 0);
        assert_false(crun_knows(a.id));
        app_cleanup(&a);
}

/* A second run of the same app: its seq continues after the first run's, and last run's files are gone. */
static void test_second_run_continues(void **state)
{
        struct app a;
        app_init(&a, "rerun", "echo run; exit 5");
        struct app_monitor_spec spec = app_spec(&a, "run");
        struct na_error err = NA_ERROR_INIT;
        uint64_t first_seq = 0;
        for (int run = 0; run < 2; run++) {
                pid_t mpid = 0;
                if (app_monitor_spawn(&spec, &mpid, NULL, &err) < 0)
                        fail_msg("spawn: %s", err.message);
                assert_true(wait_monitor_gone(a.dir, mpid, 10000));
                struct app_exit ex;
                assert_int_equal(app_monitor_read_exit(a.dir, &ex, &err), 0);
                assert_int_equal(ex.code, 5);
                assert_true(app_monitor_started(a.dir));
                uint64_t next = 0;
                struct find f = { .text = "" };
                assert_int_equal(app_ring_read(a.dir, 0, 100, 0, find_line, &f, &next, &err), 0);
                assert_int_equal(f.lines, (size_t)(run + 1) * 2); /* "run" and "exited with code 5" per run */
                if (run == 0)
                        first_seq = next;
                else
                        assert_int_equal(next, first_seq + 2);
                assert_false(crun_knows(a.id));
        }
        app_cleanup(&a);
}

int main(void)
{
        if (geteuid() != 0 || access(CRUN, X_OK) != 0) {
                fprintf(stderr, "skipped: needs root and %s\n", CRUN);
                return 77;
        }
        if (access(BUSYBOX, X_OK) != 0) {
                fprintf(stderr, "%s is missing: install busybox-static (scripts/deps.sh)\n", BUSYBOX);
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_output_console_exit),
                cmocka_unit_test(test_start_failure),
                cmocka_unit_test(test_survives_spawner_kill),
                cmocka_unit_test(test_second_run_continues),
                cmocka_unit_test(test_stdin_refusals),
                cmocka_unit_test(test_oom_recorded),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
