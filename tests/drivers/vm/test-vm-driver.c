/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The libvirt VM driver against libvirt's in-memory test driver
 * (test:///<abs>/tests/drivers/vm/node.xml): create, power, status, inventory, events,
 * upgrade, reinstall, delete, exec refusal, node reboot. Disks, seeds and
 * backups are real files made by qemu-img and xorriso.
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

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/vm/vm-libvirt-internal.h"
#include "drivers/vm/vm-util.h"
#include "vm-fixture.h"

/* A call that must succeed; on failure the message says why. */
#define OK(call)                                                                  \
        do {                                                                      \
                int _r = (call);                                                  \
                if (_r != 0)                                                      \
                        fail_msg("%s = %d: %s", #call, _r, err.message);          \
        } while (0)

#define ID1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define ID2 "0a0b0c0d-1111-4222-8333-444455556666"
#define ID_UNKNOWN "99999999-9999-4999-8999-999999999999"

struct stages {
        char seen[16][32];
        int n;
        int checkpoints;
        int fail_at; /* fail the fail_at-th checkpoint (1-based); 0 never */
};

static void rec_stage(void *userdata, const char *stage, int percent, const char *message)
{
        struct stages *s = userdata;
        if (stage && (s->n == 0 || !streq(s->seen[s->n - 1], stage)) && s->n < 16)
                snprintf(s->seen[s->n++], sizeof(s->seen[0]), "%s", stage);
}

static int rec_checkpoint(void *userdata, struct na_error *err)
{
        struct stages *s = userdata;
        if (++s->checkpoints == s->fail_at)
                return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "cancelled by the test");
        return 0;
}

static struct na_progress progress_of(struct stages *s)
{
        memset(s, 0, sizeof(*s));
        return (struct na_progress){ .stage = rec_stage, .checkpoint = rec_checkpoint, .userdata = s };
}

static void create_ok(struct vm_fixture *f, const char *id, struct proto_vps_server *srv)
{
        struct vm_create_spec spec = vmf_spec(id);
        struct na_error err = NA_ERROR_INIT;
        int r = f->vm->create(f->conn, &spec, NULL, srv, &err);
        if (r < 0)
                fail_msg("create %s: %s", id, err.message);
}

/* qemu-img info of a file as JSON. */
static json_t *image_info(const char *path)
{
        char out[8192];
        char *const argv[] = { (char *)"qemu-img", (char *)"info", (char *)"-U", (char *)"--output=json", (char *)path,
                               NULL };
        assert_int_equal(vmf_run(argv, out, sizeof(out)), 0);
        json_t *j = json_loads(out, 0, NULL);
        assert_non_null(j);
        return j;
}

static bool file_contains(const char *path, const char *needle)
{
        char *buf = NULL;
        size_t len = 0;
        struct na_error e = NA_ERROR_INIT;
        if (na_read_file(path, 64 << 20, &buf, &len, &e) < 0)
                fail_msg("%s", e.message);
        bool found = memmem(buf, len, needle, strlen(needle)) != NULL;
        free(buf);
        return found;
}

static void test_create(void **state)
{
        struct vm_fixture *f = *state;
        struct stages st;
        struct na_progress p = progress_of(&st);
        struct vm_create_spec spec = vmf_spec(ID1);
        char *keys[] = { (char *)"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host",
                         NULL };
        spec.ssh_keys = keys;
        struct proto_vps_server srv;
        struct na_error err = NA_ERROR_INIT;
        OK(f->vm->create(f->conn, &spec, &p, &srv, &err));

        assert_string_equal(srv.id, ID1);
        assert_int_equal(srv.state, PROTO_VPS_RUNNING);
        assert_string_equal(srv.hostname, "web1");
        assert_string_equal(srv.template_id, "debian");
        assert_string_equal(srv.image_slug, "12");
        assert_int_equal(srv.plan.cpu_cores, 2);
        assert_int_equal(srv.plan.ram_mb, 1024);
        assert_int_equal(strncmp(srv.mac, "52:54:00:", 9), 0);
        assert_true(srv.created_at_ms > 0);

        /* Stages in the contract's order. */
        assert_int_equal(st.n, 4);
        assert_string_equal(st.seen[0], "preparing-disk");
        assert_string_equal(st.seen[1], "writing-image");
        assert_string_equal(st.seen[2], "configuring");
        assert_string_equal(st.seen[3], "booting");

        /* A copy-on-write overlay of the template image. */
        char disk[512], seed[512], meta[512], image[512];
        vmf_path(f, disk, sizeof(disk), "state/vps/disks/%s.qcow2", ID1);
        vmf_path(f, seed, sizeof(seed), "state/vps/disks/%s-seed.iso", ID1);
        vmf_path(f, meta, sizeof(meta), "state/vps/%s.json", ID1);
        vmf_path(f, image, sizeof(image), "images/debian-12.qcow2");
        _cleanup_json_ json_t *info = image_info(disk);
        assert_string_equal(json_string_value(json_object_get(info, "format")), "qcow2");
        assert_string_equal(json_string_value(json_object_get(info, "backing-filename")), image);
        assert_int_equal(json_integer_value(json_object_get(info, "virtual-size")), 2048LL << 20);

        /* The seed: ISO 9660 labelled cidata, a hash and the key, never the password. */
        FILE *iso = fopen(seed, "rb");
        assert_non_null(iso);
        char label[7] = "";
        assert_int_equal(fseek(iso, 16 * 2048 + 40, SEEK_SET), 0);
        assert_int_equal(fread(label, 1, 6, iso), 6);
        fclose(iso);
        assert_string_equal(label, "cidata");
        assert_false(file_contains(seed, "Secret#123"));
        assert_true(file_contains(seed, "$6$"));
        assert_true(file_contains(seed, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"));
        assert_true(file_contains(seed, "\"local-hostname\": \"web1\""));
        assert_false(file_contains(meta, "Secret#123"));
        struct stat sb;
        assert_int_equal(stat(meta, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0600);

        assert_true(f->vm->exists(f->conn, ID1));
        assert_true(vmf_saw_event(f, ID1, "running"));

        /* Asked again: the same server, nothing remade. */
        struct stat before, after;
        assert_int_equal(stat(disk, &before), 0);
        struct proto_vps_server again;
        OK(f->vm->create(f->conn, &spec, NULL, &again, &err));
        assert_int_equal(stat(disk, &after), 0);
        assert_int_equal(before.st_ino, after.st_ino);
        assert_int_equal(again.created_at_ms, srv.created_at_ms);
        assert_string_equal(again.mac, srv.mac);
}

static void expect_field(struct na_error *err, const char *path)
{
        assert_string_equal(err->code, NA_E_VALIDATION);
        json_t *node = err->details;
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
                node = json_object_get(node, seg);
                if (!node)
                        fail_msg("no details for %s in: %s", path, json_dumps(err->details, JSON_COMPACT));
        }
        assert_true(json_array_size(json_object_get(node, "_errors")) > 0);
}

static void test_create_refused(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        struct na_error err = NA_ERROR_INIT;
        struct vm_create_spec spec = vmf_spec(ID2);

        spec.tmpl.id = "centos";
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "template.id");
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        spec.tmpl.image_slug = "13";
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "template.imageSlug");
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        spec.tmpl.os = PROTO_VPS_OS_WINDOWS;
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "template.os");
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        json_t *inputs = json_pack("{s:s, s:i, s:s}", "role", "mail", "workers", 9, "colour", "red");
        spec.inputs = inputs;
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "inputs.role");
        expect_field(&err, "inputs.workers");
        expect_field(&err, "inputs.colour");
        json_decref(inputs);
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        spec.tmpl.id = "needs";
        spec.tmpl.image_slug = "1";
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "inputs.token");
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        spec.plan.storage_mb = 32; /* the image is 64 MB */
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "plan.storageMB");
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        spec.tmpl.id = "missing";
        spec.tmpl.image_slug = "1";
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "template.imageSlug");
        na_error_clear(&err);

        spec = vmf_spec(ID2);
        spec.hostname = "-bad-";
        spec.password = "weak";
        assert_int_equal(f->vm->create(f->conn, &spec, NULL, &srv, &err), -EINVAL);
        expect_field(&err, "hostname");
        expect_field(&err, "vmPassword");
        na_error_clear(&err);

        /* Nothing of it reached the node. */
        char meta[512];
        vmf_path(f, meta, sizeof(meta), "state/vps/%s.json", ID2);
        assert_false(vmf_exists(meta));
        assert_false(f->vm->exists(f->conn, ID2));

        /* A corrupt image is refused before it is used. */
        spec = vmf_spec(ID2);
        spec.tmpl.id = "broken";
        spec.tmpl.image_slug = "1";
        assert_true(f->vm->create(f->conn, &spec, NULL, &srv, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "checksum mismatch"));
        assert_false(f->vm->exists(f->conn, ID2));
        na_error_clear(&err);

        /* Not a server id at all. */
        spec = vmf_spec("../../etc");
        assert_true(f->vm->create(f->conn, &spec, NULL, &srv, &err) < 0);
        na_error_clear(&err);
}

