/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The agent's seccomp filter (agent/daemon/sandbox.c) is inherited by every app it starts,
 * so it must not kill programs of the other ABIs an app may hold: on x86-64, a
 * 32-bit system call (int $0x80) under the filter works, and a denied one is refused
 * with EPERM in that ABI too. Before the fix the filter listed the native ABI only
 * and the child died of SIGSYS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/daemon/sandbox.h"

#if defined(__x86_64__)
static long syscall32(long nr, long a1)
{
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a1) : "memory");
        return ret;
}

static void test_i386_abi_under_the_filter(void **state)
{
        (void)state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct na_error err = NA_ERROR_INIT;
                if (sandbox_apply(&err) < 0)
                        _exit(10);
                long me = syscall32(20 /* i386 getpid */, 0);
                if (me != (long)getpid())
                        _exit(11);
                long r = syscall32(87 /* i386 swapoff */, 0);
                _exit(r == -EPERM ? 0 : 12);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status))
                fail_msg("the child died of signal %d under the filter", WTERMSIG(status));
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}
#endif

int main(void)
{
#if defined(__x86_64__)
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_i386_abi_under_the_filter),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
#else
        return 77;
#endif
}
