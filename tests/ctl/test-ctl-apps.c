/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The real nodeagentctl (from the build tree, $NA_BUILD_DIR/ctl/nodeagentctl)
 * against a real control socket served by this test with a fake app driver table
 * (tests/agent/control/fake-app.h): the apps table and --json, logs with -n and --since
 * (paging past the agent's 1000 lines per answer), APP_NOT_FOUND and apps off (exit
 * 1), argument checks (exit 2), an unreachable agent (exit 3), and logs -f: lines
 * that arrive after it started are printed, SIGINT ends it with 0, and an agent that
 * goes away ends it with 3. The loop runs on the test's main thread; the CLI runs as
 * a child of a session thread, which reads its output and hands findings back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/control/control.h"
#include "agent/base/log.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/unit.h"
#include "agent/control/fake-app.h"


#define WATCHDOG_MS 60000
#define APP_A "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define APP_B "0b3e1d7a-21f4-4c55-9c3e-7a1f0e2d4c6b"
#define APP_C "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
#define APP_NONE "11111111-2222-4333-8444-555555555555"

struct fixture {
        char *dir, *sock, *ctl;
        struct loop *loop;
        struct jobs *jobs;
        struct agent_services services;
        struct control *control;
        struct loop_timer *watchdog;
};

static json_t *status_cb(void *userdata)
{
        (void)userdata;
        return json_object();
}

static const struct agent_services *services_cb(void *userdata)
{
        struct fixture *f = userdata;
        return &f->services;
}

static const struct control_ops ops = { .status = status_cb, .services = services_cb };

static void watchdog_fired(void *userdata)
{
        struct fixture *f = userdata;
        loop_quit(f->loop, -99);
}

static int setup(void **state)
{
        log_set_level(LOG_LEVEL_ERROR);
        const char *build = getenv("NA_BUILD_DIR");
        struct fixture *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("ctl-apps");
        if (asprintf(&f->sock, "%s/control.sock", f->dir) < 0 ||
            asprintf(&f->ctl, "%s/ctl/nodeagentctl", build ? build : ".") < 0)
                abort();
        if (access(f->ctl, X_OK) < 0) {
                fprintf(stderr, "%s: %s (set NA_BUILD_DIR; ctest does)\n", f->ctl, strerror(errno));
                return -1;
        }
        struct na_error err = NA_ERROR_INIT;
        if (loop_new(&f->loop, &err) < 0)
                return -1;
        f->services.state_dir = f->dir;
        if (jobs_new(f->loop, &f->services, 2, &f->jobs, &err) < 0 ||
            control_open(f->loop, f->jobs, f->sock, &ops, f, &f->control, &err) < 0) {
                fprintf(stderr, "setup: %s\n", err.message);
                na_error_clear(&err);
                return -1;
        }
        f->watchdog = loop_timer_new(f->loop, watchdog_fired, f);
        loop_timer_arm_ms(f->watchdog, WATCHDOG_MS);

        struct app_conn *c = fake_app_new();
        fake_app_add(c, APP_A, "minecraft", PROTO_APP_RUNNING);
        fake_app_add(c, APP_B, NULL, PROTO_APP_STOPPED);
        fake_app_add(c, APP_C, "bot", PROTO_APP_CRASHED);
        fake_app_fail_status(c, APP_C);
        fake_app_line(c, APP_A, PROTO_APP_SYSTEM, "app started");
        fake_app_line(c, APP_A, PROTO_APP_STDOUT, "Loading world");
        fake_app_line(c, APP_A, PROTO_APP_STDERR, "warning: low memory");
        fake_app_line(c, APP_A, PROTO_APP_STDOUT, "Done (1.2s)!");
        fake_app_line(c, APP_A, PROTO_APP_STDOUT, "player joined");
        for (int i = 0; i < 2500; i++) {
                char t[32];
                snprintf(t, sizeof(t), "line %d", i);
                fake_app_line(c, APP_B, PROTO_APP_STDOUT, t);
        }
        f->services.app = &fake_app_driver;
        f->services.app_conn = c;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        control_close(f->control);
        loop_timer_free(f->watchdog);
        jobs_free(f->jobs);
        loop_free(f->loop);
        fake_app_free(f->services.app_conn);
        free(f->sock);
        free(f->ctl);
        unit_rmrf_free(f->dir);
        free(f);
        return 0;
}

