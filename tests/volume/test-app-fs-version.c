/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * volume/app-fs-version.c on a real directory (the app-fs fixture, root for owners):
 * a file's version (sha256 of small content, metadata above the content bound), text
 * and binary, what is not a regular file; the replace that happens only from the
 * current version (written, conflict with what is there, created only while missing),
 * owned like the layer's files, the old file intact when the volume is full, and the
 * hostile path table refused with nothing outside touched.
 */
#include "volume/fs-fixture.h"



static void get(struct fx *f, const char *path, size_t max, struct app_fs_file *out)
{
        struct na_error err = NA_ERROR_INIT;
        if (app_fs_file_get(f->fs, path, max, out, &err) < 0)
                fail_msg("get %s: %s", path, err.message);
}

static void test_versions(void **state)
{
        struct fx *f = *state;
        struct app_fs_file a, b;
        get(f, "mine", 1024, &a);
        assert_true(a.exists);
        assert_false(a.binary);
        assert_string_equal(a.content, "mine\n");
        assert_int_equal(a.bytes, 5);
        assert_int_equal(strncmp(a.version, "sha256:", 7), 0);
        /* The same bytes written again: the same version; other bytes: another. */
        vfile(f, "mine", "mine\n", 5);
        get(f, "/mine", 1024, &b);
        assert_string_equal(a.version, b.version);
        app_fs_file_clear(&b);
        vfile(f, "mine", "mine!\n", 6);
        get(f, "mine", 1024, &b);
        assert_string_not_equal(a.version, b.version);
        app_fs_file_clear(&b);
        /* Above the content bound: metadata only. */
        get(f, "mine", 4, &b);
        assert_true(b.exists && b.binary && !b.content);
        assert_int_equal(b.bytes, 6);
        assert_int_equal(strncmp(b.version, "meta:", 5), 0);
        app_fs_file_clear(&b);
        /* Not UTF-8: binary, with a version. */
        vfile(f, "bin", "\xff\xfe\x00", 3);
        get(f, "bin", 1024, &b);
        assert_true(b.exists && b.binary && !b.content && b.bytes == 3);
        app_fs_file_clear(&b);
        /* Missing (also its directory), a directory, a link: not a file. */
        get(f, "nothing", 1024, &b);
        assert_false(b.exists);
        assert_int_equal(b.not_regular, 0);
        get(f, "nodir/nothing", 1024, &b);
        assert_false(b.exists);
        get(f, "sub", 1024, &b);
        assert_false(b.exists);
        assert_int_equal(b.not_regular, EISDIR);
        get(f, "inlink", 1024, &b);
        assert_false(b.exists);
        assert_int_equal(b.not_regular, ELOOP);
        app_fs_file_clear(&a);
}

