/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The in-process qcow2 overlay (drivers/vm/vm-qcow2.c), checked by qemu's own tools:
 * `qemu-img check` finds no error or leak, `qemu-img info` reads the size, backing
 * file and format, `qemu-img compare` sees the backing file's bytes through the
 * overlay, and qemu-io writes and reads through it (copy-on-write) after which
 * check still passes. Against raw and qcow2 backing files, from 1 MiB to 64 TiB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/spawn.h"
#include "common/unit.h"
#include "drivers/vm/vm-qcow2.h"
#include "vm-fixture.h"

struct tmp {
        char *dir;
        char raw[128];   /* 8 MiB raw image with bytes in it */
        char qcow2[128]; /* 16 MiB qcow2 image made by qemu-img */
        char overlay[128];
};

static int run(char *const argv[], char *out, size_t len)
{
        int rc = vmf_run(argv, out, len);
        if (rc != 0)
                print_message("%s %s: exit %d: %s\n", argv[0], argv[1], rc, out ? out : "");
        return rc;
}

static int setup(void **state)
{
        struct tmp *t = calloc(1, sizeof(*t));
        if (!t)
                return -1;
        t->dir = unit_tmpdir("qcow2");
        snprintf(t->raw, sizeof(t->raw), "%s/base.raw", t->dir);
        snprintf(t->qcow2, sizeof(t->qcow2), "%s/base.qcow2", t->dir);
        snprintf(t->overlay, sizeof(t->overlay), "%s/disk.qcow2", t->dir);
        int fd = open(t->raw, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ftruncate(fd, 8 << 20) < 0)
                return -1;
        char block[4096];
        for (size_t i = 0; i < sizeof(block); i++)
                block[i] = (char)(i * 31 + 7);
        for (off_t off = 0; off < (8 << 20); off += 1 << 20)
                if (pwrite(fd, block, sizeof(block), off + 512) != (ssize_t)sizeof(block))
                        return -1;
        close(fd);
        char *const mk[] = { (char *)"qemu-img", (char *)"create", (char *)"-q", (char *)"-f", (char *)"qcow2",
                             t->qcow2, (char *)"16M", NULL };
        if (run(mk, NULL, 0) != 0)
                return -1;
        char *const io[] = { (char *)"qemu-io", (char *)"-c", (char *)"write -P 0x5a 1M 64k", t->qcow2, NULL };
        if (run(io, NULL, 0) != 0)
                return -1;
        *state = t;
        return 0;
}

static int teardown(void **state)
{
        struct tmp *t = *state;
        unit_rmrf_free(t->dir);
        free(t);
        return 0;
}

static void write_overlay(struct tmp *t, uint64_t size, const char *backing, const char *format)
{
        _cleanup_close_ int fd = open(t->overlay, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        struct na_error err = NA_ERROR_INIT;
        if (vm_qcow2_overlay_write(fd, size, backing, format, &err) < 0)
                fail_msg("overlay: %s", err.message);
}

/* What qemu-img says of the overlay; check and info must both pass. */
static void check_overlay(struct tmp *t, uint64_t size, const char *backing, const char *format)
{
        static char out[65536];
        char *const check[] = { (char *)"qemu-img", (char *)"check", t->overlay, NULL };
        assert_int_equal(run(check, out, sizeof(out)), 0);
        assert_non_null(strstr(out, "No errors were found on the image."));
        char *const info[] = { (char *)"qemu-img", (char *)"info", (char *)"--output=json", t->overlay, NULL };
        assert_int_equal(run(info, out, sizeof(out)), 0);
        _cleanup_json_ json_t *j = json_loads(out, 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "format")), "qcow2");
        assert_int_equal(json_integer_value(json_object_get(j, "virtual-size")), size);
        assert_string_equal(json_string_value(json_object_get(j, "backing-filename")), backing);
        assert_string_equal(json_string_value(json_object_get(j, "backing-filename-format")), format);
        json_t *data = json_object_get(json_object_get(j, "format-specific"), "data");
        assert_int_equal(json_integer_value(json_object_get(data, "refcount-bits")), 16);
        assert_false(json_is_true(json_object_get(j, "dirty-flag")));
}

static void test_raw_backing(void **state)
{
        struct tmp *t = *state;
        write_overlay(t, 8 << 20, t->raw, "raw");
        check_overlay(t, 8 << 20, t->raw, "raw");
        /* Nothing allocated: the guest sees the backing file's bytes. */
        char *const same[] = { (char *)"qemu-img", (char *)"compare", (char *)"-q", (char *)"-f", (char *)"qcow2",
                               (char *)"-F", (char *)"raw", t->overlay, t->raw, NULL };
        assert_int_equal(run(same, NULL, 0), 0);
        /* Copy-on-write: a write lands in the overlay, the backing file is untouched. */
        char *const io[] = { (char *)"qemu-io", (char *)"-c", (char *)"write -P 0xab 64k 128k", (char *)"-c",
                             (char *)"read -P 0xab 64k 128k", (char *)"-c", (char *)"read -P 0 1536k 4k", t->overlay,
                             NULL };
        static char out[8192];
        assert_int_equal(run(io, out, sizeof(out)), 0);
        assert_null(strstr(out, "Pattern verification failed"));
        check_overlay(t, 8 << 20, t->raw, "raw");
        assert_int_equal(vmf_run(same, NULL, 0), 1); /* differs now */
}

