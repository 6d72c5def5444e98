/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/app-update.c: the app.update params (every bad field answered on its own path,
 * all at once), the deploy an update leads to, what kind of change it is, and the
 * app.updated event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-update.h"
#include "proto/field.h"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

static struct proto_app_deploy *deploy(void)
{
        _cleanup_json_ json_t *p = J("{\"name\": \"web\", \"hostname\": \"web\", \"version\": \"1\", \"sftpUsername\": \"web\","
                                     " \"command\": [\"/bin/app\"],"
                                     " \"template\": {\"id\": \"node\", \"image\": \"node:20\", \"customCommand\": true},"
                                     " \"plan\": {\"cpuCores\": 1, \"memoryMB\": 512, \"volumeQuotaMB\": 1024}}");
        struct proto_app_deploy *d = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), 0);
        return d;
}

static struct proto_app_update *update(const char *text)
{
        _cleanup_json_ json_t *p = J(text);
        struct proto_app_update *u = NULL;
        struct na_error err = NA_ERROR_INIT;
        if (proto_app_update_decode(p, &u, &err) < 0)
                fail_msg("%s refused: %s", text, err.message);
        return u;
}

static void test_defaults(void **state)
{
        (void)state;
        struct proto_app_update *u = update("{\"version\": \"2\"}");
        assert_string_equal(u->version, "2");
        assert_false(u->has_template);
        assert_false(u->has_plan);
        assert_string_equal(u->safety_backup_id, "");
        assert_int_equal(u->healthy_sec, PROTO_APP_HEALTHY_DEFAULT);
        proto_app_update_free(u);
        u = update("{\"plan\": {\"cpuCores\": 2, \"memoryMB\": 256, \"volumeQuotaMB\": 2048, \"pids\": 64},"
                   " \"safetyBackupId\": \"pre-2\", \"healthySec\": 10}");
        assert_true(u->has_plan);
        assert_int_equal(u->plan.cpu_millis, 2000);
        assert_int_equal(u->plan.pids, 64);
        assert_string_equal(u->safety_backup_id, "pre-2");
        assert_int_equal(u->healthy_sec, 10);
        proto_app_update_free(u);
}

static void test_bad_fields(void **state)
{
        (void)state;
        static const struct {
                const char *params, *field;
        } cases[] = {
                { "{}", "" },
                { "{\"healthySec\": 30}", "" },
                { "{\"version\": null}", "version" },
                { "{\"version\": \"\"}", "version" },
                { "{\"version\": \"a\\u0001b\"}", "version" },
                { "{\"version\": 2}", "version" },
                { "{\"version\": \"2\", \"healthySec\": 9}", "healthySec" },
                { "{\"version\": \"2\", \"healthySec\": 3601}", "healthySec" },
                { "{\"version\": \"2\", \"healthySec\": \"60\"}", "healthySec" },
                { "{\"version\": \"2\", \"safetyBackupId\": \"a b\"}", "safetyBackupId" },
                { "{\"version\": \"2\", \"safetyBackupId\": \"\"}", "safetyBackupId" },
                { "{\"template\": {\"image\": \"node:20\"}}", "template.id" },
                { "{\"template\": {\"id\": \"t\", \"image\": \"Node:20\"}}", "template.image" },
                { "{\"template\": {\"id\": \"t\", \"image\": \"node:20\", \"user\": \"a:b:c\"}}", "template.user" },
                { "{\"template\": 5}", "template" },
                { "{\"plan\": {\"cpuCores\": 1, \"memoryMB\": 512}}", "plan.volumeQuotaMB" },
                { "{\"plan\": {\"cpuCores\": 0, \"memoryMB\": 512, \"volumeQuotaMB\": 64}}", "plan.cpuCores" },
                { "{\"plan\": {\"cpuCores\": 1, \"memoryMB\": 8, \"volumeQuotaMB\": 64}}", "plan.memoryMB" },
                { "{\"plan\": {\"cpuCores\": 1, \"memoryMB\": 64, \"volumeQuotaMB\": 64, \"pids\": 1}}", "plan.pids" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                _cleanup_json_ json_t *p = J(cases[i].params);
                struct proto_app_update *u = NULL;
                struct na_error err = NA_ERROR_INIT;
                if (proto_app_update_decode(p, &u, &err) != -EINVAL)
                        fail_msg("%s accepted", cases[i].params);
                assert_null(u);
                assert_string_equal(err.code, NA_E_VALIDATION);
                if (json_array_size(field_errors(&err, cases[i].field)) == 0) {
                        char *d = json_dumps(err.details, JSON_COMPACT);
                        fail_msg("%s: no _errors at '%s': %s", cases[i].params, cases[i].field, d);
                }
                na_error_clear(&err);
        }
        /* Every problem at once. */
        _cleanup_json_ json_t *p = J("{\"version\": \"\", \"healthySec\": 1, \"safetyBackupId\": \"/\","
                                     " \"plan\": {\"cpuCores\": 1, \"memoryMB\": 1, \"volumeQuotaMB\": 64}}");
        struct proto_app_update *u = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_app_update_decode(p, &u, &err), -EINVAL);
        const char *fields[] = { "version", "healthySec", "safetyBackupId", "plan.memoryMB" };
        for (size_t i = 0; i < 4; i++)
                if (json_array_size(field_errors(&err, fields[i])) == 0)
                        fail_msg("no _errors at %s", fields[i]);
        na_error_clear(&err);
}

