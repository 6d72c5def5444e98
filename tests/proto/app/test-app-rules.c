/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/app-fields.c: the field rules of apps (hostname, SFTP user, volume path,
 * startedPattern with its cost bounds, env names, stop signals) and proto/text.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/json-cleanup.h"
#include "proto/app-params.h"
#include "proto/text.h"

static void test_hostname(void **state)
{
        assert_null(proto_app_hostname_problem("a"));
        assert_null(proto_app_hostname_problem("web-1"));
        assert_null(proto_app_hostname_problem("9lives"));
        assert_null(proto_app_hostname_problem("x12345678901234567890123456789012345678901234567890123456789ab"));
        assert_non_null(proto_app_hostname_problem(""));
        assert_non_null(proto_app_hostname_problem("-a"));
        assert_non_null(proto_app_hostname_problem("a-"));
        assert_non_null(proto_app_hostname_problem("a.b"));
        assert_non_null(proto_app_hostname_problem("a_b"));
        assert_non_null(proto_app_hostname_problem("h\xc3\xa9llo"));
        assert_non_null(proto_app_hostname_problem("x123456789012345678901234567890123456789012345678901234567890abc"));
        /* Uppercase gets its own message. */
        assert_string_equal(proto_app_hostname_problem("Web-1"), "must be lowercase: it names the app in DNS and on disk");
}

static void test_sftp_username(void **state)
{
        assert_null(proto_app_sftp_username_problem("a"));
        assert_null(proto_app_sftp_username_problem("web.1_x-y"));
        assert_null(proto_app_sftp_username_problem("0abc"));
        assert_non_null(proto_app_sftp_username_problem(""));
        assert_non_null(proto_app_sftp_username_problem(".hidden"));
        assert_non_null(proto_app_sftp_username_problem("-opt"));
        assert_non_null(proto_app_sftp_username_problem("_a"));
        assert_non_null(proto_app_sftp_username_problem("Web"));
        assert_non_null(proto_app_sftp_username_problem("a b"));
        assert_non_null(proto_app_sftp_username_problem("a/b"));
        assert_non_null(proto_app_sftp_username_problem("a:b"));
        assert_non_null(proto_app_sftp_username_problem("x1234567890123456789012345678901234567890123456789012345678901ab"));
}

