/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Issue 20, attack 5, at the archive writer (drivers/app/backup/app-backup-write.c): files
 * with holes are archived as holes and restored with them, a file with more regions
 * than the writer keeps apart is still restored exactly, and a file with more data to
 * read than the volume's size is refused by its name (QUOTA_EXCEEDED).
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
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "volume/volume.h"

#define BASE 1000000000u
#define TB (1ull << 40)

static char top[256];

static int open_in(const char *rel, int flags)
{
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", top, rel);
        return open(p, flags | O_CLOEXEC, 0600);
}

static void piece(int fd, uint64_t off, const char *data, size_t len)
{
        assert_int_equal(pwrite(fd, data, len, (off_t)off), (ssize_t)len);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Many regions: 3,000 of 4 KiB, 64 KiB apart. (Past 65,536 the writer reads the rest as
 * one; not made here: on a root file system mounted with "discard" unlinking a file of
 * 70,000 extents takes minutes.) */
#define REGIONS 3000
#define STRIDE (68u << 10)

static void test_sparse_round_trip(void **state)
{
        (void)state;
        char p[512];
        snprintf(p, sizeof(p), "%s/src", top);
        assert_int_equal(mkdir(p, 0755), 0);
        int fd = open_in("src/tera.img", O_WRONLY | O_CREAT);
        assert_true(fd >= 0 && ftruncate(fd, (off_t)TB) == 0);
        piece(fd, 0, "head", 4);
        piece(fd, 300ull << 30, "middle", 6);
        piece(fd, TB - 4, "tail", 4);
        close(fd);
        fd = open_in("src/empty.img", O_WRONLY | O_CREAT);
        assert_true(fd >= 0 && ftruncate(fd, (off_t)(15 * TB)) == 0);
        close(fd);
        fd = open_in("src/many.img", O_WRONLY | O_CREAT);
        assert_true(fd >= 0);
        char block[4096];
        for (unsigned i = 0; i < REGIONS; i++) {
                memset(block, 'a' + (int)(i % 26), sizeof(block));
                piece(fd, (uint64_t)i * STRIDE, block, sizeof(block));
        }
        close(fd);

        snprintf(p, sizeof(p), "%s/src", top);
        int src = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int out = open_in("out.tar.zst", O_RDWR | O_CREAT | O_TRUNC);
        assert_true(src >= 0 && out >= 0);
        struct na_error err = NA_ERROR_INIT;
        struct app_backup_write_opts o = { .id_base = BASE, .id_count = 65536, .max_file_bytes = 1ull << 30 };
        struct app_backup_written w;
        double t0 = now_s();
        int r = app_backup_write(src, out, &o, &w, &err);
        if (r < 0)
                fail_msg("write: %s", err.message);
        printf("1 TB + 15 TB + 3,000 regions archived in %.2f s: %llu bytes read, archive %llu bytes\n", now_s() - t0,
               (unsigned long long)w.bytes_in, (unsigned long long)w.size_bytes);
        assert_true(w.bytes_in < (16u << 20)); /* the data regions only */

        snprintf(p, sizeof(p), "%s/dst", top);
        assert_int_equal(mkdir(p, 0755), 0);
        int dst = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = app_backup_extract(out, dst, BASE, 65536, NULL, "test", &err);
        if (r < 0)
                fail_msg("extract: %s", err.message);
        struct stat st;
        assert_int_equal(fstatat(dst, "tera.img", &st, 0), 0);
        assert_true(st.st_size == (off_t)TB && st.st_blocks * 512 < (1 << 20));
        assert_int_equal(fstatat(dst, "empty.img", &st, 0), 0);
        assert_true(st.st_size == (off_t)(15 * TB) && st.st_blocks == 0);
        fd = openat(dst, "tera.img", O_RDONLY | O_CLOEXEC);
        char buf[8] = { 0 };
        assert_int_equal(pread(fd, buf, 6, 300ll << 30), 6);
        assert_memory_equal(buf, "middle", 6);
        assert_int_equal(pread(fd, buf, 4, (off_t)(TB - 4)), 4);
        assert_memory_equal(buf, "tail", 4);
        close(fd);
        fd = openat(dst, "many.img", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0 && fstat(fd, &st) == 0);
        assert_int_equal(st.st_size, (off_t)((uint64_t)(REGIONS - 1) * STRIDE + 4096));
        for (unsigned i = 0; i < REGIONS; i += 997) {
                char got[4096], zero[4096] = { 0 };
                memset(block, 'a' + (int)(i % 26), sizeof(block));
                assert_int_equal(pread(fd, got, sizeof(got), (off_t)((uint64_t)i * STRIDE)), 4096);
                assert_memory_equal(got, block, 4096);
                if (i + 1 < REGIONS) {
                        assert_int_equal(pread(fd, got, sizeof(got), (off_t)((uint64_t)i * STRIDE + 8192)), 4096);
                        assert_memory_equal(got, zero, 4096);
                }
        }
        close(fd);
        close(dst);
        close(src);
        close(out);
}

static void test_refused_by_name(void **state)
{
        (void)state;
        char p[512];
        snprintf(p, sizeof(p), "%s/big", top);
        assert_int_equal(mkdir(p, 0755), 0);
        int fd = open_in("big/data.bin", O_WRONLY | O_CREAT);
        static char mb[1 << 20];
        memset(mb, 'x', sizeof(mb));
        assert_int_equal(write(fd, mb, sizeof(mb)), (ssize_t)sizeof(mb));
        assert_int_equal(write(fd, mb, sizeof(mb)), (ssize_t)sizeof(mb));
        close(fd);
        int src = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int out = open_in("big.tar.zst", O_RDWR | O_CREAT | O_TRUNC);
        struct na_error err = NA_ERROR_INIT;
        struct app_backup_write_opts o = { .id_base = BASE, .id_count = 65536, .max_file_bytes = 1 << 20 };
        struct app_backup_written w;
        assert_true(app_backup_write(src, out, &o, &w, &err) < 0);
        printf("refused: %s: %s\n", err.code, err.message);
        assert_string_equal(err.code, NA_E_QUOTA_EXCEEDED);
        assert_non_null(strstr(err.message, "data.bin"));
        na_error_clear(&err);
        o.max_file_bytes = 2 << 20; /* exactly the volume's size: fine */
        assert_int_equal(ftruncate(out, 0), 0);
        assert_int_equal(lseek(out, 0, SEEK_SET), 0);
        assert_int_equal(app_backup_write(src, out, &o, &w, &err), 0);
        close(src);
        close(out);
}

int main(void)
{
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (owners of restored files)\n");
                return 77;
        }
        snprintf(top, sizeof(top), "/var/tmp/test-jobs-sparse-XXXXXX");
        if (!mkdtemp(top))
                return 1;
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sparse_round_trip),
                cmocka_unit_test(test_refused_by_name),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        struct na_error err = NA_ERROR_INIT;
        int fd = open("/var/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
        (void)app_fs_rm_rf(fd, top + 9, &err);
        close(fd);
        na_error_clear(&err);
        return r;
}
