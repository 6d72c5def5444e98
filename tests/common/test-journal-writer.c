/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * common/journal-writer.h: group commit (many threads appending and waiting, fewer
 * fdatasyncs than records), rewrites in order with the appends around them, stop
 * writes what is queued, a sticky error.
 *
 * To make "fewer syncs than records" certain rather than likely, the writer thread is
 * held inside a rewrite's emit callback (a gate) while the records pile up; when the
 * gate opens they all go out in one batch.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/journal-writer.h"
#include "unit.h"

static int setup(void **state)
{
        *state = unit_dir_fixture_new("jwriter", "w.journal");
        return 0;
}

static int teardown(void **state)
{
        unit_dir_fixture_free(*state);
        return 0;
}

struct seen {
        size_t n, cap;
        char **rec;
};

static int collect(void *userdata, const void *data, size_t len, struct na_error *err)
{
        (void)err;
        struct seen *s = userdata;
        if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 64;
                s->rec = realloc(s->rec, s->cap * sizeof(*s->rec));
        }
        s->rec[s->n] = strndup(data, len);
        s->n++;
        return 0;
}

static void seen_clear(struct seen *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->rec[i]);
        free(s->rec);
        memset(s, 0, sizeof(*s));
}

static void replay(const char *path, struct seen *s)
{
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (na_journal_open(path, collect, s, &j, NULL, &err) < 0)
                fail_msg("reopen: %s", err.message);
        na_journal_close(j);
}

static struct na_journal_writer *start(const char *path, struct seen *s)
{
        struct na_journal *j = NULL;
        struct na_journal_writer *w = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (na_journal_open(path, collect, s, &j, NULL, &err) < 0)
                fail_msg("open: %s", err.message);
        if (na_journal_writer_start(j, &w, &err) < 0)
                fail_msg("start: %s", err.message);
        return w;
}

/* ---- a gate the writer thread waits at, inside a rewrite ---- */

struct gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool inside, open, done;
        pthread_t writer_thread;
        const char *const *keep; /* records the rewrite emits */
};

static void gate_init(struct gate *g)
{
        memset(g, 0, sizeof(*g));
        pthread_mutex_init(&g->lock, NULL);
        pthread_cond_init(&g->cond, NULL);
}

static void gate_destroy(struct gate *g)
{
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->cond);
}

