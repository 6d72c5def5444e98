/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * volume/app-fs-tmp.c on a real directory (the app-fs fixture, root for owners):
 * a file that replaces its target only on commit, owned like the files the layer
 * writes, an abort that keeps nothing and leaves the target as it was, and the hostile
 * path table refused with nothing outside touched.
 */
#include "volume/fs-fixture.h"




static void put(struct app_fs_tmp *t, const char *data)
{
        assert_int_equal(pwrite(t->fd, data, strlen(data), 0), (ssize_t)strlen(data));
}

static void test_new_and_replace(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct app_fs_tmp t;
        assert_int_equal(app_fs_tmp_open(f->fs, "/new.bin", &t, &err), 0);
        put(&t, "fresh\n");
        char *p = pathf("%s/new.bin", f->vol);
        assert_int_equal(access(p, F_OK), -1); /* nothing under the name before the commit */
        /* O_TMPFILE: no name at all until the commit; the fallback (NA_FAULTS=app-fs.tmpfile...): a hidden one. */
        assert_int_equal(leftovers(f->vol), getenv("NA_FAULTS") ? 1 : 0);
        assert_int_equal(app_fs_tmp_commit(&t, &err), 0);
        struct stat st;
        must(stat(p, &st), p);
        assert_int_equal(st.st_uid, UID);
        assert_int_equal(st.st_gid, GID);
        assert_int_equal(st.st_mode & 07777, 0644);
        size_t len;
        char *c = unit_slurp(p, &len);
        assert_int_equal(len, 6);
        assert_memory_equal(c, "fresh\n", 6);
        free(c);
        free(p);

        /* An existing file keeps its owner and permission bits; its content is replaced. */
        p = pathf("%s/mine", f->vol);
        must(chown(p, 123, 456), "chown");
        must(chmod(p, 0600), "chmod");
        assert_int_equal(app_fs_tmp_open(f->fs, "mine", &t, &err), 0);
        put(&t, "replaced\n");
        assert_int_equal(app_fs_tmp_commit(&t, &err), 0);
        must(stat(p, &st), p);
        assert_int_equal(st.st_uid, 123);
        assert_int_equal(st.st_gid, 456);
        assert_int_equal(st.st_mode & 07777, 0600);
        c = unit_slurp(p, &len);
        assert_int_equal(len, 9);
        free(c);
        free(p);

        /* Through a link that stays inside. */
        assert_int_equal(app_fs_tmp_open(f->fs, "deep/back/via-link.txt", &t, &err), 0);
        put(&t, "x");
        assert_int_equal(app_fs_tmp_commit(&t, &err), 0);
        p = pathf("%s/sub/via-link.txt", f->vol);
        assert_int_equal(access(p, F_OK), 0);
        free(p);
        assert_int_equal(leftovers(f->vol), 0);
        check_outside(f, "commits");
}

static void test_abort_keeps_nothing(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct app_fs_tmp t;
        assert_int_equal(app_fs_tmp_open(f->fs, "mine", &t, &err), 0);
        put(&t, "half a download");
        app_fs_tmp_abort(&t);
        app_fs_tmp_abort(&t); /* idempotent */
        char *p = pathf("%s/mine", f->vol);
        size_t len;
        char *c = unit_slurp(p, &len);
        assert_int_equal(len, 5);
        assert_memory_equal(c, "mine\n", 5);
        free(c);
        free(p);
        assert_int_equal(app_fs_tmp_open(f->fs, "sub/never.bin", &t, &err), 0);
        put(&t, "x");
        app_fs_tmp_abort(&t);
        p = pathf("%s/sub/never.bin", f->vol);
        assert_int_equal(access(p, F_OK), -1);
        free(p);
        char *sub = pathf("%s/sub", f->vol);
        assert_int_equal(leftovers(sub), 0);
        assert_int_equal(leftovers(f->vol), 0);
        free(sub);
        app_fs_tmp_abort(NULL);
}

static void test_refused(void **state)
{
        struct fx *f = *state;
        static const char *const hostile[] = {
                "etc/na-app-fs-test", "up/canary", "up/new", "c1/new", "abs/new", "deep/x/new", "dotdot/new",
                "proc/etc/na-app-fs-test", "cwd/new", "mixed/new", "../new", "/../new", "a/../../new", "", ".",
                "sub//x", "sub/", "x\x01y",
        };
        for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
                struct na_error err = NA_ERROR_INIT;
                struct app_fs_tmp t;
                int r = app_fs_tmp_open(f->fs, hostile[i], &t, &err);
                if (r >= 0)
                        fail_msg("%s: accepted", hostile[i]);
                if (!streq(err.code, NA_E_VALIDATION) && !streq(err.code, NA_E_FILE_NOT_FOUND))
                        fail_msg("%s: %s %s", hostile[i], err.code, err.message);
                na_error_clear(&err);
                check_outside(f, hostile[i]);
        }
        static const char *const states[] = { "/", "sub", "inlink", "etc", "deep/back" };
        for (size_t i = 0; i < ARRAY_SIZE(states); i++) {
                struct na_error err = NA_ERROR_INIT;
                struct app_fs_tmp t;
                assert_true(app_fs_tmp_open(f->fs, states[i], &t, &err) < 0);
                if (!streq(err.code, NA_E_INVALID_STATE))
                        fail_msg("%s: %s %s", states[i], err.code, err.message);
                na_error_clear(&err);
        }
        char *missing = pathf("nodir/x");
        struct na_error err = NA_ERROR_INIT;
        struct app_fs_tmp t;
        assert_true(app_fs_tmp_open(f->fs, missing, &t, &err) < 0);
        assert_string_equal(err.code, NA_E_FILE_NOT_FOUND);
        na_error_clear(&err);
        free(missing);
        assert_int_equal(leftovers(f->vol), 0);
        check_outside(f, "the table");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_new_and_replace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_abort_keeps_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
