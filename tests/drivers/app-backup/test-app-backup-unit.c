/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * App backups, the logic without I/O: the ignore-pattern matcher
 * (drivers/app/backup/app-backup-ignore.c), the retention rule shared with server backups
 * (proto/backup.c) and the app.backup.* decoders (proto/app-backup.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "proto/app-backup.h"

static void test_glob(void **state)
{
        (void)state;
        struct { const char *p, *s; bool m; } t[] = {
                { "*.log", "a.log", true },      { "*.log", "a.log.1", false },  { "*.log", "d/a.log", false },
                { "?.txt", "a.txt", true },      { "?.txt", "ab.txt", false },   { "?", "/", false },
                { "[abc].c", "b.c", true },      { "[abc].c", "d.c", false },    { "[!abc].c", "d.c", true },
                { "[^a-c].c", "b.c", false },    { "[a-c].c", "c.c", true },     { "[a-].c", "-.c", true },
                { "[", "[", true },              { "[x", "[x", true },           { "a[/]b", "a/b", false },
                { "**", "a/b/c", true },         { "**/x", "x", true },          { "**/x", "a/b/x", true },
                { "**/x", "a/bx", false },       { "a/**/b", "a/b", true },      { "a/**/b", "a/x/y/b", true },
                { "a/**", "a/x/y", true },       { "a/**", "a", false },         { "a*/b", "ab/b", true },
                { "a*/b", "a/x/b", false },      { "a**b", "a/x/b", true },      { "\\*", "*", true },
                { "\\*", "a", false },           { "*", "", true },              { "", "", true },
                { "a\\", "a", false },            { "*a*b*c*d*e*f*g*", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                if (app_backup_glob(t[i].p, t[i].s) != t[i].m)
                        fail_msg("glob '%s' against '%s': expected %d", t[i].p, t[i].s, t[i].m);
}

static void test_ignore_rules(void **state)
{
        (void)state;
        static char p0[] = "# a comment", p1[] = "", p2[] = "*.log", p3[] = "!keep.log", p4[] = "/cache/",
                    p5[] = "build/", p6[] = "/top.txt", p7[] = "deep/**/x.tmp", p8[] = "docs/*.md",
                    p9[] = "trailing   ";
        char *pats[] = { p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, NULL };
        struct app_backup_ignore *ig = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_backup_ignore_new(pats, &ig, &err), 0);
        struct { const char *path; bool dir, ignored; } t[] = {
                { "a.log", false, true },           { "sub/dir/b.log", false, true },  { "keep.log", false, false },
                { "sub/keep.log", false, false },   { "cache", true, true },           { "cache", false, false },
                { "sub/cache", true, false },       { "build", true, true },           { "x/build", true, true },
                { "x/build", false, false },        { "top.txt", false, true },        { "sub/top.txt", false, false },
                { "deep/x.tmp", false, true },      { "deep/a/b/x.tmp", false, true }, { "other/deep/x.tmp", false, false },
                { "docs/a.md", false, true },       { "docs/sub/a.md", false, false }, { "# a comment", false, false },
                { "trailing", false, true },        { "main.c", false, false },
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                if (app_backup_ignored(ig, t[i].path, t[i].dir) != t[i].ignored)
                        fail_msg("'%s' (dir %d): expected ignored=%d", t[i].path, t[i].dir, t[i].ignored);
        assert_false(app_backup_ignored(NULL, "a.log", false));
        app_backup_ignore_free(ig);
}

static struct proto_app_backup B(const char *id, int64_t created, int64_t size)
{
        struct proto_app_backup b = { .created_at_ms = created, .size_bytes = size };
        snprintf(b.backup_id, sizeof(b.backup_id), "%s", id);
        return b;
}

static void test_retention(void **state)
{
        (void)state;
        const int64_t day = 86400LL * 1000, now = 1000 * day, gib = 1LL << 30;
        struct proto_app_backup l[] = { B("a", now - 40 * day, gib), B("b", now - 20 * day, gib),
                                        B("c", now - 10 * day, 2 * gib), B("d", now, 3 * gib) };
        bool gone[4];
        struct proto_vps_backup_limits none = { -1, -1, -1 };
        proto_backup_retention(l, 4, &none, now, gone);
        for (int i = 0; i < 4; i++)
                assert_false(gone[i]);
        struct proto_vps_backup_limits count = { -1, 2, -1 };
        proto_backup_retention(l, 4, &count, now, gone);
        assert_true(gone[0] && gone[1] && !gone[2] && !gone[3]);
        struct proto_vps_backup_limits age = { -1, -1, 30 };
        proto_backup_retention(l, 4, &age, now, gone);
        assert_true(gone[0] && !gone[1] && !gone[2] && !gone[3]);
        struct proto_vps_backup_limits size = { 5, -1, -1 }; /* 7 GiB in all: a and b go */
        proto_backup_retention(l, 4, &size, now, gone);
        assert_true(gone[0] && gone[1] && !gone[2] && !gone[3]);
        struct proto_vps_backup_limits tiny = { 1, 1, 1 }; /* the newest always stays */
        proto_backup_retention(l, 4, &tiny, now, gone);
        assert_true(gone[0] && gone[1] && gone[2] && !gone[3]);
        proto_backup_retention(l, 1, &tiny, now, gone);
        assert_false(gone[0]);
}

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

static bool has_field(const struct na_error *err, const char *a, const char *b)
{
        json_t *n = err->details ? json_object_get(err->details, a) : NULL;
        if (n && b)
                n = json_object_get(n, b);
        return n && json_array_size(json_object_get(n, "_errors")) > 0;
}

static void test_decode(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        struct proto_app_backup_create *p = NULL;
        _cleanup_json_ json_t *good = J("{\"backupId\":\"b-1_x\",\"limits\":{\"maxBackups\":3,\"retentionDays\":null},"
                                        "\"ignore\":[\"*.log\",\"!keep.log\"]}");
        assert_int_equal(proto_app_backup_create_decode(good, &p, &err), 0);
        assert_string_equal(p->backup_id, "b-1_x");
        assert_int_equal(p->limits.max_backups, 3);
        assert_int_equal(p->limits.retention_days, -1);
        assert_int_equal(p->limits.max_storage_gb, -1);
        assert_string_equal(p->ignore[1], "!keep.log");
        assert_null(p->ignore[2]);
        proto_app_backup_create_free(p);

        _cleanup_json_ json_t *min = J("{\"backupId\":\"b\"}");
        assert_int_equal(proto_app_backup_create_decode(min, &p, &err), 0);
        assert_null(p->ignore);
        proto_app_backup_create_free(p);

        _cleanup_json_ json_t *bad = J("{\"backupId\":\"../x\",\"limits\":{\"maxBackups\":0},"
                                       "\"ignore\":[\"ok\",\"a\\u0000b\",7]}");
        assert_int_equal(proto_app_backup_create_decode(bad, &p, &err), -EINVAL);
        assert_string_equal(err.code, NA_E_VALIDATION);
        assert_true(has_field(&err, "backupId", NULL));
        assert_true(has_field(&err, "limits", "maxBackups"));
        assert_true(has_field(&err, "ignore", "1"));
        assert_true(has_field(&err, "ignore", "2"));
        assert_false(has_field(&err, "ignore", "0"));
        na_error_clear(&err);

        /* 1001 patterns; one of 4097 bytes. */
        json_t *many = json_array();
        for (int i = 0; i < 1001; i++)
                json_array_append_new(many, json_string("x"));
        _cleanup_json_ json_t *toomany = json_pack("{s:s, s:o}", "backupId", "b", "ignore", many);
        assert_int_equal(proto_app_backup_create_decode(toomany, &p, &err), -EINVAL);
        assert_true(has_field(&err, "ignore", NULL));
        na_error_clear(&err);
        char *long_pat = malloc(4098);
        memset(long_pat, 'a', 4097);
        long_pat[4097] = '\0';
        _cleanup_json_ json_t *toolong = json_pack("{s:s, s:[s]}", "backupId", "b", "ignore", long_pat);
        free(long_pat);
        assert_int_equal(proto_app_backup_create_decode(toolong, &p, &err), -EINVAL);
        assert_true(has_field(&err, "ignore", "0"));
        na_error_clear(&err);

        struct proto_app_backup_ref *ref = NULL;
        _cleanup_json_ json_t *r1 = J("{\"backupId\":\"abc\"}");
        assert_int_equal(proto_app_backup_ref_decode(r1, &ref, &err), 0);
        assert_string_equal(ref->backup_id, "abc");
        free(ref);
        _cleanup_json_ json_t *r2 = J("{}");
        assert_int_equal(proto_app_backup_ref_decode(r2, &ref, &err), -EINVAL);
        assert_true(has_field(&err, "backupId", NULL));
        na_error_clear(&err);

        struct proto_app_backup b = B("abc", 1700000000000, 42);
        memset(b.sha256, 'f', 64);
        _cleanup_json_ json_t *enc = proto_app_backup_encode(&b);
        assert_string_equal(json_string_value(json_object_get(enc, "backupId")), "abc");
        assert_int_equal(json_integer_value(json_object_get(enc, "sizeBytes")), 42);
        assert_non_null(json_string_value(json_object_get(enc, "createdAt")));
        assert_int_equal(strlen(json_string_value(json_object_get(enc, "sha256"))), 64);
}

/* app.backup.export/import: {backupId, transfer}, every problem under its field. */
static void test_decode_transfer(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        struct proto_backup_transfer *p = NULL;
        _cleanup_json_ json_t *good = J("{\"backupId\":\"b1\",\"transfer\":{\"url\":\"https://s3.example.com/k?sig=1\","
                                        "\"method\":\"GET\",\"sha256\":\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"}}");
        assert_int_equal(proto_backup_transfer_decode(good, "GET", 0, &p, &err), 0);
        assert_string_equal(p->backup_id, "b1");
        assert_true(p->transfer->has_sha256);
        assert_string_equal(p->transfer->sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
        proto_backup_transfer_free(p);

        /* The wrong method for the kind, a bad id, a plain http URL: each named. */
        _cleanup_json_ json_t *bad = J("{\"backupId\":\"../x\",\"transfer\":{\"url\":\"http://10.0.0.1/k\","
                                       "\"method\":\"GET\"}}");
        assert_int_equal(proto_backup_transfer_decode(bad, "PUT", 0, &p, &err), -EINVAL);
        assert_true(has_field(&err, "backupId", NULL));
        assert_true(has_field(&err, "transfer", "method"));
        assert_true(has_field(&err, "transfer", "url"));
        na_error_clear(&err);
        _cleanup_json_ json_t *none = J("{\"backupId\":\"b1\"}");
        assert_int_equal(proto_backup_transfer_decode(none, "GET", 0, &p, &err), -EINVAL);
        assert_true(has_field(&err, "transfer", NULL));
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_glob),
                cmocka_unit_test(test_ignore_rules),
                cmocka_unit_test(test_retention),
                cmocka_unit_test(test_decode),
                cmocka_unit_test(test_decode_transfer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
