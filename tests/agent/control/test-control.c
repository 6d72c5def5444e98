/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/control/control.h over a real unix socket in a temporary directory: status, jobs,
 * run (node.status and test kinds, through the real job layer), garbage answered with
 * {"ok":false,...} on a connection that keeps working, pipelined and split requests,
 * an over-long line closing its connection only, a client leaving before its job
 * ends, and the socket file's life (mode 0660, stale file replaced, live agent
 * refused). apps and logs against a fake app driver table (tests/agent/control/fake-app.h):
 * the listing with one app's status failing in its row, logs with sinceSeq and
 * limit, APP_NOT_FOUND, invalid requests, apps off, the driver never called on the
 * loop thread nor blocking it, and closing with a request under way. The loop runs
 * on the test's main thread; the clients are other threads with blocking sockets and
 * a receive timeout, and hand their findings back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent/control/control.h"
#include "agent/base/log.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/unit.h"
#include "fake-app.h"

#define WATCHDOG_MS 60000

struct fixture {
        char *dir;
        char *sock;
        struct loop *loop;
        struct jobs *jobs;
        struct agent_services services;
        struct control *control;
        struct loop_timer *watchdog;
        int status_calls;
        pthread_t loop_thread;
};

static json_t *status_cb(void *userdata)
{
        struct fixture *f = userdata;
        f->status_calls++;
        return json_pack("{s:s, s:i}", "version", "unit", "calls", f->status_calls);
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
        setenv("NODEAGENT_TEST_KINDS", "1", 1);
        log_set_level(LOG_LEVEL_ERROR); /* the control socket logs every local job */
        struct fixture *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("control");
        if (asprintf(&f->sock, "%s/run/control.sock", f->dir) < 0) /* run/ does not exist yet: created */
                abort();
        struct na_error err = NA_ERROR_INIT;
        if (loop_new(&f->loop, &err) < 0)
                return -1;
        f->services.state_dir = f->dir;
        if (jobs_new(f->loop, &f->services, 2, &f->jobs, &err) < 0)
                return -1;
        if (control_open(f->loop, f->jobs, f->sock, &ops, f, &f->control, &err) < 0) {
                fprintf(stderr, "control_open: %s\n", err.message);
                na_error_clear(&err);
                return -1;
        }
        f->loop_thread = pthread_self();
        f->watchdog = loop_timer_new(f->loop, watchdog_fired, f);
        loop_timer_arm_ms(f->watchdog, WATCHDOG_MS);
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
        free(f->sock);
        unit_rmrf_free(f->dir);
        fake_app_free(f->services.app_conn);
        free(f);
        return 0;
}

/* ---- a blocking client ---- */

struct client {
        int fd;
        char buf[1 << 16];
        size_t len;
};

static int client_connect(const char *path, struct client *c)
{
        memset(c, 0, sizeof(*c));
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        struct timeval tv = { .tv_sec = 20 };
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        return connect(c->fd, (struct sockaddr *)&sa, sizeof(sa));
}

static int client_send(struct client *c, const char *data, size_t len)
{
        while (len > 0) {
                ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                data += n;
                len -= (size_t)n;
        }
        return 0;
}

/* The next answer line as JSON; NULL at EOF, timeout or a line that is not JSON. */
static json_t *client_read(struct client *c)
{
        for (;;) {
                char *nl = memchr(c->buf, '\n', c->len);
                if (nl) {
                        json_t *j = json_loadb(c->buf, (size_t)(nl - c->buf), 0, NULL);
                        size_t used = (size_t)(nl - c->buf) + 1;
                        memmove(c->buf, c->buf + used, c->len - used);
                        c->len -= used;
                        return j;
                }
                if (c->len == sizeof(c->buf))
                        return NULL;
                ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return NULL;
                c->len += (size_t)n;
        }
}

static json_t *client_request(struct client *c, const char *line)
{
        if (client_send(c, line, strlen(line)) < 0 || client_send(c, "\n", 1) < 0)
                return NULL;
        return client_read(c);
}

