/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vps job handlers (agent/kinds/kind-vps*.c) run directly with a job-layer double
 * over the libvirt driver on libvirt's test driver: params decoding, stages,
 * result shapes, error codes, the services hooks and the backup.finished event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "agent/kinds/kind-vps.h"
#include "common/json-cleanup.h"
#include "job-double.h"
#include "vm-fixture.h"

#define ID1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define ID_UNKNOWN "99999999-9999-4999-8999-999999999999"
#define KEY_ED "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host"

struct world {
        struct vm_fixture f;
        struct agent_services services;
        int added, removed;
        int added_vcpus;
        int64_t added_mb;
        json_t *events;
};

static struct world *W; /* the hooks reach the world through this */

static void hook_added(const struct agent_services *s, const char *id, int vcpus, int64_t memory_mb)
{
        W->added++;
        W->added_vcpus = vcpus;
        W->added_mb = memory_mb;
}

static void hook_removed(const struct agent_services *s, const char *id)
{
        W->removed++;
}

static void hook_event(const struct agent_services *s, const char *type, const char *target, json_t *data)
{
        json_array_append_new(W->events, json_pack("{s:s, s:s, s:o}", "type", type, "targetId", target, "data",
                                                   data ? data : json_object()));
}

static int setup(void **state)
{
        struct world *w = calloc(1, sizeof(*w));
        vmf_setup(&w->f, NULL);
        w->services = (struct agent_services){
                .state_dir = w->f.state_dir,
                .vm = w->f.vm,
                .vm_conn = w->f.conn,
                .vps_added = hook_added,
                .vps_removed = hook_removed,
                .emit_event = hook_event,
        };
        w->events = json_array();
        W = w;
        *state = w;
        return 0;
}

static int teardown(void **state)
{
        struct world *w = *state;
        json_decref(w->events);
        vmf_teardown(&w->f);
        free(w);
        return 0;
}

static void ctx_init(struct world *w, struct job_ctx *ctx, const char *target)
{
        memset(ctx, 0, sizeof(*ctx));
        ctx->services = &w->services;
        snprintf(ctx->id, sizeof(ctx->id), "job-1");
        snprintf(ctx->target, sizeof(ctx->target), "%s", target);
}

/* Run a kind that must succeed; returns its data. */
static json_t *run_ok(struct world *w, const char *kind, const char *target, json_t *params, struct job_ctx *ctx)
{
        struct job_ctx local;
        if (!ctx) {
                ctx = &local;
                ctx_init(w, ctx, target);
        }
        struct na_error err = NA_ERROR_INIT;
        json_t *data = NULL;
        int r = job_double_run(kind, ctx, params, &data, &err);
        if (r != 0)
                fail_msg("%s: %d %s: %s", kind, r, err.code, err.message);
        if (params)
                json_decref(params);
        return data;
}

/* Run a kind that must fail with code; returns the failure object (httpStatus, code, error, details). */
static json_t *run_fail(struct world *w, const char *kind, const char *target, json_t *params, const char *code)
{
        struct job_ctx ctx;
        ctx_init(w, &ctx, target);
        struct na_error err = NA_ERROR_INIT;
        json_t *data = NULL;
        int r = job_double_run(kind, &ctx, params, &data, &err);
        if (r == 0)
                fail_msg("%s: succeeded, expected %s", kind, code);
        if (!streq(err.code, code))
                fail_msg("%s: got %s (%s), expected %s", kind, err.code, err.message, code);
        if (params)
                json_decref(params);
        json_t *out = na_error_to_json(&err);
        na_error_clear(&err);
        return out;
}

static json_t *create_params(void)
{
        return json_pack("{s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:{s:s, s:s, s:s}, s:s, s:{s:s},"
                         " s:{s:[{s:s, s:i}]}}",
                         "name", "web", "hostname", "web1", "plan", "cpuCores", 2, "cpuThreads", 2, "ramMB", 2048,
                         "storageMB", 2048, "networkSpeedLimitMbps", 100, "bandwidthLimitGb", 1000, "maxSnapshots", 2,
                         "template", "id", "debian", "imageSlug", "12", "os", "linux", "vmPassword", "Secret#123",
                         "inputs", "role", "web", "network", "ipv4", "address", "203.0.113.10", "prefix", 24);
}

