/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The parsers of the registry pull without a registry: WWW-Authenticate challenges,
 * digests, URL origins and the loopback rule, manifest kinds, manifests and the
 * platform choice of an index; then random and mutated inputs, which must never crash
 * or read out of bounds (run it under -DNA_SANITIZE=ON).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "drivers/app/image/app-registry-internal.h"

static struct reg_client client(void)
{
        static const struct app_registry_options o = {.url = "https://registry.example"};
        struct reg_client c = {.opt = &o};
        snprintf(c.what, sizeof(c.what), "registry https://registry.example: image a/b:1");
        snprintf(c.image, sizeof(c.image), "a/b:1");
        snprintf(c.origin, sizeof(c.origin), "https://registry.example:443");
        return c;
}

static void test_challenges(void **state)
{
        (void)state;
        struct reg_challenge ch;
        const char *rest = reg_challenge_parse(
                "Bearer realm=\"https://auth.example/token\",service=\"registry.example\",scope=\"repository:a/b:pull\"", &ch);
        assert_null(rest);
        assert_string_equal(ch.scheme, "Bearer");
        assert_string_equal(ch.realm, "https://auth.example/token");
        assert_string_equal(ch.service, "registry.example");
        assert_string_equal(ch.scope, "repository:a/b:pull");

        /* Two challenges in one value, unquoted values, escapes, odd spacing, unknown keys. */
        rest = reg_challenge_parse("Basic realm=\"x, \\\"y\\\"\" , Bearer  Realm = https://t/token , error=\"insufficient_scope\"", &ch);
        assert_string_equal(ch.scheme, "Basic");
        assert_string_equal(ch.realm, "x, \"y\"");
        assert_non_null(rest);
        rest = reg_challenge_parse(rest, &ch);
        assert_null(rest);
        assert_string_equal(ch.scheme, "Bearer");
        assert_string_equal(ch.realm, "https://t/token");
        assert_string_equal(ch.service, "");

        assert_null(reg_challenge_parse("", &ch));
        assert_string_equal(ch.scheme, "");
        assert_null(reg_challenge_parse(" , ,", &ch));
        rest = reg_challenge_parse("Basic", &ch);
        assert_null(rest);
        assert_string_equal(ch.scheme, "Basic");
        /* An unterminated quote ends at the end. */
        assert_null(reg_challenge_parse("Bearer realm=\"https://x", &ch));
        assert_string_equal(ch.realm, "https://x");
}

static void test_digests(void **state)
{
        (void)state;
        char hex[REG_HEX_LEN + 1];
        const char *good = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_true(reg_digest_hex(good, hex));
        assert_string_equal(hex, good + 7);
        assert_false(reg_digest_hex("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", hex));
        assert_false(reg_digest_hex("sha256:0123", hex));
        assert_false(reg_digest_hex("sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", hex));
        assert_false(reg_digest_hex("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefff", hex));
        assert_false(reg_digest_hex(NULL, hex));
}