/* Whether the server closed: EOF (or a reset) with nothing more to read. */
static bool client_eof(struct client *c)
{
        char b;
        ssize_t n = recv(c->fd, &b, 1, 0);
        return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
}

/* ---- running a client thread beside the loop ---- */

struct session {
        struct fixture *f;
        void (*body)(struct session *s);
        /* Answers kept for the main thread to check. */
        json_t *answers[32];
        int n;
        bool closed_after_long_line;
        int connect_errno;
};

static void keep(struct session *s, json_t *answer)
{
        if (s->n < (int)ARRAY_SIZE(s->answers))
                s->answers[s->n++] = answer ? answer : json_null();
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
        for (int i = 0; i < s->n; i++)
                json_decref(s->answers[i]);
}

static bool ok_of(json_t *a)
{
        return json_is_true(json_object_get(a, "ok"));
}

static const char *error_of(json_t *a)
{
        const char *e = json_string_value(json_object_get(a, "error"));
        return e ? e : "";
}

/* ---- tests ---- */

static void body_round_trip(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&c, "{\"cmd\":\"status\"}"));                       /* 0 */
        keep(s, client_request(&c, "{\"cmd\":\"jobs\"}"));                         /* 1 */
        keep(s, client_request(&c, "{\"cmd\":\"run\",\"kind\":\"node.status\"}")); /* 2 */
        keep(s, client_request(&c, "{\"cmd\":\"run\",\"kind\":\"test.sleep\",\"params\":{\"sleepMs\":1},"
                                   "\"target\":{\"type\":\"node\",\"id\":\"hv-1\"},\"timeoutSec\":30}")); /* 3 */
        keep(s, client_request(&c, "{\"cmd\":\"run\",\"kind\":\"no.such.kind\"}")); /* 4 */
        keep(s, client_request(&c, "{\"cmd\":\"jobs\"}"));                         /* 5 */
        close(c.fd);
}

static void test_round_trip(void **state)
{
        struct fixture *f = *state;
        struct stat st;
        assert_int_equal(lstat(f->sock, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0660);

        struct session s = { .body = body_round_trip };
        run_session(f, &s);
        assert_int_equal(s.connect_errno, 0);
        assert_int_equal(s.n, 6);

        json_t *status = s.answers[0];
        assert_true(ok_of(status));
        assert_string_equal(json_string_value(json_object_get(json_object_get(status, "status"), "version")), "unit");

        json_t *jobs = json_object_get(s.answers[1], "jobs");
        assert_true(ok_of(s.answers[1]));
        assert_true(json_is_array(json_object_get(jobs, "running")));
        assert_true(json_is_array(json_object_get(jobs, "queued")));
        assert_int_equal(json_array_size(json_object_get(jobs, "recent")), 0);

        json_t *run = s.answers[2];
        assert_true(ok_of(run));
        json_t *job = json_object_get(run, "job");
        assert_string_equal(json_string_value(json_object_get(job, "kind")), "node.status");
        assert_string_equal(json_string_value(json_object_get(job, "state")), "succeeded");
        assert_string_equal(json_string_value(json_object_get(job, "target")), "node/-");
        json_t *result = json_object_get(run, "result");
        assert_string_equal(json_string_value(json_object_get(result, "status")), "succeeded");
        json_t *data = json_object_get(result, "data");
        assert_string_equal(json_string_value(json_object_get(data, "agentVersion")), NA_VERSION);
        assert_true(json_is_object(json_object_get(data, "host")));
        assert_true(json_integer_value(json_object_get(json_object_get(data, "host"), "cpus")) >= 1);

        json_t *slept = s.answers[3];
        assert_true(ok_of(slept));
        assert_string_equal(json_string_value(json_object_get(json_object_get(slept, "job"), "target")), "node/hv-1");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(slept, "result"), "data"), "sleptMs")), 1);

        /* An unknown kind still goes through the job layer: a failed job, not a refused request. */
        json_t *unknown = s.answers[4];
        assert_true(ok_of(unknown));
        assert_string_equal(json_string_value(json_object_get(json_object_get(unknown, "job"), "state")), "failed");
        assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(unknown, "result"), "error"), "code")),
                            "UNSUPPORTED_JOB");

        json_t *recent = json_object_get(json_object_get(s.answers[5], "jobs"), "recent");
        assert_int_equal(json_array_size(recent), 3);
        session_free(&s);
}