static void test_kinds(void **state)
{
        static const char *const names[] = {
                "vps.create",          "vps.power",          "vps.status",         "vps.exec",
                "vps.reinstall",       "vps.upgrade",        "vps.delete",         "vps.snapshot.create",
                "vps.snapshot.list",   "vps.snapshot.revert", "vps.snapshot.delete", "vps.backup.create",
                "vps.backup.list",     "vps.backup.restore", "vps.backup.delete",  "vps.backup.export",
                "vps.backup.import",   "vps.network.set",
        };
        size_t n = 0;
        for (const struct job_kind *const *k = vps_job_kinds; *k; k++) {
                n++;
                assert_int_equal((*k)->target, PROTO_TARGET_VPS);
                assert_non_null((*k)->run);
                bool reads = streq((*k)->name, "vps.status") || streq((*k)->name, "vps.snapshot.list") ||
                             streq((*k)->name, "vps.backup.list") || streq((*k)->name, "vps.backup.export");
                assert_int_equal((*k)->changes, !reads);
                assert_null(strstr((*k)->name, "firewall"));
                assert_null(strstr((*k)->name, "metrics"));
        }
        assert_int_equal(n, sizeof(names) / sizeof(names[0]));
        for (size_t i = 0; i < n; i++)
                assert_non_null(job_double_kind(names[i]));
        const struct job_kind *re = job_double_kind("vps.reinstall");
        const char *const want[] = { "stopping", "preparing-disk", "writing-image", "configuring", "booting", "done" };
        for (size_t i = 0; i < 6; i++)
                assert_string_equal(re->stages[i], want[i]);
        assert_null(re->stages[6]);
        assert_string_equal(job_double_kind("vps.backup.create")->stages[1], "compressing");
        assert_string_equal(job_double_kind("vps.create")->stages[3], "booting");
}

