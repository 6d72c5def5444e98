/* SPDX-License-Identifier: GPL-2.0-or-later */
/* common/error.h: the error type, the VALIDATION_ERROR details shape and the failure object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "common/json-cleanup.h"

static void assert_json_eq(json_t *got, const char *want_text)
{
        json_error_t jerr;
        _cleanup_json_ json_t *want = json_loads(want_text, 0, &jerr);
        assert_non_null(want);
        if (!json_equal(got, want)) {
                _cleanup_free_ char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
                _cleanup_free_ char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
                fail_msg("JSON differs:\n got  %s\n want %s", g, w);
        }
}

static void test_set_and_clear(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        assert_false(na_error_is_set(&e));
        assert_false(na_error_is_set(NULL));

        assert_int_equal(na_error_set(&e, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: not here", "6f1c"), -ENOENT);
        assert_true(na_error_is_set(&e));
        assert_int_equal(e.errnum, ENOENT);
        assert_string_equal(e.code, NA_E_VPS_NOT_FOUND);
        assert_int_equal(e.http_status, 404);
        assert_string_equal(e.message, "vps 6f1c: not here");

        /* errnum 0 or negative becomes EIO; a NULL code is INTERNAL_ERROR. */
        assert_int_equal(na_error_set(&e, 0, NULL, "x"), -EIO);
        assert_string_equal(e.code, NA_E_INTERNAL);
        assert_int_equal(e.http_status, 500);
        assert_int_equal(na_error_set(&e, -3, NA_E_DRIVER, "y"), -EIO);
        assert_int_equal(e.http_status, 502);

        /* A NULL error pointer is allowed: only the return value tells. */
        assert_int_equal(na_error_set(NULL, EPERM, NA_E_INTERNAL, "nobody listens"), -EPERM);

        na_error_clear(&e);
        assert_false(na_error_is_set(&e));
        assert_int_equal(e.errnum, 0);
        na_error_clear(NULL);
}

static void test_message_truncated(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        char big[2000];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        na_error_set(&e, EINVAL, NA_E_INTERNAL, "%s", big);
        assert_int_equal(strlen(e.message), sizeof(e.message) - 1);
        na_error_prefix(&e, "outer");
        assert_int_equal(strlen(e.message), sizeof(e.message) - 1);
        assert_memory_equal(e.message, "outer: aaa", 10);
}

static void test_sys_and_prefix(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        assert_int_equal(na_error_sys(&e, ENOENT, "open %s", "/x"), -ENOENT);
        assert_string_equal(e.code, NA_E_INTERNAL);
        assert_string_equal(e.message, "open /x: No such file or directory");

        assert_int_equal(na_error_prefix(&e, "vps %s", "6f1c"), -ENOENT);
        assert_string_equal(e.message, "vps 6f1c: open /x: No such file or directory");
        /* The prefix keeps the code and errnum. */
        assert_string_equal(e.code, NA_E_INTERNAL);
        assert_int_equal(e.errnum, ENOENT);

        /* Prefixing nothing leaves nothing. */
        _cleanup_na_error_ struct na_error none = NA_ERROR_INIT;
        assert_int_equal(na_error_prefix(&none, "outer"), -EIO);
        assert_false(na_error_is_set(&none));
        assert_int_equal(na_error_prefix(NULL, "outer"), -EIO);
}

static void test_field_details_shape(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        assert_int_equal(na_error_field(&e, "hostname", "must be 1..63 characters"), -EINVAL);
        assert_int_equal(na_error_field(&e, "plan.cpuCores", "must be between %d and %d", 1, 64), -EINVAL);
        assert_int_equal(na_error_field(&e, "plan.cpuCores", "second problem"), -EINVAL);
        assert_int_equal(na_error_field(&e, NULL, "whole payload problem"), -EINVAL);
        assert_int_equal(na_error_field(&e, "", "another payload problem"), -EINVAL);
        assert_int_equal(na_error_field(&e, "rules.3.port", "must be 1..65535"), -EINVAL);

        assert_string_equal(e.code, NA_E_VALIDATION);
        assert_int_equal(e.http_status, 422);
        assert_int_equal(e.errnum, EINVAL);
        /* The log message names the first field. */
        assert_string_equal(e.message, "validation failed: hostname: must be 1..63 characters");

        /* Every node, intermediate ones too, has its own "_errors". */
        assert_json_eq(e.details, "{\"_errors\": [\"whole payload problem\", \"another payload problem\"],"
                                  " \"hostname\": {\"_errors\": [\"must be 1..63 characters\"]},"
                                  " \"plan\": {\"_errors\": [], \"cpuCores\": {\"_errors\": [\"must be between 1 and 64\", "
                                  "\"second problem\"]}},"
                                  " \"rules\": {\"_errors\": [], \"3\": {\"_errors\": [], \"port\": {\"_errors\": "
                                  "[\"must be 1..65535\"]}}}}");
}