static void test_direct_kernel_and_windows(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        struct na_error err = NA_ERROR_INIT;
        struct vm_create_spec spec = vmf_spec(ID1);
        spec.tmpl = (struct proto_vps_template_ref){ "busybox", "1", PROTO_VPS_OS_LINUX };
        spec.plan.storage_mb = 64;
        OK(f->vm->create(f->conn, &spec, NULL, &srv, &err));
        char meta[512];
        vmf_path(f, meta, sizeof(meta), "state/vps/%s.json", ID1);
        assert_true(file_contains(meta, "vmlinuz"));
        assert_true(file_contains(meta, "console=ttyS0 quiet"));

        spec = vmf_spec(ID2);
        spec.tmpl = (struct proto_vps_template_ref){ "windows", "2022", PROTO_VPS_OS_WINDOWS };
        spec.plan.storage_mb = 64;
        OK(f->vm->create(f->conn, &spec, NULL, &srv, &err));
        assert_int_equal(srv.os, PROTO_VPS_OS_WINDOWS);
        char disk[512];
        vmf_path(f, disk, sizeof(disk), "state/vps/disks/%s.qcow2", ID2);
        _cleanup_json_ json_t *info = image_info(disk);
        assert_string_equal(json_string_value(json_object_get(info, "backing-filename-format")), "raw");
}