static void test_create_power_status(void **state)
{
        struct world *w = *state;
        struct job_ctx ctx;
        ctx_init(w, &ctx, ID1);
        _cleanup_json_ json_t *srv = run_ok(w, "vps.create", ID1, create_params(), &ctx);
        assert_string_equal(json_string_value(json_object_get(srv, "id")), ID1);
        assert_string_equal(json_string_value(json_object_get(srv, "state")), "running");
        assert_int_equal(json_integer_value(json_object_get(srv, "cpuThreads")), 2);
        /* The assignment, not what ARP shows. */
        assert_int_equal(json_array_size(json_object_get(srv, "ipAddresses")), 1);
        assert_string_equal(json_string_value(json_array_get(json_object_get(srv, "ipAddresses"), 0)), "203.0.113.10");
        assert_string_equal(json_string_value(json_object_get(json_object_get(srv, "template"), "os")), "linux");
        assert_int_equal(ctx.n_stages, 4);
        assert_string_equal(ctx.stages[0], "preparing-disk");
        assert_string_equal(ctx.stages[3], "booting");
        assert_int_equal(w->added, 1);
        assert_int_equal(w->added_vcpus, 4);
        assert_int_equal(w->added_mb, 2048);
        _cleanup_json_ json_t *again = run_ok(w, "vps.create", ID1, create_params(), NULL);
        assert_true(json_equal(json_object_get(again, "createdAt"), json_object_get(srv, "createdAt")));

        _cleanup_json_ json_t *p1 = run_ok(w, "vps.power", ID1, json_pack("{s:s, s:i}", "action", "stop", "graceSec", 1),
                                           NULL);
        assert_string_equal(json_string_value(json_object_get(p1, "state")), "stopped");
        _cleanup_json_ json_t *p2 = run_ok(w, "vps.power", ID1, json_pack("{s:s}", "action", "stop"), NULL);
        assert_string_equal(json_string_value(json_object_get(p2, "state")), "stopped");
        _cleanup_json_ json_t *p3 = run_ok(w, "vps.power", ID1, json_pack("{s:s}", "action", "start"), NULL);
        assert_string_equal(json_string_value(json_object_get(p3, "state")), "running");
        _cleanup_json_ json_t *p4 = run_ok(w, "vps.power", ID1, json_pack("{s:s}", "action", "start"), NULL);
        assert_string_equal(json_string_value(json_object_get(p4, "state")), "running");
        _cleanup_json_ json_t *p5 = run_ok(w, "vps.power", ID1, json_pack("{s:s}", "action", "reboot"), NULL);
        assert_string_equal(json_string_value(json_object_get(p5, "state")), "running");

        _cleanup_json_ json_t *st = run_ok(w, "vps.status", ID1, NULL, NULL);
        assert_string_equal(json_string_value(json_object_get(st, "state")), "running");
        assert_int_equal(json_integer_value(json_object_get(st, "memoryMB")), 2048);
        assert_non_null(json_object_get(st, "uptimeSec"));
        assert_non_null(json_object_get(st, "cpuTimeNs"));

        _cleanup_json_ json_t *e1 = run_fail(w, "vps.status", ID_UNKNOWN, NULL, NA_E_VPS_NOT_FOUND);
        assert_int_equal(json_integer_value(json_object_get(e1, "httpStatus")), 404);
        _cleanup_json_ json_t *e2 = run_fail(w, "vps.power", ID1, json_pack("{s:s}", "action", "hibernate"),
                                             NA_E_VALIDATION);
        assert_int_equal(json_integer_value(json_object_get(e2, "httpStatus")), 422);
        assert_non_null(json_object_get(json_object_get(e2, "details"), "action"));
        _cleanup_json_ json_t *e3 = run_fail(w, "vps.exec", ID1, json_pack("{s:[s]}", "command", "/bin/true"),
                                             NA_E_GUEST_AGENT);
        assert_int_equal(json_integer_value(json_object_get(e3, "httpStatus")), 409);
        _cleanup_json_ json_t *e4 = run_fail(w, "vps.exec", ID1, json_pack("{s:s}", "command", "/bin/true"),
                                             NA_E_VALIDATION);

        /* Bad create params: nothing reaches the node. */
        json_t *bad = create_params();
        json_object_set_new(json_object_get(bad, "template"), "id", json_string("plan9"));
        json_object_set_new(json_object_get(bad, "inputs"), "role", json_string("mail"));
        _cleanup_json_ json_t *e5 = run_fail(w, "vps.create", "0a0b0c0d-1111-4222-8333-444455556666", bad,
                                             NA_E_VALIDATION);
        assert_non_null(json_object_get(json_object_get(json_object_get(e5, "details"), "template"), "id"));
        assert_int_equal(w->added, 2);
}

