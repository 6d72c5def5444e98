/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sandbox = strict (agent/daemon/sandbox-strict.c): under the allow-list a call the agent
 * never makes is refused (EPERM in release builds, the process killed by SIGSYS in
 * debug builds), while programs started through the exec helper run without the
 * agent's filter (their /proc/self/status says "Seccomp: 0"), so containers keep
 * their own profile. A call of another ABI (i386 on x86-64) kills the process. Each
 * case runs in a forked child: the filter cannot be undone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/daemon/sandbox.h"
#include "common/spawn.h"
#include "common/spawnd.h"

/* In the child: helper, filter, then the check; the exit code says what happened. */
static int strict_child(int which)
{
        struct na_error err = NA_ERROR_INIT;
        if (na_spawnd_start(NULL, &err) < 0 || sandbox_apply_strict(&err) < 0)
                return 10;
#if defined(__x86_64__)
        if (which == 2) {
                /* getpid through the i386 ABI (int $0x80): not the agent's ABI, never allowed. */
                long ret, nr = 20;
                __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr) : "memory");
                (void)ret;
                return 14;
        }
#endif
        if (which == 0) {
                /* syslog(SYSLOG_ACTION_SIZE_BUFFER): harmless, and not on the list. */
                long r = syscall(SYS_syslog, 10, NULL, 0);
                return r == -1 && errno == EPERM ? 0 : 11;
        }
        char *out = NULL;
        char *const grep[] = { (char *)"/bin/grep", (char *)"^Seccomp:", (char *)"/proc/self/status", NULL };
        if (na_spawn(grep, NULL, &out, 4096, &err) < 0)
                return 12;
        int ok = strstr(out, "Seccomp:\t0") != NULL;
        free(out);
        return ok ? 0 : 13;
}

static int run(int which)
{
        pid_t pid = fork();
        if (pid == 0)
                _exit(strict_child(which));
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFSIGNALED(st))
                return -WTERMSIG(st);
        return WEXITSTATUS(st);
}

static void test_forbidden_call_refused(void **state)
{
        (void)state;
#ifdef NDEBUG
        assert_int_equal(run(0), 0); /* EPERM */
#else
        assert_int_equal(run(0), -SIGSYS); /* killed, with an audit line in the kernel log */
#endif
}

static void test_other_abi_kills(void **state)
{
        (void)state;
#if defined(__x86_64__)
        assert_int_equal(run(2), -SIGSYS); /* the whole process, in every build */
#else
        skip();
#endif
}

static void test_spawned_programs_unfiltered(void **state)
{
        (void)state;
        assert_int_equal(run(1), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_forbidden_call_refused),
                cmocka_unit_test(test_other_abi_kills),
                cmocka_unit_test(test_spawned_programs_unfiltered),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