static void test_power(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        struct na_error err = NA_ERROR_INIT;
        enum proto_vps_state st;
        struct stages s;
        struct na_progress p = progress_of(&s);

        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_START, 60, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_RUNNING); /* starting a running server succeeds */
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_STOP, 5, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_STOPPED);
        assert_true(vmf_saw_event(f, ID1, "stopped"));
        char meta[512];
        vmf_path(f, meta, sizeof(meta), "state/vps/%s.json", ID1);
        assert_true(file_contains(meta, "\"wantedState\":\"stopped\""));
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_STOP, 5, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_STOPPED);
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_FORCE_STOP, 0, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_STOPPED);
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_REBOOT, 0, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_RUNNING); /* rebooting a stopped server starts it */
        assert_true(file_contains(meta, "\"wantedState\":\"running\""));
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_REBOOT, 0, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_RUNNING);
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_FORCE_STOP, 0, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_STOPPED);
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_START, 0, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_RUNNING);
        /* Stop with no grace: straight to force. */
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_STOP, 0, &p, &st, &err));
        assert_int_equal(st, PROTO_VPS_STOPPED);

        assert_int_equal(f->vm->power(f->conn, ID_UNKNOWN, PROTO_VPS_POWER_START, 0, NULL, &st, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        assert_non_null(strstr(err.message, ID_UNKNOWN));
        na_error_clear(&err);
        assert_true(f->vm->power(f->conn, "nonsense", PROTO_VPS_POWER_START, 0, NULL, &st, &err) < 0);
        assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        na_error_clear(&err);
}

static void test_status_inventory(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        create_ok(f, ID2, &srv);
        struct na_error err = NA_ERROR_INIT;
        enum proto_vps_state st;
        OK(f->vm->power(f->conn, ID2, PROTO_VPS_POWER_STOP, 1, NULL, &st, &err));

        struct proto_vps_status s;
        OK(f->vm->status(f->conn, ID1, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_RUNNING);
        assert_int_equal(s.memory_mb, 1024);
        assert_true(s.uptime_sec >= 0);
        OK(f->vm->status(f->conn, ID2, &s, &err));
        assert_int_equal(s.state, PROTO_VPS_STOPPED);
        assert_int_equal(s.memory_mb, 0);
        assert_int_equal(s.uptime_sec, 0);
        assert_int_equal(f->vm->status(f->conn, ID_UNKNOWN, &s, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        na_error_clear(&err);

        _cleanup_json_ json_t *inv = NULL;
        OK(f->vm->inventory(f->conn, &inv, &err));
        assert_int_equal(json_array_size(inv), 2);
        size_t i;
        json_t *item;
        int seen = 0;
        json_array_foreach(inv, i, item) {
                const char *id = json_string_value(json_object_get(item, "id"));
                const char *st_name = json_string_value(json_object_get(item, "state"));
                if (streq(id, ID1)) {
                        assert_string_equal(st_name, "running");
                        seen |= 1;
                } else if (streq(id, ID2)) {
                        assert_string_equal(st_name, "stopped");
                        seen |= 2;
                }
        }
        assert_int_equal(seen, 3);
        assert_string_equal(f->vm->uri(f->conn), f->uri);
}

static void test_upgrade(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_plan plan = srv.plan;
        bool restart = false;

        plan.storage_mb = 1024;
        assert_int_equal(f->vm->upgrade(f->conn, ID1, &plan, &srv, &restart, &err), -EINVAL);
        expect_field(&err, "plan.storageMB");
        na_error_clear(&err);

        plan.storage_mb = 4096;
        plan.cpu_cores = 4;
        plan.ram_mb = 2048;
        OK(f->vm->upgrade(f->conn, ID1, &plan, &srv, &restart, &err));
        assert_true(restart); /* running: vCPUs and memory wait for a restart */
        assert_int_equal(srv.plan.cpu_cores, 4);
        assert_int_equal(srv.plan.storage_mb, 4096);
        char disk[512];
        vmf_path(f, disk, sizeof(disk), "state/vps/disks/%s.qcow2", ID1);
        _cleanup_json_ json_t *info = image_info(disk);
        assert_int_equal(json_integer_value(json_object_get(info, "virtual-size")), 4096LL << 20);

        enum proto_vps_state st;
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_STOP, 1, NULL, &st, &err));
        plan.ram_mb = 4096;
        OK(f->vm->upgrade(f->conn, ID1, &plan, &srv, &restart, &err));
        assert_false(restart);
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_START, 1, NULL, &st, &err));
        struct proto_vps_status s;
        OK(f->vm->status(f->conn, ID1, &s, &err));
        assert_int_equal(s.memory_mb, 4096);
}

