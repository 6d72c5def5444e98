/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proto/job.h: decoding a Job (valid, each invalid field, unanswerable ids, params bound, defaults) and the Progress/Result encoders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/job.h"
#include "field.h"

#define JOB_ID "0b6f7c1e-8d2a-4f3b-9c4d-5e6f7a8b9c0d"
#define VPS_ID "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

/* A valid job; tests then change one field. */
static json_t *valid_job(void)
{
        return J("{\"id\": \"" JOB_ID "\", \"kind\": \"vps.power\", \"attempt\": 2,"
                 " \"target\": {\"type\": \"vps\", \"id\": \"" VPS_ID "\"},"
                 " \"params\": {\"action\": \"start\"},"
                 " \"createdAt\": \"2026-11-21T10:00:00Z\", \"leaseExpiresAt\": \"2026-11-21T10:01:00Z\","
                 " \"timeoutSec\": 600}");
}

static void test_valid_job(void **state)
{
        (void)state;
        _cleanup_json_ json_t *in = valid_job();
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_job_decode(in, &job, &err), 0);
        assert_false(na_error_is_set(&err));
        assert_string_equal(job.id, JOB_ID);
        assert_string_equal(job.kind, "vps.power");
        assert_int_equal(job.attempt, 2);
        assert_int_equal(job.target_type, PROTO_TARGET_VPS);
        assert_string_equal(job.target_id, VPS_ID);
        assert_ptr_equal(job.params, json_object_get(in, "params")); /* a reference, not a copy */
        assert_int_equal(job.created_at_ms, 1795255200000LL);
        assert_int_equal(job.lease_expires_at_ms, 1795255260000LL);
        assert_int_equal(job.timeout_sec, 600);
        proto_job_clear(&job);
        assert_null(job.params);
        assert_string_equal(job.id, "");
}

static void test_defaults(void **state)
{
        (void)state;
        /* No params, no lease, no timeout, a node target without id. */
        _cleanup_json_ json_t *in = J("{\"id\": \"" JOB_ID "\", \"kind\": \"node.status\", \"attempt\": 1,"
                                      " \"target\": {\"type\": \"node\"}, \"createdAt\": \"2026-11-21T10:00:00.250Z\"}");
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_job_decode(in, &job, &err), 0);
        assert_true(json_is_object(job.params));
        assert_int_equal(json_object_size(job.params), 0);
        assert_int_equal(job.lease_expires_at_ms, 0);
        assert_int_equal(job.timeout_sec, PROTO_TIMEOUT_DEFAULT_SEC);
        assert_int_equal(job.target_type, PROTO_TARGET_NODE);
        assert_string_equal(job.target_id, "");
        assert_int_equal(job.created_at_ms, 1795255200250LL);
        proto_job_clear(&job);

        /* params: null is none; attempt 4.0 is 4; a node target may carry a name. */
        _cleanup_json_ json_t *in2 = J("{\"id\": \"" JOB_ID "\", \"kind\": \"node.status\", \"attempt\": 4.0,"
                                       " \"params\": null, \"target\": {\"type\": \"node\", \"id\": \"hv-12\"},"
                                       " \"createdAt\": \"2026-11-21T10:00:00Z\", \"unknownField\": [1]}");
        assert_int_equal(proto_job_decode(in2, &job, &err), 0);
        assert_true(json_is_object(job.params));
        assert_int_equal(job.attempt, 4);
        assert_string_equal(job.target_id, "hv-12");
        proto_job_clear(&job);
}

/* Replace (or with value NULL remove) field path ("a" or "a.b") of a valid job and decode it. */
static int decode_with(const char *path, json_t *value, struct proto_job *job, struct na_error *err)
{
        _cleanup_json_ json_t *in = valid_job();
        json_t *node = in;
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", path);
        char *dot = strchr(buf, '.');
        if (dot) {
                *dot = '\0';
                node = json_object_get(in, buf);
                path = dot + 1;
        } else
                path = buf;
        if (value)
                json_object_set_new(node, path, value);
        else
                json_object_del(node, path);
        return proto_job_decode(in, job, err);
}

