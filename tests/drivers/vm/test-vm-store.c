/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Snapshots, backups and the node-reboot starts of the libvirt VM driver, on
 * libvirt's test driver. Backups are real zstd files with a real sha256.
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
#include "common/timeutil.h"
#include "drivers/vm/vm-util.h"
#include "vm-fixture.h"

#define OK(call)                                                                  \
        do {                                                                      \
                int _r = (call);                                                  \
                if (_r != 0)                                                      \
                        fail_msg("%s = %d: %s", #call, _r, err.message);          \
        } while (0)

#define ID1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define ID2 "0a0b0c0d-1111-4222-8333-444455556666"
#define ID3 "12345678-aaaa-4bbb-8ccc-ddddeeeeffff"

static void create_ok(struct vm_fixture *f, const char *id)
{
        struct vm_create_spec spec = vmf_spec(id);
        struct proto_vps_server srv;
        struct na_error err = NA_ERROR_INIT;
        OK(f->vm->create(f->conn, &spec, NULL, &srv, &err));
}

static void test_snapshots(void **state)
{
        struct vm_fixture *f = *state;
        create_ok(f, ID1);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_snapshot s1, s2, again;

        OK(f->vm->snapshot_create(f->conn, ID1, "s1", "before <upgrade> & \"more\"", 3, &s1, &err));
        assert_string_equal(s1.snapshot_id, "s1");
        assert_string_equal(s1.name, "before <upgrade> & \"more\"");
        assert_true(s1.current);
        assert_true(s1.created_at_ms > 0);
        sleep(1); /* libvirt's creationTime has a resolution of one second */
        OK(f->vm->snapshot_create(f->conn, ID1, "s2", "second", 3, &s2, &err));
        OK(f->vm->snapshot_create(f->conn, ID1, "s3", "third", 3, &s2, &err));

        /* The limit counts what exists; asking again for an existing one is not a new one. */
        assert_int_equal(f->vm->snapshot_create(f->conn, ID1, "s4", "fourth", 3, &s2, &err), -ENOSPC);
        assert_string_equal(err.code, NA_E_SNAPSHOT_LIMIT);
        assert_int_equal(json_integer_value(json_object_get(err.details, "maxSnapshots")), 3);
        na_error_clear(&err);
        OK(f->vm->snapshot_create(f->conn, ID1, "s1", "renamed?", 3, &again, &err));
        assert_string_equal(again.name, s1.name);
        assert_int_equal(again.created_at_ms, s1.created_at_ms);
        assert_int_equal(f->vm->snapshot_create(f->conn, ID1, "bad/id", "x", 3, &again, &err), -EINVAL);
        assert_string_equal(err.code, NA_E_VALIDATION);
        na_error_clear(&err);
        assert_int_equal(f->vm->snapshot_create(f->conn, ID2, "s1", "x", 3, &again, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        na_error_clear(&err);

        struct proto_vps_snapshot *list = NULL;
        size_t n = 0;
        OK(f->vm->snapshot_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 3);
        assert_string_equal(list[0].snapshot_id, "s1"); /* oldest first */
        int current = 0;
        for (size_t i = 0; i < n; i++)
                current += list[i].current;
        assert_int_equal(current, 1);
        assert_true(list[2].current || list[1].current);
        free(list);

        OK(f->vm->snapshot_revert(f->conn, ID1, "s1", &err));
        OK(f->vm->snapshot_list(f->conn, ID1, &list, &n, &err));
        assert_true(list[0].current);
        free(list);
        assert_int_equal(f->vm->snapshot_revert(f->conn, ID1, "nope", &err), -ENOENT);
        assert_string_equal(err.code, NA_E_SNAPSHOT_NOT_FOUND);
        na_error_clear(&err);

        OK(f->vm->snapshot_delete(f->conn, ID1, "s2", &err));
        OK(f->vm->snapshot_delete(f->conn, ID1, "s2", &err)); /* again: converged */
        OK(f->vm->snapshot_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 2);
        free(list);
        /* Room again for one more. */
        OK(f->vm->snapshot_create(f->conn, ID1, "s4", "fourth", 3, &s2, &err));
        assert_int_equal(f->vm->snapshot_create(f->conn, ID1, "s5", "fifth", 3, &s2, &err), -ENOSPC);
        na_error_clear(&err);
        /* A plan without snapshots allows none. */
        create_ok(f, ID2);
        assert_int_equal(f->vm->snapshot_create(f->conn, ID2, "s1", "x", 0, &s2, &err), -ENOSPC);
        na_error_clear(&err);
}

static void backup_path(struct vm_fixture *f, char *buf, size_t len, const char *id, const char *name)
{
        vmf_path(f, buf, len, "state/vps/backups/%s/%s", id, name);
}

static void test_backups(void **state)
{
        struct vm_fixture *f = *state;
        create_ok(f, ID1);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_backup b1, again;
        struct proto_vps_backup_limits none = { -1, -1, -1 };

        OK(f->vm->backup_create(f->conn, ID1, "b1", &none, NULL, &b1, &err));
        char data[512], sha[65];
        backup_path(f, data, sizeof(data), ID1, "b1.qcow2.zst");
        OK(na_sha256_file(data, NULL, sha, &err));
        assert_string_equal(b1.sha256, sha);
        struct stat st;
        assert_int_equal(stat(data, &st), 0);
        assert_int_equal(b1.size_bytes, st.st_size);
        assert_int_equal(st.st_mode & 0777, 0600);

        /* A real zstd stream of a self-contained qcow2 (the template folded in). */
        char unpacked[512];
        vmf_path(f, unpacked, sizeof(unpacked), "unpacked.qcow2");
        char *const zargv[] = { (char *)"zstd", (char *)"-q", (char *)"-d", (char *)"-f", data, (char *)"-o",
                                unpacked, NULL };
        assert_int_equal(vmf_run(zargv, NULL, 0), 0);
        char out[8192];
        char *const qargv[] = { (char *)"qemu-img", (char *)"info", (char *)"--output=json", unpacked, NULL };
        assert_int_equal(vmf_run(qargv, out, sizeof(out)), 0);
        _cleanup_json_ json_t *info = json_loads(out, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(info, "format")), "qcow2");
        assert_null(json_object_get(info, "backing-filename"));

        OK(f->vm->backup_create(f->conn, ID1, "b1", &none, NULL, &again, &err));
        assert_string_equal(again.sha256, b1.sha256);
        assert_int_equal(again.created_at_ms, b1.created_at_ms);

        /* What a cut-short backup leaves never lists as valid. */
        char p[512];
        backup_path(f, p, sizeof(p), ID1, "b9.qcow2.zst.partial");
        assert_int_equal(close(open(p, O_CREAT | O_WRONLY, 0600)), 0);
        backup_path(f, p, sizeof(p), ID1, "b8.qcow2.zst");
        assert_int_equal(close(open(p, O_CREAT | O_WRONLY, 0600)), 0);
        struct proto_vps_backup *list = NULL;
        size_t n = 0;
        OK(f->vm->backup_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 1);
        assert_string_equal(list[0].backup_id, "b1");
        free(list);
        /* ... and the next backup sweeps the partial files. */
        OK(f->vm->backup_create(f->conn, ID1, "b2", &none, NULL, &again, &err));
        backup_path(f, p, sizeof(p), ID1, "b9.qcow2.zst.partial");
        assert_false(vmf_exists(p));

        OK(f->vm->backup_delete(f->conn, ID1, "b2", &err));
        OK(f->vm->backup_delete(f->conn, ID1, "b2", &err)); /* again: converged */
        OK(f->vm->backup_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 1);
        free(list);
        assert_int_equal(f->vm->backup_list(f->conn, ID2, &list, &n, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        na_error_clear(&err);
        assert_int_equal(f->vm->backup_create(f->conn, ID1, "../x", &none, NULL, &again, &err), -EINVAL);
        na_error_clear(&err);
}

static void test_restore(void **state)
{
        struct vm_fixture *f = *state;
        create_ok(f, ID1);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_backup b1;
        struct proto_vps_snapshot snap;
        OK(f->vm->backup_create(f->conn, ID1, "b1", NULL, NULL, &b1, &err));
        OK(f->vm->snapshot_create(f->conn, ID1, "s1", "after the backup", 3, &snap, &err));

        char disk[512];
        vmf_path(f, disk, sizeof(disk), "state/vps/disks/%s.qcow2", ID1);
        struct stat before, after;
        assert_int_equal(stat(disk, &before), 0);

        assert_int_equal(f->vm->backup_restore(f->conn, ID1, "nope", NULL, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_BACKUP_NOT_FOUND);
        na_error_clear(&err);

        OK(f->vm->backup_restore(f->conn, ID1, "b1", NULL, &err));
        assert_int_equal(stat(disk, &after), 0);
        assert_true(before.st_ino != after.st_ino); /* a new disk */
        struct proto_vps_status s;
        OK(f->vm->status(f->conn, ID1, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_RUNNING); /* it ran before: it runs again */
        struct proto_vps_snapshot *list = NULL;
        size_t n = 9;
        OK(f->vm->snapshot_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 0); /* snapshots lived in the replaced disk */
        free(list);

        /* A damaged archive is refused and the server keeps its disk. */
        char data[512];
        vmf_path(f, data, sizeof(data), "state/vps/backups/%s/b1.qcow2.zst", ID1);
        int fd = open(data, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "XX", 2, 20), 2);
        close(fd);
        assert_int_equal(stat(disk, &before), 0);
        assert_true(f->vm->backup_restore(f->conn, ID1, "b1", NULL, &err) < 0);
        assert_non_null(strstr(err.message, "sha256"));
        na_error_clear(&err);
        assert_int_equal(stat(disk, &after), 0);
        assert_int_equal(before.st_ino, after.st_ino);
        OK(f->vm->status(f->conn, ID1, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_RUNNING);

        /* A stopped server stays stopped. */
        enum proto_vps_state st;
        struct proto_vps_backup b2;
        OK(f->vm->backup_create(f->conn, ID1, "b2", NULL, NULL, &b2, &err));
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_STOP, 0, NULL, &st, &err));
        OK(f->vm->backup_restore(f->conn, ID1, "b2", NULL, &err));
        OK(f->vm->status(f->conn, ID1, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_STOPPED);
}

/* A backup record as if made at ms, of a (sparse) file of size bytes. */
static void fake_backup(struct vm_fixture *f, const char *id, const char *bid, int64_t ms, int64_t size)
{
        char p[512], text[512];
        backup_path(f, p, sizeof(p), id, "");
        struct na_error err = NA_ERROR_INIT;
        OK(na_mkdir_p(p, 0700, &err));
        char name[128];
        snprintf(name, sizeof(name), "%s.qcow2.zst", bid);
        backup_path(f, p, sizeof(p), id, name);
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, size), 0);
        close(fd);
        snprintf(text, sizeof(text),
                 "{\"backupId\":\"%s\",\"createdAt\":%lld,\"sizeBytes\":%lld,\"sha256\":"
                 "\"0000000000000000000000000000000000000000000000000000000000000000\"}",
                 bid, (long long)ms, (long long)size);
        snprintf(name, sizeof(name), "%s.json", bid);
        backup_path(f, p, sizeof(p), id, name);
        OK(na_atomic_write(p, text, strlen(text), 0600, &err));
}

static size_t count_backups(struct vm_fixture *f, const char *id)
{
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_backup *list = NULL;
        size_t n = 0;
        OK(f->vm->backup_list(f->conn, id, &list, &n, &err));
        free(list);
        return n;
}

static void test_retention(void **state)
{
        struct vm_fixture *f = *state;
        create_ok(f, ID1);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_backup b;
        int64_t now = (int64_t)na_now_real_ms(), day = 86400LL * 1000;

        /* maxBackups */
        fake_backup(f, ID1, "old1", now - 3 * day, 1000);
        fake_backup(f, ID1, "old2", now - 2 * day, 1000);
        fake_backup(f, ID1, "old3", now - 1 * day, 1000);
        assert_int_equal(count_backups(f, ID1), 3);
        struct proto_vps_backup_limits limits = { .max_storage_gb = -1, .max_backups = 2, .retention_days = -1 };
        OK(f->vm->backup_create(f->conn, ID1, "new1", &limits, NULL, &b, &err));
        struct proto_vps_backup *list = NULL;
        size_t n = 0;
        OK(f->vm->backup_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 2);
        assert_string_equal(list[0].backup_id, "old3");
        assert_string_equal(list[1].backup_id, "new1");
        free(list);

        /* retentionDays */
        fake_backup(f, ID1, "ancient", now - 40 * day, 1000);
        limits = (struct proto_vps_backup_limits){ .max_storage_gb = -1, .max_backups = -1, .retention_days = 30 };
        OK(f->vm->backup_create(f->conn, ID1, "new2", &limits, NULL, &b, &err));
        OK(f->vm->backup_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++)
                assert_string_not_equal(list[i].backup_id, "ancient");
        free(list);

        /* maxStorageGB: a 3 GiB (sparse) old backup goes, the newest always stays. */
        fake_backup(f, ID1, "huge", now - 2000, 3LL << 30);
        limits = (struct proto_vps_backup_limits){ .max_storage_gb = 2, .max_backups = -1, .retention_days = -1 };
        OK(f->vm->backup_create(f->conn, ID1, "new3", &limits, NULL, &b, &err));
        OK(f->vm->backup_list(f->conn, ID1, &list, &n, &err));
        bool huge = false, new3 = false;
        for (size_t i = 0; i < n; i++) {
                huge |= streq(list[i].backup_id, "huge");
                new3 |= streq(list[i].backup_id, "new3");
        }
        assert_false(huge);
        assert_true(new3);
        free(list);
        limits = (struct proto_vps_backup_limits){ .max_storage_gb = -1, .max_backups = 1, .retention_days = 1 };
        OK(f->vm->backup_create(f->conn, ID1, "new4", &limits, NULL, &b, &err));
        assert_int_equal(count_backups(f, ID1), 1);
}

/* A node whose libvirt came back with three servers off; the agent's records say which ran. */
static void write_meta(struct vm_fixture *f, const char *id, bool want_running, bool installing)
{
        struct vm_meta m = { 0 };
        snprintf(m.id, sizeof(m.id), "%s", id);
        snprintf(m.hostname, sizeof(m.hostname), "h%c", id[0]);
        m.name = strdup("n");
        m.template_id = strdup("debian");
        m.image_slug = strdup("12");
        m.plan = (struct proto_vps_plan){ 1, 1, 512, 2048, 0, 0, 1 };
        m.want_running = want_running;
        m.installing = installing;
        char dir[512];
        vmf_path(f, dir, sizeof(dir), "state/vps");
        struct na_error err = NA_ERROR_INIT;
        OK(vm_meta_save(dir, &m, &err));
        vm_meta_clear(&m);
}

static void test_node_reboot(void **state)
{
        struct vm_fixture *f = *state;
        vmf_close(f);
        char node[512];
        vmf_path(f, node, sizeof(node), "rebooted-node.xml");
        FILE *x = fopen(node, "w");
        assert_non_null(x);
        fprintf(x, "<node><cpu><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads>"
                   "<active>4</active><mhz>2000</mhz><model>x86_64</model></cpu><memory>8388608</memory>\n");
        const char *ids[] = { ID1, ID2, ID3 };
        for (int i = 0; i < 3; i++)
                fprintf(x,
                        "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>"
                        "<name>vps-%s</name><uuid>%s</uuid><memory>524288</memory><vcpu>1</vcpu>"
                        "<os><type>hvm</type></os><test:runstate>5</test:runstate></domain>\n",
                        ids[i], ids[i]);
        fprintf(x, "<domain type='test'><name>not-ours</name><memory>524288</memory><vcpu>1</vcpu>"
                   "<os><type>hvm</type></os></domain></node>\n");
        fclose(x);
        write_meta(f, ID1, true, false);  /* ran before the node went down */
        write_meta(f, ID2, false, false); /* was stopped on purpose */
        write_meta(f, ID3, true, true);   /* an install was cut short: its job runs again */
        snprintf(f->uri, sizeof(f->uri), "test://%s", node);
        vmf_open(f);

        struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *inv = NULL;
        OK(f->vm->inventory(f->conn, &inv, &err));
        assert_int_equal(json_array_size(inv), 3); /* not-ours is not listed */

        unsigned started = 0;
        OK(f->vm->resume_servers(f->conn, true, &started, &err));
        assert_int_equal(started, 1);
        struct proto_vps_status s;
        OK(f->vm->status(f->conn, ID1, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_RUNNING);
        OK(f->vm->status(f->conn, ID2, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_STOPPED);
        OK(f->vm->status(f->conn, ID3, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_INSTALLING);
        assert_true(vmf_saw_event(f, ID1, "running"));

        json_decref(inv);
        inv = NULL;
        OK(f->vm->inventory(f->conn, &inv, &err));
        size_t i;
        json_t *item;
        json_array_foreach(inv, i, item) {
                const char *id = json_string_value(json_object_get(item, "id"));
                const char *st = json_string_value(json_object_get(item, "state"));
                assert_string_equal(st, streq(id, ID1) ? "running" : streq(id, ID2) ? "stopped" : "installing");
        }

        /* On a thread, as the daemon calls it at start: nothing left to start now. */
        OK(f->vm->resume_servers(f->conn, false, &started, &err));
        vmf_close(f); /* joins it */
        vmf_open(f);  /* a fresh test node: all off again */
        OK(f->vm->resume_servers(f->conn, false, NULL, &err));
        for (int tries = 0; tries < 500; tries++) {
                OK(f->vm->status(f->conn, ID1, &s, &err));
                if (s.state == PROTO_VPS_RUNNING)
                        break;
                usleep(10000);
        }
        assert_int_equal(s.state, PROTO_VPS_RUNNING);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_snapshots, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_backups, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_restore, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_retention, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_node_reboot, vmf_cmocka_setup, vmf_cmocka_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