static void test_reinstall(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_snapshot snap;
        OK(f->vm->snapshot_create(f->conn, ID1, "s1", "before", 3, &snap, &err));

        struct vm_install_info cur;
        OK(f->vm->get_install(f->conn, ID1, &cur, &err));
        assert_string_equal(cur.hostname, "web1");
        assert_true(cur.has_password);
        assert_int_equal(cur.n_ssh_keys, 0);
        vm_install_info_clear(&cur);

        struct proto_vps_install inst = {
                .hostname = "web2",
                .template_id = "debian",
                .image_slug = "11",
                .inputs_op = PROTO_VPS_KEEP,
                .password_op = PROTO_VPS_KEEP,
                .key_op = PROTO_VPS_SET,
                .ssh_key_id = "11111111-2222-4333-8444-555555555555",
                .ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k",
        };
        /* A cancel before the disk is touched leaves the server as it was. */
        struct stages s;
        struct na_progress p = progress_of(&s);
        s.fail_at = 2;
        assert_true(f->vm->reinstall(f->conn, ID1, &inst, &p, &err) < 0);
        assert_string_equal(err.code, NA_E_JOB_CANCELLED);
        na_error_clear(&err);
        struct proto_vps_status stt;
        OK(f->vm->status(f->conn, ID1, &stt, &err));
        assert_int_equal(stt.state, PROTO_VPS_RUNNING);
        char disk[512], fresh[512];
        vmf_path(f, disk, sizeof(disk), "state/vps/disks/%s.qcow2", ID1);
        vmf_path(f, fresh, sizeof(fresh), "state/vps/disks/%s.qcow2.new", ID1);
        {
                _cleanup_json_ json_t *info = image_info(disk);
                assert_non_null(strstr(json_string_value(json_object_get(info, "backing-filename")), "debian-12"));
        }

        /* A leftover from a crash does not get in the way. */
        FILE *left = fopen(fresh, "w");
        assert_non_null(left);
        fclose(left);

        p = progress_of(&s);
        OK(f->vm->reinstall(f->conn, ID1, &inst, &p, &err));
        assert_int_equal(s.n, 5);
        assert_string_equal(s.seen[0], "stopping");
        assert_string_equal(s.seen[1], "preparing-disk");
        assert_string_equal(s.seen[2], "writing-image");
        assert_string_equal(s.seen[3], "configuring");
        assert_string_equal(s.seen[4], "booting");
        assert_false(vmf_exists(fresh));
        _cleanup_json_ json_t *info = image_info(disk);
        assert_non_null(strstr(json_string_value(json_object_get(info, "backing-filename")), "debian-11"));

        OK(f->vm->get_server(f->conn, ID1, &srv, &err));
        assert_string_equal(srv.hostname, "web2");
        assert_string_equal(srv.image_slug, "11");
        assert_int_equal(srv.state, PROTO_VPS_RUNNING);
        OK(f->vm->get_install(f->conn, ID1, &cur, &err));
        assert_true(cur.has_password); /* kept */
        assert_int_equal(cur.n_ssh_keys, 1);
        assert_string_equal(cur.ssh_key_id, "11111111-2222-4333-8444-555555555555");
        vm_install_info_clear(&cur);

        /* The old disk's snapshots went with it. */
        struct proto_vps_snapshot *list = NULL;
        size_t n = 9;
        OK(f->vm->snapshot_list(f->conn, ID1, &list, &n, &err));
        assert_int_equal(n, 0);
        free(list);

        /* The seed carries the new hostname and a new instance id. */
        char seed[512];
        vmf_path(f, seed, sizeof(seed), "state/vps/disks/%s-seed.iso", ID1);
        assert_true(file_contains(seed, "\"local-hostname\": \"web2\""));
        assert_true(file_contains(seed, ID1 "-2"));

        /* Clearing the password leaves the key; Windows refuses keys. */
        inst.password_op = PROTO_VPS_CLEAR;
        inst.key_op = PROTO_VPS_KEEP;
        OK(f->vm->reinstall(f->conn, ID1, &inst, NULL, &err));
        OK(f->vm->get_install(f->conn, ID1, &cur, &err));
        assert_false(cur.has_password);
        vm_install_info_clear(&cur);
        inst.template_id = "windows";
        inst.image_slug = "2022";
        inst.password_op = PROTO_VPS_SET;
        inst.password = "Secret#123";
        assert_int_equal(f->vm->reinstall(f->conn, ID1, &inst, NULL, &err), -EINVAL);
        expect_field(&err, "sshKeyId");
        na_error_clear(&err);

        assert_int_equal(f->vm->reinstall(f->conn, ID_UNKNOWN, &inst, NULL, &err), -ENOENT);
        assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        na_error_clear(&err);
}

