/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The exec helper's request format (common/spawnd-wire.c): what the privileged helper
 * accepts is exactly what na_spawnd_encode writes, and every malformed or oversized
 * message is refused before anything runs. Then the helper for real: na_spawn through
 * it keeps its contract (stdout, exit status, stderr in the error, a missing program).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/spawn.h"
#include "common/spawnd.h"

static char *const argv_ok[] = { (char *)"/bin/echo", (char *)"a b", (char *)"", NULL };
static char *const envp_ok[] = { (char *)"PATH=/bin", (char *)"LC_ALL=C", NULL };
static const int fds3[] = { 0, 1, 2 };

static size_t encode_ok(char *buf, size_t cap)
{
        struct na_spawnd_cmd c = { "/bin/echo", argv_ok, envp_ok, fds3, 3, NA_SPAWND_SETPGROUP };
        size_t len = 0;
        assert_int_equal(na_spawnd_encode(&c, buf, cap, &len), 0);
        return len;
}

static void test_round_trip(void **state)
{
        (void)state;
        char buf[4096];
        size_t len = encode_ok(buf, sizeof(buf));
        struct na_spawnd_req req;
        assert_int_equal(na_spawnd_decode(buf, len, 3, &req), 0);
        assert_string_equal(req.path, "/bin/echo");
        assert_string_equal(req.argv[0], "/bin/echo");
        assert_string_equal(req.argv[1], "a b");
        assert_string_equal(req.argv[2], "");
        assert_null(req.argv[3]);
        assert_string_equal(req.envp[1], "LC_ALL=C");
        assert_null(req.envp[2]);
        assert_int_equal(req.flags, NA_SPAWND_SETPGROUP);
        assert_int_equal(req.nfds, 3);
}

static void test_refusals(void **state)
{
        (void)state;
        char buf[4096], copy[4096];
        size_t len = encode_ok(buf, sizeof(buf));
        struct na_spawnd_req req;
        struct na_spawnd_hdr h;
#define MUTATE(stmt, n, fds, want)                                        \
        do {                                                               \
                memcpy(copy, buf, len);                                    \
                memcpy(&h, copy, sizeof(h));                               \
                stmt;                                                      \
                memcpy(copy, &h, sizeof(h));                               \
                assert_int_equal(na_spawnd_decode(copy, n, fds, &req), want); \
        } while (0)
        MUTATE((void)0, len, 3, 0);
        MUTATE((void)0, len, 2, -EINVAL);               /* fewer descriptors than announced */
        MUTATE((void)0, len, 4, -EINVAL);               /* more */
        MUTATE(h.magic ^= 1, len, 3, -EINVAL);
        MUTATE(h.flags |= 0x80, len, 3, -EINVAL);       /* a flag it does not know */
        MUTATE(h.strings_len++, len, 3, -EINVAL);       /* length disagrees */
        MUTATE(h.strings_len--, len - 1, 3, -EINVAL);   /* last string not terminated */
        MUTATE(h.argc = 0, len, 3, -EINVAL);            /* no argv[0] */
        MUTATE(h.argc++, len, 3, -EINVAL);              /* one string short */
        MUTATE(h.envc--, len, 3, -EINVAL);              /* one string too many */
        MUTATE(h.argc = NA_SPAWND_MAX_ARGS + 1, len, 3, -E2BIG);
        MUTATE(h.envc = UINT32_MAX, len, 3, -E2BIG);
        MUTATE((h.nfds = 2), len, 2, -EINVAL);          /* 0, 1 and 2 are always given */
        MUTATE((h.nfds = NA_SPAWND_MAX_FDS + 1), len, NA_SPAWND_MAX_FDS + 1, -E2BIG);
        MUTATE(copy[sizeof(h)] = 'x', len, 3, -EINVAL); /* a relative path */
        /* "LC_ALL=C" without its '=' */
        MUTATE(memset(memchr(copy + len - 9, '=', 8), '_', 1), len, 3, -EINVAL);
        assert_int_equal(na_spawnd_decode(buf, 3, 3, &req), -EINVAL); /* shorter than a header */
        assert_int_equal(na_spawnd_decode(buf, NA_SPAWND_MAX_MSG + 1, 3, &req), -EINVAL);
}

static void test_encode_refusals(void **state)
{
        (void)state;
        char buf[64];
        size_t len;
        struct na_spawnd_cmd c = { "bin/echo", argv_ok, envp_ok, fds3, 3, 0 };
        assert_int_equal(na_spawnd_encode(&c, buf, sizeof(buf), &len), -EINVAL);
        c.path = "/bin/echo";
        c.flags = 0x100;
        assert_int_equal(na_spawnd_encode(&c, buf, sizeof(buf), &len), -EINVAL);
        c.flags = 0;
        c.nfds = 2;
        assert_int_equal(na_spawnd_encode(&c, buf, sizeof(buf), &len), -EINVAL);
        c.nfds = 3;
        assert_int_equal(na_spawnd_encode(&c, buf, 30, &len), -E2BIG);
}

/* Live: the same contract as the direct path (tests/common/test-spawn-fault.c). */
static void test_through_the_helper(void **state)
{
        (void)state;
        assert_true(na_spawnd_active());
        char *out = NULL;
        struct na_error err = NA_ERROR_INIT;
        char *const echo[] = { (char *)"/bin/echo", (char *)"hello", NULL };
        assert_int_equal(na_spawn(echo, NULL, &out, 4096, &err), 0);
        assert_string_equal(out, "hello\n");
        free(out);
        char *const fail[] = { (char *)"/bin/ls", (char *)"/nonexistent-spawnd", NULL };
        assert_int_equal(na_spawn(fail, NULL, NULL, 0, &err), -EIO);
        assert_non_null(strstr(err.message, "/bin/ls exited with status 2"));
        assert_non_null(strstr(err.message, "nonexistent-spawnd"));
        na_error_clear(&err);
        char *const missing[] = { (char *)"/nonexistent/prog", NULL };
        assert_int_equal(na_spawn(missing, NULL, NULL, 0, &err), -ENOENT);
        assert_non_null(strstr(err.message, "run /nonexistent/prog"));
        na_error_clear(&err);
}

int main(void)
{
        struct na_error err = NA_ERROR_INIT;
        if (na_spawnd_start(NULL, &err) < 0) {
                fprintf(stderr, "%s\n", err.message);
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_encode_refusals),
                cmocka_unit_test(test_through_the_helper),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