static int gate_emit(void *userdata, struct na_journal_out *out, struct na_error *err)
{
        struct gate *g = userdata;
        pthread_mutex_lock(&g->lock);
        g->writer_thread = pthread_self();
        g->inside = true;
        pthread_cond_broadcast(&g->cond);
        while (!g->open)
                pthread_cond_wait(&g->cond, &g->lock);
        pthread_mutex_unlock(&g->lock);
        for (const char *const *k = g->keep; k && *k; k++) {
                int r = na_journal_emit(out, *k, strlen(*k), err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void gate_done(void *userdata)
{
        struct gate *g = userdata;
        pthread_mutex_lock(&g->lock);
        g->done = true;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
}

static void gate_wait_inside(struct gate *g)
{
        pthread_mutex_lock(&g->lock);
        while (!g->inside)
                pthread_cond_wait(&g->cond, &g->lock);
        pthread_mutex_unlock(&g->lock);
}

static void gate_open(struct gate *g)
{
        pthread_mutex_lock(&g->lock);
        g->open = true;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
}

/* ---- tests ---- */

static void test_append_flush_replay(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_writer_flush(w, &err), 0); /* nothing queued yet */
        for (int i = 0; i < 300; i++) {
                char rec[32];
                int n = snprintf(rec, sizeof(rec), "rec-%03d", i);
                assert_int_not_equal(na_journal_writer_append(w, rec, (size_t)n), 0);
        }
        assert_int_equal(na_journal_writer_flush(w, &err), 0);
        struct na_journal_writer_stats st;
        na_journal_writer_get_stats(w, &st);
        assert_int_equal(st.appended, 300);
        assert_true(st.syncs >= 1);
        assert_int_equal(st.file_bytes, (uint64_t)unit_file_size(f->path));
        na_journal_writer_stop(w);

        replay(f->path, &s);
        assert_int_equal(s.n, 300);
        for (int i = 0; i < 300; i++) {
                char rec[32];
                snprintf(rec, sizeof(rec), "rec-%03d", i);
                assert_string_equal(s.rec[i], rec);
        }
        seen_clear(&s);
}

static void test_stop_writes_what_is_queued(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        for (int i = 0; i < 500; i++)
                na_journal_writer_append(w, "queued", 6);
        na_journal_writer_stop(w); /* no flush first */
        replay(f->path, &s);
        assert_int_equal(s.n, 500);
        seen_clear(&s);
}

static void test_group_commit_single_thread(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        struct gate g;
        gate_init(&g);
        assert_int_equal(na_journal_writer_rewrite(w, gate_emit, gate_done, &g), 0);
        gate_wait_inside(&g);

        uint64_t last = 0;
        for (int i = 0; i < 1000; i++) {
                uint64_t t = na_journal_writer_append(w, "x", 1);
                assert_true(t > last); /* tickets increase */
                last = t;
        }
        gate_open(&g);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_writer_wait(w, last, &err), 0);
        struct na_journal_writer_stats st;
        na_journal_writer_get_stats(w, &st);
        assert_int_equal(st.appended, 1000);
        assert_int_equal(st.rewrites, 1);
        /* The 1000 records were queued behind the held writer: one batch, one sync. */
        assert_int_equal(st.syncs, 1);
        na_journal_writer_stop(w);
        gate_destroy(&g);
        seen_clear(&s);
}

#define THREADS 8
#define PER_THREAD 150

struct worker {
        struct na_journal_writer *w;
        int id;
        int failures;
        pthread_mutex_t *lock;
        pthread_cond_t *cond;
        int *queued_first; /* threads that queued their first record */
};

static void *worker_main(void *arg)
{
        struct worker *wk = arg;
        for (int i = 0; i < PER_THREAD; i++) {
                char rec[32];
                int n = snprintf(rec, sizeof(rec), "t%d-%03d", wk->id, i);
                uint64_t t = na_journal_writer_append(wk->w, rec, (size_t)n);
                if (i == 0) {
                        pthread_mutex_lock(wk->lock);
                        (*wk->queued_first)++;
                        pthread_cond_broadcast(wk->cond);
                        pthread_mutex_unlock(wk->lock);
                }
                struct na_error err = NA_ERROR_INIT;
                if (na_journal_writer_wait(wk->w, t, &err) < 0)
                        wk->failures++;
                na_error_clear(&err);
        }
        return NULL;
}

static void test_group_commit_threads(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        struct gate g;
        gate_init(&g);
        assert_int_equal(na_journal_writer_rewrite(w, gate_emit, gate_done, &g), 0);
        gate_wait_inside(&g);

        pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
        int queued_first = 0;
        pthread_t th[THREADS];
        struct worker wk[THREADS];
        for (int i = 0; i < THREADS; i++) {
                wk[i] = (struct worker){ .w = w, .id = i, .lock = &lock, .cond = &cond, .queued_first = &queued_first };
                assert_int_equal(pthread_create(&th[i], NULL, worker_main, &wk[i]), 0);
        }
        /* Every thread has a record queued and waits for it: they share the first sync. */
        pthread_mutex_lock(&lock);
        while (queued_first < THREADS)
                pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        gate_open(&g);
        for (int i = 0; i < THREADS; i++) {
                pthread_join(th[i], NULL);
                assert_int_equal(wk[i].failures, 0);
        }

        struct na_journal_writer_stats st;
        na_journal_writer_get_stats(w, &st);
        assert_int_equal(st.appended, THREADS * PER_THREAD);
        print_message("group commit: %llu records, %llu fdatasyncs\n", (unsigned long long)st.appended,
                      (unsigned long long)st.syncs);
        assert_true(st.syncs < st.appended);
        assert_true(st.syncs <= st.appended - (THREADS - 1));
        na_journal_writer_stop(w);

        /* Every record is there, each thread's in its own order. */
        replay(f->path, &s);
        assert_int_equal(s.n, THREADS * PER_THREAD);
        int next[THREADS] = { 0 };
        for (size_t i = 0; i < s.n; i++) {
                int t, k;
                assert_int_equal(sscanf(s.rec[i], "t%d-%d", &t, &k), 2);
                assert_in_range(t, 0, THREADS - 1);
                assert_int_equal(k, next[t]);
                next[t]++;
        }
        gate_destroy(&g);
        seen_clear(&s);
}

static void test_rewrite_ordering(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        na_journal_writer_append(w, "before-1", 8);
        na_journal_writer_append(w, "before-2", 8);

        static const char *const keep[] = { "snapshot", NULL };
        struct gate g;
        gate_init(&g);
        g.keep = keep;
        g.open = true; /* no holding here */
        assert_int_equal(na_journal_writer_rewrite(w, gate_emit, gate_done, &g), 0);
        na_journal_writer_append(w, "after-1", 7);
        na_journal_writer_append(w, "after-2", 7);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_writer_flush(w, &err), 0);
        assert_true(g.done);
        assert_false(pthread_equal(g.writer_thread, pthread_self())); /* on the writer thread */

        struct na_journal_writer_stats st;
        na_journal_writer_get_stats(w, &st);
        assert_int_equal(st.rewrites, 1);
        assert_int_equal(st.appended, 4);
        assert_int_equal(st.file_bytes, (uint64_t)unit_file_size(f->path));
        na_journal_writer_stop(w);

        /* The rewrite replaced what came before it; what came after follows it. */
        replay(f->path, &s);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.rec[0], "snapshot");
        assert_string_equal(s.rec[1], "after-1");
        assert_string_equal(s.rec[2], "after-2");
        gate_destroy(&g);
        seen_clear(&s);
}