static void test_delete(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        struct na_error err = NA_ERROR_INIT;
        struct proto_vps_snapshot snap;
        struct proto_vps_backup b;
        OK(f->vm->snapshot_create(f->conn, ID1, "s1", "one", 3, &snap, &err));
        OK(f->vm->backup_create(f->conn, ID1, "b1", NULL, NULL, &b, &err));

        OK(f->vm->remove(f->conn, ID1, &err));
        assert_false(f->vm->exists(f->conn, ID1));
        char path[512];
        vmf_path(f, path, sizeof(path), "state/vps/disks/%s.qcow2", ID1);
        assert_false(vmf_exists(path));
        vmf_path(f, path, sizeof(path), "state/vps/disks/%s-seed.iso", ID1);
        assert_false(vmf_exists(path));
        vmf_path(f, path, sizeof(path), "state/vps/%s.json", ID1);
        assert_false(vmf_exists(path));
        vmf_path(f, path, sizeof(path), "state/vps/backups/%s", ID1);
        assert_false(vmf_exists(path));
        /* Again: nothing left to do, and that is fine. */
        OK(f->vm->remove(f->conn, ID1, &err));
        _cleanup_json_ json_t *inv = NULL;
        OK(f->vm->inventory(f->conn, &inv, &err));
        assert_int_equal(json_array_size(inv), 0);
        enum proto_vps_state st;
        assert_int_equal(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_START, 0, NULL, &st, &err), -ENOENT);
        na_error_clear(&err);
}

