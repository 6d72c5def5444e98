/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * App backups on a real directory (drivers/app/backup/app-backup-store.c and the writer and
 * extractor): a tree archived and extracted back the same (contents, links, modes,
 * owners mapped out of and back into the app's range), records committed from a
 * named temporary and from an O_TMPFILE (the import hook), listed oldest first,
 * a record whose data differs not listed, retention, removal, the sweep of partials.
 * Root (owners, linkat of an O_TMPFILE); exit 77 without.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "volume/volume.h"

#define BASE 1000000000u

static char top[256];

static void put(const char *rel, const char *data, mode_t mode, uid_t uid)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/src/%s", top, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
        assert_int_equal(fchmod(fd, mode), 0);
        assert_int_equal(fchown(fd, uid, uid), 0);
        close(fd);
}

static void test_round_trip(void **state)
{
        (void)state;
        char p[512], q[512];
        snprintf(p, sizeof(p), "%s/src/dir/sub", top);
        assert_int_equal(na_mkdir_p(p, 0755, NULL), 0);
        put("a.txt", "alpha", 0640, BASE + 5);
        put("dir/b.txt", "beta", 0600, BASE);
        put("dir/sub/c.log", "ignored", 0644, BASE);
        put("foreign.txt", "owned by a host user", 0644, 1000); /* outside the range: 0 in the archive */
        snprintf(p, sizeof(p), "%s/src/abs", top);
        assert_int_equal(symlink("/etc/passwd", p), 0);
        snprintf(p, sizeof(p), "%s/src/fifo", top);
        assert_int_equal(mkfifo(p, 0600), 0);

        snprintf(p, sizeof(p), "%s/src", top);
        snprintf(q, sizeof(q), "%s/out.tar.zst", top);
        int src = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int out = open(q, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(src >= 0 && out >= 0);
        static char pat[] = "*.log";
        char *pats[] = { pat, NULL };
        struct app_backup_ignore *ig = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_backup_ignore_new(pats, &ig, &err), 0);
        struct app_backup_write_opts o = { .id_base = BASE, .id_count = 65536, .ignore = ig };
        struct app_backup_written w;
        assert_int_equal(app_backup_write(src, out, &o, &w, &err), 0);
        assert_int_equal(w.files, 3);
        char sha[65];
        uint64_t size = 0;
        assert_int_equal(app_backup_hash_fd(out, NULL, sha, &size, &err), 0);
        assert_string_equal(sha, w.sha256);
        assert_int_equal(size, w.size_bytes);

        snprintf(p, sizeof(p), "%s/dst", top);
        assert_int_equal(mkdir(p, 0755), 0);
        int dst = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const uint32_t other = BASE + 65536 * 3; /* restored into another range */
        assert_int_equal(app_backup_extract(out, dst, other, 65536, NULL, "test", &err), 0);
        struct stat st;
        assert_int_equal(fstatat(dst, "a.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640 && st.st_uid == other + 5 && st.st_size == 5);
        assert_int_equal(fstatat(dst, "dir/b.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(st.st_uid == other && (st.st_mode & 07777) == 0600);
        assert_int_equal(fstatat(dst, "foreign.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, other);
        assert_int_equal(fstatat(dst, "dir/sub", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(fstatat(dst, "dir/sub/c.log", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(fstatat(dst, "fifo", &st, AT_SYMLINK_NOFOLLOW), -1);
        char link[64] = { 0 };
        assert_int_equal(readlinkat(dst, "abs", link, sizeof(link) - 1), 11);
        assert_string_equal(link, "/etc/passwd");
        /* Extracting again into the same tree: every entry exists, refused on the first. */
        assert_int_equal(app_backup_extract(out, dst, other, 65536, NULL, "test", &err), -EINVAL);
        assert_string_equal(err.code, NA_E_VALIDATION);
        na_error_clear(&err);
        app_backup_ignore_free(ig);
        close(src);
        close(out);
        close(dst);
}

static void write_all(int fd, const char *s)
{
        assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static void test_store(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        char *dir = NULL;
        assert_int_equal(app_backup_dir(top, "app1", true, &dir, &err), 0);
        char tmp[600];
        struct proto_app_backup b;
        for (int i = 0; i < 3; i++) {
                char bid[8];
                snprintf(bid, sizeof(bid), "b%d", i);
                snprintf(tmp, sizeof(tmp), "%s/%s.tar.zst.partial", dir, bid);
                int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                write_all(fd, "data of a backup");
                assert_int_equal(app_backup_commit(dir, "app1", bid, fd, tmp, 16, "ab" "000000000000000000000000000000"
                                                   "00000000000000000000000000000000", &b, &err), 0);
                close(fd);
                usleep(2000);
        }
        /* The import hook: an unnamed file made a backup. */
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        write_all(fd, "downloaded");
        char sha[65];
        uint64_t size;
        assert_int_equal(app_backup_hash_fd(fd, NULL, sha, &size, &err), 0);
        assert_int_equal(app_backup_commit(dir, "app1", "imported", fd, NULL, size, sha, &b, &err), 0);
        close(fd);
        assert_int_equal(b.size_bytes, 10);

        struct proto_app_backup *list = NULL;
        size_t n = 0;
        assert_int_equal(app_backup_records(dir, &list, &n, &err), 0);
        assert_int_equal(n, 4);
        assert_string_equal(list[0].backup_id, "b0");
        assert_string_equal(list[3].backup_id, "imported");
        free(list);

        /* Data that differs from its record: not a backup. */
        snprintf(tmp, sizeof(tmp), "%s/b1.tar.zst", dir);
        assert_int_equal(truncate(tmp, 3), 0);
        assert_int_equal(app_backup_record_load(dir, "b1", &b, &err), -ENOENT);
        /* Retention keeps 2 of the 3 listed; the sweep takes partials only. */
        struct proto_vps_backup_limits l = { -1, 2, -1 };
        assert_int_equal(app_backup_retain(dir, &l, &err), 0);
        assert_int_equal(app_backup_records(dir, &list, &n, &err), 0);
        assert_int_equal(n, 2);
        assert_string_equal(list[0].backup_id, "b2");
        free(list);
        snprintf(tmp, sizeof(tmp), "%s/x.tar.zst.partial", dir);
        close(open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        app_backup_sweep(dir);
        assert_int_equal(access(tmp, F_OK), -1);
        assert_int_equal(app_backup_remove(dir, "b2", &err), 0);
        assert_int_equal(app_backup_remove(dir, "b2", &err), 0); /* gone already: fine */
        assert_int_equal(app_backup_records(dir, &list, &n, &err), 0);
        assert_int_equal(n, 1);
        free(list);
        free(dir);
}

int main(void)
{
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (owners, linkat of an O_TMPFILE)\n");
                return 77;
        }
        snprintf(top, sizeof(top), "/tmp/test-app-backup-store-XXXXXX");
        if (!mkdtemp(top))
                return 1;
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_store),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        struct na_error err = NA_ERROR_INIT;
        int fd = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
        (void)app_fs_rm_rf(fd, top + 5, &err);
        close(fd);
        na_error_clear(&err);
        return r;
}
