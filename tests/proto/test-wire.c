/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proto/wire.h: the answer envelope, Settings (a bad field keeps the rest), lease, ack, and the hello/report/event encoders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/wire.h"
#include "field.h"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

static void assert_json(json_t *got, const char *want_text)
{
        _cleanup_json_ json_t *want = J(want_text);
        if (!json_equal(got, want)) {
                _cleanup_free_ char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
                _cleanup_free_ char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
                fail_msg("JSON differs:\n got  %s\n want %s", g, w);
        }
}

static int envelope(const char *body, json_t **root, struct proto_envelope *env, struct na_error *err)
{
        return proto_envelope_decode(body, strlen(body), root, env, err);
}

static void test_envelope_success(void **state)
{
        (void)state;
        json_t *root = NULL;
        struct proto_envelope env;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(envelope("{\"success\": true, \"message\": \"ok\", \"data\": {\"pollWaitSec\": 20}}", &root, &env,
                                  &err),
                         0);
        assert_non_null(root);
        assert_true(env.success);
        assert_int_equal(json_integer_value(json_object_get(env.data, "pollWaitSec")), 20);
        assert_string_equal(env.code, "");
        assert_string_equal(env.error, "");
        assert_null(env.details);
        json_decref(root);

        /* data may be null or absent. */
        assert_int_equal(envelope("{\"success\": true, \"data\": null}", &root, &env, &err), 0);
        assert_true(json_is_null(env.data));
        json_decref(root);
        assert_int_equal(envelope("{\"success\": true}", &root, &env, &err), 0);
        assert_null(env.data);
        json_decref(root);
        assert_false(na_error_is_set(&err));
}

static void test_envelope_failure(void **state)
{
        (void)state;
        json_t *root = NULL;
        struct proto_envelope env;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(envelope("{\"success\": false, \"type\": \"API\", \"code\": \"LEASE_LOST\", \"error\": \"gone\","
                                  " \"details\": {\"jobId\": \"x\"}}",
                                  &root, &env, &err),
                         0);
        assert_false(env.success);
        assert_string_equal(env.code, "LEASE_LOST");
        assert_string_equal(env.error, "gone");
        assert_string_equal(json_string_value(json_object_get(env.details, "jobId")), "x");
        json_decref(root);

        /* A failure without code or message: empty strings, never NULL. */
        assert_int_equal(envelope("{\"success\": false, \"code\": 5}", &root, &env, &err), 0);
        assert_string_equal(env.code, "");
        assert_string_equal(env.error, "");
        json_decref(root);
}

static void expect_bad_envelope(const char *body, size_t len, const char *msg_start)
{
        json_t *root = (json_t *)0x1;
        struct proto_envelope env;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_envelope_decode(body, len, &root, &env, &err), -EBADMSG);
        assert_null(root);
        if (strncmp(err.message, msg_start, strlen(msg_start)) != 0)
                fail_msg("for %.40s: message \"%s\" should start with \"%s\"", body, err.message, msg_start);
}

static void test_envelope_bad(void **state)
{
        (void)state;
        expect_bad_envelope("", 0, "answer is not JSON");
        expect_bad_envelope("<html>502 Bad Gateway</html>", 28, "answer is not JSON");
        expect_bad_envelope("{\"success\": true", 16, "answer is not JSON");
        expect_bad_envelope("{\"success\": true, \"success\": false}", 36, "answer is not JSON"); /* duplicate keys */
        expect_bad_envelope("[true]", 6, "answer is not a JSON object");
        expect_bad_envelope("\"ok\"", 4, "answer is not JSON"); /* not an object or array at the top */
        expect_bad_envelope("{\"data\": {}}", 12, "answer has no boolean \"success\"");
        expect_bad_envelope("{\"success\": \"true\"}", 19, "answer has no boolean \"success\"");
        expect_bad_envelope("{\"success\": 1}", 14, "answer has no boolean \"success\"");
        /* The length is honoured: what follows it is not read. */
        expect_bad_envelope("{\"success\": true}", 10, "answer is not JSON");
        /* A NUL inside the body. */
        expect_bad_envelope("{\"success\":\0 true}", 18, "answer is not JSON");
}

