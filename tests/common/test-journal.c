/* SPDX-License-Identifier: GPL-2.0-or-later */
/* common/journal.h: replay order, torn tails cut off, a corrupt middle refused, rewrite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/journal.h"
#include "unit.h"

#define HEADER 8
#define REC_HDR 12

static int setup(void **state)
{
        *state = unit_dir_fixture_new("journal", "test.journal");
        return 0;
}

static int teardown(void **state)
{
        unit_dir_fixture_free(*state);
        return 0;
}

/* What replay saw. */
struct seen {
        size_t n;
        char *rec[64];
        size_t len[64];
        int fail_at; /* fail the replay of this record (1-based), 0 = never */
};

static int collect(void *userdata, const void *data, size_t len, struct na_error *err)
{
        struct seen *s = userdata;
        if (s->fail_at && (int)s->n + 1 == s->fail_at)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "record %zu is not to my taste", s->n + 1);
        assert_true(s->n < ARRAY_SIZE(s->rec));
        s->rec[s->n] = malloc(len + 1);
        memcpy(s->rec[s->n], data, len);
        s->rec[s->n][len] = '\0';
        s->len[s->n] = len;
        s->n++;
        return 0;
}

static void seen_clear(struct seen *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->rec[i]);
        memset(s, 0, sizeof(*s));
}

static struct na_journal *open_ok(const char *path, struct seen *s, struct na_journal_stats *st)
{
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        int r = na_journal_open(path, collect, s, &j, st, &err);
        if (r < 0)
                fail_msg("open %s: %d %s", path, r, err.message);
        return j;
}

static void append_ok(struct na_journal *j, const char *text)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (na_journal_append(j, text, strlen(text), &err) < 0)
                fail_msg("append: %s", err.message);
}

/* A journal holding the given records, closed; returns the offset of each record. */
static void make_journal(const char *path, const char *const *recs, size_t n, uint64_t *offsets)
{
        struct seen s = { 0 };
        struct na_journal *j = open_ok(path, &s, NULL);
        for (size_t i = 0; i < n; i++) {
                if (offsets)
                        offsets[i] = na_journal_size(j);
                append_ok(j, recs[i]);
        }
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_sync(j, &err), 0);
        na_journal_close(j);
        seen_clear(&s);
}

static void append_bytes(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t)len);
        close(fd);
}

static void poke(const char *path, off_t off, unsigned char byte)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, &byte, 1, off), 1);
        close(fd);
}

static void test_new_journal(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_stats st = { 99, 99 };
        struct na_journal *j = open_ok(f->path, &s, &st);
        assert_int_equal(st.records, 0);
        assert_int_equal(st.torn_bytes, 0);
        assert_int_equal(na_journal_size(j), HEADER);
        assert_string_equal(na_journal_path(j), f->path);
        na_journal_close(j);
        assert_int_equal(unit_file_size(f->path), HEADER);
        _cleanup_free_ char *text = unit_slurp(f->path, NULL);
        assert_string_equal(text, "NAJRNL1\n");
        struct stat sb;
        assert_int_equal(stat(f->path, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0600);
}

static void test_replay_in_order(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal *j = open_ok(f->path, &s, NULL);
        static const char *const recs[] = { "first", "", "third record, a bit longer", "4" };
        uint64_t expect = HEADER;
        for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
                append_ok(j, recs[i]);
                expect += REC_HDR + strlen(recs[i]);
                assert_int_equal(na_journal_size(j), expect);
        }
        /* Binary payloads with NULs are fine. */
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_append(j, "a\0b", 3, &err), 0);
        expect += REC_HDR + 3;
        assert_int_equal(na_journal_sync(j, &err), 0);
        na_journal_close(j);
        assert_int_equal(unit_file_size(f->path), (off_t)expect);

        struct na_journal_stats st;
        j = open_ok(f->path, &s, &st);
        assert_int_equal(st.records, 5);
        assert_int_equal(st.torn_bytes, 0);
        assert_int_equal(s.n, 5);
        for (size_t i = 0; i < ARRAY_SIZE(recs); i++)
                assert_string_equal(s.rec[i], recs[i]);
        assert_int_equal(s.len[4], 3);
        assert_memory_equal(s.rec[4], "a\0b", 3);
        assert_int_equal(na_journal_size(j), expect);

        /* Appends after a replay go after the old records. */
        append_ok(j, "sixth");
        na_journal_close(j);
        seen_clear(&s);
        j = open_ok(f->path, &s, &st);
        assert_int_equal(s.n, 6);
        assert_string_equal(s.rec[5], "sixth");
        na_journal_close(j);
        seen_clear(&s);
}