static void test_reinstall_upgrade_delete(void **state)
{
        struct world *w = *state;
        json_decref(run_ok(w, "vps.create", ID1, create_params(), NULL));

        /* The rules need what the server has: clearing the only credential is refused. */
        _cleanup_json_ json_t *e1 = run_fail(w, "vps.reinstall", ID1, json_pack("{s:n}", "vmPassword"),
                                             NA_E_VALIDATION);
        assert_int_equal(json_array_size(json_object_get(json_object_get(e1, "details"), "_errors")), 1);
        _cleanup_json_ json_t *e2 = run_fail(w, "vps.reinstall", ID1, json_pack("{s:s}", "templateId", "windows"),
                                             NA_E_VALIDATION);
        assert_non_null(json_object_get(json_object_get(e2, "details"), "templateImageSlug"));
        _cleanup_json_ json_t *e3 =
                run_fail(w, "vps.reinstall", ID1, json_pack("{s:s, s:s}", "templateId", "debian", "templateImageSlug", "11"),
                         NA_E_VALIDATION); /* the kept inputs do not fit debian 11, which has none */
        assert_non_null(json_object_get(json_object_get(json_object_get(e3, "details"), "inputs"), "role"));
        _cleanup_json_ json_t *e4 =
                run_fail(w, "vps.reinstall", ID1,
                         json_pack("{s:s, s:s, s:s, s:s}", "templateId", "windows", "templateImageSlug", "2022",
                                   "sshKeyId", "0c4f2d8e-1b5a-4c3d-9e7f-6a8b9c0d1e2f", "sshPublicKey", KEY_ED),
                         NA_E_VALIDATION);
        assert_non_null(json_object_get(json_object_get(e4, "details"), "sshKeyId"));
        _cleanup_json_ json_t *e5 = run_fail(w, "vps.reinstall", ID_UNKNOWN, NULL, NA_E_VPS_NOT_FOUND);

        struct job_ctx ctx;
        ctx_init(w, &ctx, ID1);
        _cleanup_json_ json_t *ok = run_ok(w, "vps.reinstall", ID1,
                                           json_pack("{s:s, s:s, s:n, s:s, s:s, s:s}", "templateId", "debian",
                                                     "templateImageSlug", "11", "inputs", "hostname", "db1",
                                                     "sshKeyId", "0c4f2d8e-1b5a-4c3d-9e7f-6a8b9c0d1e2f",
                                                     "sshPublicKey", KEY_ED),
                                           &ctx);
        assert_int_equal(json_object_size(ok), 0);
        const char *want[] = { "stopping", "preparing-disk", "writing-image", "configuring", "booting", "done" };
        assert_int_equal(ctx.n_stages, 6);
        for (int i = 0; i < 6; i++)
                assert_string_equal(ctx.stages[i], want[i]);

        /* Now to Windows: the key must go, a password stays. */
        ctx_init(w, &ctx, ID1);
        json_decref(run_ok(w, "vps.reinstall", ID1,
                           json_pack("{s:s, s:s, s:n}", "templateId", "windows", "templateImageSlug", "2022", "sshKeyId"),
                           &ctx));
        _cleanup_json_ json_t *srv = run_ok(w, "vps.upgrade", ID1,
                                            json_pack("{s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}}", "plan", "cpuCores", 4,
                                                      "cpuThreads", 1, "ramMB", 4096, "storageMB", 4096,
                                                      "networkSpeedLimitMbps", 200, "bandwidthLimitGb", 1000,
                                                      "maxSnapshots", 2),
                                            NULL);
        assert_true(json_is_true(json_object_get(srv, "restartRequired")));
        assert_string_equal(json_string_value(json_object_get(srv, "hostname")), "db1");
        assert_string_equal(json_string_value(json_object_get(json_object_get(srv, "template"), "os")), "windows");
        _cleanup_json_ json_t *e6 = run_fail(w, "vps.upgrade", ID1,
                                             json_pack("{s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}}", "plan", "cpuCores", 4,
                                                       "cpuThreads", 1, "ramMB", 4096, "storageMB", 1024,
                                                       "networkSpeedLimitMbps", 200, "bandwidthLimitGb", 1000,
                                                       "maxSnapshots", 2),
                                             NA_E_VALIDATION);

        json_decref(run_ok(w, "vps.delete", ID1, NULL, NULL));
        assert_int_equal(w->removed, 1);
        json_decref(run_ok(w, "vps.delete", ID1, NULL, NULL));
        _cleanup_json_ json_t *e7 = run_fail(w, "vps.status", ID1, NULL, NA_E_VPS_NOT_FOUND);
}