static void body_garbage(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&c, "this is not json"));                                 /* 0 */
        keep(s, client_request(&c, "{\"cmd\":\"status\"}"));                              /* 1: still answers */
        keep(s, client_request(&c, "[1, 2]"));                                            /* 2 */
        keep(s, client_request(&c, "{\"nocmd\":1}"));                                     /* 3 */
        keep(s, client_request(&c, "{\"cmd\":\"reboot\"}"));                              /* 4 */
        keep(s, client_request(&c, "{\"cmd\":\"run\"}"));                                 /* 5 */
        keep(s, client_request(&c, "{\"cmd\":\"run\",\"kind\":\"test.sleep\",\"target\":{\"type\":\"disk\"},"
                                   "\"timeoutSec\":0,\"params\":[]}"));                   /* 6 */
        keep(s, client_request(&c, "{\"cmd\":\"status\",\"cmd\":\"jobs\"}"));             /* 7: duplicate keys */
        keep(s, client_request(&c, "{\"cmd\":\"st\\u0000atus\"}"));                       /* 8 */
        /* Two requests in one write, then one split over three writes, with empty lines around. */
        client_send(&c, "\n{\"cmd\":\"status\"}\n\n{\"cmd\":\"jobs\"}\n", 34);
        keep(s, client_read(&c));                                                         /* 9 */
        keep(s, client_read(&c));                                                         /* 10 */
        client_send(&c, "{\"cmd\"", 6);
        client_send(&c, ":\"sta", 5);
        client_send(&c, "tus\"}\n", 6);
        keep(s, client_read(&c));                                                         /* 11 */
        /* An unknown cmd of 22 two-byte characters: the message shows 64 bytes of it, which
         * once cut a character in two, and such an answer could not be written (found by fuzz-control). */
        char line[128] = "{\"cmd\":\"";
        for (int i = 0; i < 22; i++)
                strcat(line, "\xc3\xa9t");
        strcat(line, "\"}");
        keep(s, client_request(&c, line));                                                /* 12 */
        close(c.fd);
}

static void test_garbage_keeps_connection(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_garbage };
        run_session(f, &s);
        assert_int_equal(s.n, 13);
        assert_false(ok_of(s.answers[0]));
        assert_true(strncmp(error_of(s.answers[0]), "request is not a JSON object: ", 30) == 0);
        assert_true(ok_of(s.answers[1]));
        assert_false(ok_of(s.answers[2]));
        assert_string_equal(error_of(s.answers[2]), "request is not a JSON object: wrong type");
        assert_false(ok_of(s.answers[3]));
        assert_string_equal(error_of(s.answers[3]), "request has no \"cmd\" (status, jobs, run, apps, logs or drain)");
        assert_false(ok_of(s.answers[4]));
        assert_string_equal(error_of(s.answers[4]), "unknown cmd \"reboot\" (status, jobs, run, apps, logs or drain)");
        /* run without a kind: the details name the field. */
        assert_false(ok_of(s.answers[5]));
        json_t *kind_errs = json_object_get(json_object_get(json_object_get(json_object_get(s.answers[5], "details"), "details"), "kind"), "_errors");
        assert_string_equal(json_string_value(json_array_get(kind_errs, 0)), "is required");
        /* Every bad field of a run at once. */
        assert_false(ok_of(s.answers[6]));
        json_t *d6 = json_object_get(json_object_get(s.answers[6], "details"), "details");
        assert_non_null(json_object_get(json_object_get(d6, "target"), "type"));
        assert_non_null(json_object_get(d6, "timeoutSec"));
        assert_non_null(json_object_get(d6, "params"));
        assert_false(ok_of(s.answers[7]));
        assert_false(ok_of(s.answers[8]));
        assert_true(ok_of(s.answers[9]));
        assert_non_null(json_object_get(s.answers[9], "status"));
        assert_true(ok_of(s.answers[10]));
        assert_non_null(json_object_get(s.answers[10], "jobs"));
        assert_true(ok_of(s.answers[11]));
        assert_non_null(json_object_get(s.answers[11], "status"));
        assert_false(ok_of(s.answers[12]));
        char want[128] = "unknown cmd \"";
        for (int i = 0; i < 21; i++)
                strcat(want, "\xc3\xa9t");
        strcat(want, "\" (status, jobs, run, apps, logs or drain)");
        assert_string_equal(error_of(s.answers[12]), want);
        session_free(&s);
}