static void test_apply_and_change(void **state)
{
        (void)state;
        struct proto_app_deploy *cur = deploy(), *next = NULL;
        struct na_error err = NA_ERROR_INIT;

        /* The same version again: nothing changes. */
        struct proto_app_update *u = update("{\"version\": \"1\"}");
        assert_int_equal(proto_app_update_apply(cur, u, &next, &err), 0);
        assert_int_equal(proto_app_update_change(cur, next), PROTO_APP_UPDATE_NONE);
        proto_app_deploy_free(next);
        proto_app_update_free(u);

        /* A plan alone: live; the rest kept. */
        u = update("{\"plan\": {\"cpuCores\": 0.5, \"memoryMB\": 1024, \"volumeQuotaMB\": 2048}}");
        assert_int_equal(proto_app_update_apply(cur, u, &next, &err), 0);
        assert_int_equal(proto_app_update_change(cur, next), PROTO_APP_UPDATE_PLAN);
        assert_int_equal(next->plan.cpu_millis, 500);
        assert_int_equal(next->plan.memory_mb, 1024);
        assert_string_equal(next->version, "1");
        assert_string_equal(next->command[0], "/bin/app");
        proto_app_deploy_free(next);
        proto_app_update_free(u);

        /* A version: a restart. */
        u = update("{\"version\": \"2\", \"plan\": {\"cpuCores\": 1, \"memoryMB\": 512, \"volumeQuotaMB\": 1024}}");
        assert_int_equal(proto_app_update_apply(cur, u, &next, &err), 0);
        assert_int_equal(proto_app_update_change(cur, next), PROTO_APP_UPDATE_RESTART);
        assert_string_equal(next->version, "2");
        proto_app_deploy_free(next);
        proto_app_update_free(u);

        /* A template that manages its own start drops the app's command. */
        u = update("{\"template\": {\"id\": \"node\", \"image\": \"node:22\"}}");
        assert_int_equal(proto_app_update_apply(cur, u, &next, &err), 0);
        assert_int_equal(proto_app_update_change(cur, next), PROTO_APP_UPDATE_RESTART);
        assert_null(next->command);
        assert_string_equal(next->tmpl.image.tag, "22");
        /* Applied again to what it led to: converged. */
        struct proto_app_deploy *again = NULL;
        assert_int_equal(proto_app_update_apply(next, u, &again, &err), 0);
        assert_int_equal(proto_app_update_change(next, again), PROTO_APP_UPDATE_NONE);
        proto_app_deploy_free(again);
        proto_app_deploy_free(next);
        proto_app_update_free(u);
        proto_app_deploy_free(cur);
}

static void test_event(void **state)
{
        (void)state;
        _cleanup_json_ json_t *ok = proto_app_updated_encode("2", false, NULL);
        _cleanup_json_ json_t *want = J("{\"version\": \"2\", \"rolledBack\": false}");
        assert_true(json_equal(ok, want));
        _cleanup_json_ json_t *back = proto_app_updated_encode("1", true, "crashed: exit code 1 after 0.2 s");
        _cleanup_json_ json_t *want2 = J("{\"version\": \"1\", \"rolledBack\": true, \"reason\": \"crashed: exit code 1 after 0.2 s\"}");
        assert_true(json_equal(back, want2));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_bad_fields),
                cmocka_unit_test(test_apply_and_change),
                cmocka_unit_test(test_event),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
