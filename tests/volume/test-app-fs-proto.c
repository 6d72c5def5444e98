/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/app-files.c: the path text check (a table of good and hostile paths), strict
 * base64, every app.files.* decoder (each problem under its own field, all problems
 * of one params object together, defaults) and the result encoders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-files.h"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

/* The _errors of field in err's details, as one string ("" when none). */
static const char *field_errors(const struct na_error *err, const char *field)
{
        static char buf[1024];
        buf[0] = '\0';
        json_t *node = err->details ? json_object_get(err->details, field) : NULL;
        json_t *a = node ? json_object_get(node, "_errors") : NULL;
        size_t i;
        json_t *m;
        json_array_foreach(a, i, m) {
                strncat(buf, json_string_value(m), sizeof(buf) - strlen(buf) - 2);
                strncat(buf, ";", sizeof(buf) - strlen(buf) - 1);
        }
        return buf;
}

static void test_path_check(void **state)
{
        (void)state;
        char long_comp[300], long_path[4200], ok_path[4097];
        memset(long_comp, 'a', 256);
        long_comp[256] = '\0';
        for (size_t i = 0; i < 4097; i += 2)
                long_path[i] = 'a', long_path[i + 1] = '/';
        long_path[4097] = '\0';
        long_path[4096] = 'a';
        memset(ok_path, 'b', 4096);
        for (size_t i = 200; i < 4096; i += 200)
                ok_path[i] = '/';
        ok_path[4096] = '\0';
        const char *good[] = { "/", "a", "/a", "a/b/c", "/a/b/c", "..a", "a..", "...", ".hidden", "a/.b/..c",
                               "é/日本語/😀", "with space", "a-b_c.d", ok_path };
        for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
                const char *p = proto_app_files_path_problem(good[i], strlen(good[i]));
                if (p)
                        fail_msg("good path %.60s refused: %s", good[i], p);
        }
        struct {
                const char *path;
                size_t len;
                const char *problem;
        } bad[] = {
                { "", 0, "empty" },
                { "..", 2, "'..'" },
                { "/..", 3, "'..'" },
                { "../x", 4, "'..'" },
                { "a/..", 4, "'..'" },
                { "a/../b", 6, "'..'" },
                { "a/b/../../..", 12, "'..'" },
                { ".", 1, "'.'" },
                { "./a", 3, "'.'" },
                { "a/./b", 5, "'.'" },
                { "//", 2, "empty" },
                { "//etc", 5, "empty" },
                { "a//b", 4, "empty" },
                { "a/", 2, "end with" },
                { "/a/", 3, "end with" },
                { "a\0b", 3, "NUL" },
                { "\0", 1, "NUL" },
                { "a\nb", 3, "control" },
                { "a\tb", 3, "control" },
                { "a\x7f", 2, "control" },
                { "\x1b[31m", 5, "control" },
                { "\xff", 1, "UTF-8" },
                { "a/\xc0\xaf", 4, "UTF-8" },  /* overlong "/" */
                { "\xed\xa0\x80", 3, "UTF-8" }, /* a surrogate */
                { long_comp, 256, "255" },
                { long_path, 4097, "4096" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                const char *p = proto_app_files_path_problem(bad[i].path, bad[i].len);
                if (!p || !strstr(p, bad[i].problem))
                        fail_msg("bad path #%zu accepted or wrong message: %s", i, p ? p : "(accepted)");
        }
        assert_string_equal(proto_app_files_path_relative("/"), ".");
        assert_string_equal(proto_app_files_path_relative("/a/b"), "a/b");
        assert_string_equal(proto_app_files_path_relative("a/b"), "a/b");
}

static void test_base64(void **state)
{
        (void)state;
        struct {
                const char *in;
                const char *out;
        } ok[] = { { "", "" }, { "Zg==", "f" }, { "Zm8=", "fo" }, { "Zm9v", "foo" }, { "Zm9vYmFy", "foobar" },
                   { "/+8=", "\xff\xef" } };
        for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
                unsigned char *d = NULL;
                size_t n = 99;
                assert_int_equal(proto_base64_decode(ok[i].in, strlen(ok[i].in), 16, &d, &n), 0);
                assert_int_equal(n, strlen(ok[i].out));
                assert_memory_equal(d, ok[i].out, n);
                free(d);
        }
        const char *bad[] = { "Z", "Zg", "Zg=", "Zg=a", "Z===", "====", "Zm9v\n", " Zm9v", "Zm9-", "Zm9_", "Zh==",
                              "Zm9=Zm9v", "Zg==Zg==" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                unsigned char *d = NULL;
                size_t n;
                if (proto_base64_decode(bad[i], strlen(bad[i]), 16, &d, &n) != -EINVAL)
                        fail_msg("bad base64 #%zu accepted", i);
        }
        unsigned char *d = NULL;
        size_t n;
        assert_int_equal(proto_base64_decode("Zm9vYmFy", 8, 5, &d, &n), -EFBIG);
}

