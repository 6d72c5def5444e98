/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The in-process ISO 9660 writer of the cloud-init seed (drivers/vm/vm-seed-iso.c),
 * proved by reading its images back with real readers: isoinfo (genisoimage's,
 * through Rock Ridge, Joliet and the plain ISO 9660 names), xorriso (libisofs)
 * extracting every file, and blkid (how cloud-init finds the volume labelled
 * cidata). The kernel's own iso9660 reader is used too when this kernel has it
 * and we are root (it is absent on the CI kernel: the test says so and goes on).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/unit.h"
#include "drivers/vm/vm-seed-iso.h"
#include "drivers/vm/vm-util.h"
#include "vm-fixture.h"

#define OUT_MAX (256 * 1024)

/* A private directory and the seed's path in it. */
static int setup(void **state)
{
        *state = unit_dir_fixture_new("seed-iso", "seed.iso");
        return 0;
}

static int teardown(void **state)
{
        unit_dir_fixture_free(*state);
        return 0;
}

static char *run_out(char *const argv[], int want_rc)
{
        char *out = malloc(OUT_MAX);
        assert_non_null(out);
        int rc = vmf_run(argv, out, OUT_MAX);
        if (rc != want_rc)
                fail_msg("%s %s: exit %d, output: %s", argv[0], argv[1], rc, out);
        return out;
}

/* isoinfo's listing line of one file: "...]  <name> " at the end of a line. */
static bool listed(const char *listing, const char *name)
{
        char want[160];
        snprintf(want, sizeof(want), "]  %s \n", name);
        return strstr(listing, want) != NULL;
}

static size_t count_entries(const char *listing)
{
        size_t n = 0;
        for (const char *p = listing; (p = strstr(p, "]  ")); p += 3)
                n++;
        return n;
}

static void check_content(const char *reader, const char *got, const struct vm_iso_file *f)
{
        if (strlen(got) != f->len || memcmp(got, f->data, f->len) != 0)
                fail_msg("%s: %s: read back %zu bytes that differ from the %zu written", reader, f->name,
                         strlen(got), f->len);
}

/* The kernel's reader: mount -o loop,ro when this kernel has iso9660 and we are root. */
static void kernel_read_back(const char *iso, const char *dir, const struct vm_iso_file *files, size_t n)
{
        _cleanup_free_ char *fs = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (geteuid() != 0 || na_read_file("/proc/filesystems", 1 << 16, &fs, NULL, &e) < 0 ||
            !strstr(fs, "\tiso9660\n")) {
                na_error_clear(&e);
                print_message("kernel read-back skipped: %s\n",
                              geteuid() != 0 ? "not root" : "this kernel has no iso9660 file system");
                return;
        }
        char mnt[256];
        snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
        assert_int_equal(mkdir(mnt, 0700), 0);
        char *const mount[] = { (char *)"mount", (char *)"-t", (char *)"iso9660", (char *)"-o", (char *)"loop,ro",
                                (char *)iso, mnt, NULL };
        if (vmf_run(mount, NULL, 0) != 0) {
                print_message("kernel read-back skipped: mount -o loop failed (no loop devices?)\n");
                rmdir(mnt);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", mnt, files[i].name);
                _cleanup_free_ char *got = NULL;
                assert_int_equal(na_read_file(path, OUT_MAX, &got, NULL, &e), 0);
                check_content("kernel", got, &files[i]);
        }
        char *const umount[] = { (char *)"umount", mnt, NULL };
        assert_int_equal(vmf_run(umount, NULL, 0), 0);
        rmdir(mnt);
}

