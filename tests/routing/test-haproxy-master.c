/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app_haproxy_is_master across the master's own re-exec: HAProxy's master execs itself
 * right after its first worker is forked, and for a moment its /proc command line
 * reads empty. A start that looked in that moment reported "started, but no master
 * runs" (a failed CI run). Here a child execs itself in a loop with "-f <cfg>" in its
 * arguments; every look must say it is ours, and a look at another cfg must not.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "routing/app-haproxy.h"

#define CFG "/nonexistent/na-test/haproxy.cfg"

static void test_ours_while_it_execs(void **state)
{
        (void)state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char *const argv[] = { (char *)"test-haproxy-master", (char *)"--exec-loop", (char *)"-f",
                                       (char *)CFG, NULL };
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        /* Wait until the first exec is through, then look many times while it execs. */
        while (!app_haproxy_is_master(CFG, pid))
                usleep(1000);
        unsigned misses = 0;
        for (unsigned i = 0; i < 20000; i++)
                if (!app_haproxy_is_master(CFG, pid))
                        misses++;
        bool other = app_haproxy_is_master("/other/haproxy.cfg", pid);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        assert_int_equal(misses, 0);
        assert_false(other);
        assert_false(app_haproxy_is_master(CFG, pid)); /* reaped: gone */
        assert_false(app_haproxy_is_master(CFG, 1));
}

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "--exec-loop") == 0) {
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ours_while_it_execs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
