/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/jobs/jobstore.h: start/result/acked survive a reopen, pending results oldest first,
 * the unfinished list for hello, a torn tail after a crash, a corrupt middle refused,
 * compaction keeping what the header promises (and in the same order), retention of
 * accepted results by age and by count, and concurrent record_result from many
 * threads with fewer fdatasyncs than records.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>

#include "agent/jobs/jobstore.h"
#include "common/journal.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/unit.h"

static int setup(void **state)
{
        *state = unit_dir_fixture_new("jobstore", "jobs.journal");
        return 0;
}

static int teardown(void **state)
{
        unit_dir_fixture_free(*state);
        return 0;
}

static struct jobstore *open_ok(const struct unit_dir_fixture *f)
{
        struct jobstore *js = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (jobstore_open(f->dir, &js, &err) < 0)
                fail_msg("jobstore_open: %s", err.message);
        return js;
}

/* A job id that sorts and reads well: "job-000042". */
static void job_id(char *buf, int n)
{
        snprintf(buf, PROTO_ID_MAX + 1, "job-%06d", n);
}

static void start(struct jobstore *js, const char *id, int64_t attempt)
{
        struct proto_job pj = { .attempt = attempt };
        snprintf(pj.id, sizeof(pj.id), "%s", id);
        snprintf(pj.kind, sizeof(pj.kind), "test.append");
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (jobstore_record_start(js, &pj, "node/-", &err) < 0)
                fail_msg("record_start %s: %s", id, err.message);
}

static json_t *result_for(const char *id)
{
        return json_pack("{s:I, s:s, s:{s:s}, s:s, s:I}", "attempt", (json_int_t)1, "status", "succeeded", "data", "id", id,
                         "finishedAt", "2026-11-21T10:00:03.000Z", "durationMs", (json_int_t)3);
}

static void result(struct jobstore *js, const char *id)
{
        _cleanup_json_ json_t *r = result_for(id);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (jobstore_record_result(js, id, 1, r, &err) < 0)
                fail_msg("record_result %s: %s", id, err.message);
}

static void flush(struct jobstore *js)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (jobstore_flush(js, &err) < 0)
                fail_msg("flush: %s", err.message);
}

struct pending {
        char ids[4096][PROTO_ID_MAX + 1];
        int n;
        int bad_results;
};

static void collect_pending(void *userdata, const char *id, json_t *res)
{
        struct pending *p = userdata;
        if (p->n < 4096)
                snprintf(p->ids[p->n++], PROTO_ID_MAX + 1, "%s", id);
        /* Each result is the one recorded for that id. */
        const char *rid = json_string_value(json_object_get(json_object_get(res, "data"), "id"));
        if (!rid || !streq(rid, id))
                p->bad_results++;
}

static struct pending *pending_of(struct jobstore *js)
{
        struct pending *p = calloc(1, sizeof(*p));
        jobstore_foreach_pending(js, collect_pending, p);
        assert_int_equal(p->bad_results, 0);
        return p;
}

static void test_states_survive_reopen(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct jobstore *js = open_ok(f);
        assert_int_equal(jobstore_get(js, "job-a", NULL), JOBREC_NONE);
        start(js, "job-a", 1);
        start(js, "job-b", 2);
        result(js, "job-b");
        start(js, "job-c", 1);
        result(js, "job-c");
        jobstore_record_acked(js, "job-c");
        jobstore_record_acked(js, "job-unknown"); /* nothing recorded: nothing to ack */
        flush(js);

        assert_int_equal(jobstore_get(js, "job-a", NULL), JOBREC_STARTED);
        assert_int_equal(jobstore_get(js, "job-b", NULL), JOBREC_RESULT);
        assert_int_equal(jobstore_get(js, "job-c", NULL), JOBREC_ACKED);
        assert_int_equal(jobstore_get(js, "job-unknown", NULL), JOBREC_NONE);
        struct jobstore_stats st;
        jobstore_get_stats(js, &st);
        assert_int_equal(st.live_records, 3);
        assert_int_equal(st.pending_results, 1);
        assert_int_equal(st.interrupted, 1);
        assert_int_equal(st.file_records, 6);
        assert_int_equal(st.file_bytes, (uint64_t)unit_file_size(f->path));
        jobstore_close(js);

        js = open_ok(f);
        assert_int_equal(jobstore_get(js, "job-a", NULL), JOBREC_STARTED);
        json_t *r = NULL;
        assert_int_equal(jobstore_get(js, "job-b", &r), JOBREC_RESULT);
        _cleanup_json_ json_t *want = result_for("job-b");
        assert_true(json_equal(r, want)); /* the recorded Result, exactly */
        json_decref(r);
        assert_int_equal(jobstore_get(js, "job-c", &r), JOBREC_ACKED);
        assert_non_null(r); /* an accepted result is still there to answer a re-offer */
        json_decref(r);
        assert_int_equal(jobstore_get(js, "job-a", &r), JOBREC_STARTED);
        assert_null(r);

        /* A start after a recorded result never replaces it (a re-offered job is answered, not run). */
        start(js, "job-b", 3);
        assert_int_equal(jobstore_get(js, "job-b", NULL), JOBREC_RESULT);
        /* The central API took job-b: acked, and stays acked through a reopen. */
        jobstore_record_acked(js, "job-b");
        jobstore_close(js);
        js = open_ok(f);
        assert_int_equal(jobstore_get(js, "job-b", NULL), JOBREC_ACKED);
        jobstore_get_stats(js, &st);
        assert_int_equal(st.torn_bytes, 0);
        jobstore_close(js);
}