static void test_qcow2_backing_and_sizes(void **state)
{
        struct tmp *t = *state;
        static const uint64_t sizes[] = { 16ull << 20, (1ull << 30) + (1 << 20), 20ull << 30, 64ull << 40 };
        for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
                write_overlay(t, sizes[i], t->qcow2, "qcow2");
                check_overlay(t, sizes[i], t->qcow2, "qcow2");
        }
        /* The 16 MiB one of the same size as its backing file reads as it. */
        write_overlay(t, 16 << 20, t->qcow2, "qcow2");
        char *const same[] = { (char *)"qemu-img", (char *)"compare", (char *)"-q", (char *)"-f", (char *)"qcow2",
                               (char *)"-F", (char *)"qcow2", t->overlay, t->qcow2, NULL };
        assert_int_equal(run(same, NULL, 0), 0);
        /* Written again over a larger file, nothing of the old one stays. */
        write_overlay(t, 64ull << 40, t->raw, "raw");
        write_overlay(t, 8 << 20, t->raw, "raw");
        check_overlay(t, 8 << 20, t->raw, "raw");
        struct stat st;
        assert_int_equal(stat(t->overlay, &st), 0);
        assert_int_equal(st.st_size, 3 * 65536 + 8); /* header, refcounts, one L1 entry */
}

static void test_refuses(void **state)
{
        struct tmp *t = *state;
        _cleanup_close_ int fd = open(t->overlay, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        char long_name[VM_QCOW2_BACKING_MAX + 2];
        memset(long_name, 'a', sizeof(long_name) - 1);
        long_name[0] = '/';
        long_name[sizeof(long_name) - 1] = '\0';
        const struct {
                uint64_t size;
                const char *backing, *format, *msg;
        } bad[] = {
                { 0, t->raw, "raw", "bad size 0 bytes" },
                { 513, t->raw, "raw", "bad size 513 bytes" },
                { (64ull << 40) + 512, t->raw, "raw", "bad size" },
                { 1 << 20, "base.raw", "raw", "bad backing file 'base.raw'" },
                { 1 << 20, "", "raw", "bad backing file ''" },
                { 1 << 20, long_name, "raw", "bad backing file" },
                { 1 << 20, t->raw, "vmdk", "bad backing format 'vmdk'" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct na_error err = NA_ERROR_INIT;
                assert_int_equal(vm_qcow2_overlay_write(fd, bad[i].size, bad[i].backing, bad[i].format, &err),
                                 -EINVAL);
                if (!strstr(err.message, bad[i].msg))
                        fail_msg("message '%s' does not say '%s'", err.message, bad[i].msg);
                na_error_clear(&err);
        }
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, 0);
        _cleanup_close_ int ro = open(t->overlay, O_RDONLY | O_CLOEXEC);
        struct na_error err = NA_ERROR_INIT;
        assert_true(vm_qcow2_overlay_write(ro, 1 << 20, t->raw, "raw", &err) < 0);
        assert_non_null(strstr(err.message, "write qcow2 overlay"));
        na_error_clear(&err);
}

/* A disk from outside the node: standalone qcow2 only (never a path qemu would open). */
static void test_standalone(void **state)
{
        struct tmp *t = *state;
        struct na_error err = NA_ERROR_INIT;
        unsigned char head[VM_QCOW2_HEAD];
        write_overlay(t, 64 << 20, "/etc/shadow", "raw");
        int fd = open(t->overlay, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
        close(fd);
        assert_int_equal(vm_qcow2_check_standalone(head, sizeof(head), "transfer", &err), -EINVAL);
        assert_non_null(strstr(err.message, "backing file"));
        na_error_clear(&err);

        char *const mk[] = { (char *)"/usr/bin/qemu-img", (char *)"create", (char *)"-q", (char *)"-f",
                             (char *)"qcow2", t->overlay, (char *)"64M", NULL };
        assert_int_equal(na_spawn(mk, NULL, NULL, 0, &err), 0);
        fd = open(t->overlay, O_RDONLY | O_CLOEXEC);
        assert_int_equal(pread(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
        close(fd);
        assert_int_equal(vm_qcow2_check_standalone(head, sizeof(head), "transfer", &err), 0);
        head[72 + 7] |= 1u << 2; /* an external data file */
        assert_int_equal(vm_qcow2_check_standalone(head, sizeof(head), "transfer", &err), -EINVAL);
        na_error_clear(&err);
        head[72 + 7] &= (unsigned char)~(1u << 2);
        memcpy(head, "RAW!", 4);
        assert_int_equal(vm_qcow2_check_standalone(head, sizeof(head), "transfer", &err), -EINVAL);
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_raw_backing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_qcow2_backing_and_sizes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refuses, setup, teardown),
                cmocka_unit_test_setup_teardown(test_standalone, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