static void test_path_decoders(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        json_t *p = J("{\"path\": \"/config/server.properties\"}");
        struct proto_app_files_path *d = NULL;
        assert_int_equal(proto_app_files_path_decode(p, &d, &err), 0);
        assert_string_equal(d->path, "/config/server.properties");
        proto_app_files_path_free(d);
        json_decref(p);

        const char *bad[] = { "{}", "{\"path\": null}", "{\"path\": 3}", "{\"path\": \"\"}", "{\"path\": \"../x\"}",
                              "{\"path\": \"a\\u0000b\"}", "{\"path\": \"a//b\"}", "{\"path\": \"a\\nb\"}", "[]", "3" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                na_error_clear(&err);
                d = NULL;
                p = J(bad[i]);
                assert_true(proto_app_files_path_decode(p, &d, &err) < 0);
                assert_null(d);
                assert_string_equal(err.code, NA_E_VALIDATION);
                if (!*field_errors(&err, "path"))
                        fail_msg("%s: no error on path", bad[i]);
                json_decref(p);
        }
}

static void test_read_decoder(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_files_read *d = NULL;
        json_t *p = J("{\"path\": \"a.txt\"}");
        assert_int_equal(proto_app_files_read_decode(p, &d, &err), 0);
        assert_int_equal(d->offset, 0);
        assert_int_equal(d->limit, 524288);
        proto_app_files_read_free(d);
        json_decref(p);
        p = J("{\"path\": \"a.txt\", \"offset\": 524288, \"limit\": 1}");
        assert_int_equal(proto_app_files_read_decode(p, &d, &err), 0);
        assert_int_equal(d->offset, 524288);
        assert_int_equal(d->limit, 1);
        proto_app_files_read_free(d);
        json_decref(p);
        /* All problems together, each under its field. */
        p = J("{\"path\": \"/..\", \"offset\": -1, \"limit\": 524289}");
        d = NULL;
        assert_true(proto_app_files_read_decode(p, &d, &err) < 0);
        assert_null(d);
        assert_non_null(strstr(field_errors(&err, "path"), "'..'"));
        assert_non_null(strstr(field_errors(&err, "offset"), "between 0"));
        assert_non_null(strstr(field_errors(&err, "limit"), "between 1 and 524288"));
        json_decref(p);
        const char *bad_limits[] = { "0", "-5", "\"10\"", "1.5", "true", "524289" };
        for (size_t i = 0; i < sizeof(bad_limits) / sizeof(*bad_limits); i++) {
                char text[128];
                snprintf(text, sizeof(text), "{\"path\": \"a\", \"limit\": %s}", bad_limits[i]);
                na_error_clear(&err);
                p = J(text);
                assert_true(proto_app_files_read_decode(p, &d, &err) < 0);
                if (!*field_errors(&err, "limit"))
                        fail_msg("limit %s: no error on limit", bad_limits[i]);
                json_decref(p);
        }
}

static void test_write_decoder(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_files_write *d = NULL;
        json_t *p = J("{\"path\": \"a.txt\", \"contentBase64\": \"aGVsbG8=\"}");
        assert_int_equal(proto_app_files_write_decode(p, &d, &err), 0);
        assert_int_equal(d->len, 5);
        assert_memory_equal(d->data, "hello", 5);
        assert_false(d->has_offset);
        assert_true(d->truncate);
        proto_app_files_write_free(d);
        json_decref(p);
        p = J("{\"path\": \"a.txt\", \"contentBase64\": \"\", \"offset\": 7}");
        assert_int_equal(proto_app_files_write_decode(p, &d, &err), 0);
        assert_int_equal(d->len, 0);
        assert_true(d->has_offset);
        assert_int_equal(d->offset, 7);
        assert_false(d->truncate);
        proto_app_files_write_free(d);
        json_decref(p);
        p = J("{\"path\": \"a.txt\", \"contentBase64\": \"YQ==\", \"offset\": 1, \"truncate\": true}");
        assert_int_equal(proto_app_files_write_decode(p, &d, &err), 0);
        assert_true(d->has_offset && d->truncate);
        proto_app_files_write_free(d);
        json_decref(p);
        p = J("{\"path\": \"a.txt\", \"contentBase64\": \"YQ==\", \"truncate\": false}");
        assert_int_equal(proto_app_files_write_decode(p, &d, &err), 0);
        assert_true(d->has_offset && !d->truncate && d->offset == 0);
        proto_app_files_write_free(d);
        json_decref(p);

        p = J("{\"path\": \"a//b\", \"contentBase64\": \"not base64!\", \"offset\": \"1\", \"truncate\": 1}");
        d = NULL;
        assert_true(proto_app_files_write_decode(p, &d, &err) < 0);
        assert_null(d);
        assert_non_null(strstr(field_errors(&err, "path"), "empty"));
        assert_non_null(strstr(field_errors(&err, "contentBase64"), "base64"));
        assert_non_null(strstr(field_errors(&err, "offset"), "integer"));
        assert_non_null(strstr(field_errors(&err, "truncate"), "true or false"));
        json_decref(p);
        na_error_clear(&err);
        p = J("{\"path\": \"a\"}");
        assert_true(proto_app_files_write_decode(p, &d, &err) < 0);
        assert_non_null(strstr(field_errors(&err, "contentBase64"), "required"));
        json_decref(p);

        /* 4 MiB decoded is the bound: one byte more is refused on contentBase64. */
        size_t n = (4u << 20) + 1, tl = (n + 2) / 3 * 4;
        char *text = malloc(tl + 1);
        for (size_t i = 0; i < tl; i++)
                text[i] = 'A';
        text[tl] = '\0';
        text[tl - 1] = '='; /* 5592408 characters, one pad: 4194305 bytes */
        json_t *big = json_pack("{s:s, s:s}", "path", "big", "contentBase64", text);
        na_error_clear(&err);
        assert_true(proto_app_files_write_decode(big, &d, &err) < 0);
        assert_non_null(strstr(field_errors(&err, "contentBase64"), "4194304"));
        json_decref(big);
        tl = (4u << 20) / 3 * 4 + 4; /* 4194304 = 3 * 1398101 + 1: one "AA==" quantum at the end */
        text = realloc(text, tl + 1);
        memset(text, 'A', tl);
        text[tl] = '\0';
        text[tl - 1] = '=', text[tl - 2] = '=';
        big = json_pack("{s:s, s:s}", "path", "big", "contentBase64", text);
        assert_int_equal(proto_app_files_write_decode(big, &d, &err), 0);
        assert_int_equal(d->len, 4u << 20);
        proto_app_files_write_free(d);
        json_decref(big);
        free(text);
}

