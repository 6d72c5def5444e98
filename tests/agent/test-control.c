/*
 * agent/control.h over a real unix socket in a temporary directory: status, jobs,
 * run (node.status and test kinds, through the real job layer), garbage answered with
 * {"ok":false,...} on a connection that keeps working, pipelined and split requests,
 * an over-long line closing its connection only, a client leaving before its job
 * ends, and the socket file's life (mode 0660, stale file replaced, live agent
 * refused). The loop runs on the test's main thread; the clients are other threads
 * with blocking sockets and a receive timeout, and hand their findings back.
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

#include "agent/control.h"
#include "agent/log.h"
#include "common/json-cleanup.h"
#include "common/unit.h"

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
};

static json_t *status_cb(void *userdata)
{
        struct fixture *f = userdata;
        f->status_calls++;
        return json_pack("{s:s, s:i}", "version", "unit", "calls", f->status_calls);
}

static const struct control_ops ops = { .status = status_cb };

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
        close(c.fd);
}

static void test_garbage_keeps_connection(void **state)
{
        struct fixture *f = *state;
        struct session s = { .body = body_garbage };
        run_session(f, &s);
        assert_int_equal(s.n, 12);
        assert_false(ok_of(s.answers[0]));
        assert_true(strncmp(error_of(s.answers[0]), "request is not a JSON object: ", 30) == 0);
        assert_true(ok_of(s.answers[1]));
        assert_false(ok_of(s.answers[2]));
        assert_string_equal(error_of(s.answers[2]), "request is not a JSON object: wrong type");
        assert_false(ok_of(s.answers[3]));
        assert_string_equal(error_of(s.answers[3]), "request has no \"cmd\" (status, jobs or run)");
        assert_false(ok_of(s.answers[4]));
        assert_string_equal(error_of(s.answers[4]), "unknown cmd \"reboot\" (status, jobs or run)");
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

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_garbage_keeps_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_line_closes_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_leaves_before_job_ends, setup, teardown),
                cmocka_unit_test_setup_teardown(test_socket_file_life, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
