/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * na_spawn when poll() fails while the child is blocked on a full pipe (issue 9,
 * item 5): the child is killed before it is waited for, so the call returns the
 * error instead of waiting forever. The fault is injected (common/fault.h); an alarm
 * turns a hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/spawn.h"

static void test_poll_error_kills_the_child(void **state)
{
        (void)state;
        /* yes(1) fills its pipe at once and blocks: the first poll fails (injected). */
        char *argv[] = { (char *)"/usr/bin/yes", NULL };
        struct na_error err = NA_ERROR_INIT;
        alarm(20);
        int r = na_spawn(argv, NULL, NULL, 0, &err);
        alarm(0);
        assert_true(r < 0);
        assert_true(na_error_is_set(&err));
        assert_non_null(strstr(err.message, "/usr/bin/yes"));
        na_error_clear(&err);
}

int main(void)
{
#ifndef NA_TEST_HOOKS
        return 77; /* fault injection is compiled into test builds only */
#endif
        setenv("NA_FAULTS", "spawn.poll=1", 1);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_poll_error_kills_the_child),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