/* ---- the CLI as a child ---- */

struct child {
        pid_t pid;
        int out, err; /* read ends */
        char *out_buf, *err_buf;
        size_t out_len, err_len;
};

static int child_start(struct fixture *f, struct child *ch, const char *const *args)
{
        memset(ch, 0, sizeof(*ch));
        int o[2], e[2];
        if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0)
                return -errno;
        const char *argv[32] = { f->ctl, "-s", f->sock };
        size_t n = 3;
        for (; args[n - 3] && n < 31; n++)
                argv[n] = args[n - 3];
        argv[n] = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, o[1], 1);
        posix_spawn_file_actions_adddup2(&fa, e[1], 2);
        int r = posix_spawn(&ch->pid, f->ctl, &fa, NULL, (char *const *)argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(o[1]);
        close(e[1]);
        ch->out = o[0];
        ch->err = e[0];
        return -r;
}

static void append(int fd, char **buf, size_t *len)
{
        char tmp[65536];
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n <= 0)
                return;
        *buf = realloc(*buf, *len + (size_t)n + 1);
        memcpy(*buf + *len, tmp, (size_t)n);
        *len += (size_t)n;
        (*buf)[*len] = '\0';
}

/* Read stdout and stderr until stdout holds want (NULL: until both close) or ms pass. */
static bool child_read(struct child *ch, const char *want, int ms)
{
        uint64_t deadline = na_now_mono_us() + (uint64_t)ms * 1000;
        for (;;) {
                if (want && ch->out_buf && strstr(ch->out_buf, want))
                        return true;
                int64_t left = (int64_t)(deadline - na_now_mono_us()) / 1000;
                if (left <= 0)
                        return false;
                struct pollfd p[2] = { { .fd = ch->out, .events = POLLIN }, { .fd = ch->err, .events = POLLIN } };
                if (poll(p, 2, (int)left) <= 0)
                        continue;
                bool open = false;
                if (p[0].revents) {
                        size_t before = ch->out_len;
                        append(ch->out, &ch->out_buf, &ch->out_len);
                        open |= ch->out_len != before;
                }
                if (p[1].revents) {
                        size_t before = ch->err_len;
                        append(ch->err, &ch->err_buf, &ch->err_len);
                        open |= ch->err_len != before;
                }
                if (!open && !want && (p[0].revents & POLLHUP) && (p[1].revents & POLLHUP))
                        return true;
                if (!open && want && (p[0].revents & POLLHUP))
                        return false;
        }
}

/* Wait for the exit: its status (0..255), 128+signal, or -1 when it did not end in time. */
static int child_wait(struct child *ch, int ms)
{
        for (int waited = 0;; waited += 20) {
                int st;
                pid_t r = waitpid(ch->pid, &st, WNOHANG);
                if (r == ch->pid)
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                if (waited >= ms) {
                        kill(ch->pid, SIGKILL);
                        waitpid(ch->pid, &st, 0);
                        return -1;
                }
                usleep(20000);
        }
}

static void child_free(struct child *ch)
{
        close(ch->out);
        close(ch->err);
        free(ch->out_buf);
        free(ch->err_buf);
}

/* ---- sessions beside the loop ---- */

struct run {
        const char *args[16];
        int code;
        char *out, *err;
};

struct session {
        struct fixture *f;
        void (*body)(struct session *s);
        struct run runs[16];
        int n;
        /* logs -f */
        bool saw_old, saw_new, saw_escaped;
        int follow_code;
        char *follow_out, *follow_err;
};

static void run_ctl(struct session *s, const char *const *args)
{
        struct run *r = &s->runs[s->n++];
        struct child ch;
        r->code = -2;
        if (child_start(s->f, &ch, args) < 0)
                return;
        child_read(&ch, NULL, 20000);
        r->code = child_wait(&ch, 5000);
        r->out = ch.out_buf ? strdup(ch.out_buf) : strdup("");
        r->err = ch.err_buf ? strdup(ch.err_buf) : strdup("");
        child_free(&ch);
}