/* A key of the input named "_errors" (found by fuzz-transfer: a header of that name)
 * must not replace a node's list of messages with an object. */
static void test_field_input_key_named_errors(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        assert_int_equal(na_error_field(&e, "transfer.headers", "bad name"), -EINVAL);
        assert_int_equal(na_error_field(&e, "transfer.headers._errors", "must be a string"), -EINVAL);
        assert_int_equal(na_error_field(&e, "_errors.x", "at the root"), -EINVAL);
        assert_json_eq(e.details, "{\"_errors\": [\"_errors.x: at the root\"],"
                                  " \"transfer\": {\"_errors\": [], \"headers\": {\"_errors\": [\"bad name\","
                                  " \"_errors: must be a string\"]}}}");
}

static void test_field_replaces_other_error(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        na_error_set(&e, EIO, NA_E_DRIVER, "libvirt said no");
        na_error_detail(&e, "reason", json_string("no"));
        na_error_field(&e, NULL, "bad payload");
        assert_string_equal(e.code, NA_E_VALIDATION);
        assert_int_equal(e.http_status, 422);
        assert_string_equal(e.message, "validation failed: bad payload");
        assert_json_eq(e.details, "{\"_errors\": [\"bad payload\"]}");

        /* NULL error: only the return value. */
        assert_int_equal(na_error_field(NULL, "x", "y"), -EINVAL);
}

static void test_detail(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        na_error_set(&e, EBUSY, NA_E_INVALID_STATE, "vps x: is running");
        na_error_detail(&e, "state", json_string("running"));
        na_error_detail(&e, "state", json_string("paused")); /* replaces */
        na_error_detail(&e, "ignored", NULL);
        assert_json_eq(e.details, "{\"state\": \"paused\"}");

        _cleanup_json_ json_t *j = na_error_to_json(&e);
        assert_json_eq(j, "{\"httpStatus\": 409, \"code\": \"INVALID_STATE\", \"error\": \"vps x: is running\","
                          " \"details\": {\"state\": \"paused\"}}");
        na_error_detail(NULL, "x", NULL);
}

static void test_to_json_fixed_messages(void **state)
{
        (void)state;
        static const struct {
                const char *code;
                int status;
                const char *text; /* NULL: our own message */
        } cases[] = {
                { "AUTHENTICATION_ERROR", 401, "Authentication required" },
                { "INVALID_API_KEY", 401, "Invalid API key" },
                { "EXPIRED_API_KEY", 401, "API key has expired" },
                { "ACCOUNT_BANNED", 403, "Account is banned" },
                { "ACCOUNT_SUSPENDED", 403, "Account is suspended" },
                { "AUTHORIZATION_ERROR", 403, "Insufficient permissions" },
                { NA_E_APP_NOT_FOUND, 404, "App not found" },
                { NA_E_COMMAND_MANAGED, 409, "This template decides how it starts" },
                { NA_E_VALIDATION, 422, "Validation error" },
                { NA_E_INTERNAL, 500, "Internal server error" },
                { NA_E_VPS_NOT_FOUND, 404, NULL },
                { NA_E_SNAPSHOT_NOT_FOUND, 404, NULL },
                { NA_E_BACKUP_NOT_FOUND, 404, NULL },
                { NA_E_FILE_NOT_FOUND, 404, NULL },
                { "IMAGE_NOT_FOUND", 404, NULL },
                { "EXPOSURE_NOT_FOUND", 404, NULL },
                { "PORT_IN_USE", 409, NULL },
                { "QUOTA_EXCEEDED", 409, NULL },
                { NA_E_JOB_NOT_FOUND, 404, NULL },
                { NA_E_FILE_ACCESS_DISABLED, 403, NULL },
                { NA_E_INVALID_STATE, 409, NULL },
                { NA_E_SNAPSHOT_LIMIT, 409, NULL },
                { NA_E_GUEST_AGENT, 409, NULL },
                { NA_E_JOB_CANCELLED, 409, NULL },
                { NA_E_LEASE_LOST, 409, NULL },
                { NA_E_UNSUPPORTED_JOB, 400, NULL },
                { NA_E_JOB_TIMEOUT, 504, NULL },
                { NA_E_DRIVER, 502, NULL },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
                na_error_set(&e, EIO, cases[i].code, "our text for %s", cases[i].code);
                assert_int_equal(na_error_code_status(cases[i].code), cases[i].status);
                _cleanup_json_ json_t *j = na_error_to_json(&e);
                assert_non_null(j);
                assert_int_equal(json_integer_value(json_object_get(j, "httpStatus")), cases[i].status);
                assert_string_equal(json_string_value(json_object_get(j, "code")), cases[i].code);
                char ours[128];
                snprintf(ours, sizeof(ours), "our text for %s", cases[i].code);
                assert_string_equal(json_string_value(json_object_get(j, "error")), cases[i].text ? cases[i].text : ours);
                json_t *details = json_object_get(j, "details");
                assert_non_null(details); /* always present */
                if (streq(cases[i].code, NA_E_VALIDATION))
                        assert_json_eq(details, "{\"_errors\": []}");
                else
                        assert_true(json_is_null(details));
        }
        assert_int_equal(na_error_code_status("NO_SUCH_CODE"), 500);
        assert_int_equal(na_error_code_status(NULL), 500);
}