static void test_origins(void **state)
{
        (void)state;
        char o[256];
        bool loop = true, https = false;
        assert_int_equal(reg_url_origin("https://Reg.Example/prefix/v2/", o, sizeof(o), &loop, &https), 0);
        assert_string_equal(o, "https://reg.example:443");
        assert_false(loop);
        assert_true(https);
        assert_int_equal(reg_url_origin("http://127.0.0.2:5000", o, sizeof(o), &loop, &https), 0);
        assert_string_equal(o, "http://127.0.0.2:5000");
        assert_true(loop);
        assert_false(https);
        assert_int_equal(reg_url_origin("http://[::1]:8080/x", o, sizeof(o), &loop, NULL), 0);
        assert_true(loop);
        assert_int_equal(reg_url_origin("http://LocalHost/", o, sizeof(o), &loop, NULL), 0);
        assert_true(loop);
        assert_int_equal(reg_url_origin("http://10.0.0.1/", o, sizeof(o), &loop, NULL), 0);
        assert_false(loop);
        assert_int_equal(reg_url_origin("http://127.0.0.1.example.net/", o, sizeof(o), &loop, NULL), 0);
        assert_false(loop);
        assert_true(reg_url_origin("not a url", o, sizeof(o), NULL, NULL) < 0);

        /* The policy: https anywhere; http only to loopback, only when allowed, only from an http registry. */
        struct reg_client c = client();
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(reg_url_check(&c, "https://storage.example/blob", "redirect", &err), 0);
        assert_true(reg_url_check(&c, "http://127.0.0.1/blob", "redirect", &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        na_error_clear(&err);
        struct app_registry_options insecure = {.url = "http://127.0.0.1:5000", .allow_insecure_http = true};
        c.opt = &insecure;
        assert_true(reg_url_check(&c, "http://127.0.0.1/blob", "redirect", &err) < 0); /* c.origin is still https */
        na_error_clear(&err);
        snprintf(c.origin, sizeof(c.origin), "http://127.0.0.1:5000");
        assert_int_equal(reg_url_check(&c, "http://127.0.0.1/blob", "redirect", &err), 0);
        assert_true(reg_url_check(&c, "http://192.0.2.1/blob", "redirect", &err) < 0);
        na_error_clear(&err);
        assert_true(reg_url_check(&c, "ftp://127.0.0.1/blob", "redirect", &err) < 0);
        na_error_clear(&err);
}

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

static const char manifest[] = "{\"schemaVersion\":2,\"mediaType\":\"" REG_MT_OCI_MANIFEST "\","
                               "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D1 "\",\"size\":10},"
                               "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" D2 "\",\"size\":20}]}";
static const char list[] = "{\"schemaVersion\":2,\"mediaType\":\"" REG_MT_DOCKER_LIST "\",\"manifests\":["
                           "{\"mediaType\":\"" REG_MT_DOCKER_MANIFEST "\",\"digest\":\"" D1 "\",\"size\":5,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
                           "{\"mediaType\":\"" REG_MT_OCI_INDEX "\",\"digest\":\"" D3 "\",\"size\":5,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
                           "{\"mediaType\":\"" REG_MT_DOCKER_MANIFEST "\",\"digest\":\"" D2 "\",\"size\":7,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}";

static void test_manifests(void **state)
{
        (void)state;
        struct reg_client c = client();
        struct na_error err = NA_ERROR_INIT;
        char mt[256];
        bool is_index = true;

        assert_int_equal(reg_manifest_kind(&c, manifest, strlen(manifest), "application/json", mt, &is_index, &err), 0);
        assert_string_equal(mt, REG_MT_OCI_MANIFEST);
        assert_false(is_index);
        struct reg_manifest m;
        assert_int_equal(reg_manifest_parse(&c, manifest, strlen(manifest), mt, &m, &err), 0);
        assert_string_equal(m.config.hex, D1 + 7);
        assert_int_equal(m.config.size, 10);
        assert_int_equal(m.n_layers, 1);
        assert_string_equal(m.layers[0].hex, D2 + 7);
        assert_int_equal(m.layers[0].size, 20);
        reg_manifest_done(&m);

        /* No mediaType in the body: the Content-Type says it, else the shape. */
        const char *bare = "{\"schemaVersion\":2,\"manifests\":[]}";
        assert_int_equal(reg_manifest_kind(&c, bare, strlen(bare), REG_MT_DOCKER_LIST "; charset=utf-8", mt, &is_index, &err), 0);
        assert_string_equal(mt, REG_MT_DOCKER_LIST);
        assert_true(is_index);
        assert_int_equal(reg_manifest_kind(&c, bare, strlen(bare), "", mt, &is_index, &err), 0);
        assert_string_equal(mt, REG_MT_OCI_INDEX);

        /* Schema 1 and other types are refused with the reason. */
        const char *v1 = "{\"schemaVersion\":1,\"mediaType\":\"application/vnd.docker.distribution.manifest.v1+prettyjws\"}";
        assert_true(reg_manifest_kind(&c, v1, strlen(v1), "", mt, &is_index, &err) < 0);
        assert_string_equal(json_string_value(json_object_get(err.details, "reason")), "unsupported-media-type");
        assert_non_null(strstr(err.message, "image a/b:1"));
        na_error_clear(&err);

        /* Bad descriptors. */
        static const char *const bad[] = {
                "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":-1},\"layers\":[]}",
                "{\"schemaVersion\":2,\"config\":{\"digest\":\"sha512:11\",\"size\":1},\"layers\":[]}",
                "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":1},\"layers\":{}}",
                "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":1},\"layers\":[{\"digest\":\"" D2 "\"}]}",
                "{\"schemaVersion\":3,\"config\":{\"digest\":\"" D1 "\",\"size\":1},\"layers\":[]}",
                "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":1},\"config\":{},\"layers\":[]}",
                "[]",
                "{",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_true(reg_manifest_parse(&c, bad[i], strlen(bad[i]), REG_MT_OCI_MANIFEST, &m, &err) < 0);
                assert_string_equal(json_string_value(json_object_get(err.details, "reason")), "bad-manifest");
                na_error_clear(&err);
        }

        /* The index: linux/amd64, never a nested index. */
        struct reg_descriptor d;
        assert_int_equal(reg_index_choose(&c, list, strlen(list), &d, &err), 0);
        assert_string_equal(d.hex, D2 + 7);
        assert_int_equal(d.size, 7);
        assert_string_equal(d.media_type, REG_MT_DOCKER_MANIFEST);
        const char *arm = "{\"manifests\":[{\"digest\":\"" D1 "\",\"size\":5,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}}]}";
        assert_true(reg_index_choose(&c, arm, strlen(arm), &d, &err) < 0);
        assert_string_equal(json_string_value(json_object_get(err.details, "reason")), "no-platform");
        na_error_clear(&err);
}