static void test_move_decoder(void **state)
{
        (void)state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_files_move *d = NULL;
        json_t *p = J("{\"from\": \"/a\", \"to\": \"b/c\"}");
        assert_int_equal(proto_app_files_move_decode(p, &d, &err), 0);
        assert_string_equal(d->from, "/a");
        assert_string_equal(d->to, "b/c");
        proto_app_files_move_free(d);
        json_decref(p);
        p = J("{\"from\": \"../../etc/passwd\", \"to\": \"x/./y\"}");
        d = NULL;
        assert_true(proto_app_files_move_decode(p, &d, &err) < 0);
        assert_null(d);
        assert_non_null(strstr(field_errors(&err, "from"), "'..'"));
        assert_non_null(strstr(field_errors(&err, "to"), "'.'"));
        json_decref(p);
}

static void test_encoders(void **state)
{
        (void)state;
        json_t *r = proto_app_files_read_encode("/a.txt", "h\xc3\xa9llo", 6, true, false);
        char *s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"binary\":false,\"bytes\":6,\"content\":\"h\xc3\xa9llo\",\"path\":\"/a.txt\",\"truncated\":true}");
        free(s);
        json_decref(r);
        r = proto_app_files_read_encode("/b.bin", NULL, 10, false, true);
        s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"binary\":true,\"bytes\":10,\"path\":\"/b.bin\",\"truncated\":false}");
        free(s);
        json_decref(r);
        r = proto_app_files_read_encode("/e", "", 0, false, false);
        s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"binary\":false,\"bytes\":0,\"content\":\"\",\"path\":\"/e\",\"truncated\":false}");
        free(s);
        json_decref(r);

        struct proto_app_file_entry e[] = {
                { "dir", PROTO_APP_FILE_DIRECTORY, 4096, 1763980803123, 0755 },
                { "bad\xff", PROTO_APP_FILE, 3, 0, 0644 },
                { "ln", PROTO_APP_FILE_SYMLINK, 5, 1000, 0777 },
        };
        r = proto_app_files_list_encode(e, 3);
        s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "[{\"bytes\":4096,\"mode\":\"0755\",\"modifiedAt\":\"2025-11-24T10:40:03.123Z\",\"name\":\"dir\","
                               "\"type\":\"directory\"},{\"bytes\":3,\"mode\":\"0644\",\"modifiedAt\":\"1970-01-01T00:00:00.000Z\","
                               "\"name\":\"bad\xef\xbf\xbd\",\"type\":\"file\"},{\"bytes\":5,\"mode\":\"0777\",\"modifiedAt\":"
                               "\"1970-01-01T00:00:01.000Z\",\"name\":\"ln\",\"type\":\"symlink\"}]");
        free(s);
        json_decref(r);
        r = proto_app_files_write_encode("/a", 5);
        s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"bytes\":5,\"path\":\"/a\"}");
        free(s);
        json_decref(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path_check),     cmocka_unit_test(test_base64),
                cmocka_unit_test(test_path_decoders),  cmocka_unit_test(test_read_decoder),
                cmocka_unit_test(test_write_decoder),  cmocka_unit_test(test_move_decoder),
                cmocka_unit_test(test_encoders),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