static void expect_invalid(const char *path, json_t *value, const char *err_path, const char *msg)
{
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int r = decode_with(path, value, &job, &err);
        if (r != -EINVAL)
                fail_msg("%s: expected -EINVAL, got %d", path, r);
        assert_string_equal(err.code, NA_E_VALIDATION);
        assert_int_equal(err.http_status, 422);
        assert_field(&err, err_path, msg);
        /* Exactly this problem: nothing else in the job was blamed. */
        if (field_count(err.details) != 1) {
                _cleanup_free_ char *d = json_dumps(err.details, JSON_COMPACT);
                fail_msg("%s: more than one problem: %s", path, d);
        }
        /* The job can still be answered: id and attempt are there, params are not held. */
        assert_string_equal(job.id, streq(path, "id") ? "job-1" : JOB_ID);
        assert_true(job.attempt >= 1);
        assert_null(job.params);
        proto_job_clear(&job);
}

/* A NUL in the params is named as the kind's own errors name fields: relative to the
 * params ("env.X"), never "params.env.X" (which the central API would pass on to a
 * public caller who never wrote a "params"). */
static void test_nul_named_within_params(void **state)
{
        (void)state;
        json_t *params = json_object();
        json_t *env = json_object();
        json_object_set_new(env, "X", json_stringn("a\0b", 3));
        json_object_set_new(params, "env", env);
        expect_invalid("params", params, "env.X", "must not contain NUL characters");
        json_t *list = json_array();
        json_array_append_new(list, json_string("ok"));
        json_array_append_new(list, json_stringn("\0", 1));
        params = json_object();
        json_object_set_new(params, "command", list);
        expect_invalid("params", params, "command.1", "must not contain NUL characters");
}

static void test_each_invalid_field(void **state)
{
        (void)state;
        expect_invalid("kind", NULL, "kind", "is required");
        expect_invalid("kind", json_string(""), "kind", "must not be empty");
        expect_invalid("kind", json_integer(3), "kind", "must be a string");
        char longkind[66];
        memset(longkind, 'k', 65);
        longkind[65] = '\0';
        expect_invalid("kind", json_string(longkind), "kind", "must be 1..64 characters (got 65)");
        expect_invalid("attempt", NULL, "attempt", "is required");
        expect_invalid("attempt", json_integer(0), "attempt", "must be between 1 and 2147483647");
        expect_invalid("attempt", json_integer(2147483648LL), "attempt", "must be between 1 and 2147483647");
        expect_invalid("attempt", json_string("1"), "attempt", "must be an integer");
        expect_invalid("attempt", json_real(1.5), "attempt", "must be an integer");
        expect_invalid("target", NULL, "target", "is required");
        expect_invalid("target", json_null(), "target", "must not be null");
        expect_invalid("target", json_string("vps"), "target", "must be an object");
        expect_invalid("target.type", NULL, "target.type", "is required");
        expect_invalid("target.type", json_string("disk"), "target.type", "must be one of: node, vps, app");
        expect_invalid("target.id", NULL, "target.id", "is required");
        expect_invalid("target.id", json_string("vps-1"), "target.id", "must be a UUID");
        expect_invalid("params", json_array(), "params", "must be an object");
        expect_invalid("params", json_string("{}"), "params", "must be an object");
        expect_invalid("createdAt", NULL, "createdAt", "is required");
        expect_invalid("createdAt", json_string("2026-11-21 10:00:00"), "createdAt", "must be an RFC 3339 date-time");
        expect_invalid("createdAt", json_integer(1795255200), "createdAt", "must be an RFC 3339 date-time");
        expect_invalid("leaseExpiresAt", json_string("soon"), "leaseExpiresAt", "must be an RFC 3339 date-time");
        expect_invalid("timeoutSec", json_integer(0), "timeoutSec", "must be between 1 and 604800");
        expect_invalid("timeoutSec", json_integer(604801), "timeoutSec", "must be between 1 and 604800");
        expect_invalid("timeoutSec", json_string("600"), "timeoutSec", "must be an integer");
        /* An id a URL can carry that is not a UUID: answered with a validation failure. */
        expect_invalid("id", json_string("job-1"), "id", "must be a UUID");
}