static void test_pending_oldest_first_and_unfinished(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct jobstore *js = open_ok(f);
        /* Results recorded in an order unlike the ids' (and unlike any hash order). */
        static const int order[] = { 7, 3, 9, 1, 8, 2, 6, 4, 5, 0 };
        char id[PROTO_ID_MAX + 1];
        for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
                job_id(id, order[i]);
                start(js, id, 1);
                result(js, id);
        }
        job_id(id, 8);
        jobstore_record_acked(js, id);
        job_id(id, 100);
        start(js, id, 4); /* interrupted */
        flush(js);

        struct pending *p = pending_of(js);
        assert_int_equal(p->n, 9);
        for (int i = 0, k = 0; i < 10; i++) {
                if (order[i] == 8)
                        continue;
                job_id(id, order[i]);
                assert_string_equal(p->ids[k++], id);
        }
        free(p);

        _cleanup_json_ json_t *unf = jobstore_unfinished_json(js);
        assert_int_equal(json_array_size(unf), 10);
        size_t i;
        json_t *u;
        int interrupted = 0, pending = 0;
        json_array_foreach(unf, i, u) {
                const char *s = json_string_value(json_object_get(u, "state"));
                const char *uid = json_string_value(json_object_get(u, "id"));
                if (streq(s, "interrupted")) {
                        interrupted++;
                        assert_string_equal(uid, "job-000100");
                        assert_int_equal(json_integer_value(json_object_get(u, "attempt")), 4);
                } else {
                        assert_string_equal(s, "result-pending");
                        assert_string_not_equal(uid, "job-000008");
                        pending++;
                }
        }
        assert_int_equal(interrupted, 1);
        assert_int_equal(pending, 9);
        jobstore_close(js);

        /* The same order after a restart. */
        js = open_ok(f);
        p = pending_of(js);
        assert_int_equal(p->n, 9);
        job_id(id, 7);
        assert_string_equal(p->ids[0], id);
        job_id(id, 0);
        assert_string_equal(p->ids[8], id);
        free(p);
        jobstore_close(js);
}

static void test_crash_and_torn_tail(void **state)
{
        struct unit_dir_fixture *f = *state;
        /* A child records, then dies without closing anything (kill -9 of the agent). */
        pid_t pid = fork();
        if (pid == 0) {
                struct jobstore *js = NULL;
                struct na_error err = NA_ERROR_INIT;
                if (jobstore_open(f->dir, &js, &err) < 0)
                        _exit(3);
                char id[PROTO_ID_MAX + 1];
                for (int i = 0; i < 20; i++) {
                        struct proto_job pj = { .attempt = 1 };
                        job_id(id, i);
                        snprintf(pj.id, sizeof(pj.id), "%s", id);
                        if (jobstore_record_start(js, &pj, "node/-", &err) < 0)
                                _exit(4);
                        if (i % 2 == 0) {
                                json_t *r = result_for(id);
                                if (jobstore_record_result(js, id, 1, r, &err) < 0)
                                        _exit(5);
                                json_decref(r);
                        }
                }
                /* record_start/record_result returned: durable. Die now. */
                raise(SIGKILL);
                _exit(6);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        /* And the last write was torn: half a record at the end. */
        off_t good = unit_file_size(f->path);
        static const unsigned char torn[] = { 0x52, 0x4a, 0x41, 0x4e, 0x40, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, '{', '"', 't' };
        int fd = open(f->path, O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, torn, sizeof(torn)), (ssize_t)sizeof(torn));
        close(fd);

        struct jobstore *js = open_ok(f);
        struct jobstore_stats st;
        jobstore_get_stats(js, &st);
        assert_int_equal(st.torn_bytes, sizeof(torn));
        assert_int_equal(unit_file_size(f->path), good);
        assert_int_equal(st.interrupted, 10);
        assert_int_equal(st.pending_results, 10);
        char id[PROTO_ID_MAX + 1];
        for (int i = 0; i < 20; i++) {
                job_id(id, i);
                assert_int_equal(jobstore_get(js, id, NULL), i % 2 == 0 ? JOBREC_RESULT : JOBREC_STARTED);
        }
        /* It goes on after the cut. */
        job_id(id, 1);
        result(js, id);
        jobstore_close(js);
        js = open_ok(f);
        assert_int_equal(jobstore_get(js, id, NULL), JOBREC_RESULT);
        jobstore_close(js);
}

