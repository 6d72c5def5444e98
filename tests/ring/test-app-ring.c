/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The output ring (ring/app-ring.c): lines and streams, wrap-around that keeps
 * at least one segment, seq continuing after a reopen, torn tails cut, concurrent
 * appends from two processes, long lines cut, tail reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/unit.h"
#include "ring/app-ring.h"

#define MAX_LINES 200000

struct collected {
        size_t n;
        uint64_t seq[MAX_LINES];
        int stream[MAX_LINES];
        size_t len[MAX_LINES];
        char *text[MAX_LINES];
};

static int collect(const struct app_ring_line *line, void *userdata)
{
        struct collected *c = userdata;
        assert_true(c->n < MAX_LINES);
        assert_int_equal(line->text[line->len], '\0');
        c->seq[c->n] = line->seq;
        c->stream[c->n] = (int)line->stream;
        c->len[c->n] = line->len;
        c->text[c->n] = malloc(line->len + 1);
        memcpy(c->text[c->n], line->text, line->len + 1);
        c->n++;
        return 0;
}

static struct collected *collected_new(void)
{
        struct collected *c = calloc(1, sizeof(*c));
        assert_non_null(c);
        return c;
}

static void collected_free(struct collected *c)
{
        for (size_t i = 0; i < c->n; i++)
                free(c->text[i]);
        free(c);
}

static struct collected *read_all(const char *dir, uint64_t since, size_t limit, unsigned flags, uint64_t *next)
{
        struct collected *c = collected_new();
        struct na_error err = NA_ERROR_INIT;
        int r = app_ring_read(dir, since, limit, flags, collect, c, next, &err);
        if (r < 0)
                fail_msg("read: %s", err.message);
        return c;
}

static void append(struct app_ring *r, enum app_ring_stream s, const char *text)
{
        struct na_error err = NA_ERROR_INIT;
        if (app_ring_append(r, s, text, strlen(text), NULL, &err) < 0)
                fail_msg("append: %s", err.message);
}

static int setup(void **state)
{
        *state = unit_tmpdir("app-ring");
        return 0;
}

static int teardown(void **state)
{
        unit_rmrf_free(*state);
        return 0;
}

static void test_lines_and_streams(void **state)
{
        const char *dir = *state;
        uint64_t next = 0;
        struct collected *c = read_all(dir, 0, 100, 0, &next);
        assert_int_equal(c->n, 0);
        assert_int_equal(next, 1);
        collected_free(c);

        struct app_ring *r = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_ring_open(dir, 0, &r, &err), 0);
        uint64_t last = 0;
        assert_int_equal(app_ring_append(r, APP_RING_STDOUT, "one\ntwo\n", 8, &last, &err), 0);
        assert_int_equal(last, 2);
        append(r, APP_RING_STDERR, "three");
        append(r, APP_RING_SYSTEM, "");        /* one empty line */
        append(r, APP_RING_STDOUT, "a\n\n");   /* "a" and "" */
        assert_int_equal(app_ring_next_seq(r), 7);
        assert_int_equal(app_ring_append(r, 9, "x", 1, NULL, &err), -EINVAL);
        app_ring_close(r);

        c = read_all(dir, 0, 100, 0, &next);
        assert_int_equal(c->n, 6);
        const char *want[] = { "one", "two", "three", "", "a", "" };
        const int streams[] = { 1, 1, 2, 3, 1, 1 };
        for (size_t i = 0; i < 6; i++) {
                assert_int_equal(c->seq[i], i + 1);
                assert_string_equal(c->text[i], want[i]);
                assert_int_equal(c->stream[i], streams[i]);
        }
        assert_int_equal(next, 7);
        assert_string_equal(app_ring_stream_name(APP_RING_STDERR), "stderr");
        assert_null(app_ring_stream_name(0));
        collected_free(c);
        /* The files are the app's own: 0600. */
        char *path = NULL;
        assert_true(asprintf(&path, "%s/output.0", dir) > 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        free(path);
}

static void test_wrap_keeps_a_segment(void **state)
{
        const char *dir = *state;
        struct app_ring *r = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_ring_open(dir, 0, &r, &err), 0); /* 1 MiB segments */
        char line[101];
        memset(line, 'x', 100);
        line[100] = '\0';
        const size_t total = 3u * 1024u * 1024u / 100u; /* 3 MiB of text: two switches at least */
        for (size_t i = 0; i < total; i++) {
                snprintf(line, sizeof(line), "%08zu", i);
                line[8] = 'x';
                append(r, APP_RING_STDOUT, line);
        }
        app_ring_close(r);
        for (int i = 0; i < 2; i++) {
                char name[16];
                snprintf(name, sizeof(name), "output.%d", i);
                char *p = NULL;
                assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
                assert_true(unit_file_size(p) <= (off_t)APP_RING_SEGMENT_DEFAULT);
                free(p);
        }
        uint64_t next = 0;
        struct collected *c = read_all(dir, 0, APP_RING_READ_LIMIT_MAX, 0, &next);
        size_t text_bytes = 0;
        for (size_t i = 0; i < c->n; i++) {
                text_bytes += c->len[i];
                if (i > 0)
                        assert_int_equal(c->seq[i], c->seq[i - 1] + 1);
                char want[16];
                snprintf(want, sizeof(want), "%08llu", (unsigned long long)(c->seq[i] - 1));
                assert_memory_equal(c->text[i], want, 8);
        }
        assert_int_equal(c->seq[c->n - 1], total);
        assert_int_equal(next, total + 1);
        assert_true(text_bytes >= 1024u * 1024u); /* at least 1 MiB of output kept */
        assert_true(c->seq[0] > 1);             /* and the oldest dropped */
        collected_free(c);
}