static void test_attempt_kept_when_readable(void **state)
{
        (void)state;
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        /* Another field is bad: the attempt that could be read is kept for the answer. */
        assert_int_equal(decode_with("kind", json_integer(1), &job, &err), -EINVAL);
        assert_int_equal(job.attempt, 2);
        proto_job_clear(&job);
        na_error_clear(&err);
        /* The attempt itself is bad: 1. */
        assert_int_equal(decode_with("attempt", json_integer(-5), &job, &err), -EINVAL);
        assert_int_equal(job.attempt, 1);
        proto_job_clear(&job);
}

static void test_every_problem_listed(void **state)
{
        (void)state;
        _cleanup_json_ json_t *in = J("{\"id\": \"" JOB_ID "\", \"kind\": 1, \"attempt\": \"x\","
                                      " \"target\": {\"type\": \"vps\", \"id\": 5}, \"params\": [],"
                                      " \"createdAt\": \"never\", \"leaseExpiresAt\": 3, \"timeoutSec\": -1}");
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_job_decode(in, &job, &err), -EINVAL);
        assert_int_equal(field_count(err.details), 7);
        assert_field(&err, "kind", "must be a string");
        assert_field(&err, "attempt", "must be an integer");
        assert_field(&err, "target.id", "must be a UUID");
        assert_field(&err, "params", "must be an object");
        assert_field(&err, "createdAt", "must be an RFC 3339 date-time");
        assert_field(&err, "leaseExpiresAt", "must be an RFC 3339 date-time");
        assert_field(&err, "timeoutSec", "must be between 1 and 604800");
        assert_string_equal(job.id, JOB_ID);
        assert_int_equal(job.attempt, 1);
        proto_job_clear(&job);
}

static void expect_unanswerable(json_t *in)
{
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(proto_job_decode(in, &job, &err), -EBADMSG);
        assert_true(na_error_is_set(&err));
        assert_null(job.params);
        assert_string_equal(job.id, "");
        json_decref(in);
}

static void test_unanswerable(void **state)
{
        (void)state;
        expect_unanswerable(J("[]"));
        expect_unanswerable(J("\"job\""));
        expect_unanswerable(J("null"));
        expect_unanswerable(J("{\"kind\": \"vps.power\"}"));
        expect_unanswerable(J("{\"id\": 12}"));
        expect_unanswerable(J("{\"id\": null}"));
        expect_unanswerable(J("{\"id\": \"\"}"));
        expect_unanswerable(J("{\"id\": \"../../etc\"}"));
        expect_unanswerable(J("{\"id\": \"..\"}"));
        expect_unanswerable(J("{\"id\": \"a b\"}"));
        expect_unanswerable(J("{\"id\": \"a/b\"}"));
        expect_unanswerable(J("{\"id\": \"a?b=c\"}"));
        expect_unanswerable(J("{\"id\": \"0123456789012345678901234567890123456789012345678901234567890123X\"}"));

        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_job job;
        assert_int_equal(proto_job_decode(NULL, &job, &err), -EBADMSG);
        assert_string_equal(err.code, NA_E_VALIDATION);
}

static void test_id_answerable(void **state)
{
        (void)state;
        assert_true(proto_id_answerable(JOB_ID));
        assert_true(proto_id_answerable("a"));
        assert_true(proto_id_answerable("job_1.retry-2"));
        assert_true(proto_id_answerable("0123456789012345678901234567890123456789012345678901234567890123"));
        assert_false(proto_id_answerable("01234567890123456789012345678901234567890123456789012345678901234"));
        assert_false(proto_id_answerable(NULL));
        assert_false(proto_id_answerable(""));
        assert_false(proto_id_answerable("."));
        assert_false(proto_id_answerable(".."));
        assert_false(proto_id_answerable("a/b"));
        assert_false(proto_id_answerable("a%2fb"));
        assert_false(proto_id_answerable("caf\xc3\xa9"));
}