static void test_corrupt_middle_refused(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct jobstore *js = open_ok(f);
        start(js, "job-a", 1);
        start(js, "job-b", 1);
        start(js, "job-c", 1);
        jobstore_close(js);
        /* Damage the second record's payload. */
        int fd = open(f->path, O_RDWR | O_CLOEXEC);
        char buf[4096];
        ssize_t n = pread(fd, buf, sizeof(buf), 0);
        assert_true(n > 0);
        char *second = memmem(buf, (size_t)n, "job-b", 5);
        assert_non_null(second);
        assert_int_equal(pwrite(fd, "X", 1, second - buf), 1);
        close(fd);

        js = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(jobstore_open(f->dir, &js, &err), -EBADMSG);
        assert_null(js);
        assert_non_null(strstr(err.message, f->path));
        assert_non_null(strstr(err.message, "offset"));
}

static void test_bad_record_refused(void **state)
{
        struct unit_dir_fixture *f = *state;
        /* A well-formed journal record that is not a job record. */
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_open(f->path, NULL, NULL, &j, NULL, &err), 0);
        assert_int_equal(na_journal_append(j, "{\"t\":\"z\",\"id\":\"x\"}", 18, &err), 0);
        na_journal_close(j);
        struct jobstore *js = NULL;
        assert_int_equal(jobstore_open(f->dir, &js, &err), -EBADMSG);
        assert_non_null(strstr(err.message, "unknown record type z"));
}

/* Write a journal by hand: retention by age is decided at open. */
static void test_retention_by_age(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_open(f->path, NULL, NULL, &j, NULL, &err), 0);
        uint64_t now = na_now_real_ms();
        struct {
                const char *id;
                uint64_t acked_ago_ms; /* 0: not acked */
        } recs[] = {
                { "old", 25ULL * 3600 * 1000 },  /* past 24 h: dropped */
                { "recent", 23ULL * 3600 * 1000 },
                { "pending", 0 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
                char text[512];
                int n = snprintf(text, sizeof(text), "{\"t\":\"s\",\"id\":\"%s\",\"a\":1,\"k\":\"test.append\",\"g\":\"node/-\"}",
                                 recs[i].id);
                assert_int_equal(na_journal_append(j, text, (size_t)n, &err), 0);
                n = snprintf(text, sizeof(text), "{\"t\":\"r\",\"id\":\"%s\",\"a\":1,\"r\":{\"status\":\"succeeded\"}}",
                             recs[i].id);
                assert_int_equal(na_journal_append(j, text, (size_t)n, &err), 0);
                if (recs[i].acked_ago_ms) {
                        n = snprintf(text, sizeof(text), "{\"t\":\"k\",\"id\":\"%s\",\"at\":%llu}", recs[i].id,
                                     (unsigned long long)(now - recs[i].acked_ago_ms));
                        assert_int_equal(na_journal_append(j, text, (size_t)n, &err), 0);
                }
        }
        assert_int_equal(na_journal_sync(j, &err), 0);
        na_journal_close(j);

        struct jobstore *js = open_ok(f);
        assert_int_equal(jobstore_get(js, "old", NULL), JOBREC_NONE);
        assert_int_equal(jobstore_get(js, "recent", NULL), JOBREC_ACKED);
        assert_int_equal(jobstore_get(js, "pending", NULL), JOBREC_RESULT);
        jobstore_close(js);
}