static void quit_loop(void *userdata)
{
        struct fixture *f = userdata;
        loop_quit(f->loop, 0);
}

static void *session_main(void *arg)
{
        struct session *s = arg;
        s->body(s);
        assert_int_equal(loop_post(s->f->loop, quit_loop, s->f), 0);
        return NULL;
}

static void run_session(struct fixture *f, struct session *s)
{
        s->f = f;
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, session_main, s), 0);
        int code = loop_run(f->loop);
        pthread_join(th, NULL);
        assert_int_not_equal(code, -99);
}

static void session_free(struct session *s)
{
        for (int i = 0; i < s->n; i++) {
                free(s->runs[i].out);
                free(s->runs[i].err);
        }
        free(s->follow_out);
        free(s->follow_err);
}

static size_t count_lines(const char *s)
{
        size_t n = 0;
        for (; s && *s; s++)
                n += *s == '\n';
        return n;
}

/* ---- tests ---- */

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void body_apps(struct session *s)
{
        run_ctl(s, ARGS("apps"));                     /* 0 */
        run_ctl(s, ARGS("apps", "--json"));           /* 1 */
        run_ctl(s, ARGS("apps", "extra"));            /* 2 */
        run_ctl(s, ARGS("apps", "-f"));               /* 3 */
}

static void test_apps(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_apps };
        run_session(f, &s);
        assert_int_equal(s.n, 4);

        struct run *t = &s.runs[0];
        assert_int_equal(t->code, 0);
        assert_non_null(strstr(t->out, "ID"));
        assert_non_null(strstr(t->out, "STATE"));
        assert_non_null(strstr(t->out, "STARTED"));
        assert_non_null(strstr(t->out, "RESTARTS"));
        assert_non_null(strstr(t->out, "MEMORY"));
        assert_non_null(strstr(t->out, "VOLUME"));
        char *ra = strstr(t->out, APP_A);
        assert_non_null(ra);
        assert_non_null(strstr(ra, "running"));
        assert_non_null(strstr(ra, "1h02m ago"));
        assert_non_null(strstr(ra, "100 MiB"));
        assert_non_null(strstr(ra, "minecraft"));
        assert_non_null(strstr(t->out, APP_B));
        char *rc = strstr(t->out, APP_C);
        assert_non_null(rc);
        assert_non_null(strstr(rc, "crashed"));
        assert_non_null(strstr(rc, "status failed: DRIVER_ERROR: app " APP_C ": status: crun state"));
        assert_int_equal(count_lines(t->out), 5); /* heading, 3 apps, 1 failure note */

        struct run *j = &s.runs[1];
        assert_int_equal(j->code, 0);
        _cleanup_json_ json_t *doc = json_loads(j->out, 0, NULL);
        assert_non_null(doc);
        assert_true(json_is_true(json_object_get(doc, "ok")));
        assert_int_equal(json_array_size(json_object_get(doc, "apps")), 3);

        assert_int_equal(s.runs[2].code, 2);
        assert_non_null(strstr(s.runs[2].err, "unexpected argument \"extra\""));
        assert_int_equal(s.runs[3].code, 2);
        assert_non_null(strstr(s.runs[3].err, "--follow, --since and --lines go with logs"));
        session_free(&s);
}

static void body_logs(struct session *s)
{
        run_ctl(s, ARGS("logs", APP_A));                                 /* 0 */
        run_ctl(s, ARGS("logs", APP_A, "-n", "2"));                      /* 1 */
        run_ctl(s, ARGS("logs", "--since", "1", "-n", "2", APP_A));      /* 2 */
        run_ctl(s, ARGS("logs", APP_A, "--json", "-n", "1"));            /* 3 */
        run_ctl(s, ARGS("logs", APP_B, "--since", "0"));                 /* 4: three pages */
        run_ctl(s, ARGS("logs", APP_B, "--since", "100", "-n", "1500")); /* 5 */
        run_ctl(s, ARGS("logs", APP_NONE));                              /* 6 */
        run_ctl(s, ARGS("logs", "../../etc/passwd"));                    /* 7 */
        run_ctl(s, ARGS("logs"));                                        /* 8 */
        run_ctl(s, ARGS("logs", APP_A, "-n", "0"));                      /* 9 */
        run_ctl(s, ARGS("logs", APP_A, "--since", "-3"));                /* 10 */
        run_ctl(s, ARGS("logs", APP_A, "--since", "12abc"));             /* 11 */
        run_ctl(s, ARGS("logs", APP_B, "-n", "1200"));                   /* 12: the last 1200, in pages */
}