static void body_long_line(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        /* 1.5 MiB without a newline: over the 1 MiB line limit. The server may close while we write. */
        size_t len = 3u << 19;
        char *junk = malloc(len);
        memset(junk, 'x', len);
        client_send(&c, junk, len);
        free(junk);
        keep(s, client_read(&c));
        s->closed_after_long_line = client_eof(&c);
        close(c.fd);

        /* The agent is still there for the next client. */
        struct client d;
        if (client_connect(s->f->sock, &d) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&d, "{\"cmd\":\"status\"}"));
        close(d.fd);
}

static void test_long_line_closes_connection(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_long_line };
        run_session(f, &s);
        assert_int_equal(s.connect_errno, 0);
        assert_int_equal(s.n, 2);
        assert_false(ok_of(s.answers[0]));
        assert_string_equal(error_of(s.answers[0]), "request line longer than 1048576 bytes");
        assert_true(s.closed_after_long_line);
        assert_true(ok_of(s.answers[1]));
        session_free(&s);
}

static void body_leave_early(struct session *s)
{
        /* Ask for a job and hang up before it ends: the answer has nowhere to go. */
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        const char *req = "{\"cmd\":\"run\",\"kind\":\"test.sleep\",\"params\":{\"sleepMs\":300}}\n";
        client_send(&c, req, strlen(req));
        close(c.fd);
        /* A second client waits for a job queued behind... nothing: it simply runs; by the
         * time it answers, the first job has ended with its client gone. */
        struct client d;
        if (client_connect(s->f->sock, &d) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&d, "{\"cmd\":\"run\",\"kind\":\"test.sleep\",\"params\":{\"sleepMs\":600}}"));
        keep(s, client_request(&d, "{\"cmd\":\"jobs\"}"));
        close(d.fd);
}

static void test_client_leaves_before_job_ends(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_leave_early };
        run_session(f, &s);
        assert_int_equal(s.connect_errno, 0);
        assert_int_equal(s.n, 2);
        assert_true(ok_of(s.answers[0]));
        json_t *recent = json_object_get(json_object_get(s.answers[1], "jobs"), "recent");
        assert_int_equal(json_array_size(recent), 2); /* both jobs ran to their end */
        size_t i;
        json_t *r;
        json_array_foreach(recent, i, r)
                assert_string_equal(json_string_value(json_object_get(r, "state")), "succeeded");
        session_free(&s);
}

static void test_socket_file_life(void **state)
{
        struct fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct control *second = NULL;

        /* Another agent answers on the path: refused, and its socket is left alone. */
        assert_int_equal(control_open(f->loop, f->jobs, f->sock, &ops, f, &second, &err), -EADDRINUSE);
        assert_null(second);
        assert_non_null(strstr(err.message, "another agent is listening"));
        na_error_clear(&err);
        struct stat st;
        assert_int_equal(lstat(f->sock, &st), 0);

        /* Closed: the file goes. */
        control_close(f->control);
        f->control = NULL;
        assert_int_equal(lstat(f->sock, &st), -1);

        /* A stale socket file (its agent died): replaced. */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->sock);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd); /* bound, never listening: nobody answers */
        assert_int_equal(control_open(f->loop, f->jobs, f->sock, &ops, f, &f->control, &err), 0);
        control_close(f->control);
        f->control = NULL;

        /* Something else in the way: refused, not removed. */
        free(unit_write_str(NULL, f->sock, "not a socket", 0600));
        assert_int_equal(control_open(f->loop, f->jobs, f->sock, &ops, f, &second, &err), -EEXIST);
        assert_non_null(strstr(err.message, "exists and is not a socket"));
        assert_int_equal(unit_file_size(f->sock), 12);
        na_error_clear(&err);

        char longpath[200];
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[0] = '/';
        longpath[sizeof(longpath) - 1] = '\0';
        assert_int_equal(control_open(f->loop, f->jobs, longpath, &ops, f, &second, &err), -ENAMETOOLONG);
}