static void test_settings(void **state)
{
        (void)state;
        struct proto_settings s;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *all = J("{\"pollWaitSec\": 30, \"maxJobs\": 8, \"leaseSec\": 60, \"reportIntervalSec\": 15,"
                                       " \"metricsIntervalSec\": 10, \"exchange\": true, \"somethingNew\": true}");
        assert_int_equal(proto_settings_decode(all, &s, &err), 0);
        assert_int_equal(s.exchange, 1);
        assert_int_equal(s.poll_wait_sec, 30);
        assert_int_equal(s.max_jobs, 8);
        assert_int_equal(s.lease_sec, 60);
        assert_int_equal(s.report_interval_sec, 15);
        assert_int_equal(s.metrics_interval_sec, 10);

        /* Absent fields: -1, the agent keeps its own. */
        _cleanup_json_ json_t *some = J("{\"maxJobs\": 4.0}");
        assert_int_equal(proto_settings_decode(some, &s, &err), 0);
        assert_int_equal(s.poll_wait_sec, -1);
        assert_int_equal(s.max_jobs, 4);
        assert_int_equal(s.lease_sec, -1);
        assert_int_equal(s.report_interval_sec, -1);
        assert_int_equal(s.metrics_interval_sec, -1);
        assert_int_equal(s.exchange, -1); /* absent: the form in use stays */
        _cleanup_json_ json_t *off = J("{\"exchange\": false}");
        assert_int_equal(proto_settings_decode(off, &s, &err), 0);
        assert_int_equal(s.exchange, 0);

        assert_int_equal(proto_settings_decode(NULL, &s, &err), 0);
        assert_int_equal(s.max_jobs, -1);
        _cleanup_json_ json_t *null = json_null();
        assert_int_equal(proto_settings_decode(null, &s, &err), 0);
        assert_int_equal(s.poll_wait_sec, -1);
        assert_false(na_error_is_set(&err));
}

static void test_settings_bad_field_keeps_rest(void **state)
{
        (void)state;
        struct proto_settings s;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *in = J("{\"pollWaitSec\": 0, \"maxJobs\": \"8\", \"leaseSec\": 60, \"reportIntervalSec\": 3601,"
                                      " \"metricsIntervalSec\": 10, \"exchange\": \"yes\"}");
        assert_int_equal(proto_settings_decode(in, &s, &err), -EINVAL);
        assert_int_equal(s.exchange, -1);
        assert_int_equal(s.poll_wait_sec, -1);
        assert_int_equal(s.max_jobs, -1);
        assert_int_equal(s.lease_sec, 60);
        assert_int_equal(s.report_interval_sec, -1);
        assert_int_equal(s.metrics_interval_sec, 10);
        assert_field(&err, "pollWaitSec", "must be between 1 and 60");
        assert_field(&err, "maxJobs", "must be an integer");
        assert_field(&err, "reportIntervalSec", "must be between 1 and 3600");
        assert_true(json_object_get(err.details, "exchange") != NULL);
        assert_int_equal(field_count(err.details), 4);
        na_error_clear(&err);

        _cleanup_json_ json_t *bounds = J("{\"maxJobs\": 257, \"leaseSec\": 2, \"pollWaitSec\": 61}");
        assert_int_equal(proto_settings_decode(bounds, &s, &err), -EINVAL);
        assert_field(&err, "maxJobs", "must be between 1 and 256");
        assert_field(&err, "leaseSec", "must be between 3 and 86400");
        assert_field(&err, "pollWaitSec", "must be between 1 and 60");
        na_error_clear(&err);

        _cleanup_json_ json_t *arr = J("[1]");
        assert_int_equal(proto_settings_decode(arr, &s, &err), -EINVAL);
        assert_field(&err, "", "settings must be an object");
        assert_int_equal(s.max_jobs, -1);
}

static void test_lease_and_ack(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int64_t ms = -1;
        _cleanup_json_ json_t *lease = J("{\"leaseExpiresAt\": \"2026-11-21T10:01:00Z\"}");
        assert_int_equal(proto_lease_decode(lease, &ms, &err), 0);
        assert_int_equal(ms, 1795255260000LL);
        _cleanup_json_ json_t *empty = J("{}");
        assert_int_equal(proto_lease_decode(empty, &ms, &err), 0);
        assert_int_equal(ms, 0);
        assert_int_equal(proto_lease_decode(NULL, &ms, &err), 0);
        assert_int_equal(ms, 0);
        assert_false(na_error_is_set(&err));
        _cleanup_json_ json_t *bad = J("{\"leaseExpiresAt\": 60}");
        assert_true(proto_lease_decode(bad, &ms, &err) < 0);
        assert_field(&err, "leaseExpiresAt", "must be an RFC 3339 date-time");
        na_error_clear(&err);

        int64_t seq = -1;
        _cleanup_json_ json_t *ack = J("{\"ackSeq\": 42}");
        assert_int_equal(proto_ack_decode(ack, &seq, &err), 0);
        assert_int_equal(seq, 42);
        _cleanup_json_ json_t *zero = J("{\"ackSeq\": 0}");
        assert_int_equal(proto_ack_decode(zero, &seq, &err), 0);
        assert_int_equal(seq, 0);
        assert_false(na_error_is_set(&err));
        assert_true(proto_ack_decode(empty, &seq, &err) < 0);
        assert_field(&err, "ackSeq", "is required");
        na_error_clear(&err);
        _cleanup_json_ json_t *neg = J("{\"ackSeq\": -1}");
        assert_true(proto_ack_decode(neg, &seq, &err) < 0);
        assert_field(&err, "ackSeq", "must be between 0 and 9223372036854775807");
        na_error_clear(&err);
        assert_true(proto_ack_decode(NULL, &seq, &err) < 0);
}

static const struct proto_host host = {
        .hostname = "hv-12", .kernel = "6.1.0-18-amd64", .cpus = 64, .memory_mb = 515000, .cgroup = "hybrid",
};