/* Build two good records, add tail, reopen: both replayed, the tail cut off. */
static void check_torn_tail(const struct unit_dir_fixture *f, const void *tail, size_t tail_len)
{
        static const char *const recs[] = { "one", "two" };
        make_journal(f->path, recs, 2, NULL);
        off_t good = unit_file_size(f->path);
        append_bytes(f->path, tail, tail_len);

        struct seen s = { 0 };
        struct na_journal_stats st;
        struct na_journal *j = open_ok(f->path, &s, &st);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.rec[0], "one");
        assert_string_equal(s.rec[1], "two");
        assert_int_equal(st.records, 2);
        assert_int_equal(st.torn_bytes, tail_len);
        assert_int_equal(unit_file_size(f->path), good); /* cut on disk, not only skipped */
        assert_int_equal(na_journal_size(j), (uint64_t)good);

        /* And the journal goes on cleanly after the cut. */
        append_ok(j, "three");
        na_journal_close(j);
        seen_clear(&s);
        j = open_ok(f->path, &s, &st);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.rec[2], "three");
        assert_int_equal(st.torn_bytes, 0);
        na_journal_close(j);
        seen_clear(&s);
        unlink(f->path);
}

/* The bytes a record would have: header and payload. */
static size_t record_bytes(const char *payload, unsigned char *out)
{
        /* Let the journal itself encode it, then copy the record out of the file. */
        char *dir = unit_tmpdir("record");
        char *path;
        if (asprintf(&path, "%s/j", dir) < 0)
                abort();
        const char *recs[] = { payload };
        make_journal(path, recs, 1, NULL);
        size_t len = 0;
        char *all = unit_slurp(path, &len);
        memcpy(out, all + HEADER, len - HEADER);
        free(all);
        free(path);
        unit_rmrf_free(dir);
        return len - HEADER;
}

static void test_torn_tails(void **state)
{
        struct unit_dir_fixture *f = *state;
        unsigned char rec[256];
        size_t n = record_bytes("a record that was being written", rec);

        check_torn_tail(f, rec, 5);           /* header cut short */
        check_torn_tail(f, rec, REC_HDR);     /* header only */
        check_torn_tail(f, rec, n - 1);       /* payload cut short */

        unsigned char bad[256];
        memcpy(bad, rec, n);
        bad[n - 1] ^= 0x40;                   /* complete, but its checksum fails */
        check_torn_tail(f, bad, n);

        unsigned char zeros[4096] = { 0 };
        check_torn_tail(f, zeros, sizeof(zeros)); /* size grew, data never landed */
        check_torn_tail(f, zeros, 3);

        /* A last record failing its checksum followed by zeros only. */
        unsigned char both[256 + 512] = { 0 };
        memcpy(both, bad, n);
        check_torn_tail(f, both, n + 512);
}

static void test_short_file_restarted(void **state)
{
        struct unit_dir_fixture *f = *state;
        _cleanup_free_ char *p = unit_write_str(NULL, f->path, "NAJ", 0600); /* torn while being created */
        struct seen s = { 0 };
        struct na_journal_stats st;
        struct na_journal *j = open_ok(f->path, &s, &st);
        assert_int_equal(s.n, 0);
        assert_int_equal(na_journal_size(j), HEADER);
        append_ok(j, "x");
        na_journal_close(j);
        j = open_ok(f->path, &s, &st);
        assert_int_equal(s.n, 1);
        na_journal_close(j);
        seen_clear(&s);
}

static void expect_refused(const struct unit_dir_fixture *f, uint64_t offset, const char *why)
{
        off_t before = unit_file_size(f->path);
        _cleanup_free_ char *content_before = unit_slurp(f->path, NULL);
        struct seen s = { 0 };
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_open(f->path, collect, &s, &j, NULL, &err), -EBADMSG);
        assert_null(j);
        char needle[64];
        snprintf(needle, sizeof(needle), "offset %llu", (unsigned long long)offset);
        if (!strstr(err.message, f->path) || !strstr(err.message, needle) || !strstr(err.message, why))
                fail_msg("error should name %s, %s and %s: %s", f->path, needle, why, err.message);
        /* Nothing was cut: the operator decides. */
        assert_int_equal(unit_file_size(f->path), before);
        seen_clear(&s);
}

static void test_corrupt_middle_refused(void **state)
{
        struct unit_dir_fixture *f = *state;
        static const char *const recs[] = { "one", "two", "three" };
        uint64_t off[3];

        /* A flipped payload byte in the middle record. */
        make_journal(f->path, recs, 3, off);
        poke(f->path, (off_t)off[1] + REC_HDR + 1, 'X');
        expect_refused(f, off[1], "checksum mismatch");
        unlink(f->path);

        /* A damaged record magic. */
        make_journal(f->path, recs, 3, off);
        poke(f->path, (off_t)off[1], 0x00);
        expect_refused(f, off[1], "bad record magic");
        unlink(f->path);

        /* A length no record can have. */
        make_journal(f->path, recs, 3, off);
        poke(f->path, (off_t)off[1] + 7, 0x7f);
        expect_refused(f, off[1], "impossible record length");
        unlink(f->path);

        /* The first record damaged, two good ones after it. */
        make_journal(f->path, recs, 3, off);
        poke(f->path, (off_t)off[0] + 9, 0x55);
        expect_refused(f, off[0], "checksum mismatch");
}