static void test_volume_path(void **state)
{
        const char *good[] = { "/home/container", "/data", "/srv/my app/data", "/a/.hidden", "/a/..b", "/procx",
                               "/devices", "/x/proc", "/opt/sys" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                if (proto_app_volume_path_problem(good[i]))
                        fail_msg("%s refused: %s", good[i], proto_app_volume_path_problem(good[i]));
        const char *bad[] = { "", "data", "./data", "/", "//", "/data/", "/a//b", "/a/./b", "/a/../b", "/..", "/.",
                              "/a/..", "/proc", "/proc/x", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm", "/a\nb",
                              "/a\tb" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (!proto_app_volume_path_problem(bad[i]))
                        fail_msg("\"%s\" accepted", bad[i]);
        char longp[300] = "/";
        memset(longp + 1, 'a', 255);
        assert_non_null(proto_app_volume_path_problem(longp)); /* 256 bytes */
        longp[255] = '\0';
        assert_null(proto_app_volume_path_problem(longp)); /* 255 bytes */
        assert_non_null(proto_app_volume_path_problem(NULL));
}

static void test_user_and_signal_parse(void **state)
{
        (void)state;
        const char *good[] = { "postgres", "1000", "1000:1000", "postgres:postgres", "0:0", "65535:65535", "www-data",
                               "_apt", "user.name", "x$", "a:1" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                if (proto_app_user_problem(good[i]))
                        fail_msg("%s refused: %s", good[i], proto_app_user_problem(good[i]));
        const char *bad[] = { "", ":", "a:", ":a", "a:b:c", "65536", "1:65536", "-a", "a b", "a/b", "$a",
                              "abcdefghijabcdefghijabcdefghijabc", "a\nb", "99999999999999999999" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (!proto_app_user_problem(bad[i]))
                        fail_msg("\"%s\" accepted", bad[i]);
        assert_non_null(proto_app_user_problem(NULL));
        assert_int_equal(proto_app_signal_parse("SIGINT"), SIGINT);
        assert_int_equal(proto_app_signal_parse("INT"), SIGINT);
        assert_int_equal(proto_app_signal_parse("2"), SIGINT);
        assert_int_equal(proto_app_signal_parse("SIGRTMIN+3"), 0);
        assert_int_equal(proto_app_signal_parse("99"), 0);
        assert_int_equal(proto_app_signal_parse(""), 0);
        assert_int_equal(proto_app_signal_parse(NULL), 0);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_pattern(void **state)
{
        const char *good[] = { "Done \\(", "^\\[Server\\] started$", "listening on (port )?[0-9]+", "a{2,5}b{3}",
                               "[[:alpha:]]+ ready", "[]{}]", "x{255}", "(a|b){16}(c|d){16}", "ready|started" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                if (proto_app_pattern_problem(good[i]))
                        fail_msg("%s refused: %s", good[i], proto_app_pattern_problem(good[i]));
        assert_string_equal(proto_app_pattern_problem("(a"), "must be a POSIX extended regular expression");
        assert_string_equal(proto_app_pattern_problem("a{3,1}"), "must be a POSIX extended regular expression");
        assert_non_null(proto_app_pattern_problem(""));
        assert_non_null(proto_app_pattern_problem("(a)\\1"));
        assert_non_null(proto_app_pattern_problem("x{256}"));
        assert_non_null(proto_app_pattern_problem("x{1,1000}"));

        /* Patterns that would cost regcomp gigabytes or a deep recursion are refused at once. */
        const char *costly[] = { "((a{255}){255}){255}", "(((((a{16}){16}){16}){16}){16})", "(a{,255}){,255}",
                                 "(x{200}){200}", "a{255}{255}", "(abcdefghijklmnopq){255}",
                                 /* glibc takes 0.3 s, 13 s and 22 s to compile these */
                                 "((a*)*)*{255}", "(a*{64})*{64}", "a**********************{255}",
                                 "(a*)*", "(a|b?){9}", "(a|){2}", "(^)+", "a+*", "a{2}{3}", "((a*)(b*)){255}" };
        double t0 = now_s();
        for (size_t i = 0; i < sizeof(costly) / sizeof(costly[0]); i++)
                if (!proto_app_pattern_problem(costly[i]))
                        fail_msg("%s accepted", costly[i]);
        char deep[200] = "";
        for (int i = 0; i < 40; i++)
                strcat(deep, "(");
        strcat(deep, "a");
        for (int i = 0; i < 40; i++)
                strcat(deep, ")");
        assert_string_equal(proto_app_pattern_problem(deep), "must not nest groups more than 32 deep");
        /* A long but cheap pattern is fine; 1025 characters is not. */
        char big[1100];
        memset(big, 'a', 1024);
        big[1024] = '\0';
        assert_null(proto_app_pattern_problem(big));
        big[1024] = 'a';
        big[1025] = '\0';
        assert_non_null(proto_app_pattern_problem(big));
        /* The largest accepted expansion compiles quickly. */
        assert_null(proto_app_pattern_problem("(abcdefghijklmno){255}"));
        assert_null(proto_app_pattern_problem("(a+){255}(b+){255}"));
        assert_null(proto_app_pattern_problem("(a*)?b"));
        assert_null(proto_app_pattern_problem("((a*b)*c){100}"));
        assert_null(proto_app_pattern_problem("(.*x){255}"));
        if (now_s() - t0 > 2.0)
                fail_msg("refusing costly patterns took %.2f s", now_s() - t0);
}

static void test_env_name_and_signals(void **state)
{
        assert_true(proto_app_env_name_valid("PORT"));
        assert_true(proto_app_env_name_valid("_x1"));
        assert_true(proto_app_env_name_valid("a"));
        assert_false(proto_app_env_name_valid(""));
        assert_false(proto_app_env_name_valid("1X"));
        assert_false(proto_app_env_name_valid("A-B"));
        assert_false(proto_app_env_name_valid("A=B"));
        assert_false(proto_app_env_name_valid("A.B"));
        char name[200];
        memset(name, 'A', 129);
        name[129] = '\0';
        assert_false(proto_app_env_name_valid(name));
        name[128] = '\0';
        assert_true(proto_app_env_name_valid(name));

        assert_string_equal(proto_app_signal_name(SIGTERM), "SIGTERM");
        assert_string_equal(proto_app_signal_name(SIGKILL), "SIGKILL");
        assert_string_equal(proto_app_signal_name(SIGSEGV), "SIGSEGV");
        assert_null(proto_app_signal_name(0));
        assert_null(proto_app_signal_name(64));
        assert_true(proto_app_stop_signal_allowed(SIGTERM));
        assert_true(proto_app_stop_signal_allowed(SIGUSR2));
        assert_false(proto_app_stop_signal_allowed(SIGSTOP));
        assert_false(proto_app_stop_signal_allowed(SIGSEGV));
        assert_false(proto_app_stop_signal_allowed(0));
}

static void test_text_json(void **state)
{
        _cleanup_json_ json_t *a = proto_text_json("ok\xff\xfe\n", 5);
        assert_string_equal(json_string_value(a), "ok\xef\xbf\xbd\xef\xbf\xbd\n");
        _cleanup_json_ json_t *b = proto_text_json("a\0b", 3);
        assert_string_equal(json_string_value(b), "a\xef\xbf\xbd" "b");
        /* Overlong, surrogate, truncated and valid multi-byte sequences. */
        _cleanup_json_ json_t *c = proto_text_json("\xc0\xaf|\xed\xa0\x80|\xe2\x82|\xe2\x82\xac", 13);
        assert_string_equal(json_string_value(c), "\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
                                                  "\xef\xbf\xbd\xef\xbf\xbd|\xe2\x82\xac");
        _cleanup_json_ json_t *d = proto_text_json(NULL, 0);
        assert_string_equal(json_string_value(d), "");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hostname),      cmocka_unit_test(test_sftp_username),
                cmocka_unit_test(test_volume_path),   cmocka_unit_test(test_pattern),
                cmocka_unit_test(test_user_and_signal_parse),
                cmocka_unit_test(test_env_name_and_signals), cmocka_unit_test(test_text_json),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