static void test_host_and_hello(void **state)
{
        (void)state;
        _cleanup_json_ json_t *h = proto_host_encode(&host);
        assert_json(h, "{\"hostname\": \"hv-12\", \"kernel\": \"6.1.0-18-amd64\", \"cpus\": 64, \"memoryMB\": 515000,"
                       " \"cgroup\": \"hybrid\"}");
        struct proto_host blank = { 0 };
        _cleanup_json_ json_t *b = proto_host_encode(&blank);
        assert_json(b, "{\"hostname\": \"\", \"kernel\": \"\", \"cpus\": 0, \"memoryMB\": 0, \"cgroup\": \"v2\"}");

        /* Defaults for what is not given. */
        _cleanup_json_ json_t *hello = proto_hello_encode("0.1.0", "b00t", &host, NULL, NULL, NULL);
        assert_json(hello, "{\"agentVersion\": \"0.1.0\", \"protocol\": 1, \"bootId\": \"b00t\","
                           " \"host\": {\"hostname\": \"hv-12\", \"kernel\": \"6.1.0-18-amd64\", \"cpus\": 64,"
                           "          \"memoryMB\": 515000, \"cgroup\": \"hybrid\"},"
                           " \"capabilities\": {}, \"inventory\": {\"vps\": [], \"apps\": []}, \"unfinishedJobs\": []}");

        /* Given parts are stolen (ASan's leak check sees a missing decref). */
        json_t *caps = J("{\"jobKinds\": [\"node.status\"], \"vmDriver\": \"libvirt\"}");
        json_t *inv = J("{\"vps\": [{\"id\": \"x\", \"state\": \"running\"}], \"apps\": []}");
        json_t *unf = J("[{\"id\": \"j\", \"attempt\": 1, \"state\": \"result-pending\"}]");
        _cleanup_json_ json_t *full = proto_hello_encode("0.1.0", NULL, &host, caps, inv, unf);
        assert_ptr_equal(json_object_get(full, "capabilities"), caps);
        assert_int_equal(caps->refcount, 1);
        assert_string_equal(json_string_value(json_object_get(full, "bootId")), "");
        assert_int_equal(json_array_size(json_object_get(full, "unfinishedJobs")), 1);
        assert_ptr_equal(json_object_get(full, "inventory"), inv);
}

static void test_event_and_report(void **state)
{
        (void)state;
        bool has_vps_state = false, has_firewall = false;
        size_t n = 0;
        for (; proto_event_types[n]; n++) {
                has_vps_state |= streq(proto_event_types[n], "vps.state");
                has_firewall |= streq(proto_event_types[n], "firewall.drift");
        }
        assert_true(n >= 5);
        assert_true(has_vps_state && has_firewall);

        _cleanup_json_ json_t *ev = proto_event_encode("vps.state", "6f1c", 1795255203042ULL, json_pack("{s:s}", "state", "running"));
        assert_json(ev, "{\"type\": \"vps.state\", \"targetId\": \"6f1c\", \"at\": \"2026-11-21T10:00:03.042Z\","
                        " \"data\": {\"state\": \"running\"}}");
        _cleanup_json_ json_t *ev2 = proto_event_encode("app.exited", "a1", 0, NULL);
        assert_json(ev2, "{\"type\": \"app.exited\", \"targetId\": \"a1\", \"at\": \"1970-01-01T00:00:00.000Z\", \"data\": {}}");

        _cleanup_json_ json_t *metrics = J("[{\"targetId\": \"node\", \"cpuPercent\": 12.5}]");
        _cleanup_json_ json_t *events = json_array();
        json_array_append(events, ev);
        _cleanup_json_ json_t *rep = proto_report_encode(42, 1795255203000ULL, metrics, events);
        assert_json(rep, "{\"seq\": 42, \"sentAt\": \"2026-11-21T10:00:03.000Z\","
                         " \"metrics\": [{\"targetId\": \"node\", \"cpuPercent\": 12.5}],"
                         " \"events\": [{\"type\": \"vps.state\", \"targetId\": \"6f1c\", \"at\": \"2026-11-21T10:00:03.042Z\","
                         "              \"data\": {\"state\": \"running\"}}]}");
        /* Borrowed: the caller's references stay its own. */
        assert_int_equal(metrics->refcount, 2);
        _cleanup_json_ json_t *bare = proto_report_encode(1, 0, NULL, NULL);
        assert_json(bare, "{\"seq\": 1, \"sentAt\": \"1970-01-01T00:00:00.000Z\", \"metrics\": [], \"events\": []}");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_envelope_success),
                cmocka_unit_test(test_envelope_failure),
                cmocka_unit_test(test_envelope_bad),
                cmocka_unit_test(test_settings),
                cmocka_unit_test(test_settings_bad_field_keeps_rest),
                cmocka_unit_test(test_lease_and_ack),
                cmocka_unit_test(test_host_and_hello),
                cmocka_unit_test(test_event_and_report),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
