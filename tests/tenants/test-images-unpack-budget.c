/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Issue 20, the image bomb, in the layer unpacker itself (no root, no agent): a zstd
 * layer of 64 MiB of zeros (a few KB) against a budget of 8 MiB, and 3,000 empty
 * files against a budget of 1,000 entries, are stopped while they are written, not
 * after: at most the budget is on disk when app_layer_apply returns -EFBIG, and the
 * error names the [apps] key. The budget runs across layers (a second layer continues
 * the first's count). Before the fix app_layer_apply had no budget and wrote all of it.
 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "drivers/app/image/app-image.h"

static char dir[] = "/tmp/na-images-unpack-budget-XXXXXX";

/* A zstd tar at path: `files` empty files, or one file "bomb" of `zeros` bytes of zeros. */
static void write_layer(const char *path, uint64_t zeros, unsigned files)
{
        struct archive *a = archive_write_new();
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
        struct archive_entry *e = archive_entry_new();
        /* Our own ids: the unpacker gives entries their owners, and this test runs without root. */
        archive_entry_set_uid(e, getuid());
        archive_entry_set_gid(e, getgid());
        if (zeros) {
                archive_entry_set_pathname(e, "bomb");
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_perm(e, 0644);
                archive_entry_set_size(e, (la_int64_t)zeros);
                assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
                static char block[1 << 16];
                for (uint64_t left = zeros; left;) {
                        size_t n = left < sizeof(block) ? (size_t)left : sizeof(block);
                        assert_int_equal(archive_write_data(a, block, n), (la_ssize_t)n);
                        left -= n;
                }
        }
        for (unsigned i = 0; i < files; i++) {
                char name[32];
                snprintf(name, sizeof(name), "d%u/f%u", i / 500, i);
                archive_entry_clear(e);
                archive_entry_set_uid(e, getuid());
                archive_entry_set_gid(e, getgid());
                archive_entry_set_pathname(e, name);
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_perm(e, 0644);
                archive_entry_set_size(e, 0);
                assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        }
        archive_entry_free(e);
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
}

static uint64_t tree_bytes, tree_entries;

static int count(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)p, (void)flag;
        if (ftw->level > 0) {
                tree_bytes += (uint64_t)st->st_blocks * 512;
                tree_entries++;
        }
        return 0;
}

static int apply(const char *root, const char *layer, struct app_unpack_budget *b, struct na_error *err)
{
        int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = open(layer, O_RDONLY | O_CLOEXEC);
        assert_true(root_fd >= 0 && fd >= 0);
        struct app_layer_opts opts = { .budget = b };
        int r = app_layer_apply(root_fd, fd, &opts, err);
        close(fd);
        close(root_fd);
        tree_bytes = tree_entries = 0;
        assert_int_equal(nftw(root, count, 16, FTW_PHYS), 0);
        return r;
}

static void test_bytes(void **state)
{
        (void)state;
        char layer[256], root[256];
        snprintf(layer, sizeof(layer), "%s/zeros.tar.zst", dir);
        snprintf(root, sizeof(root), "%s/root-bytes", dir);
        assert_int_equal(mkdir(root, 0755), 0);
        write_layer(layer, 64u << 20, 0);
        struct stat st;
        assert_int_equal(stat(layer, &st), 0);
        assert_true(st.st_size < (64 << 10));
        struct app_unpack_limits lim = { .max_bytes = 8u << 20 };
        struct app_unpack_budget b = { .limits = &lim, .label = "test:bomb" };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(apply(root, layer, &b, &err), -EFBIG);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "test:bomb"));
        assert_non_null(strstr(err.message, "image_unpack_max_mb = 8 MB"));
        assert_string_equal(json_string_value(json_object_get(err.details, "limit")), "image_unpack_max_mb");
        assert_true(b.bytes <= lim.max_bytes);
        assert_true(tree_bytes <= lim.max_bytes + (1 << 20)); /* what is on disk: the budget, not 64 MiB */
        printf("64 MiB of zeros (%lld bytes of zstd): stopped after %llu bytes, %llu on disk\n", (long long)st.st_size,
               (unsigned long long)b.bytes, (unsigned long long)tree_bytes);
        na_error_clear(&err);
}

static void test_entries_across_layers(void **state)
{
        (void)state;
        char l1[256], l2[256], root[256];
        snprintf(l1, sizeof(l1), "%s/files1.tar.zst", dir);
        snprintf(l2, sizeof(l2), "%s/files2.tar.zst", dir);
        snprintf(root, sizeof(root), "%s/root-files", dir);
        assert_int_equal(mkdir(root, 0755), 0);
        write_layer(l1, 0, 600);
        write_layer(l2, 0, 3000);
        struct app_unpack_limits lim = { .max_files = 1000 };
        struct app_unpack_budget b = { .limits = &lim, .label = "test:files" };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(apply(root, l1, &b, &err), 0); /* 600 files and 2 directories: within */
        assert_int_equal(b.files, 602);
        assert_int_equal(apply(root, l2, &b, &err), -EFBIG);
        assert_non_null(strstr(err.message, "image_unpack_max_files = 1000 entries"));
        assert_true(b.files <= 1000);
        assert_true(tree_entries <= 1000);
        na_error_clear(&err);
}

/* Without a budget (the tests of app-layer.c, the fuzzer) nothing is counted or refused. */
static void test_no_budget(void **state)
{
        (void)state;
        char layer[256], root[256];
        snprintf(layer, sizeof(layer), "%s/small.tar.zst", dir);
        snprintf(root, sizeof(root), "%s/root-none", dir);
        assert_int_equal(mkdir(root, 0755), 0);
        write_layer(layer, 1u << 20, 10);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(apply(root, layer, NULL, &err), 0);
        assert_int_equal(tree_entries, 12); /* bomb, d0 and its 10 files */
}

static int rm(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        return remove(p);
}

int main(void)
{
        assert_non_null(mkdtemp(dir));
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bytes),
                cmocka_unit_test(test_entries_across_layers),
                cmocka_unit_test(test_no_budget),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        nftw(dir, rm, 16, FTW_DEPTH | FTW_PHYS);
        return r;
}
