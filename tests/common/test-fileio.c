/* SPDX-License-Identifier: GPL-2.0-or-later */
/* common/fileio.h: atomic replace, writes at an offset, bounded reads, mkdir -p and the state directory lock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fileio.h"
#include "unit.h"

struct fixture {
        char *dir;
};

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("fileio");
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        unit_rmrf_free(f->dir);
        free(f);
        return 0;
}

static char *path_in(const struct fixture *f, const char *name)
{
        char *p;
        if (asprintf(&p, "%s/%s", f->dir, name) < 0)
                abort();
        return p;
}

static void test_atomic_write_creates_and_replaces(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_in(f, "state.json");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;

        assert_int_equal(na_atomic_write(p, "first", 5, 0640, &err), 0);
        _cleanup_free_ char *a = unit_slurp(p, NULL);
        assert_string_equal(a, "first");
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640); /* exactly the mode asked for, whatever the umask */

        assert_int_equal(na_atomic_write(p, "second, longer", 14, 0600, &err), 0);
        _cleanup_free_ char *b = unit_slurp(p, NULL);
        assert_string_equal(b, "second, longer");
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);

        /* Empty content is content too. */
        assert_int_equal(na_atomic_write(p, "", 0, 0600, &err), 0);
        assert_int_equal(unit_file_size(p), 0);

        /* No temporary file is left behind. */
        assert_int_equal(unit_dir_entries(f->dir), 1);
        assert_false(na_error_is_set(&err));
}

static void test_atomic_write_replaces_symlink_not_target(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *target = unit_write_str(f->dir, "target", "untouched", 0600);
        _cleanup_free_ char *link = path_in(f, "link");
        assert_int_equal(symlink(target, link), 0);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_atomic_write(link, "new", 3, 0600, &err), 0);
        _cleanup_free_ char *t = unit_slurp(target, NULL);
        assert_string_equal(t, "untouched");
        struct stat st;
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISREG(st.st_mode));
}

static void test_atomic_write_errors(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_in(f, "missing-dir/file");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_atomic_write(p, "x", 1, 0600, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_INTERNAL);
        assert_non_null(strstr(err.message, f->dir));
        assert_non_null(strstr(err.message, "No such file or directory"));

        /* A directory in the way: the rename fails and the temporary file goes away. */
        _cleanup_free_ char *d = path_in(f, "adir");
        assert_int_equal(mkdir(d, 0700), 0);
        _cleanup_free_ char *inner = unit_write_str(d, "keep", "x", 0600);
        na_error_clear(&err);
        assert_true(na_atomic_write(d, "x", 1, 0600, &err) < 0);
        assert_non_null(strstr(err.message, "rename"));
        assert_int_equal(unit_dir_entries(f->dir), 1);
}

static void test_read_file(void **state)
{
        struct fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_free_ char *p = unit_write_str(f->dir, "ten", "0123456789", 0600);
        char *text = NULL;
        size_t len = 99;

        assert_int_equal(na_read_file(p, 100, &text, &len, &err), 0);
        assert_int_equal(len, 10);
        assert_string_equal(text, "0123456789");
        free(text);

        /* Exactly max is fine, one more is not. */
        text = NULL;
        assert_int_equal(na_read_file(p, 10, &text, NULL, &err), 0);
        assert_string_equal(text, "0123456789");
        free(text);
        text = NULL;
        assert_int_equal(na_read_file(p, 9, &text, &len, &err), -EFBIG);
        assert_null(text);
        assert_non_null(strstr(err.message, p));
        na_error_clear(&err);

        _cleanup_free_ char *empty = unit_write_str(f->dir, "empty", "", 0600);
        assert_int_equal(na_read_file(empty, 0, &text, &len, &err), 0);
        assert_int_equal(len, 0);
        assert_string_equal(text, "");
        free(text);
        text = NULL;

        /* Binary content with NULs comes back whole. */
        _cleanup_free_ char *bin = unit_write(f->dir, "bin", "a\0b\0c", 5, 0600);
        assert_int_equal(na_read_file(bin, 5, &text, &len, &err), 0);
        assert_int_equal(len, 5);
        assert_memory_equal(text, "a\0b\0c", 6);
        free(text);
        text = NULL;

        _cleanup_free_ char *missing = path_in(f, "nope");
        assert_int_equal(na_read_file(missing, 100, &text, &len, &err), -ENOENT);
        assert_null(text);
        assert_non_null(strstr(err.message, "nope"));
}

