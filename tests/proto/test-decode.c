/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proto/decode.h: the strict field readers (types, bounds, NUL, null vs absent, reals, strv). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/decode.h"
#include "field.h"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

static void test_utf8_chars_and_path(void **state)
{
        (void)state;
        assert_int_equal(proto_utf8_chars(""), 0);
        assert_int_equal(proto_utf8_chars("abc"), 3);
        assert_int_equal(proto_utf8_chars("h\xc3\xa9llo"), 5);          /* é */
        assert_int_equal(proto_utf8_chars("\xe2\x82\xac\xf0\x9f\x98\x80"), 2); /* € and an emoji */
        char buf[64];
        assert_string_equal(proto_path(buf, sizeof(buf), NULL, "key"), "key");
        assert_string_equal(proto_path(buf, sizeof(buf), "", "key"), "key");
        assert_string_equal(proto_path(buf, sizeof(buf), "plan", "ramMB"), "plan.ramMB");
}

static void test_presence(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = J("{\"n\": null, \"s\": \"x\"}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        const char *out = "untouched";

        /* Absent: optional is fine and leaves *out alone; required is an error. */
        assert_int_equal(proto_string(o, NULL, "missing", 0, 0, 10, &out, &err), PROTO_ABSENT);
        assert_string_equal(out, "untouched");
        assert_false(na_error_is_set(&err));
        assert_int_equal(proto_string(o, NULL, "missing", PROTO_REQUIRED, 0, 10, &out, &err), -EINVAL);
        assert_field(&err, "missing", "is required");
        na_error_clear(&err);

        /* null: absent for an optional field, an error for a required one, a value with NULLABLE. */
        assert_int_equal(proto_string(o, NULL, "n", 0, 0, 10, &out, &err), PROTO_ABSENT);
        assert_false(na_error_is_set(&err));
        assert_int_equal(proto_string(o, NULL, "n", PROTO_NULLABLE, 0, 10, &out, &err), PROTO_NULL);
        assert_int_equal(proto_string(o, NULL, "n", PROTO_NULLABLE | PROTO_REQUIRED, 0, 10, &out, &err), PROTO_NULL);
        assert_false(na_error_is_set(&err));
        assert_int_equal(proto_string(o, NULL, "n", PROTO_REQUIRED, 0, 10, &out, &err), -EINVAL);
        assert_field(&err, "n", "must not be null");
        assert_string_equal(out, "untouched");
        na_error_clear(&err);

        /* Not an object at all (or NULL): every field is absent. */
        _cleanup_json_ json_t *arr = J("[1, 2]");
        assert_int_equal(proto_string(arr, NULL, "s", 0, 0, 10, &out, &err), PROTO_ABSENT);
        assert_int_equal(proto_string(NULL, NULL, "s", 0, 0, 10, &out, &err), PROTO_ABSENT);
        assert_int_equal(proto_int(NULL, "plan", "ramMB", PROTO_REQUIRED, 0, 10, NULL, &err), -EINVAL);
        assert_field(&err, "plan.ramMB", "is required");
}

static void test_string(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = J("{\"ok\": \"h\\u00e9llo\", \"num\": 5, \"empty\": \"\", \"long\": \"abcdef\","
                                     " \"arr\": [], \"nested\": {\"name\": 1}}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        const char *out = NULL;

        assert_int_equal(proto_string(o, NULL, "ok", PROTO_REQUIRED, 5, 5, &out, &err), PROTO_PRESENT);
        assert_string_equal(out, "h\xc3\xa9llo"); /* 5 characters, 6 bytes */
        assert_int_equal(proto_string(o, NULL, "ok", 0, 1, 10, NULL, &err), PROTO_PRESENT); /* out may be NULL */
        assert_false(na_error_is_set(&err));

        out = NULL;
        assert_int_equal(proto_string(o, NULL, "num", 0, 0, 10, &out, &err), -EINVAL);
        assert_null(out);
        assert_field(&err, "num", "must be a string");
        assert_int_equal(proto_string(o, NULL, "arr", 0, 0, 10, &out, &err), -EINVAL);
        assert_field(&err, "arr", "must be a string");
        assert_int_equal(proto_string(o, NULL, "empty", 0, 1, 10, &out, &err), -EINVAL);
        assert_field(&err, "empty", "must not be empty");
        assert_int_equal(proto_string(o, NULL, "long", 0, 1, 3, &out, &err), -EINVAL);
        assert_field(&err, "long", "must be 1..3 characters (got 6)");
        assert_int_equal(proto_string(o, NULL, "long", 0, 3, 3, &out, &err), -EINVAL);
        assert_field(&err, "long", "must be exactly 3 characters");
        assert_int_equal(proto_string(o, NULL, "ok", 0, 6, 10, &out, &err), -EINVAL);
        assert_field(&err, "ok", "must be 6..10 characters (got 5)");

        json_t *nested = json_object_get(o, "nested");
        assert_int_equal(proto_string(nested, "nested", "name", 0, 0, 10, &out, &err), -EINVAL);
        assert_field(&err, "nested.name", "must be a string");
        /* Every problem is listed, nothing is lost. */
        assert_int_equal(field_count(err.details), 7);
        assert_string_equal(err.code, NA_E_VALIDATION);
}

static void test_string_with_nul(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = json_object();
        json_object_set_new(o, "s", json_stringn("ab\0cd", 5));
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        const char *out = NULL;
        assert_int_equal(proto_string(o, NULL, "s", 0, 0, 100, &out, &err), -EINVAL);
        assert_null(out);
        assert_field(&err, "s", "must not contain NUL characters");

        /* Parsing refuses \u0000 unless asked; with JSON_ALLOW_NUL it reaches the reader. */
        json_error_t jerr;
        _cleanup_json_ json_t *p = json_loads("{\"s\": \"a\\u0000b\"}", JSON_ALLOW_NUL, &jerr);
        assert_non_null(p);
        na_error_clear(&err);
        assert_int_equal(proto_string(p, NULL, "s", 0, 0, 100, &out, &err), -EINVAL);
        assert_field(&err, "s", "must not contain NUL characters");
}

static void test_int(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = J("{\"i\": 7, \"real_whole\": 4.0, \"exp\": 1e2, \"frac\": 4.5, \"huge\": 1e300,"
                                     " \"neg\": -3, \"str\": \"4\", \"bool\": true, \"max\": 9223372036854775807,"
                                     " \"min\": -9223372036854775808, \"big_real\": 9.0e15, \"bigger_real\": 1.0e16,"
                                     " \"neg_real\": -2.0}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int64_t v = -1;

        assert_int_equal(proto_int(o, NULL, "i", PROTO_REQUIRED, 1, 10, &v, &err), PROTO_PRESENT);
        assert_int_equal(v, 7);
        /* JSON has one number type: 4.0 and 1e2 are whole numbers. */
        assert_int_equal(proto_int(o, NULL, "real_whole", 0, 1, 10, &v, &err), PROTO_PRESENT);
        assert_int_equal(v, 4);
        assert_int_equal(proto_int(o, NULL, "exp", 0, 1, 1000, &v, &err), PROTO_PRESENT);
        assert_int_equal(v, 100);
        assert_int_equal(proto_int(o, NULL, "neg_real", 0, -10, 10, &v, &err), PROTO_PRESENT);
        assert_int_equal(v, -2);
        assert_int_equal(proto_int(o, NULL, "big_real", 0, 0, INT64_MAX, &v, &err), PROTO_PRESENT);
        assert_int_equal(v, 9000000000000000LL);
        assert_int_equal(proto_int(o, NULL, "max", 0, 0, INT64_MAX, &v, &err), PROTO_PRESENT);
        assert_int_equal(v, INT64_MAX);
        assert_int_equal(proto_int(o, NULL, "min", 0, INT64_MIN, 0, &v, &err), PROTO_PRESENT);
        assert_true(v == INT64_MIN);
        assert_false(na_error_is_set(&err));

        v = 99;
        assert_int_equal(proto_int(o, NULL, "frac", 0, 0, 10, &v, &err), -EINVAL);
        assert_int_equal(v, 99);
        assert_field(&err, "frac", "must be an integer");
        assert_int_equal(proto_int(o, NULL, "huge", 0, 0, INT64_MAX, &v, &err), -EINVAL);
        assert_field(&err, "huge", "must be an integer");
        assert_int_equal(proto_int(o, NULL, "bigger_real", 0, 0, INT64_MAX, &v, &err), -EINVAL);
        assert_field(&err, "bigger_real", "must be an integer");
        assert_int_equal(proto_int(o, NULL, "str", 0, 0, 10, &v, &err), -EINVAL);
        assert_field(&err, "str", "must be an integer");
        assert_int_equal(proto_int(o, NULL, "bool", 0, 0, 10, &v, &err), -EINVAL);
        assert_field(&err, "bool", "must be an integer");
        assert_int_equal(proto_int(o, NULL, "neg", 0, 0, 10, &v, &err), -EINVAL);
        assert_field(&err, "neg", "must be between 0 and 10");
        assert_int_equal(proto_int(o, NULL, "i", 0, 8, 10, &v, &err), -EINVAL);
        assert_field(&err, "i", "must be between 8 and 10");
        assert_int_equal(proto_int(o, NULL, "i", 0, 1, 6, &v, &err), -EINVAL);
        assert_field(&err, "i", "must be between 1 and 6");
        assert_int_equal(v, 99);
}

static void test_bool_uuid_enum_time(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = J("{\"t\": true, \"f\": false, \"s\": \"true\", \"zero\": 0,"
                                     " \"id\": \"6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B\", \"badid\": \"6f1c\", \"numid\": 5,"
                                     " \"act\": \"stop\", \"badact\": \"halt\", \"numact\": 1,"
                                     " \"at\": \"2026-11-21T10:00:03Z\", \"badat\": \"yesterday\", \"numat\": 17}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        bool b = false;
        assert_int_equal(proto_bool(o, NULL, "t", 0, &b, &err), PROTO_PRESENT);
        assert_true(b);
        assert_int_equal(proto_bool(o, NULL, "f", 0, &b, &err), PROTO_PRESENT);
        assert_false(b);
        const char *id = NULL;
        assert_int_equal(proto_uuid(o, NULL, "id", 0, &id, &err), PROTO_PRESENT);
        assert_string_equal(id, "6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B");
        static const char *const actions[] = { "start", "stop", "reboot", "force-stop", NULL };
        int idx = -1;
        assert_int_equal(proto_enum(o, NULL, "act", 0, actions, &idx, &err), PROTO_PRESENT);
        assert_int_equal(idx, 1);
        int64_t ms = 0;
        assert_int_equal(proto_time(o, NULL, "at", 0, &ms, &err), PROTO_PRESENT);
        assert_int_equal(ms, 1795255203000LL);
        assert_false(na_error_is_set(&err));

        assert_int_equal(proto_bool(o, NULL, "s", 0, &b, &err), -EINVAL);
        assert_field(&err, "s", "must be true or false");
        assert_int_equal(proto_bool(o, NULL, "zero", 0, &b, &err), -EINVAL);
        assert_field(&err, "zero", "must be true or false");
        assert_int_equal(proto_uuid(o, NULL, "badid", 0, &id, &err), -EINVAL);
        assert_field(&err, "badid", "must be a UUID");
        assert_int_equal(proto_uuid(o, NULL, "numid", 0, &id, &err), -EINVAL);
        assert_field(&err, "numid", "must be a UUID");
        idx = -1;
        assert_int_equal(proto_enum(o, "p", "badact", 0, actions, &idx, &err), -EINVAL);
        assert_field(&err, "p.badact", "must be one of: start, stop, reboot, force-stop");
        assert_int_equal(proto_enum(o, NULL, "numact", 0, actions, &idx, &err), -EINVAL);
        assert_int_equal(idx, -1);
        assert_int_equal(proto_time(o, NULL, "badat", 0, &ms, &err), -EINVAL);
        assert_field(&err, "badat", "must be an RFC 3339 date-time");
        assert_int_equal(proto_time(o, NULL, "numat", 0, &ms, &err), -EINVAL);
        assert_int_equal(ms, 1795255203000LL);
        assert_int_equal(field_count(err.details), 8);

        /* A very long list of allowed values does not overflow the message. */
        const char *many[80];
        for (int i = 0; i < 79; i++)
                many[i] = "a-rather-long-enumeration-value";
        many[79] = NULL;
        na_error_clear(&err);
        assert_int_equal(proto_enum(o, NULL, "badact", 0, many, &idx, &err), -EINVAL);
        json_t *list = field_errors(&err, "badact");
        assert_int_equal(json_array_size(list), 1);
        assert_true(strlen(json_string_value(json_array_get(list, 0))) < 256);
}

static void test_object_array(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = J("{\"obj\": {\"a\": 1}, \"arr\": [1, 2, 3], \"str\": \"x\"}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        json_t *out = NULL;
        assert_int_equal(proto_object(o, NULL, "obj", PROTO_REQUIRED, &out, &err), PROTO_PRESENT);
        assert_ptr_equal(out, json_object_get(o, "obj")); /* borrowed */
        assert_int_equal(proto_array(o, NULL, "arr", 0, 0, 3, &out, &err), PROTO_PRESENT);
        assert_int_equal(json_array_size(out), 3);
        assert_false(na_error_is_set(&err));

        assert_int_equal(proto_object(o, NULL, "arr", 0, &out, &err), -EINVAL);
        assert_field(&err, "arr", "must be an object");
        assert_int_equal(proto_array(o, NULL, "obj", 0, 0, 3, &out, &err), -EINVAL);
        assert_field(&err, "obj", "must be an array");
        assert_int_equal(proto_array(o, NULL, "arr", 0, 0, 2, &out, &err), -EINVAL);
        assert_field(&err, "arr", "must hold 0..2 items (got 3)");
        assert_int_equal(proto_array(o, NULL, "arr", 0, 4, 9, &out, &err), -EINVAL);
        assert_field(&err, "arr", "must hold 4..9 items (got 3)");
}

static void test_strv(void **state)
{
        (void)state;
        _cleanup_json_ json_t *o = J("{\"cmd\": [\"/bin/echo\", \"h\\u00e9llo world\", \"--x=1\"],"
                                     " \"bad\": [\"ok\", 7, \"\", \"toolong\", null],"
                                     " \"many\": [\"a\", \"b\", \"c\"], \"empty\": [], \"notarr\": \"echo hi\"}");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        char **v = NULL;

        assert_int_equal(proto_strv(o, NULL, "cmd", PROTO_REQUIRED, 1, 100, 1, 1000, &v, &err), PROTO_PRESENT);
        assert_non_null(v);
        assert_string_equal(v[0], "/bin/echo");
        assert_string_equal(v[1], "h\xc3\xa9llo world");
        assert_string_equal(v[2], "--x=1");
        assert_null(v[3]);
        /* A copy: it outlives the JSON. */
        assert_ptr_not_equal(v[0], json_string_value(json_array_get(json_object_get(o, "cmd"), 0)));
        proto_strv_free(v);
        proto_strv_free(NULL);
        assert_int_equal(proto_strv(o, NULL, "cmd", 0, 1, 100, 1, 1000, NULL, &err), PROTO_PRESENT);
        assert_false(na_error_is_set(&err));

        /* Every bad item is named by its index. */
        v = NULL;
        assert_int_equal(proto_strv(o, "app", "bad", 0, 1, 100, 1, 5, &v, &err), -EINVAL);
        assert_null(v);
        assert_field(&err, "app.bad.1", "must be a string");
        assert_field(&err, "app.bad.2", "must not be empty");
        assert_field(&err, "app.bad.3", "must be 1..5 characters (got 7)");
        assert_field(&err, "app.bad.4", "must be a string");
        assert_null(field_errors(&err, "app.bad.0"));
        assert_int_equal(field_count(err.details), 4);
        na_error_clear(&err);

        assert_int_equal(proto_strv(o, NULL, "many", 0, 1, 2, 1, 10, &v, &err), -EINVAL);
        assert_field(&err, "many", "must hold 1..2 items (got 3)");
        assert_int_equal(proto_strv(o, NULL, "empty", 0, 1, 2, 1, 10, &v, &err), -EINVAL);
        assert_field(&err, "empty", "must hold 1..2 items (got 0)");
        assert_int_equal(proto_strv(o, NULL, "notarr", 0, 1, 2, 1, 10, &v, &err), -EINVAL);
        assert_field(&err, "notarr", "must be an array");
        assert_null(v);
        na_error_clear(&err);

        v = (char **)0x1;
        assert_int_equal(proto_strv(o, NULL, "absent", 0, 1, 2, 1, 10, &v, &err), PROTO_ABSENT);
        assert_ptr_equal(v, (char **)0x1);

        /* NUL inside an item. */
        _cleanup_json_ json_t *n = json_pack("{s:[s, o]}", "cmd", "ok", json_stringn("a\0b", 3));
        v = NULL;
        assert_int_equal(proto_strv(n, NULL, "cmd", 0, 1, 10, 1, 10, &v, &err), -EINVAL);
        assert_field(&err, "cmd.1", "must not contain NUL characters");
        assert_null(v);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_utf8_chars_and_path),
                cmocka_unit_test(test_presence),
                cmocka_unit_test(test_string),
                cmocka_unit_test(test_string_with_nul),
                cmocka_unit_test(test_int),
                cmocka_unit_test(test_bool_uuid_enum_time),
                cmocka_unit_test(test_object_array),
                cmocka_unit_test(test_strv),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