static void test_snapshots_backups(void **state)
{
        struct world *w = *state;
        json_decref(run_ok(w, "vps.create", ID1, create_params(), NULL));
        _cleanup_json_ json_t *s1 = run_ok(w, "vps.snapshot.create", ID1,
                                           json_pack("{s:s, s:s, s:i}", "snapshotId", "s1", "name", "first",
                                                     "maxSnapshots", 2),
                                           NULL);
        assert_string_equal(json_string_value(json_object_get(s1, "snapshotId")), "s1");
        assert_true(json_is_true(json_object_get(s1, "current")));
        json_decref(run_ok(w, "vps.snapshot.create", ID1,
                           json_pack("{s:s, s:s, s:i}", "snapshotId", "s2", "name", "second", "maxSnapshots", 2), NULL));
        _cleanup_json_ json_t *e1 = run_fail(w, "vps.snapshot.create", ID1,
                                             json_pack("{s:s, s:s, s:i}", "snapshotId", "s3", "name", "third",
                                                       "maxSnapshots", 2),
                                             NA_E_SNAPSHOT_LIMIT);
        assert_int_equal(json_integer_value(json_object_get(e1, "httpStatus")), 409);
        _cleanup_json_ json_t *list = run_ok(w, "vps.snapshot.list", ID1, NULL, NULL);
        assert_int_equal(json_array_size(list), 2);
        json_decref(run_ok(w, "vps.snapshot.revert", ID1, json_pack("{s:s}", "snapshotId", "s1"), NULL));
        _cleanup_json_ json_t *e2 = run_fail(w, "vps.snapshot.revert", ID1, json_pack("{s:s}", "snapshotId", "s9"),
                                             NA_E_SNAPSHOT_NOT_FOUND);
        assert_int_equal(json_integer_value(json_object_get(e2, "httpStatus")), 404);
        json_decref(run_ok(w, "vps.snapshot.delete", ID1, json_pack("{s:s}", "snapshotId", "s2"), NULL));

        struct job_ctx ctx;
        ctx_init(w, &ctx, ID1);
        _cleanup_json_ json_t *b = run_ok(w, "vps.backup.create", ID1,
                                          json_pack("{s:s, s:{s:i, s:i, s:i}}", "backupId", "b1", "limits",
                                                    "maxStorageGB", 10, "maxBackups", 3, "retentionDays", 7),
                                          &ctx);
        assert_int_equal(strlen(json_string_value(json_object_get(b, "sha256"))), 64);
        assert_true(json_integer_value(json_object_get(b, "sizeBytes")) > 0);
        assert_int_equal(ctx.n_stages, 2);
        assert_string_equal(ctx.stages[0], "exporting");
        assert_string_equal(ctx.stages[1], "compressing");
        assert_int_equal(json_array_size(w->events), 1);
        json_t *ev = json_array_get(w->events, 0);
        assert_string_equal(json_string_value(json_object_get(ev, "type")), "backup.finished");
        assert_string_equal(json_string_value(json_object_get(ev, "targetId")), ID1);
        json_t *evd = json_object_get(ev, "data");
        assert_string_equal(json_string_value(json_object_get(evd, "status")), "succeeded");
        assert_true(json_equal(json_object_get(evd, "sha256"), json_object_get(b, "sha256")));

        _cleanup_json_ json_t *bl = run_ok(w, "vps.backup.list", ID1, NULL, NULL);
        assert_int_equal(json_array_size(bl), 1);
        json_decref(run_ok(w, "vps.backup.restore", ID1, json_pack("{s:s}", "backupId", "b1"), NULL));
        _cleanup_json_ json_t *e3 = run_fail(w, "vps.backup.restore", ID1, json_pack("{s:s}", "backupId", "b7"),
                                             NA_E_BACKUP_NOT_FOUND);
        json_decref(run_ok(w, "vps.backup.delete", ID1, json_pack("{s:s}", "backupId", "b1"), NULL));
        _cleanup_json_ json_t *bl2 = run_ok(w, "vps.backup.list", ID1, NULL, NULL);
        assert_int_equal(json_array_size(bl2), 0);

        /* Refused before any work: no event. */
        _cleanup_json_ json_t *e4 = run_fail(w, "vps.backup.create", ID_UNKNOWN, json_pack("{s:s}", "backupId", "b2"),
                                             NA_E_VPS_NOT_FOUND);
        assert_int_equal(json_array_size(w->events), 1);
}

static void test_cancel_and_no_driver(void **state)
{
        struct world *w = *state;
        struct job_ctx ctx;
        ctx_init(w, &ctx, ID1);
        ctx.cancel_at = 2; /* after the first safe point, before preparing-disk */
        struct na_error err = NA_ERROR_INIT;
        json_t *data = NULL;
        json_t *params = create_params();
        assert_true(job_double_run("vps.create", &ctx, params, &data, &err) < 0);
        assert_string_equal(err.code, NA_E_JOB_CANCELLED);
        na_error_clear(&err);
        /* Run again, as the central API does: it converges. */
        ctx_init(w, &ctx, ID1);
        assert_int_equal(job_double_run("vps.create", &ctx, params, &data, &err), 0);
        assert_string_equal(json_string_value(json_object_get(data, "state")), "running");
        json_decref(data);
        json_decref(params);

        struct agent_services none = { .state_dir = w->f.state_dir };
        ctx_init(w, &ctx, ID1);
        ctx.services = &none;
        assert_true(job_double_run("vps.status", &ctx, NULL, &data, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),
                cmocka_unit_test_setup_teardown(test_create_power_status, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reinstall_upgrade_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshots_backups, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_and_no_driver, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