static void test_bad_header_refused(void **state)
{
        struct unit_dir_fixture *f = *state;
        _cleanup_free_ char *p = unit_write_str(NULL, f->path, "NOTAJRNL and some more bytes", 0600);
        struct seen s = { 0 };
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_open(f->path, collect, &s, &j, NULL, &err), -EBADMSG);
        assert_non_null(strstr(err.message, f->path));
        assert_non_null(strstr(err.message, "bad header"));
}

static void test_replay_error_aborts(void **state)
{
        struct unit_dir_fixture *f = *state;
        static const char *const recs[] = { "one", "two", "three" };
        uint64_t off[3];
        make_journal(f->path, recs, 3, off);
        struct seen s = { .fail_at = 2 };
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_open(f->path, collect, &s, &j, NULL, &err), -EINVAL);
        assert_null(j);
        char want[512];
        snprintf(want, sizeof(want), "journal %s: record at offset %llu: record 2 is not to my taste", f->path,
                 (unsigned long long)off[1]);
        assert_string_equal(err.message, want);
        assert_int_equal(s.n, 1);
        seen_clear(&s);
}

static void test_record_too_large(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal *j = open_ok(f->path, &s, NULL);
        append_ok(j, "before");
        uint64_t size = na_journal_size(j);
        size_t big = NA_JOURNAL_MAX_RECORD + 1;
        char *data = calloc(1, big);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_append(j, data, big, &err), -EMSGSIZE);
        free(data);
        assert_non_null(strstr(err.message, f->path));
        assert_int_equal(na_journal_size(j), size);
        assert_int_equal(unit_file_size(f->path), (off_t)size);
        append_ok(j, "after");
        na_journal_close(j);
        j = open_ok(f->path, &s, NULL);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.rec[1], "after");
        na_journal_close(j);
        seen_clear(&s);
}

struct keep {
        const struct seen *from;
        int fail;
};

/* Emit every other record of the replay. */
static int emit_some(void *userdata, struct na_journal_out *out, struct na_error *err)
{
        const struct keep *k = userdata;
        for (size_t i = 0; i < k->from->n; i += 2) {
                int r = na_journal_emit(out, k->from->rec[i], k->from->len[i], err);
                if (r < 0)
                        return r;
        }
        if (k->fail)
                return na_error_set(err, ENOSPC, NA_E_INTERNAL, "emit failed on purpose");
        return 0;
}

static void test_rewrite(void **state)
{
        struct unit_dir_fixture *f = *state;
        static const char *const recs[] = { "r0", "r1", "r2", "r3", "r4" };
        make_journal(f->path, recs, 5, NULL);
        struct seen s = { 0 };
        struct na_journal *j = open_ok(f->path, &s, NULL);
        assert_int_equal(s.n, 5);

        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct keep k = { .from = &s };
        assert_int_equal(na_journal_rewrite(j, emit_some, &k, &err), 0);
        uint64_t want = HEADER + 3 * (REC_HDR + 2);
        assert_int_equal(na_journal_size(j), want);
        assert_int_equal(unit_file_size(f->path), (off_t)want);
        /* Appends land in the new file. */
        append_ok(j, "r5");
        na_journal_close(j);
        assert_int_equal(unit_dir_entries(f->dir), 1); /* no .compact left */

        struct seen t = { 0 };
        j = open_ok(f->path, &t, NULL);
        assert_int_equal(t.n, 4);
        assert_string_equal(t.rec[0], "r0");
        assert_string_equal(t.rec[1], "r2");
        assert_string_equal(t.rec[2], "r4");
        assert_string_equal(t.rec[3], "r5");
        na_journal_close(j);
        seen_clear(&s);
        seen_clear(&t);
}

static void test_rewrite_failure_keeps_old(void **state)
{
        struct unit_dir_fixture *f = *state;
        static const char *const recs[] = { "r0", "r1", "r2" };
        make_journal(f->path, recs, 3, NULL);
        struct seen s = { 0 };
        struct na_journal *j = open_ok(f->path, &s, NULL);
        uint64_t size = na_journal_size(j);

        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct keep k = { .from = &s, .fail = 1 };
        assert_int_equal(na_journal_rewrite(j, emit_some, &k, &err), -ENOSPC);
        assert_string_equal(err.message, "emit failed on purpose");
        assert_int_equal(na_journal_size(j), size);
        assert_int_equal(unit_dir_entries(f->dir), 1);
        append_ok(j, "r3");
        na_journal_close(j);

        struct seen t = { 0 };
        j = open_ok(f->path, &t, NULL);
        assert_int_equal(t.n, 4);
        assert_string_equal(t.rec[3], "r3");
        na_journal_close(j);
        seen_clear(&s);
        seen_clear(&t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_new_journal, setup, teardown),
                cmocka_unit_test_setup_teardown(test_replay_in_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_torn_tails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_short_file_restarted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_middle_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_header_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_replay_error_aborts, setup, teardown),
                cmocka_unit_test_setup_teardown(test_record_too_large, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rewrite, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rewrite_failure_keeps_old, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