/* Every reader sees the label, exactly these names and each file's bytes. */
static void read_back(const char *iso, const char *dir, const struct vm_iso_file *files, size_t n)
{
        char *const info[] = { (char *)"isoinfo", (char *)"-d", (char *)"-i", (char *)iso, NULL };
        _cleanup_free_ char *d = run_out(info, 0);
        assert_non_null(strstr(d, "Volume id: cidata\n"));
        assert_non_null(strstr(d, "Logical block size is: 2048\n"));
        assert_non_null(strstr(d, "Joliet with UCS level 3 found"));
        assert_non_null(strstr(d, "Rock Ridge signatures version 1 found"));

        static const char *const modes[] = { "-R", "-J" };
        for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
                char *const ls[] = { (char *)"isoinfo", (char *)modes[m], (char *)"-l", (char *)"-i", (char *)iso,
                                     NULL };
                _cleanup_free_ char *l = run_out(ls, 0);
                assert_int_equal(count_entries(l), n + 2); /* ".", ".." and the files */
                for (size_t i = 0; i < n; i++) {
                        if (!listed(l, files[i].name))
                                fail_msg("isoinfo %s -l does not list %s:\n%s", modes[m], files[i].name, l);
                        char path[160];
                        snprintf(path, sizeof(path), "/%s", files[i].name);
                        char *const x[] = { (char *)"isoinfo", (char *)modes[m], (char *)"-x", path, (char *)"-i",
                                            (char *)iso, NULL };
                        _cleanup_free_ char *got = run_out(x, 0);
                        check_content(modes[m], got, &files[i]);
                }
        }
        if (n > 0) {
                /* Readers of plain ISO 9660 see 8.3 names with a version ("META_DAT.;1"). */
                char *const plain[] = { (char *)"isoinfo", (char *)"-l", (char *)"-i", (char *)iso, NULL };
                _cleanup_free_ char *l = run_out(plain, 0);
                assert_int_equal(count_entries(l), n + 2);
                size_t versions = 0;
                for (const char *p = l; (p = strstr(p, ";1 \n")); p++)
                        versions++;
                assert_int_equal(versions, n);
        }

        /* xorriso (libisofs) extracts exactly these files, no more. */
        char out[256];
        snprintf(out, sizeof(out), "%s/x", dir);
        char *const x[] = { (char *)"xorriso", (char *)"-osirrox", (char *)"on", (char *)"-indev", (char *)iso,
                            (char *)"-extract", (char *)"/", out, NULL };
        free(run_out(x, 0));
        DIR *dh = opendir(out);
        assert_non_null(dh);
        size_t seen = 0;
        for (struct dirent *de; (de = readdir(dh));)
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        seen++;
        closedir(dh);
        assert_int_equal(seen, n);
        for (size_t i = 0; i < n; i++) {
                char path[512];
                snprintf(path, sizeof(path), "%s/%s", out, files[i].name);
                _cleanup_free_ char *got = NULL;
                struct na_error e = NA_ERROR_INIT;
                if (na_read_file(path, OUT_MAX, &got, NULL, &e) < 0)
                        fail_msg("xorriso did not extract %s: %s", files[i].name, e.message);
                check_content("xorriso", got, &files[i]);
        }
        chmod(out, 0700); /* xorriso gives the extracted directory the seed's mode 0555 */
        unit_rmrf_free(strdup(out));

        /* blkid: what cloud-init's NoCloud looks for (TYPE=iso9660, LABEL=cidata). */
        char *const probe[] = { (char *)"blkid", (char *)"-p", (char *)"-o", (char *)"export", (char *)iso, NULL };
        _cleanup_free_ char *b = run_out(probe, 0);
        assert_non_null(strstr(b, "\nTYPE=iso9660\n"));
        assert_non_null(strstr(b, "\nLABEL=cidata\n"));

        kernel_read_back(iso, dir, files, n);
}