static void test_exec_refused(void **state)
{
        struct vm_fixture *f = *state;
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        struct na_error err = NA_ERROR_INIT;
        char *argv[] = { (char *)"/bin/uname", (char *)"-a", NULL };
        struct proto_vps_exec_result res;
        /* The test driver has no guest agent: the same answer as a guest without one. */
        assert_true(f->vm->exec(f->conn, ID1, argv, 5, NULL, &res, &err) < 0);
        assert_string_equal(err.code, NA_E_GUEST_AGENT);
        assert_non_null(json_object_get(err.details, "reason"));
        na_error_clear(&err);

        enum proto_vps_state st;
        OK(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_STOP, 0, NULL, &st, &err));
        assert_true(f->vm->exec(f->conn, ID1, argv, 5, NULL, &res, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        assert_string_equal(json_string_value(json_object_get(err.details, "state")), "stopped");
        na_error_clear(&err);
}

/* A lost connection is replaced: by the timer, or by the next call. */
static void test_reconnect(void **state)
{
        struct vm_fixture *f = *state;
        vmf_close(f);
        f->opts.reconnect_interval_ms = 20;
        vmf_open(f);
        struct proto_vps_server srv;
        create_ok(f, ID1, &srv);
        assert_true(f->vm->exists(f->conn, ID1));

        /* What libvirt's close callback does when the daemon goes away. */
        atomic_store(&f->conn->dead, true);
        for (int tries = 0; tries < 500 && atomic_load(&f->conn->dead); tries++)
                usleep(10000);
        assert_false(atomic_load(&f->conn->dead));
        /* A test:///file connection starts from the file again: proof of a new connection. */
        assert_false(f->vm->exists(f->conn, ID1));
        /* Events flow on the new connection. */
        pthread_mutex_lock(&f->lock);
        f->n_events = 0;
        pthread_mutex_unlock(&f->lock);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(f->vm->remove(f->conn, ID1, &err), 0);
        create_ok(f, ID1, &srv);
        assert_true(vmf_saw_event(f, ID1, "running"));

        /* Without the timer, the next call notices. */
        atomic_store(&f->conn->dead, true);
        enum proto_vps_state st;
        assert_int_equal(f->vm->power(f->conn, ID1, PROTO_VPS_POWER_START, 0, NULL, &st, &err), -ENOENT);
        na_error_clear(&err);
        (void)srv;
}

/* A hypervisor that is not there yet: open anyway (connect_later), calls fail until it is. */
static void test_connect_later(void **state)
{
        struct vm_fixture *f = *state;
        vmf_close(f);
        struct vm_options o = f->opts;
        o.uri = "test:///nonexistent/node.xml";
        struct vm_conn *c = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_true(f->vm->open(&o, &c, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        na_error_clear(&err);
        o.connect_later = true;
        o.reconnect_interval_ms = 20;
        assert_int_equal(f->vm->open(&o, &c, &err), 0);
        json_t *inv = NULL;
        assert_true(f->vm->inventory(c, &inv, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(json_object_get(err.details, "reason"));
        na_error_clear(&err);
        assert_int_equal(f->vm->resume_servers(c, false, NULL, &err), 0); /* waits on its thread */
        usleep(100000);
        f->vm->close(c); /* and close stops it */
        vmf_open(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_create_refused, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_direct_kernel_and_windows, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_power, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_status_inventory, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_upgrade, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_reinstall, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_delete, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_exec_refused, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_reconnect, vmf_cmocka_setup, vmf_cmocka_teardown),
                cmocka_unit_test_setup_teardown(test_connect_later, vmf_cmocka_setup, vmf_cmocka_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
