/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Percentages that move (issue 15, item 5): qemu-img's -p output read as it comes,
 * the template's sha256 by bytes, and a backup and its restore on libvirt's test
 * driver with a real disk holding 32 MiB: exporting follows qemu-img convert -p,
 * compressing the bytes read, the restore 0-90 while it unpacks, then 90 and 95.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/fileio.h"
#include "drivers/vm/vm-util.h"
#include "vm-fixture.h"

#define ID "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
#define OK(x)                                                  \
        do {                                                   \
                if ((x) < 0)                                   \
                        fail_msg("%s: %s", #x, err.message);   \
        } while (0)

struct calls {
        int n;
        char stage[1024][24];
        int pct[1024];
};

static void rec(void *userdata, const char *stage, int percent, const char *message)
{
        (void)message;
        struct calls *c = userdata;
        assert_true(c->n < 1024);
        snprintf(c->stage[c->n], sizeof(c->stage[0]), "%s", stage ? stage : "-");
        c->pct[c->n++] = percent;
}

/* The percents reported with stage, in order; checks they never go back. Returns how many differ. */
static int distinct_rising(const struct calls *c, const char *stage, int *ret_last)
{
        int last = -1, distinct = 0;
        for (int i = 0; i < c->n; i++) {
                if (strcmp(c->stage[i], stage) != 0)
                        continue;
                assert_true(c->pct[i] >= last);
                if (c->pct[i] != last)
                        distinct++;
                last = c->pct[i];
        }
        *ret_last = last;
        return distinct;
}

static void test_qemu_progress_parser(void **state)
{
        (void)state;
        struct vm_qemu_progress q = VM_QEMU_PROGRESS_INIT;
        assert_int_equal(vm_qemu_progress_feed(&q, "", 0), -1);
        const char *a = "    (0.00/100%)\r    (12.6";
        assert_int_equal(vm_qemu_progress_feed(&q, a, strlen(a)), 0);
        const char *b = "7/100%)\r    (13.3";
        assert_int_equal(vm_qemu_progress_feed(&q, b, strlen(b)), 12); /* split across reads */
        const char *c = "3/100%)\rnoise (x/100%) (/100%)\r";
        assert_int_equal(vm_qemu_progress_feed(&q, c, strlen(c)), 13);
        const char *d = "    (100.00/100%)\r\n";
        assert_int_equal(vm_qemu_progress_feed(&q, d, strlen(d)), 100);
        const char *e = "(99999999999999999999/100%)"; /* too long to be a percent: ignored */
        assert_int_equal(vm_qemu_progress_feed(&q, e, strlen(e)), 100);
}

static void test_sha256_meter(void **state)
{
        (void)state;
        char path[] = "/tmp/na-vm-progress-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 5 << 20), 0);
        close(fd);
        struct calls c = { 0 };
        struct na_progress p = { .stage = rec, .userdata = &c };
        struct na_progress_meter m;
        na_progress_meter_init(&m, &p, NULL, "verifying the template image", 0, 100);
        struct na_error err = NA_ERROR_INIT;
        char hex[65];
        OK(na_sha256_file(path, &m, hex, &err));
        unlink(path);
        int last;
        /* Read 1 MiB at a time: 0, 20, 40, 60, 80, 100. */
        assert_int_equal(distinct_rising(&c, "-", &last), 6);
        assert_int_equal(last, 100);
}

static void test_backup_and_restore_percent(void **state)
{
        struct vm_fixture *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct vm_create_spec spec = vmf_spec(ID);
        struct proto_vps_server srv;
        OK(f->vm->create(f->conn, &spec, NULL, &srv, &err));
        char disk[512];
        vmf_path(f, disk, sizeof(disk), "state/vps/disks/%s.qcow2", ID);
        /* Data the copy and the compression must go through (a fresh overlay holds none). */
        char *const write[] = { (char *)"/usr/bin/qemu-io", (char *)"-f", (char *)"qcow2", (char *)"-c",
                                (char *)"write -P 0x5a 0 32M", disk, NULL };
        assert_int_equal(vmf_run(write, NULL, 0), 0);

        struct calls *c = calloc(1, sizeof(*c));
        assert_non_null(c);
        struct na_progress p = { .stage = rec, .userdata = c };
        struct proto_vps_backup b;
        OK(f->vm->backup_create(f->conn, ID, "b1", NULL, &p, &b, &err));
        int last;
        int exporting = distinct_rising(c, "exporting", &last);
        assert_true(exporting >= 3); /* qemu-img's own percent, as it copies */
        assert_int_equal(last, 100);
        int compressing = distinct_rising(c, "compressing", &last);
        assert_true(compressing >= 2);
        assert_int_equal(last, 100);
        print_message("backup of 32 MiB: %d exporting percents, %d compressing, %d calls in all\n", exporting,
                      compressing, c->n);

        memset(c, 0, sizeof(*c));
        OK(f->vm->backup_restore(f->conn, ID, "b1", &p, &err));
        int restoring = distinct_rising(c, "-", &last);
        assert_true(restoring >= 3);
        assert_int_equal(last, 95); /* unpacked to 90, replaced at 90, started again at 95 */
        assert_int_equal(c->pct[0], 0);
        free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_qemu_progress_parser),
                cmocka_unit_test(test_sha256_meter),
                cmocka_unit_test_setup_teardown(test_backup_and_restore_percent, vmf_cmocka_setup,
                                                vmf_cmocka_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
