/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The SFTP monitor (sftp/sftpd-monitor.c) against a network half taken over by an
 * attacker (issue 20, "SFTP before login runs as root"): this test speaks the
 * monitor's protocol itself, as such a network half could. A password is checked by
 * the monitor, not believed; failures are reported to the listener; attempts are
 * capped; after a login nothing more is answered (a question about another user would
 * otherwise replace the credentials the session starts with); a session is not started
 * without a login; SIGTERM ends the monitor and its network half.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sftp/keys.h"
#include "sftp/sftp-creds.h"
#include "sftp/sftpd.h"

struct rig {
        char dir[64], users[128];
        int chan, report;
        pid_t monitor;
};

static struct sftp_ratelimit users_table;

static void store(const char *users, const char *name, const char *app, const char *hash, const char *key)
{
        char *keys[] = { (char *)key };
        struct sftp_user u = { .app_id = (char *)app, .volume_dir = (char *)"/nonexistent/disk/volume", .uid = 1000065536,
                               .gid = 1000065536, .enabled = true, .file_access = true, .password_hash = (char *)hash,
                               .public_keys = key ? keys : NULL, .n_keys = key ? 1 : 0 };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(sftp_user_store(users, name, &u, &err), 0);
}

/* A monitor in its own process (with a network half that only waits), as sftpd_session makes it. */
static void start(struct rig *r)
{
        snprintf(r->dir, sizeof(r->dir), "/tmp/test-sftp-monitor-XXXXXX");
        assert_non_null(mkdtemp(r->dir));
        snprintf(r->users, sizeof(r->users), "%s/users", r->dir);
        store(r->users, "alpha", "app-alpha", SHA512_PW1, NULL);
        store(r->users, "beta", "app-beta", NULL, ED25519_LINE);
        int sp[2], rp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
        assert_int_equal(pipe2(rp, O_CLOEXEC | O_NONBLOCK), 0);
        sftp_ratelimit_init(&users_table, 10, 300, 0, 30);
        r->monitor = fork();
        assert_true(r->monitor >= 0);
        if (r->monitor == 0) {
                prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed assertion skips stop() */
                close(sp[1]);
                close(rp[0]);
                pid_t net = fork();
                if (net == 0) {
                        pause();
                        _exit(0);
                }
                static struct sftpd_config cfg;
                cfg = (struct sftpd_config){ .users_dir = r->users, .max_failures = 10, .login_grace_sec = 60 };
                _exit(sftpd_monitor(&cfg, "192.0.2.7", &users_table, rp[1], sp[0], net));
        }
        close(sp[0]);
        close(rp[1]);
        r->chan = sp[1];
        r->report = rp[0];
}

static void stop(struct rig *r)
{
        kill(r->monitor, SIGTERM);
        int st = 0;
        assert_int_equal(waitpid(r->monitor, &st, 0), r->monitor);
        close(r->chan);
        close(r->report);
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "%s/users/alpha.json", r->dir);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/users/beta.json", r->dir);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/users", r->dir);
        rmdir(cmd);
        rmdir(r->dir);
}

/* One request (kind, then NUL-separated fields); the answer's text. */
static const char *ask(struct rig *r, char kind, const char *a, const char *b, const char *c)
{
        static char buf[4096];
        size_t len = 0;
        buf[len++] = kind;
        const char *f[] = { a, b, c };
        for (size_t i = 0; i < 3 && f[i]; i++) {
                buf[len++] = '\0';
                memcpy(buf + len, f[i], strlen(f[i]));
                len += strlen(f[i]);
        }
        assert_int_equal(send(r->chan, buf, len, 0), (ssize_t)len);
        ssize_t n = recv(r->chan, buf, sizeof(buf) - 1, 0);
        assert_true(n > 0);
        buf[n] = '\0';
        return buf;
}

static size_t reports(struct rig *r, char *out, size_t len)
{
        usleep(50000);
        ssize_t n = read(r->report, out, len - 1);
        out[n > 0 ? n : 0] = '\0';
        return n > 0 ? (size_t)n : 0;
}

static const char *ed25519_b64(void)
{
        static char b64[256];
        const char *p = strchr(ED25519_LINE, ' ') + 1;
        size_t n = (size_t)(strchr(p, ' ') - p);
        memcpy(b64, p, n);
        b64[n] = '\0';
        return b64;
}

static void password_checked_by_monitor(void **state)
{
        (void)state;
        struct rig r;
        start(&r);
        char rep[512];
        assert_string_equal(ask(&r, 'P', "alpha", "wrong", NULL), "0");
        reports(&r, rep, sizeof(rep));
        assert_non_null(strstr(rep, "F addr:192.0.2.7\n"));
        assert_non_null(strstr(rep, "F user:alpha\n"));
        /* A network half cannot start a session it did not log in. */
        assert_string_equal(ask(&r, 'S', NULL, NULL, NULL), "0 not logged in");
        /* The key is listed for beta; a signature the network half says is bad is a failure. */
        assert_string_equal(ask(&r, 'Q', "beta", "ssh-ed25519", ed25519_b64()), "1");
        assert_string_equal(ask(&r, 'W', "beta", "ssh-ed25519", ed25519_b64()), "0");
        reports(&r, rep, sizeof(rep));
        assert_non_null(strstr(rep, "F user:beta\n"));
        assert_string_equal(ask(&r, 'P', "alpha", "pw1", NULL), "1");
        /* Logged in as alpha: nothing more is answered, not even the truth about beta's key. */
        assert_string_equal(ask(&r, 'Q', "beta", "ssh-ed25519", ed25519_b64()), "0");
        assert_string_equal(ask(&r, 'V', "beta", "ssh-ed25519", ed25519_b64()), "0");
        assert_string_equal(ask(&r, 'P', "alpha", "pw1", NULL), "0");
        stop(&r);
}

static void attempts_capped(void **state)
{
        (void)state;
        struct rig r;
        start(&r);
        for (int i = 0; i < 6; i++)
                assert_string_equal(ask(&r, 'P', "alpha", "wrong", NULL), "0");
        /* The seventh attempt of the connection is refused, right or not. */
        assert_string_equal(ask(&r, 'P', "alpha", "pw1", NULL), "0");
        /* Malformed requests answer "0". */
        assert_string_equal(ask(&r, 'P', "alpha", NULL, NULL), "0");
        assert_string_equal(ask(&r, 'X', "alpha", "pw1", NULL), "0");
        stop(&r);
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(password_checked_by_monitor),
                                            cmocka_unit_test(attempts_capped) };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