static void test_read_file_not_regular(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        char *text = NULL;
        size_t len = 0;
        /* /proc files claim size 0; the bound still holds. */
        assert_int_equal(na_read_file("/proc/self/status", 1 << 20, &text, &len, &err), 0);
        assert_true(len > 0);
        assert_non_null(strstr(text, "Pid:"));
        free(text);
        text = NULL;
        assert_int_equal(na_read_file("/proc/self/status", 16, &text, &len, &err), -EFBIG);
        assert_null(text);
        na_error_clear(&err);

        /* A pipe: no size at all. */
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        assert_int_equal(write(fds[1], "through a pipe", 14), 14);
        close(fds[1]);
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
        assert_int_equal(na_read_file(path, 100, &text, &len, &err), 0);
        assert_string_equal(text, "through a pipe");
        free(text);
        close(fds[0]);
}

static void test_mkdir_p(void **state)
{
        struct fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_free_ char *deep = path_in(f, "a/b/c/d");
        assert_int_equal(na_mkdir_p(deep, 0750, &err), 0);
        struct stat st;
        assert_int_equal(stat(deep, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(na_mkdir_p(deep, 0750, &err), 0); /* again: fine */
        _cleanup_free_ char *slash = path_in(f, "a/b/e/");
        assert_int_equal(na_mkdir_p(slash, 0750, &err), 0);
        assert_false(na_error_is_set(&err));

        _cleanup_free_ char *file = unit_write_str(f->dir, "plain", "x", 0600);
        _cleanup_free_ char *under = path_in(f, "plain/sub");
        assert_int_equal(na_mkdir_p(under, 0750, &err), -ENOTDIR);
        assert_non_null(strstr(err.message, "plain"));
        na_error_clear(&err);
        assert_int_equal(na_mkdir_p(file, 0750, &err), -ENOTDIR);
}

static void test_fsync_parent(void **state)
{
        struct fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_free_ char *p = unit_write_str(f->dir, "x", "x", 0600);
        assert_int_equal(na_fsync_parent(p, &err), 0);
        _cleanup_free_ char *gone = path_in(f, "no/such/file");
        assert_int_equal(na_fsync_parent(gone, &err), -ENOENT);
        assert_non_null(strstr(err.message, "no/such"));
}

/* na_pwrite_all: at its offset, leaving what is around it; a failure names what. */
static void test_pwrite_all(void **state)
{
        struct fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_free_ char *p = path_in(f, "pw");
        _cleanup_close_ int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(na_write_all(fd, "0123456789", 10, p, &err), 0);
        assert_int_equal(na_pwrite_all(fd, "abc", 3, 4, "the thing", &err), 0);
        assert_int_equal(na_pwrite_all(fd, "z", 1, 12, "the thing", &err), 0); /* past the end: a hole */
        char buf[16] = { 0 };
        assert_int_equal(pread(fd, buf, sizeof(buf), 0), 13);
        assert_memory_equal(buf, "0123abc789\0\0z", 13);
        _cleanup_close_ int ro = open(p, O_RDONLY | O_CLOEXEC);
        assert_int_equal(na_pwrite_all(ro, "x", 1, 0, "the thing", &err), -EBADF);
        assert_non_null(strstr(err.message, "write the thing"));
}

/*
 * The lock. POSIX locks never conflict inside one process, so the second holder is
 * a forked child: it reports through its exit status and a pipe.
 */
static pid_t lock_in_child(const char *dir, int report_fd, int hold_fd, int parent_fd)
{
        pid_t pid = fork();
        if (pid != 0)
                return pid;
        if (parent_fd >= 0)
                close(parent_fd); /* the parent's end of the hold pipe: EOF must reach us */
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        int r = na_statedir_lock(dir, &fd, &err);
        char msg[600];
        int n = snprintf(msg, sizeof(msg), "%d %s", r, err.message);
        (void)!write(report_fd, msg, (size_t)n);
        close(report_fd);
        if (r == 0 && hold_fd >= 0) {
                char c;
                (void)!read(hold_fd, &c, 1); /* hold it until the parent says so */
        }
        _exit(r == 0 ? 0 : 3);
}

static void read_report(int fd, char *buf, size_t len)
{
        size_t got = 0;
        for (;;) {
                ssize_t n = read(fd, buf + got, len - 1 - got);
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        buf[got] = '\0';
}

static void test_statedir_lock_second_holder_refused(void **state)
{
        struct fixture *f = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        assert_int_equal(na_statedir_lock(f->dir, &fd, &err), 0);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);

        /* The lock file holds our pid. Read it through the same fd: closing any other
         * fd of the file would drop our POSIX lock. */
        char text[32] = "", want[32];
        assert_true(pread(fd, text, sizeof(text) - 1, 0) > 0);
        snprintf(want, sizeof(want), "%d\n", (int)getpid());
        assert_string_equal(text, want);

        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t child = lock_in_child(f->dir, p[1], -1, p[0]);
        close(p[1]);
        char report[700];
        read_report(p[0], report, sizeof(report));
        close(p[0]);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 3);
        char needle[64];
        snprintf(needle, sizeof(needle), "%d ", -EBUSY);
        assert_true(strncmp(report, needle, strlen(needle)) == 0);
        snprintf(needle, sizeof(needle), "(pid %d)", (int)getpid());
        if (!strstr(report, needle))
                fail_msg("child's error does not name our pid: %s", report);
        assert_non_null(strstr(report, f->dir));

        /* Released: the next agent gets it. */
        close(fd);
        assert_int_equal(pipe(p), 0);
        child = lock_in_child(f->dir, p[1], -1, p[0]);
        close(p[1]);
        read_report(p[0], report, sizeof(report));
        close(p[0]);
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 0)
                fail_msg("lock not free after close: %s", report);
}