/* xorshift: the same inputs on every run. */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
        rnd_state ^= rnd_state << 13;
        rnd_state ^= rnd_state >> 7;
        rnd_state ^= rnd_state << 17;
        return rnd_state;
}

static void test_garbage(void **state)
{
        (void)state;
        struct reg_client c = client();
        static const char *const seeds[] = {manifest, list,
                                            "Bearer realm=\"https://a/t\",service=\"s\",scope=\"repository:x:pull\"",
                                            "Basic realm=\"x\", Bearer realm=y"};
        static const char alphabet[] = "\"\\=, \t{}[]:aB0\x01\xff";
        char buf[2048];
        for (int round = 0; round < 20000; round++) {
                const char *seed = seeds[rnd() % ARRAY_SIZE(seeds)];
                size_t n = strlen(seed);
                if (n >= sizeof(buf))
                        n = sizeof(buf) - 1;
                memcpy(buf, seed, n);
                for (int k = (int)(rnd() % 8); k >= 0; k--) {
                        size_t at = n ? rnd() % n : 0;
                        switch (rnd() % 3) {
                        case 0: buf[at] = alphabet[rnd() % (sizeof(alphabet) - 1)]; break;
                        case 1: n = at; break; /* cut */
                        default: buf[at] = (char)(rnd() & 0xff); break;
                        }
                }
                buf[n] = 0;
                n = strlen(buf);
                struct reg_challenge ch;
                int steps = 0;
                for (const char *p = buf; p && *p; steps++) {
                        p = reg_challenge_parse(p, &ch);
                        assert_true(steps < 2048);
                        assert_true(strlen(ch.realm) < sizeof(ch.realm));
                }
                struct na_error err = NA_ERROR_INIT;
                char mt[256];
                bool is_index;
                struct reg_manifest m;
                struct reg_descriptor d;
                if (reg_manifest_kind(&c, buf, n, "", mt, &is_index, &err) == 0 && !is_index &&
                    reg_manifest_parse(&c, buf, n, mt, &m, &err) == 0)
                        reg_manifest_done(&m);
                na_error_clear(&err);
                (void)reg_index_choose(&c, buf, n, &d, &err);
                na_error_clear(&err);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_challenges), cmocka_unit_test(test_digests), cmocka_unit_test(test_origins),
                cmocka_unit_test(test_manifests), cmocka_unit_test(test_garbage),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
