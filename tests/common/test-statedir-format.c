/* SPDX-License-Identifier: GPL-2.0-or-later */
/* common/statedir-format.h: the state directory's format file, parsed, written when missing, refused when unknown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/statedir-format.h"
#include "unit.h"

static int setup(void **state)
{
        *state = unit_dir_fixture_new("statedir-format", NA_STATEDIR_FORMAT_FILE);
        return 0;
}

static int teardown(void **state)
{
        unit_dir_fixture_free(*state);
        return 0;
}

static int parse(const char *text, size_t len, unsigned *v, char *why, size_t whylen)
{
        struct na_error err = NA_ERROR_INIT;
        int r = na_statedir_format_parse(text, len, v, &err);
        snprintf(why, whylen, "%s", err.message);
        na_error_clear(&err);
        return r;
}

static void test_parse_good(void **state)
{
        (void)state;
        char why[512];
        unsigned v = 0;
        assert_int_equal(parse("nodeagent-state 1\n", 18, &v, why, sizeof(why)), 0);
        assert_int_equal(v, 1);
        assert_int_equal(parse("nodeagent-state 1", 17, &v, why, sizeof(why)), 0);
        assert_int_equal(v, 1);
        assert_int_equal(parse("nodeagent-state 42\n", 19, &v, why, sizeof(why)), 0);
        assert_int_equal(v, 42);
        assert_int_equal(parse("nodeagent-state 999999999", 25, &v, why, sizeof(why)), 0);
        assert_int_equal(v, 999999999u);
}

static void test_parse_garbled(void **state)
{
        (void)state;
        static const struct {
                const char *text;
                size_t len;
                const char *reason;
        } bad[] = {
                { "", 0, "empty" },
                { "\n", 1, "does not start with" },
                { "nodeagent-state", 15, "does not start with" },
                { "nodeagent-state ", 16, "no version" },
                { "nodeagent-state 0\n", 18, "version 0" },
                { "nodeagent-state 01\n", 19, "leading zero" },
                { "nodeagent-state 1\n\n", 19, "more than one line" },
                { "nodeagent-state 1\nnodeagent-state 2\n", 36, "more than one line" },
                { "nodeagent-state 1 \n", 19, "not a decimal number" },
                { "nodeagent-state -1\n", 19, "not a decimal number" },
                { "nodeagent-state 1x", 18, "not a decimal number" },
                { "nodeagent-state 1234567890", 26, "longer than 9 digits" },
                { "nodeagent-state 1\0", 18, "NUL" },
                { "Nodeagent-state 1\n", 18, "does not start with" },
                { " nodeagent-state 1\n", 19, "does not start with" },
                { "nodeagent-state\t1\n", 18, "does not start with" },
                { "{\"format\": 1}\n", 14, "does not start with" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char why[512];
                unsigned v = 77;
                int r = parse(bad[i].text, bad[i].len, &v, why, sizeof(why));
                if (r != -EBADMSG || !strstr(why, bad[i].reason) || v != 77)
                        fail_msg("case %zu: r=%d v=%u why='%s', want -EBADMSG and '%s'", i, r, v, why, bad[i].reason);
        }
}

/* A fresh directory, and one made before the file existed, get format 1, atomically (no temporary left). */
static void test_missing_is_written(void **state)
{
        struct unit_dir_fixture *f = *state;
        free(unit_write_str(f->dir, "jobs.journal", "older state\n", 0600));
        struct na_error err = NA_ERROR_INIT;
        unsigned v = 0;
        assert_int_equal(na_statedir_format_check(f->dir, &v, &err), 0);
        assert_int_equal(v, NA_STATEDIR_FORMAT);
        _cleanup_free_ char *text = unit_slurp(f->path, NULL);
        assert_non_null(text);
        assert_string_equal(text, "nodeagent-state 1\n");
        struct stat st;
        assert_int_equal(stat(f->path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        /* Only the two files: no temporary of the atomic write left behind. */
        DIR *d = opendir(f->dir);
        unsigned n = 0;
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        assert_int_equal(n, 2);
        /* A second start reads what the first wrote, and leaves it. */
        assert_int_equal(na_statedir_format_check(f->dir, &v, &err), 0);
        assert_int_equal(stat(f->path, &st), 0);
        _cleanup_free_ char *again = unit_slurp(f->path, NULL);
        assert_string_equal(again, "nodeagent-state 1\n");
        assert_false(na_error_is_set(&err));
}

static int check_text(const struct unit_dir_fixture *f, const char *text, size_t len, unsigned *v, struct na_error *err)
{
        free(unit_write(f->dir, NA_STATEDIR_FORMAT_FILE, text, len, 0644));
        return na_statedir_format_check(f->dir, v, err);
}

static void test_newer_refused(void **state)
{
        struct unit_dir_fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        unsigned v = 0;
        assert_int_equal(check_text(f, "nodeagent-state 2\n", 18, &v, &err), -EPROTONOSUPPORT);
        assert_int_equal(v, 2);
        char want[1024];
        snprintf(want, sizeof(want),
                 "state directory %s was written by a newer nodeagent (format 2, in %s); this one knows format 1: "
                 "upgrade the package, or restore a backup of the directory made with this version",
                 f->dir, f->path);
        assert_string_equal(err.message, want);
        /* The file is left as it was: the newer agent's directory is not ours to rewrite. */
        _cleanup_free_ char *text = unit_slurp(f->path, NULL);
        assert_string_equal(text, "nodeagent-state 2\n");
}

static void test_garbled_refused(void **state)
{
        struct unit_dir_fixture *f = *state;
        static const char *bad[] = { "", "nodeagent-state one\n", "garbage\x01\x02", "nodeagent-state 1\nx\n" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                unsigned v = 0;
                assert_int_equal(check_text(f, bad[i], strlen(bad[i]), &v, &err), -EPROTONOSUPPORT);
                char head[1024];
                snprintf(head, sizeof(head), "state directory %s: %s is garbled (", f->dir, f->path);
                if (strncmp(err.message, head, strlen(head)) != 0 || !strstr(err.message, "this nodeagent knows format 1") ||
                    !strstr(err.message, "restore"))
                        fail_msg("case %zu: '%s'", i, err.message);
                _cleanup_free_ char *text = unit_slurp(f->path, NULL);
                assert_string_equal(text, bad[i]);
        }
        /* Longer than any format file: garbled too, not read whole. */
        char big[4096];
        memset(big, 'x', sizeof(big));
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(check_text(f, big, sizeof(big), NULL, &err), -EPROTONOSUPPORT);
        assert_non_null(strstr(err.message, "is garbled (larger than 64 bytes)"));
}

/* Not a format problem: an unreadable format file is an I/O error (exit 1, not 2), and names the file. */
static void test_unreadable_is_io_error(void **state)
{
        struct unit_dir_fixture *f = *state;
        assert_int_equal(mkdir(f->path, 0700), 0);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int r = na_statedir_format_check(f->dir, NULL, &err);
        assert_true(r < 0);
        assert_int_not_equal(r, -EPROTONOSUPPORT);
        assert_non_null(strstr(err.message, "read its format"));
        assert_non_null(strstr(err.message, f->path));
        rmdir(f->path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_good),
                cmocka_unit_test(test_parse_garbled),
                cmocka_unit_test_setup_teardown(test_missing_is_written, setup, teardown),
                cmocka_unit_test_setup_teardown(test_newer_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_garbled_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreadable_is_io_error, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
