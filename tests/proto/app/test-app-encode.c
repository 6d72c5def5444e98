/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/app-encode.c: App (a decoded deploy round-trips into the record), app.status,
 * app.output (bytes to valid UTF-8), images, the state names and the app events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-params.h"

#define APP_ID "3e4f5a6b-7c8d-4e9f-8a1b-2c3d4e5f6a7b"
#define GROUP_ID "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

static void expect_json(json_t *got, const char *want_text)
{
        _cleanup_json_ json_t *want = J(want_text);
        if (!got || !json_equal(got, want)) {
                char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
                fail_msg("got %s\nwant %s", g ? g : "(null)", w);
        }
}

static void test_states(void **state)
{
        assert_string_equal(proto_app_state_name(PROTO_APP_RUNNING), "running");
        assert_string_equal(proto_app_state_name(PROTO_APP_CRASHED), "crashed");
        assert_string_equal(proto_app_state_name((enum proto_app_state)99), "stopped");
        assert_string_equal(proto_app_record_state_name(PROTO_APP_RUNNING), "running");
        assert_string_equal(proto_app_record_state_name(PROTO_APP_STARTING), "running");
        assert_string_equal(proto_app_record_state_name(PROTO_APP_STOPPING), "running");
        assert_string_equal(proto_app_record_state_name(PROTO_APP_STOPPED), "stopped");
        assert_string_equal(proto_app_record_state_name(PROTO_APP_CRASHED), "stopped");
        for (int s = PROTO_APP_RUNNING; s <= PROTO_APP_CRASHED; s++) {
                _cleanup_json_ json_t *j = proto_app_state_encode((enum proto_app_state)s);
                assert_string_equal(json_string_value(json_object_get(j, "state")), proto_app_states[s]);
        }
}

static void test_app_round_trip(void **state)
{
        /* Decoded deploy params become the App record the deploy answers with. */
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *params = J(
                "{\"name\": \"Shop\", \"hostname\": \"shop\", \"type\": \"service\", \"version\": \"2\","
                " \"command\": [\"node\", \"server.js\"], \"sftpUsername\": \"shop\", \"groupId\": \"" GROUP_ID "\","
                " \"template\": {\"id\": \"node\", \"image\": \"node:20\", \"customCommand\": true},"
                " \"plan\": {\"id\": \"s\", \"cpuCores\": 0.5, \"memoryMB\": 512, \"volumeQuotaMB\": 2048}}");
        struct proto_app_deploy *d = NULL;
        assert_int_equal(proto_app_deploy_decode(params, &d, &err), 0);
        struct proto_app a;
        proto_app_from_deploy(d, APP_ID, &a);
        a.state = PROTO_APP_STARTING;
        a.sftp_enabled = true;
        a.created_at_ms = 1795300000123;
        a.updated_at_ms = 1795300001000;
        _cleanup_json_ json_t *j = proto_app_encode(&a);
        expect_json(j, "{\"id\": \"" APP_ID "\", \"name\": \"Shop\", \"hostname\": \"shop\", \"type\": \"service\","
                       " \"version\": \"2\", \"command\": [\"node\", \"server.js\"], \"sftpUsername\": \"shop\","
                       " \"groupId\": \"" GROUP_ID "\", \"group\": {\"id\": \"" GROUP_ID "\"},"
                       " \"template\": {\"id\": \"node\"},"
                       " \"plan\": {\"id\": \"s\", \"cpuCores\": 0.5, \"memoryMB\": 512, \"volumeQuotaMB\": 2048,"
                       "   \"pids\": 512},"
                       " \"state\": \"running\", \"volumeQuotaMB\": 2048, \"sftpEnabled\": true,"
                       " \"createdAt\": \"2026-11-21T22:26:40.123Z\", \"updatedAt\": \"2026-11-21T22:26:41.000Z\","
                       " \"volumeSeededAt\": null}");
        /* A seeded volume says when (AGENT-API 4.2, volume seeding). */
        a.volume_seeded_at_ms = 1795300002000;
        _cleanup_json_ json_t *seeded = proto_app_encode(&a);
        assert_string_equal(json_string_value(json_object_get(seeded, "volumeSeededAt")), "2026-11-21T22:26:42.000Z");
        /* Every field the params gave reads back as given. */
        const char *same[] = { "name", "hostname", "type", "version", "command", "sftpUsername", "groupId" };
        for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
                assert_true(json_equal(json_object_get(j, same[i]), json_object_get(params, same[i])));
        proto_app_deploy_free(d);

        /* No command, no group, no plan id; a whole number of cores is an integer. */
        _cleanup_json_ json_t *min = J("{\"name\": \"a\", \"hostname\": \"a\", \"version\": \"1\", \"sftpUsername\": \"a\","
                                       " \"template\": {\"id\": \"t\", \"image\": \"a:1\"},"
                                       " \"plan\": {\"cpuCores\": 2.0, \"memoryMB\": 64, \"volumeQuotaMB\": 64}}");
        assert_int_equal(proto_app_deploy_decode(min, &d, &err), 0);
        proto_app_from_deploy(d, APP_ID, &a);
        _cleanup_json_ json_t *m = proto_app_encode(&a);
        assert_true(json_is_null(json_object_get(m, "command")));
        assert_true(json_is_null(json_object_get(m, "groupId")));
        assert_true(json_is_null(json_object_get(m, "group")));
        assert_string_equal(json_string_value(json_object_get(m, "type")), "app");
        assert_string_equal(json_string_value(json_object_get(m, "state")), "stopped");
        expect_json(json_object_get(m, "plan"), "{\"cpuCores\": 2, \"memoryMB\": 64, \"volumeQuotaMB\": 64, \"pids\": 512}");
        assert_true(json_is_integer(json_object_get(json_object_get(m, "plan"), "cpuCores")));
        assert_false(json_is_true(json_object_get(m, "sftpEnabled")));
        proto_app_deploy_free(d);
}