static void test_logs(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_logs };
        run_session(f, &s);
        assert_int_equal(s.n, 13);

        struct run *r = &s.runs[0];
        assert_int_equal(r->code, 0);
        assert_int_equal(count_lines(r->out), 5);
        assert_non_null(strstr(r->out, "Z SYS app started\n"));
        assert_non_null(strstr(r->out, "Z out Loading world\n"));
        assert_non_null(strstr(r->out, "Z ERR warning: low memory\n"));
        assert_true(strstr(r->out, "app started") < strstr(r->out, "player joined"));
        /* <ts> first: an RFC 3339 time. */
        char ts[64];
        assert_int_equal(sscanf(r->out, "%63s", ts), 1);
        int64_t ms;
        assert_true(na_parse_time_ms(ts, &ms));

        assert_int_equal(s.runs[1].code, 0);
        assert_int_equal(count_lines(s.runs[1].out), 2);
        assert_non_null(strstr(s.runs[1].out, "Done (1.2s)!"));
        assert_non_null(strstr(s.runs[1].out, "player joined"));

        assert_int_equal(s.runs[2].code, 0);
        assert_int_equal(count_lines(s.runs[2].out), 2);
        assert_non_null(strstr(s.runs[2].out, "Loading world"));
        assert_non_null(strstr(s.runs[2].out, "warning: low memory"));

        assert_int_equal(s.runs[3].code, 0);
        _cleanup_json_ json_t *doc = json_loads(s.runs[3].out, 0, NULL);
        assert_non_null(doc);
        assert_int_equal(json_array_size(json_object_get(doc, "lines")), 1);
        assert_int_equal(json_integer_value(json_object_get(doc, "nextSeq")), 5);

        assert_int_equal(s.runs[4].code, 0);
        assert_int_equal(count_lines(s.runs[4].out), 2500);
        assert_non_null(strstr(s.runs[4].out, " out line 0\n"));
        assert_non_null(strstr(s.runs[4].out, " out line 2499\n"));
        assert_int_equal(s.runs[5].code, 0);
        assert_int_equal(count_lines(s.runs[5].out), 1500);
        assert_non_null(strstr(s.runs[5].out, " out line 100\n"));
        assert_non_null(strstr(s.runs[5].out, " out line 1599\n"));
        assert_null(strstr(s.runs[5].out, " out line 1600\n"));

        assert_int_equal(s.runs[6].code, 1);
        assert_non_null(strstr(s.runs[6].err, "APP_NOT_FOUND"));
        assert_non_null(strstr(s.runs[6].err, APP_NONE));
        assert_int_equal(s.runs[7].code, 2);
        assert_non_null(strstr(s.runs[7].err, "is not an app id (a UUID"));
        assert_int_equal(s.runs[8].code, 2);
        assert_non_null(strstr(s.runs[8].err, "logs needs an app id"));
        for (int i = 9; i <= 11; i++) {
                assert_int_equal(s.runs[i].code, 2);
                assert_string_equal(s.runs[i].out, "");
        }
        assert_int_equal(s.runs[12].code, 0);
        assert_int_equal(count_lines(s.runs[12].out), 1200);
        assert_non_null(strstr(s.runs[12].out, " out line 1300\n"));
        assert_non_null(strstr(s.runs[12].out, " out line 2499\n"));
        assert_null(strstr(s.runs[12].out, " out line 1299\n"));
        session_free(&s);
}