static void test_failed_record_alone(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;

        /* A ticket of 0 (what append returns out of memory) fails at once. */
        assert_int_equal(na_journal_writer_wait(w, 0, &err), -ENOMEM);
        assert_non_null(strstr(err.message, f->path));
        na_error_clear(&err);

        assert_int_equal(na_journal_writer_wait(w, na_journal_writer_append(w, "before", 6), &err), 0);
        size_t big = NA_JOURNAL_MAX_RECORD + 1;
        char *data = calloc(1, big);
        uint64_t t = na_journal_writer_append(w, data, big);
        free(data);
        assert_int_equal(na_journal_writer_wait(w, t, &err), -EMSGSIZE);
        assert_non_null(strstr(err.message, "too large"));
        na_error_clear(&err);
        /* The refused record fails alone: the journal is whole, later records go on. */
        t = na_journal_writer_append(w, "later", 5);
        assert_int_equal(na_journal_writer_wait(w, t, &err), 0);
        struct na_journal_writer_stats st;
        na_journal_writer_get_stats(w, &st);
        assert_int_equal(st.failed, 1);
        na_journal_writer_stop(w);
        replay(f->path, &s);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.rec[0], "before");
        assert_string_equal(s.rec[1], "later");
        seen_clear(&s);
}

/*
 * A file that cannot grow (RLIMIT_FSIZE here, a full disk on a node): each record that
 * does not fit fails with the reason, the journal keeps every record before them, and
 * once the file may grow again records are durable again, without a restart.
 */
static void test_full_then_room_again(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct seen s = { 0 };
        struct na_journal_writer *w = start(f->path, &s);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        char rec[512];
        memset(rec, 'x', sizeof(rec));
        assert_int_equal(na_journal_writer_wait(w, na_journal_writer_append(w, "kept-1", 6), &err), 0);
        assert_int_equal(na_journal_writer_wait(w, na_journal_writer_append(w, "kept-2", 6), &err), 0);

        struct rlimit old, lim;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        lim = old;
        lim.rlim_cur = (rlim_t)unit_file_size(f->path) + 100; /* room for less than one more record */
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        for (int i = 0; i < 50; i++) {
                uint64_t t = na_journal_writer_append(w, rec, sizeof(rec));
                assert_int_equal(na_journal_writer_wait(w, t, &err), -EFBIG);
                na_error_clear(&err);
        }
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        signal(SIGXFSZ, prev);
        assert_int_equal(na_journal_writer_wait(w, na_journal_writer_append(w, "room-again", 10), &err), 0);
        na_journal_writer_stop(w);
        replay(f->path, &s);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.rec[0], "kept-1");
        assert_string_equal(s.rec[1], "kept-2");
        assert_string_equal(s.rec[2], "room-again");
        seen_clear(&s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_append_flush_replay, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_writes_what_is_queued, setup, teardown),
                cmocka_unit_test_setup_teardown(test_group_commit_single_thread, setup, teardown),
                cmocka_unit_test_setup_teardown(test_group_commit_threads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rewrite_ordering, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_record_alone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_full_then_room_again, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