/* ---- apps and logs ---- */

#define APP_A "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define APP_B "0b3e1d7a-21f4-4c55-9c3e-7a1f0e2d4c6b"
#define APP_C "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
#define APP_NONE "11111111-2222-4333-8444-555555555555"

static struct app_conn *apps_on(struct fixture *f)
{
        struct app_conn *c = fake_app_new();
        fake_app_add(c, APP_A, "minecraft", PROTO_APP_RUNNING);
        fake_app_add(c, APP_B, NULL, PROTO_APP_STOPPED);
        fake_app_add(c, APP_C, "bot", PROTO_APP_CRASHED);
        f->services.app = &fake_app_driver;
        f->services.app_conn = c;
        return c;
}

static const char *code_of(json_t *a)
{
        const char *e = json_string_value(json_object_get(a, "code"));
        return e ? e : "";
}

static void body_apps_off(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&c, "{\"cmd\":\"apps\"}"));
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\"}"));
        keep(s, client_request(&c, "{\"cmd\":\"status\"}"));
        close(c.fd);
}

static void test_apps_off(void **state)
{
        struct fixture *f = *state;
        snprintf(f->services.apps_off_reason, sizeof(f->services.apps_off_reason), "[apps] enabled = false");
        struct session s = { .body = body_apps_off };
        run_session(f, &s);
        assert_int_equal(s.n, 3);
        for (int i = 0; i < 2; i++) {
                assert_false(ok_of(s.answers[i]));
                assert_string_equal(error_of(s.answers[i]), "apps are not enabled on this node: [apps] enabled = false");
        }
        assert_true(ok_of(s.answers[2]));
        session_free(&s);
}

static void body_apps_list(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&c, "{\"cmd\":\"apps\"}"));
        close(c.fd);
}

static json_t *row_of(json_t *apps, const char *id)
{
        size_t i;
        json_t *r;
        json_array_foreach(apps, i, r)
                if (streq(json_string_value(json_object_get(r, "id")), id))
                        return r;
        fail_msg("no row for %s", id);
        return NULL;
}

static void test_apps_list(void **state)
{
        struct fixture *f = *state;
        struct app_conn *c = apps_on(f);
        fake_app_fail_status(c, APP_C);
        struct session s = { .body = body_apps_list };
        run_session(f, &s);
        assert_int_equal(s.n, 1);
        json_t *a = s.answers[0];
        assert_true(ok_of(a));
        json_t *apps = json_object_get(a, "apps");
        assert_int_equal(json_array_size(apps), 3);

        json_t *ra = row_of(apps, APP_A);
        assert_string_equal(json_string_value(json_object_get(ra, "name")), "minecraft");
        assert_string_equal(json_string_value(json_object_get(ra, "state")), "running");
        assert_true(json_is_string(json_object_get(ra, "startedAt")));
        assert_true(json_is_null(json_object_get(ra, "exitCode")));
        assert_int_equal(json_integer_value(json_object_get(ra, "restarts")), 0);
        assert_int_equal(json_integer_value(json_object_get(ra, "memoryMB")), 100);
        assert_int_equal(json_integer_value(json_object_get(ra, "volumeUsedMB")), 10);
        assert_null(json_object_get(ra, "error"));

        json_t *rb = row_of(apps, APP_B);
        assert_null(json_object_get(rb, "name"));
        assert_string_equal(json_string_value(json_object_get(rb, "state")), "stopped");
        assert_true(json_is_null(json_object_get(rb, "startedAt")));
        assert_int_equal(json_integer_value(json_object_get(rb, "exitCode")), 0);
        assert_int_equal(json_integer_value(json_object_get(rb, "restarts")), 1);
        assert_int_equal(json_integer_value(json_object_get(rb, "memoryMB")), 200);

        /* One app's status failed: said in its row, the others are whole. */
        json_t *rc = row_of(apps, APP_C);
        assert_string_equal(json_string_value(json_object_get(rc, "name")), "bot");
        assert_string_equal(json_string_value(json_object_get(rc, "state")), "crashed"); /* the inventory's */
        json_t *e = json_object_get(rc, "error");
        assert_string_equal(json_string_value(json_object_get(e, "code")), "DRIVER_ERROR");
        assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "crun state"));
        assert_null(json_object_get(rc, "memoryMB"));

        /* inventory + 3 status calls, none of them on the loop thread. */
        assert_int_equal(fake_app_calls(c), 4);
        assert_false(fake_app_called_on(c, f->loop_thread));
        session_free(&s);
}