static void test_seq_continues_after_reopen(void **state)
{
        const char *dir = *state;
        for (int round = 0; round < 3; round++) {
                struct app_ring *r = NULL;
                struct na_error err = NA_ERROR_INIT;
                assert_int_equal(app_ring_open(dir, 64 * 1024, &r, &err), 0);
                assert_int_equal(app_ring_next_seq(r), (uint64_t)round * 2000 + 1);
                for (int i = 0; i < 2000; i++)
                        append(r, APP_RING_STDOUT, "some line of output, about forty bytes");
                app_ring_close(r);
        }
        uint64_t next = 0;
        struct collected *c = read_all(dir, 0, 10, APP_RING_TAIL, &next);
        assert_int_equal(c->n, 10);
        assert_int_equal(c->seq[9], 6000);
        assert_int_equal(next, 6001);
        collected_free(c);
        /* The one-shot append of the agent continues too. */
        uint64_t last = 0;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_ring_append_once(dir, APP_RING_SYSTEM, "stopping: sent 'stop'", 21, &last, &err), 0);
        assert_int_equal(last, 6001);
}

static char *seg_path(const char *dir, int i)
{
        char *p = NULL;
        assert_true(asprintf(&p, "%s/output.%d", dir, i) > 0);
        return p;
}

static void test_torn_tail_is_cut(void **state)
{
        const char *dir = *state;
        struct app_ring *r = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_ring_open(dir, 0, &r, &err), 0);
        for (int i = 0; i < 10; i++)
                append(r, APP_RING_STDOUT, "0123456789");
        app_ring_close(r);
        char *p = seg_path(dir, 0);
        off_t size = unit_file_size(p);
        /* A crash in the middle of the tenth record. */
        assert_int_equal(truncate(p, size - 4), 0);
        uint64_t next = 0;
        struct collected *c = read_all(dir, 0, 100, 0, &next);
        assert_int_equal(c->n, 9);
        assert_int_equal(next, 10);
        collected_free(c);

        /* A flipped byte in the ninth record's text: its CRC no longer matches. */
        int fd = open(p, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        off_t rec = 25 + 10;
        assert_int_equal(pwrite(fd, "X", 1, 8 * rec + 25 + 3), 1);
        close(fd);
        c = read_all(dir, 0, 100, 0, &next);
        assert_int_equal(c->n, 8);
        collected_free(c);

        /* The next writer cuts the bad tail and continues after the last good record. */
        assert_int_equal(app_ring_open(dir, 0, &r, &err), 0);
        assert_int_equal(unit_file_size(p), 8 * rec);
        assert_int_equal(app_ring_next_seq(r), 9);
        append(r, APP_RING_STDERR, "after the crash");
        app_ring_close(r);
        c = read_all(dir, 0, 100, 0, &next);
        assert_int_equal(c->n, 9);
        assert_int_equal(c->seq[8], 9);
        assert_string_equal(c->text[8], "after the crash");
        collected_free(c);
        free(p);
}

static void writer(const char *dir, size_t seg, char tag, int count)
{
        struct app_ring *r = NULL;
        struct na_error err = NA_ERROR_INIT;
        if (app_ring_open(dir, seg, &r, &err) < 0)
                _exit(2);
        char line[64];
        for (int i = 0; i < count; i++) {
                int n = snprintf(line, sizeof(line), "%c %06d the quick brown fox", tag, i);
                if (app_ring_append(r, APP_RING_STDOUT, line, (size_t)n, NULL, &err) < 0)
                        _exit(3);
        }
        app_ring_close(r);
        _exit(0);
}