static void test_compaction_keeps_what_it_promises(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct jobstore *js = open_ok(f);
        char id[PROTO_ID_MAX + 1];
        /*
         * 2,200 jobs accepted (start, result, ack: 3 records each, so the file grows past
         * twice the live records plus 1024 and compaction runs, more than once), with
         * results still pending and jobs still running spread among them.
         */
        int pending_ids[12], npending = 0, started_ids[5], nstarted = 0;
        for (int i = 0; i < 2200; i++) {
                job_id(id, i);
                start(js, id, 1);
                if (i % 400 == 17 && nstarted < 5) {
                        started_ids[nstarted++] = i; /* interrupted: no result */
                        continue;
                }
                result(js, id);
                if (i % 200 == 99 && npending < 12) {
                        pending_ids[npending++] = i; /* not accepted */
                        continue;
                }
                jobstore_record_acked(js, id);
        }
        flush(js);
        struct jobstore_stats st;
        jobstore_get_stats(js, &st);
        print_message("jobstore: %llu live, %llu records in the file (%llu bytes), %llu syncs, %llu compactions\n",
                      (unsigned long long)st.live_records, (unsigned long long)st.file_records,
                      (unsigned long long)st.file_bytes, (unsigned long long)st.syncs,
                      (unsigned long long)st.compactions);
        /*
         * Compacted, and not over and over: 6,600 or so records written, a rewrite only
         * once the file doubled (plus 1024) since the last one. (It used to rewrite the
         * whole file for every record once 1,024 jobs were kept.)
         */
        assert_in_range(st.compactions, 1, 8);
        assert_true(st.file_records < 3 * 2200);
        assert_int_equal(st.pending_results, (uint64_t)npending);
        assert_int_equal(st.interrupted, (uint64_t)nstarted);
        jobstore_close(js);

        js = open_ok(f);
        /* Never dropped: jobs started without result, results not accepted (in their order). */
        for (int k = 0; k < nstarted; k++) {
                job_id(id, started_ids[k]);
                assert_int_equal(jobstore_get(js, id, NULL), JOBREC_STARTED);
        }
        struct pending *p = pending_of(js);
        assert_int_equal(p->n, npending);
        for (int k = 0; k < npending; k++) {
                job_id(id, pending_ids[k]);
                if (!streq(p->ids[k], id))
                        fail_msg("pending result %d is %s, expected %s: oldest first is lost", k, p->ids[k], id);
        }
        free(p);
        /* Accepted results: the newest 2,048 stay, older ones go. */
        int acked = 0, newest_dropped = -1;
        for (int i = 0; i < 2200; i++) {
                job_id(id, i);
                enum jobrec_state s = jobstore_get(js, id, NULL);
                if (s == JOBREC_ACKED)
                        acked++;
                else if (s == JOBREC_NONE)
                        newest_dropped = i;
        }
        assert_int_equal(acked, JOBSTORE_KEEP_ACKED_MAX);
        assert_true(newest_dropped >= 0);
        for (int i = newest_dropped + 1; i < 2200; i++) {
                job_id(id, i);
                assert_int_not_equal(jobstore_get(js, id, NULL), JOBREC_NONE);
        }
        jobstore_close(js);
        assert_int_equal(unit_dir_entries(f->dir), 1); /* no compaction file left behind */
}

#define THREADS 8
#define PER_THREAD 100

struct worker {
        struct jobstore *js;
        int thread;
        int failures;
};

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        for (int i = 0; i < PER_THREAD; i++) {
                char id[PROTO_ID_MAX + 1];
                job_id(id, w->thread * 1000 + i);
                struct proto_job pj = { .attempt = 1 };
                snprintf(pj.id, sizeof(pj.id), "%s", id);
                struct na_error err = NA_ERROR_INIT;
                if (jobstore_record_start(w->js, &pj, "node/-", &err) < 0)
                        w->failures++;
                json_t *r = result_for(id);
                if (jobstore_record_result(w->js, id, 1, r, &err) < 0)
                        w->failures++;
                json_decref(r);
                na_error_clear(&err);
        }
        return NULL;
}

static void test_concurrent_group_commit(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct jobstore *js = open_ok(f);
        pthread_t th[THREADS];
        struct worker w[THREADS];
        for (int t = 0; t < THREADS; t++) {
                w[t] = (struct worker){ .js = js, .thread = t };
                assert_int_equal(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
        }
        for (int t = 0; t < THREADS; t++) {
                pthread_join(th[t], NULL);
                assert_int_equal(w[t].failures, 0);
        }
        struct jobstore_stats st;
        jobstore_get_stats(js, &st);
        uint64_t records = 2 * THREADS * PER_THREAD;
        print_message("jobstore group commit: %llu durable records from %d threads, %llu fdatasyncs\n",
                      (unsigned long long)records, THREADS, (unsigned long long)st.syncs);
        assert_true(st.syncs < records);
        assert_int_equal(st.pending_results, THREADS * PER_THREAD);
        jobstore_close(js);

        js = open_ok(f);
        jobstore_get_stats(js, &st);
        assert_int_equal(st.pending_results, THREADS * PER_THREAD);
        assert_int_equal(st.interrupted, 0);
        jobstore_close(js);
}

static void test_open_errors(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct jobstore *js = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_free_ char *missing = NULL;
        if (asprintf(&missing, "%s/no/such/dir", f->dir) < 0)
                abort();
        assert_int_equal(jobstore_open(missing, &js, &err), -ENOENT);
        assert_null(js);
        assert_non_null(strstr(err.message, missing));
        jobstore_close(NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_states_survive_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pending_oldest_first_and_unfinished, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_and_torn_tail, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_middle_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_record_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_retention_by_age, setup, teardown),
                cmocka_unit_test_setup_teardown(test_compaction_keeps_what_it_promises, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_group_commit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