static void body_logs(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\"}"));                          /* 0 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\",\"limit\":2}"));               /* 1 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\",\"sinceSeq\":1,\"limit\":2}")); /* 2 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\",\"sinceSeq\":5}"));            /* 3 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_NONE "\"}"));                        /* 4 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"../etc\"}"));                              /* 5 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\"}"));                                                 /* 6 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\",\"limit\":0,\"sinceSeq\":-1}")); /* 7 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\",\"limit\":1001}"));            /* 8 */
        keep(s, client_request(&c, "{\"cmd\":\"logs\",\"app\":\"" APP_A "\",\"sinceSeq\":\"3\"}"));        /* 9 */
        keep(s, client_request(&c, "{\"cmd\":\"status\"}"));                                               /* 10 */
        close(c.fd);
}

static void assert_seqs(json_t *answer, int64_t first, size_t n, int64_t next)
{
        assert_true(ok_of(answer));
        json_t *lines = json_object_get(answer, "lines");
        assert_int_equal(json_array_size(lines), n);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, i), "seq")), first + (int64_t)i);
        assert_int_equal(json_integer_value(json_object_get(answer, "nextSeq")), next);
}

static json_t *field_errors(json_t *answer, const char *field)
{
        return json_object_get(json_object_get(json_object_get(json_object_get(answer, "details"), "details"), field),
                               "_errors");
}

static void test_logs(void **state)
{
        struct fixture *f = *state;
        struct app_conn *c = apps_on(f);
        fake_app_line(c, APP_A, PROTO_APP_SYSTEM, "app started");
        fake_app_line(c, APP_A, PROTO_APP_STDOUT, "Loading world");
        fake_app_line(c, APP_A, PROTO_APP_STDERR, "warning: low memory");
        fake_app_line(c, APP_A, PROTO_APP_STDOUT, "Done (1.2s)!");
        fake_app_line(c, APP_A, PROTO_APP_STDOUT, "player joined");
        struct session s = { .body = body_logs };
        run_session(f, &s);
        assert_int_equal(s.n, 11);

        assert_seqs(s.answers[0], 0, 5, 5); /* default: the last 100 */
        json_t *l2 = json_array_get(json_object_get(s.answers[0], "lines"), 2);
        assert_string_equal(json_string_value(json_object_get(l2, "stream")), "stderr");
        assert_string_equal(json_string_value(json_object_get(l2, "text")), "warning: low memory");
        int64_t ts;
        assert_true(na_parse_time_ms(json_string_value(json_object_get(l2, "ts")), &ts));
        assert_seqs(s.answers[1], 3, 2, 5); /* the last 2 */
        assert_seqs(s.answers[2], 1, 2, 3); /* from 1, 2 of them */
        assert_seqs(s.answers[3], 0, 0, 5); /* nothing new */

        assert_false(ok_of(s.answers[4]));
        assert_string_equal(code_of(s.answers[4]), "APP_NOT_FOUND");
        assert_non_null(strstr(error_of(s.answers[4]), APP_NONE));
        json_t *d4 = json_object_get(s.answers[4], "details");
        assert_string_equal(json_string_value(json_object_get(d4, "code")), "APP_NOT_FOUND");
        assert_int_equal(json_integer_value(json_object_get(d4, "httpStatus")), 404);

        /* Invalid requests never reach the driver; each bad field is named. */
        assert_false(ok_of(s.answers[5]));
        assert_string_equal(code_of(s.answers[5]), "VALIDATION_ERROR");
        assert_non_null(field_errors(s.answers[5], "app"));
        assert_false(ok_of(s.answers[6]));
        assert_string_equal(json_string_value(json_array_get(field_errors(s.answers[6], "app"), 0)), "is required");
        assert_false(ok_of(s.answers[7]));
        assert_non_null(field_errors(s.answers[7], "limit"));
        assert_non_null(field_errors(s.answers[7], "sinceSeq"));
        assert_false(ok_of(s.answers[8]));
        assert_non_null(field_errors(s.answers[8], "limit"));
        assert_false(ok_of(s.answers[9]));
        assert_non_null(field_errors(s.answers[9], "sinceSeq"));
        assert_true(ok_of(s.answers[10]));

        /* 5 output calls (the app that is not there included), none on the loop thread. */
        assert_int_equal(fake_app_calls(c), 5);
        assert_false(fake_app_called_on(c, f->loop_thread));
        session_free(&s);
}

