/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app's user from its image (app-user.h): names and numbers, user:group,
 * supplementary groups, missing names as VALIDATION_ERROR, and the image's files read
 * beneath its root: a symbolic link /etc/passwd -> /etc/passwd of the host resolves
 * inside the root, never to the host's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unit.h"
#include "drivers/app/oci/app-user.h"

static const char *passwd = "root:x:0:0:root:/root:/bin/bash\n"
                            "# a comment:x:5:5\n"
                            "postgres:x:101:104:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash\n"
                            "container:x:1000:1000:container:/home/container:/bin/sh\n"
                            "big:x:70000:70000::/:/bin/sh\n"
                            "short:x\n";
static const char *group = "root:x:0:\n"
                           "ssl-cert:x:103:postgres\n"
                           "postgres:x:104:\n"
                           "audio:x:29:container,postgres\n"
                           "container:x:1000:\n"
                           "big:x:70000:\n";

static struct app_user resolve_ok(const char *spec)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_user u;
        if (app_user_resolve_text(passwd, group, spec, &u, &err) < 0)
                fail_msg("%s: %s", spec, err.message);
        return u;
}

static void test_names_and_numbers(void **state)
{
        (void)state;
        struct app_user u = resolve_ok("postgres");
        assert_int_equal(u.uid, 101);
        assert_int_equal(u.gid, 104);
        assert_int_equal(u.n_groups, 2); /* ssl-cert and audio */
        assert_int_equal(u.groups[0], 103);
        assert_int_equal(u.groups[1], 29);
        u = resolve_ok("postgres:audio");
        assert_int_equal(u.gid, 29);
        assert_int_equal(u.n_groups, 1); /* ssl-cert; audio is the primary now */
        u = resolve_ok("1000:1000");
        assert_int_equal(u.uid, 1000);
        assert_int_equal(u.gid, 1000);
        assert_int_equal(u.n_groups, 1); /* audio lists container, the name of uid 1000 */
        u = resolve_ok("1000");
        assert_int_equal(u.gid, 1000); /* its passwd entry's */
        u = resolve_ok("4242");          /* no entry: as given, group 0 */
        assert_int_equal(u.uid, 4242);
        assert_int_equal(u.gid, 0);
        assert_int_equal(u.n_groups, 0);
        u = resolve_ok("4242:4343");
        assert_int_equal(u.gid, 4343);
        u = resolve_ok(NULL);
        assert_int_equal(u.uid, 0);
        u = resolve_ok("");
        assert_int_equal(u.gid, 0);
}

static void test_refused(void **state)
{
        (void)state;
        const char *bad[] = { "nobody", "postgres:nogroup", "big", "70000", "1:70000", ":", "a:", "short",
                              "a comment" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct na_error err = NA_ERROR_INIT;
                struct app_user u;
                if (app_user_resolve_text(passwd, group, bad[i], &u, &err) >= 0)
                        fail_msg("\"%s\" resolved to %u:%u", bad[i], u.uid, u.gid);
                assert_string_equal(err.code, "VALIDATION_ERROR");
                na_error_clear(&err);
        }
        struct na_error err = NA_ERROR_INIT;
        struct app_user u;
        assert_true(app_user_resolve_text(NULL, NULL, "postgres", &u, &err) < 0); /* no /etc/passwd */
        assert_non_null(strstr(err.message, "no user 'postgres'"));
        na_error_clear(&err);
        assert_int_equal(app_user_resolve_text(NULL, NULL, "33:33", &u, &err), 0); /* numbers need no files */
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void test_read_beneath_the_root(void **state)
{
        (void)state;
        char *dir = unit_tmpdir("app-user");
        char root[4200], p[4300];
        snprintf(root, sizeof(root), "%s/root", dir);
        snprintf(p, sizeof(p), "%s/etc", root);
        assert_int_equal(mkdir(root, 0755), 0);
        assert_int_equal(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/etc/group", root);
        write_file(p, group);
        /* passwd is a link to an absolute path: inside the root it is the root's own file. */
        snprintf(p, sizeof(p), "%s/etc/passwd", root);
        assert_int_equal(symlink("/etc/passwd.image", p), 0);
        snprintf(p, sizeof(p), "%s/etc/passwd.image", root);
        write_file(p, passwd);
        struct na_error err = NA_ERROR_INIT;
        struct app_user u;
        if (app_user_resolve(root, "postgres", &u, &err) < 0)
                fail_msg("%s", err.message);
        assert_int_equal(u.uid, 101);
        /* A link that climbs out ends at the root: the host's /etc/passwd (which has root) is never read. */
        snprintf(p, sizeof(p), "%s/etc/passwd", root);
        unlink(p);
        assert_int_equal(symlink("../../../../../../../../etc/passwd.image", p), 0);
        assert_int_equal(app_user_resolve(root, "postgres", &u, &err), 0);
        unlink(p);
        assert_int_equal(symlink("../../../../../../../../etc/hostname", p), 0);
        assert_true(app_user_resolve(root, "root", &u, &err) < 0);
        assert_string_equal(err.code, "VALIDATION_ERROR");
        na_error_clear(&err);
        /* A directory where the file should be: refused, not read. */
        unlink(p);
        assert_int_equal(mkdir(p, 0755), 0);
        assert_true(app_user_resolve(root, "root", &u, &err) < 0);
        na_error_clear(&err);
        unit_rmrf_free(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_and_numbers),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_read_beneath_the_root),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
