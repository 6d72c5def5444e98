/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Unit tests of proto/transfer-spec.c and proto/app-files-transfer.c: the `transfer` object (AGENT-API 4.4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-files-transfer.h"
#include "proto/field.h"
#include "proto/transfer-spec.h"

#define NOW 1800000000000LL /* 2027-01-15 */

static int decode(const char *text, const char *method, struct proto_transfer **t, struct na_error *err)
{
        json_error_t jerr;
        json_t *v = json_loads(text, JSON_ALLOW_NUL, &jerr);
        if (!v)
                fail_msg("bad JSON in the test: %s: %s", text, jerr.text);
        int r = proto_transfer_decode(v, "transfer", method, NOW, t, err);
        json_decref(v);
        return r;
}

static void refused(const char *text, const char *method, const char *field, const char *msg)
{
        struct proto_transfer *t = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = decode(text, method, &t, &err);
        if (r != -EINVAL)
                fail_msg("accepted: %s", text);
        assert_null(t);
        assert_string_equal(err.code, NA_E_VALIDATION);
        assert_field(&err, field, msg);
        na_error_clear(&err);
}

static void test_minimal_and_full(void **state)
{
        (void)state;
        struct proto_transfer *t = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(decode("{\"url\":\"https://s3.example.com/b/k?sig=abc\",\"method\":\"GET\"}", "GET", &t, &err), 0);
        assert_string_equal(t->url, "https://s3.example.com/b/k?sig=abc");
        assert_false(t->put);
        assert_false(t->has_sha256);
        assert_int_equal(t->expires_at_ms, 0);
        assert_null(t->parts);
        assert_int_equal(t->n_headers, 0);
        proto_transfer_free(t);

        const char *full = "{\"url\":\"https://[::1]:8443/o?X-Amz-Signature=x\",\"method\":\"PUT\","
                           "\"headers\":{\"x-amz-acl\":\"private\",\"Content-Type\":\"application/zstd\"},"
                           "\"sha256\":\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\","
                           "\"expiresAt\":\"2027-01-15T10:00:00Z\","
                           "\"parts\":[{\"url\":\"https://s3/p1?sig=1\"},{\"url\":\"https://s3/p2?sig=2\"}]}";
        assert_int_equal(decode(full, "PUT", &t, &err), 0);
        assert_true(t->put);
        assert_true(t->has_sha256);
        assert_string_equal(t->sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
        assert_true(t->expires_at_ms > NOW);
        assert_int_equal(t->n_headers, 2);
        assert_int_equal(t->n_parts, 2);
        assert_string_equal(t->parts[1], "https://s3/p2?sig=2");
        proto_transfer_free(t);
        assert_false(na_error_is_set(&err));
}

static void test_urls(void **state)
{
        (void)state;
        const char *m = "GET";
        refused("{\"method\":\"GET\"}", m, "transfer.url", "is required");
        refused("{\"url\":1,\"method\":\"GET\"}", m, "transfer.url", "must be a string");
        refused("{\"url\":\"ftp://x/y\",\"method\":\"GET\"}", m, "transfer.url", "must be an https:// URL");
        refused("{\"url\":\"http://example.com/y\",\"method\":\"GET\"}", m, "transfer.url",
                "must be an https:// URL (plain http:// only to a loopback host)");
        refused("{\"url\":\"http://127.0.0.1.example.com/y\",\"method\":\"GET\"}", m, "transfer.url",
                "must be an https:// URL (plain http:// only to a loopback host)");
        refused("{\"url\":\"https://user:pw@example.com/y\",\"method\":\"GET\"}", m, "transfer.url",
                "must not contain user information");
        refused("{\"url\":\"https://exa mple.com/\",\"method\":\"GET\"}", m, "transfer.url",
                "must not contain spaces, control or non-ASCII characters (percent-encode them)");
        refused("{\"url\":\"https://example.com/\\u0000\",\"method\":\"GET\"}", m, "transfer.url",
                "must not contain NUL characters");
        refused("{\"url\":\"https:///path\",\"method\":\"GET\"}", m, "transfer.url", "must name a host");
        refused("{\"url\":\"https://h:0/\",\"method\":\"GET\"}", m, "transfer.url", "must have a port of 1..65535");
        refused("{\"url\":\"https://h:65536/\",\"method\":\"GET\"}", m, "transfer.url", "must have a port of 1..65535");
        refused("{\"url\":\"https://[zz]/\",\"method\":\"GET\"}", m, "transfer.url", "must name a valid host");
        refused("{\"url\":\"https://h%2f/\",\"method\":\"GET\"}", m, "transfer.url", "must name a valid host");

        bool plain = false;
        assert_null(proto_transfer_url_problem("http://127.0.0.1:9000/x?sig=1", 29, &plain));
        assert_true(plain);
        assert_null(proto_transfer_url_problem("http://localhost/x", 18, &plain));
        assert_null(proto_transfer_url_problem("http://[::1]:80/x", 17, &plain));
        assert_null(proto_transfer_url_problem("HTTPS://Example.COM", 19, &plain));
        assert_false(plain);
        char *big = malloc(PROTO_TRANSFER_URL_MAX + 2);
        memcpy(big, "https://h/", 10);
        memset(big + 10, 'a', PROTO_TRANSFER_URL_MAX - 10);
        assert_null(proto_transfer_url_problem(big, PROTO_TRANSFER_URL_MAX, NULL));
        big[PROTO_TRANSFER_URL_MAX] = 'a';
        assert_string_equal(proto_transfer_url_problem(big, PROTO_TRANSFER_URL_MAX + 1, NULL),
                            "must be at most 8192 bytes");
        free(big);
}

static void test_host(void **state)
{
        (void)state;
        char buf[64];
        assert_int_equal(proto_transfer_host("https://S3.Example.com:8443/b/k?X-Amz-Signature=secret", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "s3.example.com:8443");
        assert_int_equal(proto_transfer_host("https://h?sig=secret", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "h");
        assert_int_equal(proto_transfer_host("https://[::1]:1/x", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "[::1]:1");
        assert_int_equal(proto_transfer_host("nope", buf, sizeof(buf)), -EINVAL);
        assert_null(strstr(buf, "nope"));
}

static void test_members(void **state)
{
        (void)state;
        refused("{\"url\":\"https://h/\",\"method\":\"PUT\"}", "GET", "transfer.method", "must be GET for this kind");
        refused("{\"url\":\"https://h/\"}", "GET", "transfer.method", "is required");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"sha256\":\"abc\"}", "GET", "transfer.sha256",
                "must be exactly 64 characters");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"sha256\":"
                "\"g000000000000000000000000000000000000000000000000000000000000000\"}",
                "GET", "transfer.sha256", "must be 64 hexadecimal digits");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"expiresAt\":\"2020-01-01T00:00:00Z\"}", "GET",
                "transfer.expiresAt", "has passed: the URL expired");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"expiresAt\":\"tomorrow\"}", "GET", "transfer.expiresAt",
                "must be an RFC 3339 date-time");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"headers\":{\"Host\":\"evil\"}}", "GET", "transfer.headers",
                "names must not be Host, Content-Length, Transfer-Encoding, Connection, Range or Expect");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"headers\":{\"range\":\"bytes=0-\"}}", "GET",
                "transfer.headers",
                "names must not be Host, Content-Length, Transfer-Encoding, Connection, Range or Expect");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"headers\":{\"a b\":\"x\"}}", "GET", "transfer.headers",
                "names must be HTTP tokens");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"headers\":{\"X-A\":\"x\\r\\nHost: evil\"}}", "GET",
                "transfer.headers.X-A", "must be at most 4096 bytes without CR, LF or NUL");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"headers\":{\"X-A\":3}}", "GET", "transfer.headers.X-A",
                "must be a string");
        refused("{\"url\":\"https://h/\",\"method\":\"GET\",\"parts\":[{\"url\":\"https://h/1\"}]}", "GET",
                "transfer.parts", "is only for PUT (a multipart upload)");
        refused("{\"url\":\"https://h/\",\"method\":\"PUT\",\"parts\":[]}", "PUT", "transfer.parts",
                "must hold 1..10000 items (got 0)");
        refused("{\"url\":\"https://h/\",\"method\":\"PUT\",\"parts\":[{\"url\":\"https://h/1\"},{\"url\":\"http://x/\"}]}",
                "PUT", "transfer.parts.1.url", "must be an https:// URL (plain http:// only to a loopback host)");
        refused("{\"url\":\"https://h/\",\"method\":\"PUT\",\"parts\":[\"https://h/1\"]}", "PUT", "transfer.parts.0",
                "must be an object");

        /* 33 headers. */
        char text[4096];
        size_t n = (size_t)snprintf(text, sizeof(text), "{\"url\":\"https://h/\",\"method\":\"GET\",\"headers\":{");
        for (int i = 0; i < 33; i++)
                n += (size_t)snprintf(text + n, sizeof(text) - n, "%s\"h%d\":\"v\"", i ? "," : "", i);
        snprintf(text + n, sizeof(text) - n, "}}");
        refused(text, "GET", "transfer.headers", "must hold at most 32 headers");

        struct proto_transfer *t = NULL;
        struct na_error err = NA_ERROR_INIT;
        json_t *nul = json_null();
        assert_int_equal(proto_transfer_decode(NULL, "transfer", "GET", NOW, &t, &err), -EINVAL);
        assert_field(&err, "transfer", "is required");
        na_error_clear(&err);
        assert_int_equal(proto_transfer_decode(nul, "transfer", "GET", NOW, &t, &err), -EINVAL);
        na_error_clear(&err);
        json_t *arr = json_array();
        assert_int_equal(proto_transfer_decode(arr, "transfer", "GET", NOW, &t, &err), -EINVAL);
        assert_field(&err, "transfer", "must be an object");
        na_error_clear(&err);
        json_decref(arr);
        json_decref(nul);
}