static void test_params_bound(void **state)
{
        (void)state;
        /* {"x":"<n>"} serialises to n + 8 bytes. */
        size_t n = PROTO_PARAMS_MAX - 8;
        char *big = malloc(n + 2);
        memset(big, 'a', n + 1);
        big[n] = '\0';
        struct proto_job job;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(decode_with("params", json_pack("{s:s}", "x", big), &job, &err), 0);
        assert_int_equal(json_string_length(json_object_get(job.params, "x")), n);
        proto_job_clear(&job);

        big[n] = 'a';
        big[n + 1] = '\0';
        assert_int_equal(decode_with("params", json_pack("{s:s}", "x", big), &job, &err), -EINVAL);
        assert_field(&err, "params", "must be at most 6291456 bytes");
        assert_null(job.params);
        proto_job_clear(&job);
        free(big);
}

static void test_progress_encode(void **state)
{
        (void)state;
        _cleanup_json_ json_t *a = proto_progress_encode(3, "writing-image", 40, "wrote 4 GB");
        _cleanup_json_ json_t *wa = J("{\"attempt\": 3, \"stage\": \"writing-image\", \"percent\": 40, \"message\": \"wrote 4 GB\"}");
        assert_true(json_equal(a, wa));
        _cleanup_json_ json_t *b = proto_progress_encode(1, NULL, -1, NULL);
        _cleanup_json_ json_t *wb = J("{\"attempt\": 1}");
        assert_true(json_equal(b, wb));
        _cleanup_json_ json_t *c = proto_progress_encode(1, NULL, 250, "");
        _cleanup_json_ json_t *wc = J("{\"attempt\": 1, \"percent\": 100}");
        assert_true(json_equal(c, wc));
        _cleanup_json_ json_t *d = proto_progress_encode(1, "s", 0, NULL);
        _cleanup_json_ json_t *wd = J("{\"attempt\": 1, \"stage\": \"s\", \"percent\": 0}");
        assert_true(json_equal(d, wd));
}

static void test_result_encode(void **state)
{
        (void)state;
        _cleanup_json_ json_t *data = J("{\"state\": \"running\"}");
        _cleanup_json_ json_t *ok = proto_result_encode(2, data, NULL, 1795255203042ULL, 2817);
        _cleanup_json_ json_t *want = J("{\"attempt\": 2, \"status\": \"succeeded\", \"data\": {\"state\": \"running\"},"
                                        " \"finishedAt\": \"2026-11-21T10:00:03.042Z\", \"durationMs\": 2817}");
        assert_true(json_equal(ok, want));
        assert_int_equal(data->refcount, 2); /* borrowed, and held by the result */

        _cleanup_json_ json_t *empty = proto_result_encode(1, NULL, NULL, 0, 0);
        assert_true(json_is_object(json_object_get(empty, "data")));
        assert_int_equal(json_object_size(json_object_get(empty, "data")), 0);

        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        na_error_field(&err, "hostname", "must be 1..63 characters");
        _cleanup_json_ json_t *failed = proto_result_encode(1, data, &err, 1795255203000ULL, 3);
        _cleanup_json_ json_t *wf = J("{\"attempt\": 1, \"status\": \"failed\","
                                      " \"error\": {\"httpStatus\": 422, \"code\": \"VALIDATION_ERROR\", \"error\": \"Validation error\","
                                      "  \"details\": {\"_errors\": [], \"hostname\": {\"_errors\": [\"must be 1..63 characters\"]}}},"
                                      " \"finishedAt\": \"2026-11-21T10:00:03.000Z\", \"durationMs\": 3}");
        if (!json_equal(failed, wf)) {
                _cleanup_free_ char *g = json_dumps(failed, JSON_COMPACT | JSON_SORT_KEYS);
                fail_msg("got %s", g);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid_job),
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_each_invalid_field),
                cmocka_unit_test(test_nul_named_within_params),
                cmocka_unit_test(test_attempt_kept_when_readable),
                cmocka_unit_test(test_every_problem_listed),
                cmocka_unit_test(test_unanswerable),
                cmocka_unit_test(test_id_answerable),
                cmocka_unit_test(test_params_bound),
                cmocka_unit_test(test_progress_encode),
                cmocka_unit_test(test_result_encode),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