/* The seed as vps.create writes it: the three documents, atomically, mode 0600. */
static void test_seed_write(void **state)
{
        struct unit_dir_fixture *t = *state;
        struct vm_meta m;
        memset(&m, 0, sizeof(m));
        snprintf(m.id, sizeof(m.id), "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
        snprintf(m.hostname, sizeof(m.hostname), "web1");
        m.generation = 2;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(vm_password_hash("Secret#123", &m.password_hash, &err), 0);
        char *keys[] = { (char *)"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey k1", NULL };
        assert_int_equal(vm_meta_set_keys(&m, keys, &err), 0);
        m.inputs = json_pack("{s:s}", "role", "web");

        assert_int_equal(vm_seed_write(&m, "52:54:00:01:02:03", NULL, t->path, &err), 0);
        struct stat st;
        assert_int_equal(stat(t->path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(st.st_size % 2048, 0);
        char partial[160];
        snprintf(partial, sizeof(partial), "%s.partial", t->path);
        assert_false(vmf_exists(partial));

        _cleanup_free_ char *md = NULL, *ud = NULL, *nc = NULL;
        assert_int_equal(vm_seed_documents(&m, "52:54:00:01:02:03", NULL, &md, &ud, &nc, &err), 0);
        const struct vm_iso_file files[] = {
                { "meta-data", md, strlen(md) },
                { "user-data", ud, strlen(ud) },
                { "network-config", nc, strlen(nc) },
        };
        read_back(t->path, t->dir, files, ARRAY_SIZE(files));
        char *const plain[] = { (char *)"isoinfo", (char *)"-l", (char *)"-i", t->path, NULL };
        _cleanup_free_ char *l = run_out(plain, 0);
        assert_true(listed(l, "META_DAT.;1") && listed(l, "NETWORK_.;1") && listed(l, "USER_DAT.;1"));

        /* Written again over itself (a reinstall), it is still the new seed only. */
        m.generation = 3;
        assert_int_equal(vm_seed_write(&m, "52:54:00:01:02:03", NULL, t->path, &err), 0);
        _cleanup_free_ char *md3 = NULL, *ud3 = NULL, *nc3 = NULL;
        assert_int_equal(vm_seed_documents(&m, "52:54:00:01:02:03", NULL, &md3, &ud3, &nc3, &err), 0);
        assert_non_null(strstr(md3, "-3\""));
        const struct vm_iso_file files3[] = {
                { "meta-data", md3, strlen(md3) },
                { "user-data", ud3, strlen(ud3) },
                { "network-config", nc3, strlen(nc3) },
        };
        read_back(t->path, t->dir, files3, ARRAY_SIZE(files3));
        vm_meta_clear(&m);
}

/* Sizes around sector boundaries, an empty file, the most files with the longest names. */
static void test_shapes(void **state)
{
        struct unit_dir_fixture *t = *state;
        static char big[2048 * 3 + 17];
        for (size_t i = 0; i < sizeof(big) - 1; i++)
                big[i] = (char)('a' + i % 26);
        static char sector[2049];
        memset(sector, 'x', 2048);
        char names[8][VM_ISO_NAME_MAX + 1];
        struct vm_iso_file files[8];
        for (size_t i = 0; i < 8; i++) {
                memset(names[i], 'n', VM_ISO_NAME_MAX);
                names[i][VM_ISO_NAME_MAX] = '\0';
                names[i][0] = (char)('h' - i); /* out of order: the writer sorts */
                names[i][1] = '-';
                names[i][VM_ISO_NAME_MAX - 4] = '.';
                files[i].name = names[i];
                files[i].data = i == 0 ? big : i == 1 ? sector : i == 2 ? "" : names[i];
                files[i].len = strlen(files[i].data);
        }
        struct na_error err = NA_ERROR_INIT;
        _cleanup_close_ int fd = open(t->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(vm_iso_write(fd, "cidata", files, 8, 1795300000, &err), 0);
        read_back(t->path, t->dir, files, 8);

        /* Fewer files over a larger image: nothing of the old one is left. */
        assert_int_equal(vm_iso_write(fd, "cidata", files + 2, 2, 1795300000, &err), 0);
        read_back(t->path, t->dir, files + 2, 2);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, (26 + 0 + 1) * 2048); /* metadata sectors, "" and one name */
}

static void expect_refused(int fd, const char *label, const struct vm_iso_file *files, size_t n, const char *msg)
{
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(vm_iso_write(fd, label, files, n, 0, &err), -EINVAL);
        if (!strstr(err.message, msg))
                fail_msg("message '%s' does not say '%s'", err.message, msg);
        na_error_clear(&err);
}

static void test_refuses(void **state)
{
        struct unit_dir_fixture *t = *state;
        _cleanup_close_ int fd = open(t->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        struct vm_iso_file f[9];
        for (size_t i = 0; i < 9; i++)
                f[i] = (struct vm_iso_file){ "meta-data", "x", 1 };
        expect_refused(fd, "CIDATA", f, 1, "bad volume label 'CIDATA'");
        expect_refused(fd, "", f, 1, "bad volume label ''");
        expect_refused(fd, "a-label-longer-than-16", f, 1, "bad volume label");
        expect_refused(fd, "cidata", f, 9, "9 files, at most 8");
        static const char *const bad[] = { "", "Meta-data", "a/b", "../x", "a b",
                                           "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                f[0].name = bad[i];
                expect_refused(fd, "cidata", f, 1, "bad file name");
        }
        f[0].name = "meta-data";
        expect_refused(fd, "cidata", f, 2, "file name meta-data is not unique");
        f[0].name = "user-data-a";
        f[1].name = "user-data-b";
        expect_refused(fd, "cidata", f, 2, "file name user-data-b is not unique (as USER_DAT.;1)");
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, 0); /* refused before anything was written */

        /* A failed write names itself. */
        _cleanup_close_ int ro = open(t->path, O_RDONLY | O_CLOEXEC);
        struct na_error err = NA_ERROR_INIT;
        f[0].name = "meta-data";
        assert_true(vm_iso_write(ro, "cidata", f, 1, 0, &err) < 0);
        assert_non_null(strstr(err.message, "ISO image"));
        na_error_clear(&err);
}

/* vm_seed_write's failures name the server and the file. */
static void test_seed_write_fails(void **state)
{
        struct unit_dir_fixture *t = *state;
        struct vm_meta m;
        memset(&m, 0, sizeof(m));
        snprintf(m.id, sizeof(m.id), "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
        snprintf(m.hostname, sizeof(m.hostname), "web1");
        char path[256];
        snprintf(path, sizeof(path), "%s/no-such-dir/seed.iso", t->dir);
        struct na_error err = NA_ERROR_INIT;
        assert_true(vm_seed_write(&m, "52:54:00:01:02:03", NULL, path, &err) < 0);
        assert_non_null(strstr(err.message, "vps 6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b: seed: create "));
        assert_non_null(strstr(err.message, "No such file or directory"));
        na_error_clear(&err);
        vm_meta_clear(&m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_seed_write, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shapes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refuses, setup, teardown),
                cmocka_unit_test_setup_teardown(test_seed_write_fails, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