static void test_status(void **state)
{
        struct proto_app_status s = { .state = PROTO_APP_RUNNING, .started_at_ms = 1795300000000, .restarts = 2,
                                      .memory_mb = 300, .volume_used_mb = 12 };
        _cleanup_json_ json_t *j = proto_app_status_encode(&s);
        expect_json(j, "{\"state\": \"running\", \"startedAt\": \"2026-11-21T22:26:40.000Z\", \"exitCode\": null,"
                       " \"restarts\": 2, \"memoryMB\": 300, \"volumeUsedMB\": 12}");
        struct proto_app_status c = { .state = PROTO_APP_CRASHED, .has_exit_code = true, .exit_code = 137 };
        _cleanup_json_ json_t *k = proto_app_status_encode(&c);
        expect_json(k, "{\"state\": \"crashed\", \"startedAt\": null, \"exitCode\": 137, \"restarts\": 0,"
                       " \"memoryMB\": 0, \"volumeUsedMB\": 0}");
}

static void test_output(void **state)
{
        struct proto_app_line lines[] = {
                { 7, 1795300000000, PROTO_APP_STDOUT, "Done (1.2s)!", 12 },
                { 8, 1795300000500, PROTO_APP_STDERR, "bad \xff byte and \xc3", 16 },
                { 9, 1795300001000, PROTO_APP_SYSTEM, "a\0b", 3 },
                { 10, 1795300001000, PROTO_APP_STDOUT, NULL, 0 },
        };
        _cleanup_json_ json_t *j = proto_app_output_encode(lines, 4, 11);
        expect_json(j, "{\"lines\": ["
                       "{\"seq\": 7, \"ts\": \"2026-11-21T22:26:40.000Z\", \"stream\": \"stdout\", \"text\": \"Done (1.2s)!\"},"
                       "{\"seq\": 8, \"ts\": \"2026-11-21T22:26:40.500Z\", \"stream\": \"stderr\","
                       "  \"text\": \"bad \\ufffd byte and \\ufffd\"},"
                       "{\"seq\": 9, \"ts\": \"2026-11-21T22:26:41.000Z\", \"stream\": \"system\", \"text\": \"a\\ufffdb\"},"
                       "{\"seq\": 10, \"ts\": \"2026-11-21T22:26:41.000Z\", \"stream\": \"stdout\", \"text\": \"\"}"
                       "], \"nextSeq\": 11}");
        /* It dumps as valid JSON text and parses back. */
        char *text = json_dumps(j, JSON_COMPACT);
        assert_non_null(text);
        _cleanup_json_ json_t *back = J(text);
        assert_true(json_equal(back, j));
        free(text);
        _cleanup_json_ json_t *empty = proto_app_output_encode(NULL, 0, 1);
        expect_json(empty, "{\"lines\": [], \"nextSeq\": 1}");
}

static void test_images_and_events(void **state)
{
        const char *users[] = { "a1", "a2" };
        struct proto_app_image_info imgs[] = {
                { "node:20", "sha256:aa", 1234, users, 2 },
                { "games/mc@sha256:bb", "sha256:bb", 5, NULL, 0 },
        };
        _cleanup_json_ json_t *one = proto_app_image_encode(&imgs[0]);
        expect_json(one, "{\"image\": \"node:20\", \"digest\": \"sha256:aa\", \"sizeBytes\": 1234}");
        _cleanup_json_ json_t *list = proto_app_image_list_encode(imgs, 2);
        expect_json(list, "[{\"image\": \"node:20\", \"digest\": \"sha256:aa\", \"sizeBytes\": 1234, \"usedBy\": [\"a1\", \"a2\"]},"
                          " {\"image\": \"games/mc@sha256:bb\", \"digest\": \"sha256:bb\", \"sizeBytes\": 5, \"usedBy\": []}]");
        _cleanup_json_ json_t *none = proto_app_image_list_encode(NULL, 0);
        expect_json(none, "[]");

        _cleanup_json_ json_t *ex = proto_app_exited_encode(3, 0, false);
        expect_json(ex, "{\"exitCode\": 3, \"crashLoop\": false}");
        _cleanup_json_ json_t *killed = proto_app_exited_encode(0, SIGKILL, true);
        expect_json(killed, "{\"exitCode\": 137, \"signal\": \"SIGKILL\", \"crashLoop\": true}");
        _cleanup_json_ json_t *rt = proto_app_exited_encode(0, 40, false);
        expect_json(rt, "{\"exitCode\": 168, \"signal\": \"SIG40\", \"crashLoop\": false}");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_states), cmocka_unit_test(test_app_round_trip), cmocka_unit_test(test_status),
                cmocka_unit_test(test_output), cmocka_unit_test(test_images_and_events),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
