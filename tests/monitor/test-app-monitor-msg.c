/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The monitor's wire messages as the agent parses them (app_monitor_parse_message), and the state files read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/unit.h"
#include "drivers/app/oci/app-monitor.h"
#include "ring/monitor-msg.h"

static int parse(const char *text, struct app_monitor_msg *msg)
{
        struct na_error err = NA_ERROR_INIT;
        int r = app_monitor_parse_message(text, strlen(text), msg, &err);
        if (r < 0)
                assert_string_equal(err.code, NA_E_DRIVER);
        na_error_clear(&err);
        return r;
}

static void test_valid(void **state)
{
        struct app_monitor_msg m;
        assert_int_equal(parse("O42", &m), 0);
        assert_int_equal(m.type, APP_MONITOR_MSG_OUTPUT);
        assert_int_equal(m.next_seq, 42);
        assert_int_equal(parse("R", &m), 0);
        assert_int_equal(m.type, APP_MONITOR_MSG_STARTED);
        assert_int_equal(parse("K", &m), 0);
        assert_int_equal(m.type, APP_MONITOR_MSG_ACK);
        assert_int_equal(parse("X137 9", &m), 0);
        assert_int_equal(m.type, APP_MONITOR_MSG_EXIT);
        assert_int_equal(m.exit_code, 137);
        assert_int_equal(m.exit_signal, 9);
        assert_int_equal(parse("X0 0", &m), 0);
        assert_int_equal(parse("Estdin buffer is full", &m), 0);
        assert_int_equal(m.type, APP_MONITOR_MSG_REFUSED);
        assert_string_equal(m.reason, "stdin buffer is full");
        assert_int_equal(parse("E\x01\xff", &m), 0);
        assert_string_equal(m.reason, "??"); /* printable only */
}

static void test_invalid(void **state)
{
        struct app_monitor_msg m;
        const char *bad[] = { "", "O", "O0", "O-1", "Ox", "O1 ", "O99999999999999999999999", "R1", "K ",
                              "X", "X1", "X1 ", "X 1", "X-1 0", "X1 65", "X999 0", "Xa b", "Z", "o1" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (parse(bad[i], &m) != -EBADMSG)
                        fail_msg("accepted '%s'", bad[i]);
}

static void test_state_files(void **state)
{
        char *dir = unit_tmpdir("app-monitor-msg");
        struct app_exit ex;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_monitor_read_exit(dir, &ex, &err), -ENOENT);
        assert_false(na_error_is_set(&err));
        free(unit_write_str(dir, "exit", "code=137 signal=9 oom=1 at_ms=1795539659144\n", 0600));
        assert_int_equal(app_monitor_read_exit(dir, &ex, &err), 0);
        assert_int_equal(ex.code, 137);
        assert_int_equal(ex.signal, 9);
        assert_true(ex.oom);
        assert_int_equal(ex.at_ms, 1795539659144LL);
        free(unit_write_str(dir, "exit", "garbage", 0600));
        assert_int_equal(app_monitor_read_exit(dir, &ex, &err), -EBADMSG);
        na_error_clear(&err);

        assert_false(app_monitor_started(dir));
        free(unit_write_str(dir, "started", "at_ms=1\n", 0600));
        assert_true(app_monitor_started(dir));

        /* A pid file nobody locks is no monitor, whatever pid it names (here our own). */
        assert_false(app_monitor_alive(dir, NULL));
        char pid[32];
        snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        free(unit_write_str(dir, "monitor.pid", pid, 0600));
        assert_false(app_monitor_alive(dir, NULL));
        int fd = -1;
        assert_int_equal(app_monitor_connect(dir, &fd, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        unit_rmrf_free(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_state_files),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