static void concurrent(const char *dir, size_t seg, int count, bool all_kept)
{
        pid_t a = fork();
        if (a == 0)
                writer(dir, seg, 'A', count);
        pid_t b = fork();
        if (b == 0)
                writer(dir, seg, 'B', count);
        /* Meanwhile a reader sees whole records only, seqs without holes. */
        for (int round = 0; round < 50; round++) {
                struct collected *c = read_all(dir, 0, 500, round % 2 ? APP_RING_TAIL : 0, NULL);
                for (size_t i = 1; i < c->n; i++)
                        assert_int_equal(c->seq[i], c->seq[i - 1] + 1);
                for (size_t i = 0; i < c->n; i++)
                        assert_non_null(strstr(c->text[i], " the quick brown fox"));
                collected_free(c);
        }
        int sa, sb;
        assert_int_equal(waitpid(a, &sa, 0), a);
        assert_int_equal(waitpid(b, &sb, 0), b);
        assert_true(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
        assert_true(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);

        uint64_t next = 0;
        struct collected *c = read_all(dir, 0, APP_RING_READ_LIMIT_MAX, 0, &next);
        assert_int_equal(next, (uint64_t)count * 2 + 1);
        assert_int_equal(c->seq[c->n - 1], (uint64_t)count * 2);
        int last_a = -1, last_b = -1;
        for (size_t i = 0; i < c->n; i++) {
                if (i > 0)
                        assert_int_equal(c->seq[i], c->seq[i - 1] + 1);
                char tag;
                int k;
                assert_int_equal(sscanf(c->text[i], "%c %d", &tag, &k), 2);
                assert_true(strstr(c->text[i], " the quick brown fox") != NULL);
                int *last = tag == 'A' ? &last_a : &last_b;
                if (*last >= 0)
                        assert_int_equal(k, *last + 1); /* each writer's lines in order, none lost */
                *last = k;
        }
        if (all_kept) {
                assert_int_equal(c->seq[0], 1);
                assert_int_equal(last_a, count - 1);
                assert_int_equal(last_b, count - 1);
        } /* else one writer may have finished long before the other, its lines all rotated out */
        collected_free(c);
}

static void test_concurrent_writers(void **state)
{
        concurrent(*state, 0, 3000, true); /* everything kept */
}

static void test_concurrent_writers_switching(void **state)
{
        concurrent(*state, 64 * 1024, 6000, false); /* many segment switches under contention */
}

static void test_long_line_is_cut(void **state)
{
        const char *dir = *state;
        size_t len = 20000;
        char *text = malloc(len + 1);
        for (size_t i = 0; i < len; i++)
                text[i] = (char)('a' + i % 26);
        text[len] = '\n';
        struct app_ring *r = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_ring_open(dir, 0, &r, &err), 0);
        assert_int_equal(app_ring_append(r, APP_RING_STDOUT, text, len + 1, NULL, &err), 0);
        app_ring_close(r);
        struct collected *c = read_all(dir, 0, 10, 0, NULL);
        assert_int_equal(c->n, 3);
        assert_int_equal(c->len[0], APP_RING_TEXT_MAX);
        assert_int_equal(c->len[1], APP_RING_TEXT_MAX);
        assert_int_equal(c->len[2], len - 2 * APP_RING_TEXT_MAX);
        assert_memory_equal(c->text[0], text, APP_RING_TEXT_MAX);
        assert_memory_equal(c->text[1], text + APP_RING_TEXT_MAX, APP_RING_TEXT_MAX);
        assert_memory_equal(c->text[2], text + 2 * APP_RING_TEXT_MAX, c->len[2]);
        collected_free(c);
        free(text);
}

static int stop_at_three(const struct app_ring_line *line, void *userdata)
{
        (*(int *)userdata)++;
        return line->seq == 3 ? -ECANCELED : 0;
}

static void test_tail_and_since(void **state)
{
        const char *dir = *state;
        struct app_ring *r = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_ring_open(dir, 0, &r, &err), 0);
        for (int i = 1; i <= 100; i++) {
                char line[16];
                snprintf(line, sizeof(line), "line %d", i);
                append(r, i % 2 ? APP_RING_STDOUT : APP_RING_STDERR, line);
        }
        app_ring_close(r);

        uint64_t next = 0;
        struct collected *c = read_all(dir, 0, 10, APP_RING_TAIL, &next);
        assert_int_equal(c->n, 10);
        assert_int_equal(c->seq[0], 91);
        assert_string_equal(c->text[9], "line 100");
        assert_int_equal(next, 101);
        collected_free(c);

        c = read_all(dir, 50, 5, 0, &next);
        assert_int_equal(c->n, 5);
        assert_int_equal(c->seq[0], 50);
        assert_int_equal(c->seq[4], 54);
        assert_int_equal(next, 55);
        collected_free(c);

        c = read_all(dir, 95, 3, APP_RING_TAIL, &next); /* the last 3 of 95..100 */
        assert_int_equal(c->n, 3);
        assert_int_equal(c->seq[0], 98);
        collected_free(c);

        c = read_all(dir, 101, 10, 0, &next); /* nothing new yet */
        assert_int_equal(c->n, 0);
        assert_int_equal(next, 101);
        collected_free(c);
        c = read_all(dir, 500, 10, 0, &next);
        assert_int_equal(c->n, 0);
        assert_int_equal(next, 500);
        collected_free(c);

        int calls = 0;
        assert_int_equal(app_ring_read(dir, 0, 100, 0, stop_at_three, &calls, &next, &err), -ECANCELED);
        assert_int_equal(calls, 3);
        assert_int_equal(app_ring_read(dir, 0, 0, 0, stop_at_three, &calls, &next, &err), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_lines_and_streams, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrap_keeps_a_segment, setup, teardown),
                cmocka_unit_test_setup_teardown(test_seq_continues_after_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_torn_tail_is_cut, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_writers_switching, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_line_is_cut, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tail_and_since, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
