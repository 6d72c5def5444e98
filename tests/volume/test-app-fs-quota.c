/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The quota through app_fs_write (volume/app-fs-write.c) on a real volume: an
 * 8 MiB ext4 image loop-mounted by drivers/app/oci/app-volume.h. A write that does not fit
 * is QUOTA_EXCEEDED with nothing written (no file, no temporary, the free space as it
 * was); a whole-file replace needs room for the new copy beside the old one; ENOSPC
 * in the middle of a write (injected with NA_FAULTS, in a child so the fault table is
 * read there first) leaves the old content and no temporary; a hard link out of the
 * volume is impossible (another file system); what is created belongs to the app.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/unit.h"
#include "volume/volume.h"
#include "drivers/app/oci/app-volume.h"

#define UID 1000131072u

static struct {
        char *dir;
        char image[PATH_MAX], vol[PATH_MAX];
        struct app_fs *fs;
} F;

static int setup(void **state)
{
        (void)state;
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (loop devices, mount)\n");
                exit(77);
        }
        if (getenv("NA_FAULTS")) {
                fprintf(stderr, "NA_FAULTS is set: this test sets it itself\n");
                exit(77);
        }
        char *tmp = unit_tmpdir("app-fs-quota");
        F.dir = realpath(tmp, NULL); /* the mount point must be canonical */
        free(tmp);
        snprintf(F.image, sizeof(F.image), "%s/volume.img", F.dir);
        snprintf(F.vol, sizeof(F.vol), "%s/volume", F.dir);
        struct na_error err = NA_ERROR_INIT;
        if (app_volume_create(F.image, APP_VOLUME_MIN_MB, UID, UID, &err) < 0 ||
            app_volume_mount(F.image, F.vol, &err) < 0) {
                fprintf(stderr, "volume: %s\n", err.message);
                return -1;
        }
        if (app_fs_open(F.vol, UID, UID, &F.fs, &err) < 0) {
                fprintf(stderr, "open: %s\n", err.message);
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        app_fs_close(F.fs);
        if (app_volume_remove(F.image, F.vol, &err) < 0)
                fprintf(stderr, "teardown: %s\n", err.message);
        na_error_clear(&err);
        unit_rmrf_free(F.dir);
        return 0;
}

static uint64_t avail(void)
{
        struct statvfs sv;
        assert_int_equal(statvfs(F.vol, &sv), 0);
        return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* The volume's entries other than lost+found, as "a,b" in readdir order sorted by the listing. */
static char *names(void)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_fs_listing l;
        if (app_fs_list(F.fs, "/", 0, &l, &err) < 0)
                fail_msg("list: %s", err.message);
        char *s = calloc(1, 4096);
        for (size_t i = 0; i < l.n; i++) {
                if (streq(l.entries[i].name, "lost+found"))
                        continue;
                if (*s)
                        strcat(s, ",");
                strncat(s, l.entries[i].name, 4000 - strlen(s));
        }
        app_fs_listing_clear(&l);
        return s;
}

static void expect_names(const char *want)
{
        char *s = names();
        if (!streq(s, want))
                fail_msg("volume holds {%s}, wanted {%s}", s, want);
        free(s);
}

static unsigned char *pattern(size_t len, unsigned char c)
{
        unsigned char *b = malloc(len ? len : 1);
        memset(b, c, len);
        return b;
}

static void check_content(const char *name, size_t len, unsigned char c)
{
        char *p = NULL;
        if (asprintf(&p, "%s/%s", F.vol, name) < 0)
                abort();
        size_t n = 0;
        char *data = unit_slurp(p, &n);
        assert_non_null(data);
        assert_int_equal(n, len);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)data[i] != c)
                        fail_msg("%s: byte %zu changed", name, i);
        free(data);
        free(p);
}

/*
 * One write under faults in a fresh process (NA_FAULTS is read once per process, and
 * the volume's setup already passed fault sites here): this program run again with
 * --fault-write <volume> <replace|in-place> and NA_FAULTS set; it exits 0 when the
 * write was refused with QUOTA_EXCEEDED.
 */
static int fault_child(const char *vol, const char *mode)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_fs *fs;
        if (app_fs_open(vol, UID, UID, &fs, &err) < 0)
                return 2;
        unsigned char *b = pattern(100000, 'n');
        struct app_fs_write_opts o = { .in_place = true, .offset = 50000 };
        int r = app_fs_write(fs, "small", b, 100000, streq(mode, "in-place") ? &o : NULL, &err);
        app_fs_close(fs);
        free(b);
        if (r >= 0 || !streq(err.code, NA_E_QUOTA_EXCEEDED) || err.http_status != 409) {
                fprintf(stderr, "%s: %d %s %s\n", getenv("NA_FAULTS"), r, err.code ? err.code : "-", err.message);
                return 1;
        }
        return 0;
}