static void body_slow_apps(struct session *s)
{
        struct client slow, quick;
        if (client_connect(s->f->sock, &slow) < 0 || client_connect(s->f->sock, &quick) < 0) {
                s->connect_errno = errno;
                return;
        }
        uint64_t t0 = na_now_mono_us();
        client_send(&slow, "{\"cmd\":\"apps\"}\n", 15);
        keep(s, client_request(&quick, "{\"cmd\":\"status\"}"));
        uint64_t t1 = na_now_mono_us();
        keep(s, client_read(&slow));
        uint64_t t2 = na_now_mono_us();
        keep(s, json_pack("{s:I, s:I}", "statusMs", (json_int_t)((t1 - t0) / 1000), "appsMs",
                          (json_int_t)((t2 - t0) / 1000)));
        close(slow.fd);
        close(quick.fd);
}

static void test_apps_do_not_block_the_loop(void **state)
{
        struct fixture *f = *state;
        struct app_conn *c = apps_on(f);
        fake_app_status_delay_ms(c, 500); /* 3 apps: 1.5 s of status calls */
        struct session s = { .body = body_slow_apps };
        run_session(f, &s);
        assert_int_equal(s.connect_errno, 0);
        assert_int_equal(s.n, 3);
        assert_true(ok_of(s.answers[0]));
        assert_true(ok_of(s.answers[1]));
        assert_int_equal(json_array_size(json_object_get(s.answers[1], "apps")), 3);
        json_int_t status_ms = json_integer_value(json_object_get(s.answers[2], "statusMs"));
        json_int_t apps_ms = json_integer_value(json_object_get(s.answers[2], "appsMs"));
        assert_true(apps_ms >= 1500);
        assert_true(status_ms < 1000); /* answered while the status calls were still under way */
        session_free(&s);
}

static void body_leave_apps(struct session *s)
{
        struct client c;
        if (client_connect(s->f->sock, &c) < 0) {
                s->connect_errno = errno;
                return;
        }
        /* Asked, then gone; a second request waits in the queue when the socket closes. */
        client_send(&c, "{\"cmd\":\"apps\"}\n{\"cmd\":\"apps\"}\n{\"cmd\":\"apps\"}\n", 45);
        keep(s, client_request(&c, "{\"cmd\":\"status\"}"));
        close(c.fd);
}

static void test_close_with_requests_under_way(void **state)
{
        struct fixture *f = *state;
        struct app_conn *c = apps_on(f);
        fake_app_status_delay_ms(c, 200);
        struct session s = { .body = body_leave_apps };
        run_session(f, &s);
        assert_int_equal(s.n, 1);
        assert_true(ok_of(s.answers[0]));
        /* teardown closes the socket while status calls run: it waits for them, leaks nothing. */
        session_free(&s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_garbage_keeps_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_line_closes_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_leaves_before_job_ends, setup, teardown),
                cmocka_unit_test_setup_teardown(test_socket_file_life, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apps_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apps_list, setup, teardown),
                cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apps_do_not_block_the_loop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_close_with_requests_under_way, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
