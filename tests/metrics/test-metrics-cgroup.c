/* SPDX-License-Identifier: GPL-2.0-or-later */
/* metrics/cgroup.c and cgroup-libvirt.c: layout detection, path checks, libvirt's machine cgroup names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "fixture.h"
#include "metrics/cgroup.h"

#define UUID1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define UUID2 "11111111-2222-4333-8444-555555555555"
#define UUID3 "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
#define UUID4 "99999999-8888-4777-8666-555555555555"
/* The UUIDs as systemd unit names carry them ('-' escaped). */
#define UUID1_ESC "6f1c2a3b\\x2d4c5d\\x2d4e6f\\x2d8a9b\\x2d0c1d2e3f4a5b"
#define UUID2_ESC "11111111\\x2d2222\\x2d4333\\x2d8444\\x2d555555555555"
#define UUID3_ESC "aaaaaaaa\\x2dbbbb\\x2d4ccc\\x2d8ddd\\x2deeeeeeeeeeee"

static void test_machine_name(void **state)
{
        char buf[128];
        assert_int_equal(metrics_libvirt_machine_name("qemu", 3, "vps-" UUID1, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "qemu-3-vps-" UUID1);

        assert_int_equal(metrics_libvirt_machine_name("qemu", 1, "..my--weird__VM.name!!", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "qemu-1-my-weirdVM.name");

        assert_int_equal(metrics_libvirt_machine_name("qemu", 1, "abc-.", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "qemu-1-abc");

        char longname[81];
        memset(longname, 'a', 80);
        longname[80] = '\0';
        assert_int_equal(metrics_libvirt_machine_name("qemu", 7, longname, buf, sizeof(buf)), 0);
        assert_int_equal(strlen(buf), 64);
        assert_int_equal(metrics_libvirt_machine_name("qemu", 12345, longname, buf, sizeof(buf)), 0);
        assert_int_equal(strlen(buf), 64);
        assert_memory_equal(buf, "qemu-12345-aaa", 14);

        /* the cut can leave a trailing '-', which goes */
        char cut[70];
        memset(cut, 'b', sizeof(cut));
        cut[56] = '-';
        cut[69] = '\0';
        assert_int_equal(metrics_libvirt_machine_name("qemu", 1, cut, buf, sizeof(buf)), 0);
        assert_int_equal(strlen(buf), 63); /* "qemu-1-" + 56 'b', the '-' at 64 trimmed */

        assert_int_equal(metrics_libvirt_machine_name("qemu", 1, "x", buf, 8), -ENAMETOOLONG);
}

static void test_systemd_escape(void **state)
{
        char buf[128];
        assert_int_equal(metrics_systemd_escape("qemu-3-vps-ab", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "qemu\\x2d3\\x2dvps\\x2dab");
        assert_int_equal(metrics_systemd_escape(".x.y", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "\\x2ex.y");
        assert_int_equal(metrics_systemd_escape("a/b c\\_:", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "a-b\\x20c\\x5c_:");
        assert_int_equal(metrics_systemd_escape("----", buf, 10), -ENAMETOOLONG);
}

static void test_path_normalize(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        char *p = NULL;
        assert_int_equal(metrics_cgroup_path_normalize("/machine/x.scope", &p, &err), 0);
        assert_string_equal(p, "machine/x.scope");
        free(p);
        assert_int_equal(metrics_cgroup_path_normalize("a//b/", &p, &err), 0);
        assert_string_equal(p, "a/b");
        free(p);
        assert_int_equal(metrics_cgroup_path_normalize("/", &p, &err), 0);
        assert_string_equal(p, "");
        free(p);
        assert_int_equal(metrics_cgroup_path_normalize("a/../../etc", &p, &err), -EINVAL);
        na_error_clear(&err);
        assert_int_equal(metrics_cgroup_path_normalize("./a", &p, &err), -EINVAL);
        na_error_clear(&err);
        char big[1100];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(metrics_cgroup_path_normalize(big, &p, &err), -ENAMETOOLONG);
        na_error_clear(&err);
}

static void test_detect(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct metrics_cgroups cg;
        char *root = fx_mkdtemp("cgdetect");
        char path[512];

        /* pure v2 */
        snprintf(path, sizeof(path), "%s/v2", root);
        fx_write(path, "cgroup.controllers", "cpuset cpu io memory pids\n");
        fx_write(path, "cpu.stat", "usage_usec 1\n");
        assert_int_equal(metrics_cgroups_detect(path, &cg, &err), 0);
        assert_string_equal(cg.mode, "v2");
        for (int r = 0; r < CG__RES; r++) {
                assert_int_equal(cg.res[r].ver, CG_V2);
                assert_string_equal(cg.res[r].dir, path);
        }
        assert_string_equal(cg.io_file, "io.stat");
        metrics_cgroups_clear(&cg);

        /* v2 with the memory controller not enabled */
        snprintf(path, sizeof(path), "%s/v2b", root);
        fx_write(path, "cgroup.controllers", "cpu pids\n");
        fx_write(path, "cpu.stat", "usage_usec 1\n");
        assert_int_equal(metrics_cgroups_detect(path, &cg, &err), 0);
        assert_null(cg.res[CG_MEMORY].dir);
        assert_null(cg.res[CG_IO].dir);
        assert_int_equal(cg.res[CG_CPU].ver, CG_V2);
        metrics_cgroups_clear(&cg);

        /* v1 */
        snprintf(path, sizeof(path), "%s/v1", root);
        fx_cg1(path, "", 1, 1, 0, 1, 0, 0);
        assert_int_equal(metrics_cgroups_detect(path, &cg, &err), 0);
        assert_string_equal(cg.mode, "v1");
        for (int r = 0; r < CG__RES; r++)
                assert_int_equal(cg.res[r].ver, CG_V1);
        assert_non_null(strstr(cg.res[CG_CPU].dir, "/cpuacct"));
        assert_string_equal(cg.io_file, "blkio.throttle.io_service_bytes_recursive");
        assert_null(cg.v2_dir);
        metrics_cgroups_clear(&cg);

        /* hybrid as on this machine: v1 controllers, cgroup2 at unified with only hugetlb */
        snprintf(path, sizeof(path), "%s/hybrid", root);
        fx_cg1(path, "", 1, 1, 0, 1, 0, 0);
        fx_write(path, "unified/cgroup.controllers", "hugetlb\n");
        fx_write(path, "unified/cpu.stat", "usage_usec 1\n");
        assert_int_equal(metrics_cgroups_detect(path, &cg, &err), 0);
        assert_string_equal(cg.mode, "hybrid");
        for (int r = 0; r < CG__RES; r++)
                assert_int_equal(cg.res[r].ver, CG_V1);
        assert_non_null(cg.v2_dir);
        metrics_cgroups_clear(&cg);

        /* hybrid where io comes from cgroup2 and cpu is co-mounted with cpuacct */
        snprintf(path, sizeof(path), "%s/hybrid2", root);
        fx_write(path, "cpu,cpuacct/cpuacct.usage", "5\n");
        fx_write(path, "memory/memory.usage_in_bytes", "5\n");
        fx_write(path, "unified/cgroup.controllers", "io\n");
        assert_int_equal(metrics_cgroups_detect(path, &cg, &err), 0);
        assert_string_equal(cg.mode, "hybrid");
        assert_int_equal(cg.res[CG_CPU].ver, CG_V1);
        assert_non_null(strstr(cg.res[CG_CPU].dir, "cpu,cpuacct"));
        assert_int_equal(cg.res[CG_IO].ver, CG_V2);
        assert_string_equal(cg.io_file, "io.stat");
        metrics_cgroups_clear(&cg);

        /* nothing */
        snprintf(path, sizeof(path), "%s/none", root);
        fx_mkdir(path, "");
        assert_int_equal(metrics_cgroups_detect(path, &cg, &err), -ENOENT);
        na_error_clear(&err);

        /* this host: whatever it is, it is detected */
        if (metrics_cgroups_detect("/sys/fs/cgroup", &cg, &err) == 0) {
                assert_true(streq(cg.mode, "v1") || streq(cg.mode, "v2") || streq(cg.mode, "hybrid"));
                metrics_cgroups_clear(&cg);
        }
        na_error_clear(&err);

        fx_remove(root);
        free(root);
}

static void test_machine_index(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        char *root = fx_mkdtemp("cgindex");

        /* systemd: a stale scope of an earlier start next to the current one */
        fx_mkdir(root, "machine.slice/machine-qemu\\x2d1\\x2dvps\\x2d" UUID1_ESC ".scope");
        fx_mkdir(root, "machine.slice/machine-qemu\\x2d3\\x2dvps\\x2d" UUID1_ESC ".scope/libvirt");
        fx_mkdir(root, "machine.slice/machine-qemu\\x2d2\\x2dvps\\x2d" UUID1_ESC ".scope");
        /* no systemd */
        fx_mkdir(root, "machine/qemu-5-vps-" UUID2 ".libvirt-qemu/emulator");
        /* legacy names */
        fx_mkdir(root, "machine.slice/machine-qemu\\x2dvps\\x2d" UUID3_ESC ".scope");
        fx_mkdir(root, "machine/vps-" UUID4 ".libvirt-qemu");
        fx_mkdir(root, "machine/_cpu.x.libvirt-qemu");
        /* a long name cut at 64 bytes of machine name */
        char longname[71], dir[256];
        memset(longname, 'x', 70);
        longname[70] = '\0';
        snprintf(dir, sizeof(dir), "machine.slice/machine-qemu\\x2d12\\x2d%.56s.scope", longname);
        fx_mkdir(root, dir);
        /* noise */
        fx_mkdir(root, "machine.slice/systemd-nspawn@foo.service");
        fx_mkdir(root, "machine.slice/machine-lxc\\x2d9\\x2dvps\\x2d" UUID2_ESC ".scope");
        fx_write(root, "machine.slice/cgroup.procs", "\n");

        _cleanup_(machine_index_freep) struct machine_index *ix = NULL;
        assert_int_equal(machine_index_build(root, &ix, &err), 0);
        assert_true(machine_index_size(ix) >= 8);

        const char *p = machine_index_find(ix, "qemu", "vps-" UUID1);
        assert_non_null(p);
        assert_string_equal(p, "machine.slice/machine-qemu\\x2d3\\x2dvps\\x2d" UUID1_ESC ".scope");
        p = machine_index_find(ix, "qemu", "vps-" UUID2);
        assert_non_null(p);
        assert_string_equal(p, "machine/qemu-5-vps-" UUID2 ".libvirt-qemu");
        p = machine_index_find(ix, "lxc", "vps-" UUID2);
        assert_non_null(p);
        assert_string_equal(p, "machine.slice/machine-lxc\\x2d9\\x2dvps\\x2d" UUID2_ESC ".scope");
        p = machine_index_find(ix, "qemu", "vps-" UUID3);
        assert_non_null(p);
        assert_string_equal(p, "machine.slice/machine-qemu\\x2dvps\\x2d" UUID3_ESC ".scope");
        p = machine_index_find(ix, "qemu", "vps-" UUID4);
        assert_non_null(p);
        assert_string_equal(p, "machine/vps-" UUID4 ".libvirt-qemu");
        p = machine_index_find(ix, "qemu", "cpu.x");
        assert_non_null(p);
        assert_string_equal(p, "machine/_cpu.x.libvirt-qemu");
        p = machine_index_find(ix, "qemu", longname);
        assert_non_null(p);
        assert_string_equal(p, dir);
        assert_null(machine_index_find(ix, "qemu", "vps-00000000-0000-4000-8000-000000000000"));
        assert_null(machine_index_find(ix, "qemu", "systemd-nspawn@foo"));

        char *rel = NULL;
        assert_int_equal(metrics_libvirt_find_cgroup(root, "qemu", "vps-" UUID2, &rel, &err), 0);
        assert_string_equal(rel, "machine/qemu-5-vps-" UUID2 ".libvirt-qemu");
        free(rel);
        assert_int_equal(metrics_libvirt_find_cgroup(root, "qemu", "nope", &rel, &err), -ENOENT);
        assert_non_null(strstr(err.message, "nope"));
        na_error_clear(&err);

        /* no partitions at all: an empty index */
        _cleanup_(machine_index_freep) struct machine_index *empty = NULL;
        char *other = fx_mkdtemp("cgindex-empty");
        assert_int_equal(machine_index_build(other, &empty, &err), 0);
        assert_int_equal(machine_index_size(empty), 0);
        assert_null(machine_index_find(empty, "qemu", "vps-" UUID1));
        fx_remove(other);
        free(other);

        fx_remove(root);
        free(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_machine_name),   cmocka_unit_test(test_systemd_escape),
                cmocka_unit_test(test_path_normalize), cmocka_unit_test(test_detect),
                cmocka_unit_test(test_machine_index),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