static void test_statedir_lock_held_by_child(void **state)
{
        struct fixture *f = *state;
        int p[2], hold[2];
        assert_int_equal(pipe(p), 0);
        assert_int_equal(pipe(hold), 0);
        pid_t child = lock_in_child(f->dir, p[1], hold[0], hold[1]);
        close(p[1]);
        close(hold[0]);
        char report[700];
        read_report(p[0], report, sizeof(report)); /* EOF once the child took the lock */
        close(p[0]);
        assert_true(strncmp(report, "0 ", 2) == 0);

        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        assert_int_equal(na_statedir_lock(f->dir, &fd, &err), -EBUSY);
        assert_int_equal(fd, -1);
        char needle[64];
        snprintf(needle, sizeof(needle), "(pid %d)", (int)child);
        if (!strstr(err.message, needle))
                fail_msg("error does not name the holder %d: %s", (int)child, err.message);

        close(hold[1]); /* the child lets go and exits */
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        na_error_clear(&err);
        assert_int_equal(na_statedir_lock(f->dir, &fd, &err), 0);
        close(fd);
}

static void test_statedir_lock_missing_dir(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *missing = path_in(f, "not-there");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        assert_int_equal(na_statedir_lock(missing, &fd, &err), -ENOENT);
        assert_non_null(strstr(err.message, "not-there"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_atomic_write_creates_and_replaces, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_write_replaces_symlink_not_target, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_write_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_file_not_regular, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fsync_parent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pwrite_all, setup, teardown),
                cmocka_unit_test_setup_teardown(test_statedir_lock_second_holder_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_statedir_lock_held_by_child, setup, teardown),
                cmocka_unit_test_setup_teardown(test_statedir_lock_missing_dir, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