static void test_replace_if(void **state)
{
        struct fx *f = *state;
        if (getenv("NA_FAULTS"))
                skip(); /* the run with the volume full: test_full */
        struct na_error err = NA_ERROR_INIT;
        struct app_fs_file cur, now;
        bool conflict = true;
        get(f, "mine", 1024, &cur);
        assert_int_equal(app_fs_file_replace_if(f->fs, "mine", cur.version, "edited\n", 7, 1024, &now, &conflict, &err),
                         0);
        assert_false(conflict);
        struct app_fs_file after;
        get(f, "mine", 1024, &after);
        assert_string_equal(after.content, "edited\n");
        assert_string_equal(after.version, now.version);
        app_fs_file_clear(&after);
        check_owner(f, "mine", 0, 0, 0644); /* an existing file keeps its owner (the fixture's: root) */
        /* From the old version again: a conflict with what is there, nothing written. */
        struct app_fs_file c2;
        assert_int_equal(app_fs_file_replace_if(f->fs, "mine", cur.version, "stale\n", 6, 1024, &c2, &conflict, &err),
                         0);
        assert_true(conflict);
        assert_string_equal(c2.content, "edited\n");
        assert_string_equal(c2.version, now.version);
        app_fs_file_clear(&c2);
        /* baseVersion null: created while missing, a conflict once it exists. */
        assert_int_equal(app_fs_file_replace_if(f->fs, "sub/new.txt", NULL, "new\n", 4, 1024, &c2, &conflict, &err), 0);
        assert_false(conflict);
        app_fs_file_clear(&c2);
        check_owner(f, "sub/new.txt", UID, GID, 0644);
        assert_int_equal(app_fs_file_replace_if(f->fs, "sub/new.txt", NULL, "again\n", 6, 1024, &c2, &conflict, &err),
                         0);
        assert_true(conflict);
        assert_string_equal(c2.content, "new\n");
        app_fs_file_clear(&c2);
        /* A version given for a file that is gone: conflict, nothing created. */
        assert_int_equal(app_fs_file_replace_if(f->fs, "gone.txt", now.version, "x", 1, 1024, &c2, &conflict, &err), 0);
        assert_true(conflict);
        assert_false(c2.exists);
        char *p = pathf("%s/gone.txt", f->vol);
        assert_int_equal(access(p, F_OK), -1);
        free(p);
        /* Larger than the content bound: the version is the metadata of what was written. */
        app_fs_file_clear(&cur);
        get(f, "mine", 4, &cur);
        assert_int_equal(app_fs_file_replace_if(f->fs, "mine", cur.version, "0123456789", 10, 4, &c2, &conflict, &err),
                         0);
        assert_false(conflict);
        get(f, "mine", 4, &after);
        assert_string_equal(after.version, c2.version);
        app_fs_file_clear(&after);
        app_fs_file_clear(&c2);
        app_fs_file_clear(&cur);
        app_fs_file_clear(&now);
        assert_int_equal(leftovers(f->vol), 0);
        check_outside(f, "replace_if");
}

static void test_full(void **state)
{
        struct fx *f = *state;
        if (!getenv("NA_FAULTS"))
                skip();
        struct na_error err = NA_ERROR_INIT;
        struct app_fs_file cur, now;
        bool conflict;
        get(f, "mine", 1024, &cur);
        assert_true(app_fs_file_replace_if(f->fs, "mine", cur.version, "big\n", 4, 1024, &now, &conflict, &err) < 0);
        assert_string_equal(err.code, NA_E_QUOTA_EXCEEDED);
        na_error_clear(&err);
        struct app_fs_file after;
        get(f, "mine", 1024, &after);
        assert_string_equal(after.content, "mine\n");
        app_fs_file_clear(&after);
        app_fs_file_clear(&cur);
        assert_int_equal(leftovers(f->vol), 0);
}

static void test_refused(void **state)
{
        struct fx *f = *state;
        static const char *const hostile[] = { "etc/passwd", "up/canary", "c1/canary", "proc/etc/passwd",
                                               "cwd/x",      "dotdot/outside/canary", "deep/x/canary",
                                               "abs/canary", "mixed/canary", "../outside/canary" };
        for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
                struct na_error err = NA_ERROR_INIT;
                struct app_fs_file out;
                bool conflict;
                int r = app_fs_file_get(f->fs, hostile[i], 1024, &out, &err);
                if (r >= 0) /* a link the kernel refuses to follow is still never followed */
                        assert_false(out.exists);
                else {
                        if (!streq(err.code, NA_E_VALIDATION))
                                fail_msg("%s: %s %s", hostile[i], err.code, err.message);
                        assert_non_null(json_object_get(err.details, "path"));
                }
                na_error_clear(&err);
                r = app_fs_file_replace_if(f->fs, hostile[i], NULL, "owned\n", 6, 1024, &out, &conflict, &err);
                if (r >= 0)
                        fail_msg("%s: written", hostile[i]);
                na_error_clear(&err);
        }
        assert_int_equal(leftovers(f->vol), 0);
        check_outside(f, "the table");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_versions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_replace_if, setup, teardown),
                cmocka_unit_test_setup_teardown(test_full, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