static void faulted(const char *faults, bool in_place)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("NA_FAULTS", faults, 1);
                execl("/proc/self/exe", "test-app-fs-quota", "--fault-write", F.vol, in_place ? "in-place" : "replace",
                      (char *)NULL);
                _exit(127);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("%s (%s): the write was not refused with QUOTA_EXCEEDED", faults, in_place ? "in place" : "replace");
}

static void test_enospc_during_write(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        unsigned char *c = pattern(60000, 'o');
        assert_int_equal(app_fs_write(F.fs, "small", c, 60000, NULL, &err), 0);
        free(c);
        uint64_t before = avail();
        faulted("app-fs.write=1", false);   /* ENOSPC on the first write(2) of a replace */
        faulted("app-fs.reserve=1", false); /* ENOSPC on fallocate of a replace */
        faulted("app-fs.reserve=1", true);  /* and of an in-place write */
        faulted("app-fs.write=1", true);    /* ENOSPC at write(2) of an in-place write */
        check_content("small", 60000, 'o');
        expect_names("small");
        assert_int_equal(avail(), before);
}

static void test_quota_exceeded(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        size_t four = 4u << 20;
        unsigned char *a = pattern(four, 'a');
        assert_int_equal(app_fs_write(F.fs, "a", a, four, NULL, &err), 0);
        /* A filler leaves about 3 MiB free: less than a second copy of "a" needs. */
        uint64_t free_now = avail();
        assert_true(free_now > (7u << 19));
        size_t fill = (size_t)free_now - (3u << 20);
        unsigned char *z = pattern(fill, 'z');
        assert_int_equal(app_fs_write(F.fs, "filler", z, fill, NULL, &err), 0);
        free(z);
        free_now = avail();
        fprintf(stderr, "after 4 MiB and a %zu bytes filler: %llu bytes free\n", fill, (unsigned long long)free_now);
        assert_true(free_now < four);

        /* A new file larger than what is free: refused, nothing written. */
        size_t big = (size_t)free_now + 65536;
        unsigned char *b = pattern(big, 'b');
        assert_true(app_fs_write(F.fs, "b", b, big, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_QUOTA_EXCEEDED);
        assert_int_equal(err.http_status, 409);
        assert_non_null(strstr(err.message, "b"));
        na_error_clear(&err);
        expect_names("a,filler,small");
        assert_int_equal(avail(), free_now);

        /* Replacing the 4 MiB file needs room for the new copy beside it: refused, the old one intact. */
        unsigned char *c = pattern(four, 'c');
        assert_true(app_fs_write(F.fs, "a", c, four, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_QUOTA_EXCEEDED);
        na_error_clear(&err);
        check_content("a", four, 'a');
        expect_names("a,filler,small");

        /* Growing it in place past the quota: refused, same size. */
        struct app_fs_write_opts o = { .in_place = true, .offset = four };
        assert_true(app_fs_write(F.fs, "a", b, big, &o, &err) < 0);
        assert_string_equal(err.code, NA_E_QUOTA_EXCEEDED);
        na_error_clear(&err);
        check_content("a", four, 'a');
        assert_int_equal(avail(), free_now);

        /* Overwriting in place within its size needs no room: allowed. */
        o.offset = 0;
        assert_int_equal(app_fs_write(F.fs, "a", c, four, &o, &err), 0);
        check_content("a", four, 'c');

        /* What fits still fits. */
        assert_int_equal(app_fs_write(F.fs, "b", b, 65536, NULL, &err), 0);
        expect_names("a,b,filler,small");
        free(a);
        free(b);
        free(c);
}

static void test_owner_and_links(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_fs_mkdir(F.fs, "d/e", &err), 0);
        assert_int_equal(app_fs_write(F.fs, "d/e/f", "x", 1, NULL, &err), 0);
        char p[PATH_MAX + 16];
        struct stat st;
        snprintf(p, sizeof(p), "%s/d/e/f", F.vol);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, UID);
        assert_int_equal(st.st_gid, UID);
        snprintf(p, sizeof(p), "%s/d", F.vol);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, UID);
        /* A hard link into the volume from outside (or out of it) cannot exist: another file system. */
        char out[PATH_MAX + 16], in[PATH_MAX + 16];
        snprintf(out, sizeof(out), "%s/outside", F.dir);
        free(unit_write_str(NULL, out, "outside", 0600));
        snprintf(in, sizeof(in), "%s/hl", F.vol);
        assert_int_equal(link(out, in), -1);
        assert_int_equal(errno, EXDEV);
        snprintf(p, sizeof(p), "%s/d/e/f", F.vol);
        assert_int_equal(link(p, out), -1);
        assert_int_equal(app_fs_delete(F.fs, "d", &err), 0);
        expect_names("a,b,filler,small");
}

int main(int argc, char **argv)
{
        if (argc == 4 && streq(argv[1], "--fault-write"))
                return fault_child(argv[2], argv[3]);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_enospc_during_write),
                cmocka_unit_test(test_quota_exceeded),
                cmocka_unit_test(test_owner_and_links),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