static void body_off(struct session *s)
{
        run_ctl(s, ARGS("apps"));
        run_ctl(s, ARGS("logs", "-f", APP_A));
        /* Nobody listening at all. */
        const char *const args[] = { "apps", NULL };
        struct run *r = &s->runs[s->n++];
        struct child ch;
        char *sock = s->f->sock;
        s->f->sock = (char *)"/nonexistent/nodeagent.sock";
        r->code = child_start(s->f, &ch, args) < 0 ? -2 : 0;
        s->f->sock = sock;
        child_read(&ch, NULL, 10000);
        r->code = child_wait(&ch, 5000);
        r->out = strdup(ch.out_buf ? ch.out_buf : "");
        r->err = strdup(ch.err_buf ? ch.err_buf : "");
        child_free(&ch);
}

static void test_apps_off_and_unreachable(void **state)
{
        struct fixture *f = *state;
        f->services.app = NULL; /* [apps] enabled = false */
        struct session s = { .body = body_off };
        run_session(f, &s);
        assert_int_equal(s.n, 3);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(s.runs[i].code, 1);
                assert_non_null(strstr(s.runs[i].err, "apps are not enabled on this node"));
        }
        assert_int_equal(s.runs[2].code, 3);
        assert_non_null(strstr(s.runs[2].err, "cannot reach the agent"));
        session_free(&s);
}

static void body_follow_sigint(struct session *s)
{
        struct child ch;
        if (child_start(s->f, &ch, ARGS("logs", "-f", APP_A)) < 0)
                return;
        s->saw_old = child_read(&ch, "player joined\n", 10000);
        /* Lines that arrive after it started; one with an escape sequence shown, not obeyed. */
        usleep(700000);
        fake_app_line(s->f->services.app_conn, APP_A, PROTO_APP_STDOUT, "a new player joined");
        fake_app_line(s->f->services.app_conn, APP_A, PROTO_APP_STDERR, "red \x1b[31malert");
        s->saw_new = child_read(&ch, "a new player joined\n", 10000);
        s->saw_escaped = child_read(&ch, " ERR red \\x1b[31malert\n", 10000);
        kill(ch.pid, SIGINT);
        s->follow_code = child_wait(&ch, 5000);
        child_read(&ch, NULL, 2000);
        s->follow_out = strdup(ch.out_buf ? ch.out_buf : "");
        s->follow_err = strdup(ch.err_buf ? ch.err_buf : "");
        child_free(&ch);
}

static void test_follow_until_sigint(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_follow_sigint };
        run_session(f, &s);
        assert_true(s.saw_old);
        assert_true(s.saw_new);
        assert_true(s.saw_escaped);
        assert_int_equal(s.follow_code, 0);
        assert_int_equal(count_lines(s.follow_out), 7); /* no line twice */
        assert_string_equal(s.follow_err, "");
        session_free(&s);
}

static void close_control(void *userdata)
{
        struct fixture *f = userdata;
        control_close(f->control);
        f->control = NULL;
}

static void body_follow_agent_gone(struct session *s)
{
        struct child ch;
        if (child_start(s->f, &ch, ARGS("logs", APP_A, "--follow", "--since", "3")) < 0)
                return;
        s->saw_old = child_read(&ch, "player joined\n", 10000);
        assert_int_equal(loop_post(s->f->loop, close_control, s->f), 0);
        s->follow_code = child_wait(&ch, 10000);
        child_read(&ch, NULL, 2000);
        s->follow_out = strdup(ch.out_buf ? ch.out_buf : "");
        s->follow_err = strdup(ch.err_buf ? ch.err_buf : "");
        child_free(&ch);
}

static void test_follow_agent_gone(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_follow_agent_gone };
        run_session(f, &s);
        assert_true(s.saw_old);
        assert_int_equal(s.follow_code, 3);
        assert_int_equal(count_lines(s.follow_out), 2); /* from seq 3 */
        assert_true(strstr(s.follow_err, "closed the connection") || strstr(s.follow_err, "went away"));
        session_free(&s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_apps, setup, teardown),
                cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apps_off_and_unreachable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_follow_until_sigint, setup, teardown),
                cmocka_unit_test_setup_teardown(test_follow_agent_gone, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