static void test_files_params_and_result(void **state)
{
        (void)state;
        struct proto_app_files_transfer *p = NULL;
        struct na_error err = NA_ERROR_INIT;
        json_t *params = json_pack("{s:s, s:{s:s, s:s}}", "path", "/world/level.dat", "transfer", "url",
                                   "https://h/k?sig=1", "method", "PUT");
        assert_int_equal(proto_app_files_transfer_decode(params, "PUT", NOW, &p, &err), 0);
        assert_string_equal(p->path, "/world/level.dat");
        assert_true(p->transfer->put);
        proto_app_files_transfer_free(p);
        p = NULL;
        /* Both fields' problems at once. */
        assert_int_equal(proto_app_files_transfer_decode(params, "GET", NOW, &p, &err), -EINVAL);
        na_error_clear(&err);
        json_object_set_new(params, "path", json_string("../x"));
        assert_int_equal(proto_app_files_transfer_decode(params, "GET", NOW, &p, &err), -EINVAL);
        assert_null(p);
        assert_field(&err, "path", "must not contain '.' or '..' components");
        assert_field(&err, "transfer.method", "must be GET for this kind");
        na_error_clear(&err);
        json_object_del(params, "transfer");
        json_object_set_new(params, "path", json_string("/a"));
        assert_int_equal(proto_app_files_transfer_decode(params, "GET", NOW, &p, &err), -EINVAL);
        assert_field(&err, "transfer", "is required");
        na_error_clear(&err);
        json_decref(params);

        const char etags[2][128] = { "\"e1\"", "\"e2\"" };
        json_t *o = proto_app_files_transfer_encode("/a", 10, "00ff", etags, 2);
        char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"bytes\":10,\"parts\":[{\"etag\":\"\\\"e1\\\"\",\"partNumber\":1},"
                               "{\"etag\":\"\\\"e2\\\"\",\"partNumber\":2}],\"path\":\"/a\",\"sha256\":\"00ff\"}");
        free(s);
        json_decref(o);
        o = proto_app_files_transfer_encode("/a", 0, "00", NULL, 0);
        assert_null(json_object_get(o, "parts"));
        json_decref(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_minimal_and_full),
                cmocka_unit_test(test_urls),
                cmocka_unit_test(test_host),
                cmocka_unit_test(test_members),
                cmocka_unit_test(test_files_params_and_result),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