static void test_to_json_internal_hides_details(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        na_error_sys(&e, EACCES, "open /var/lib/secret");
        na_error_detail(&e, "path", json_string("/var/lib/secret"));
        _cleanup_json_ json_t *j = na_error_to_json(&e);
        /* INTERNAL_ERROR: the reference's message and details null, nothing of ours leaks. */
        assert_json_eq(j, "{\"httpStatus\": 500, \"code\": \"INTERNAL_ERROR\", \"error\": \"Internal server error\","
                          " \"details\": null}");

        _cleanup_json_ json_t *n = na_error_to_json(NULL);
        assert_json_eq(n, "{\"httpStatus\": 500, \"code\": \"INTERNAL_ERROR\", \"error\": \"Internal server error\","
                          " \"details\": null}");

        /* A validation error keeps its details (a copy: the error stays usable). */
        _cleanup_na_error_ struct na_error v = NA_ERROR_INIT;
        na_error_field(&v, "name", "must not be empty");
        _cleanup_json_ json_t *vj = na_error_to_json(&v);
        assert_json_eq(vj, "{\"httpStatus\": 422, \"code\": \"VALIDATION_ERROR\", \"error\": \"Validation error\","
                           " \"details\": {\"_errors\": [], \"name\": {\"_errors\": [\"must not be empty\"]}}}");
        assert_ptr_not_equal(json_object_get(vj, "details"), v.details);
}

static void test_move(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error a = NA_ERROR_INIT, b = NA_ERROR_INIT;
        na_error_field(&a, "x", "bad");
        na_error_set(&b, EPERM, NA_E_INTERNAL, "old");
        na_error_detail(&b, "k", json_true());
        na_error_move(&b, &a);
        assert_false(na_error_is_set(&a));
        assert_null(a.details);
        assert_string_equal(b.code, NA_E_VALIDATION);
        assert_json_eq(b.details, "{\"_errors\": [], \"x\": {\"_errors\": [\"bad\"]}}");
}
/* Every message can go into JSON: bytes that are not UTF-8 become '?', a sequence cut by the bound too. */
static void test_message_is_utf8(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error e = NA_ERROR_INIT;
        na_error_set(&e, EINVAL, NA_E_VALIDATION, "near '%s'", "\xc3\xa9t\\\xc3");
        assert_string_equal(e.message, "near '\xc3\xa9t\\?'");
        na_error_set(&e, EINVAL, NA_E_VALIDATION, "%s", "\xff\xfe \xed\xa0\x80 \xe0\x80\x80 \xf4\x90\x80\x80 \xf0\x9f\x98\x80");
        assert_string_equal(e.message, "?? ??? ??? ???? \xf0\x9f\x98\x80");
        char big[600];
        memset(big, 'a', sizeof(big));
        for (size_t i = 500; i + 2 < sizeof(big); i += 2)
                memcpy(big + i, "\xc3\xa9", 2);
        big[sizeof(big) - 1] = '\0';
        na_error_set(&e, EINVAL, NA_E_INTERNAL, "%s", big); /* the 511 bytes kept end in half an \xc3\xa9 */
        assert_int_equal(e.message[510], '?');
        _cleanup_json_ json_t *j = json_string(e.message);
        assert_non_null(j);
        na_error_prefix(&e, "\xe2\x82");
        assert_memory_equal(e.message, "??: ", 4);
        _cleanup_json_ json_t *k = json_string(e.message);
        assert_non_null(k);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_set_and_clear),
                cmocka_unit_test(test_message_truncated),
                cmocka_unit_test(test_sys_and_prefix),
                cmocka_unit_test(test_field_details_shape),
                cmocka_unit_test(test_field_input_key_named_errors),
                cmocka_unit_test(test_field_replaces_other_error),
                cmocka_unit_test(test_detail),
                cmocka_unit_test(test_to_json_fixed_messages),
                cmocka_unit_test(test_to_json_internal_hides_details),
                cmocka_unit_test(test_move),
                cmocka_unit_test(test_message_is_utf8),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
