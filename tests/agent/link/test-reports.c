/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/link/reports.h: consecutive seq numbers that survive a reopen (and a compaction),
 * ack drops everything up to ackSeq, events are never dropped, the metrics bound
 * drops the oldest metrics first, events queued from many threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "agent/link/reports.h"
#include "common/journal.h"
#include "common/json-cleanup.h"
#include "common/unit.h"

static int setup(void **state)
{
        *state = unit_dir_fixture_new("reports", "reports.journal");
        return 0;
}

static int teardown(void **state)
{
        unit_dir_fixture_free(*state);
        return 0;
}

static struct reports *open_ok(const struct unit_dir_fixture *f)
{
        struct reports *r = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        if (reports_open(f->dir, &r, &err) < 0)
                fail_msg("reports_open: %s", err.message);
        return r;
}

static void close_flushed(struct reports *r)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(reports_flush(r, &err), 0);
        reports_close(r);
}

static json_t *event(const char *type, const char *target)
{
        return json_pack("{s:s, s:s, s:s, s:{}}", "type", type, "targetId", target, "at", "2026-11-21T10:00:00.000Z", "data");
}

static json_t *metrics(const char *target, double cpu)
{
        return json_pack("[{s:s, s:s, s:f}]", "targetId", target, "at", "2026-11-21T10:00:00.000Z", "cpuPercent", cpu);
}

/* The oldest report as JSON (and its seq), or NULL. */
static json_t *oldest(struct reports *r, int64_t *seq)
{
        int64_t s = -1;
        _cleanup_free_ char *body = reports_oldest_body(r, 1795255203000ULL, &s);
        if (!body)
                return NULL;
        json_error_t jerr;
        json_t *j = json_loads(body, JSON_REJECT_DUPLICATES, &jerr);
        if (!j)
                fail_msg("report body is not JSON: %s", jerr.text);
        assert_int_equal(json_integer_value(json_object_get(j, "seq")), s);
        if (seq)
                *seq = s;
        return j;
}

static void test_seal_and_body(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct reports *r = open_ok(f);
        struct reports_stats st;
        reports_get_stats(r, &st);
        assert_int_equal(st.next_seq, 1);
        assert_int_equal(st.pending, 0);
        int64_t seq = 0;
        assert_null(reports_oldest_body(r, 0, &seq));

        /* Nothing to say: no report, no seq used. */
        assert_int_equal(reports_seal(r, NULL), 0);
        _cleanup_json_ json_t *empty = json_array();
        assert_int_equal(reports_seal(r, empty), 0);

        _cleanup_json_ json_t *m = metrics("node", 12.5);
        assert_int_equal(reports_seal(r, m), 1);
        reports_add_event(r, event("vps.state", "6f1c"));
        reports_add_event(r, event("app.exited", "a1"));
        assert_int_equal(reports_events_queued(r), 2);
        assert_int_equal(reports_seal(r, NULL), 2);
        assert_int_equal(reports_events_queued(r), 0);

        _cleanup_json_ json_t *one = oldest(r, &seq);
        assert_int_equal(seq, 1);
        assert_string_equal(json_string_value(json_object_get(one, "sentAt")), "2026-11-21T10:00:03.000Z");
        assert_true(json_equal(json_object_get(one, "metrics"), m));
        assert_int_equal(json_array_size(json_object_get(one, "events")), 0);

        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 2);
        assert_int_equal(st.next_seq, 3);
        assert_true(st.metrics_bytes > 0);
        close_flushed(r);
}

static void test_ack(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct reports *r = open_ok(f);
        for (int i = 1; i <= 5; i++) {
                reports_add_event(r, event("vps.state", "x"));
                assert_int_equal(reports_seal(r, NULL), i);
        }
        reports_ack(r, 0); /* below everything: nothing */
        int64_t seq;
        json_decref(oldest(r, &seq));
        assert_int_equal(seq, 1);
        reports_ack(r, 2);
        json_decref(oldest(r, &seq));
        assert_int_equal(seq, 3);
        reports_ack(r, 2); /* again: nothing */
        struct reports_stats st;
        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 3);
        reports_ack(r, 99); /* past everything: all gone, and seq continues above it */
        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 0);
        assert_null(oldest(r, &seq));
        assert_int_equal(st.next_seq, 100); /* the central API has seen up to 99 */
        close_flushed(r);
}

static void test_seq_and_pending_survive_reopen(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct reports *r = open_ok(f);
        for (int i = 0; i < 4; i++) {
                reports_add_event(r, event("vps.state", "x"));
                _cleanup_json_ json_t *m = metrics("node", i);
                reports_seal(r, m);
        }
        reports_ack(r, 2);
        close_flushed(r);

        r = open_ok(f);
        struct reports_stats st;
        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 2);
        assert_int_equal(st.next_seq, 5);
        int64_t seq;
        _cleanup_json_ json_t *three = oldest(r, &seq);
        assert_int_equal(seq, 3);
        assert_int_equal(json_array_size(json_object_get(three, "events")), 1);
        assert_true(json_real_value(json_object_get(json_array_get(json_object_get(three, "metrics"), 0), "cpuPercent")) == 2.0);

        /* Everything acknowledged: the next seq still follows on. */
        reports_ack(r, 4);
        close_flushed(r);
        r = open_ok(f);
        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 0);
        assert_int_equal(st.next_seq, 5);
        reports_add_event(r, event("vps.state", "x"));
        assert_int_equal(reports_seal(r, NULL), 5);
        close_flushed(r);
}

static void test_compaction_keeps_seq(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct reports *r = open_ok(f);
        for (int i = 1; i <= 501; i++) {
                reports_add_event(r, event("vps.state", "x"));
                assert_int_equal(reports_seal(r, NULL), i);
                if (i % 3)
                        reports_ack(r, i);
        }
        /* Every third is left until the next ack covers it; 501, the last, stays pending. */
        close_flushed(r);
        off_t size = unit_file_size(f->path);
        print_message("reports: journal of %lld bytes after 501 reports and their acks\n", (long long)size);
        assert_true(size < 64 * 1024); /* compacted, not 1,000 records long */

        r = open_ok(f);
        struct reports_stats st;
        reports_get_stats(r, &st);
        assert_int_equal(st.next_seq, 502);
        assert_int_equal(st.pending, 1); /* 501 was not acknowledged */
        int64_t seq;
        json_decref(oldest(r, &seq));
        assert_int_equal(seq, 501);
        close_flushed(r);
}

/* ~1 MB of metrics: an array with one sample holding a long string. */
static json_t *big_metrics(int tag)
{
        size_t n = 1000000;
        char *s = malloc(n + 1);
        memset(s, 'a' + tag % 26, n);
        s[n] = '\0';
        json_t *m = json_pack("[{s:s, s:i}]", "blob", s, "tag", tag);
        free(s);
        return m;
}

static void test_metrics_bound_events_kept(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct reports *r = open_ok(f);
        /* Ten reports of about 1 MB of metrics each; reports 2 and 5 also carry an event. */
        for (int i = 1; i <= 10; i++) {
                if (i == 2 || i == 5)
                        reports_add_event(r, event("vps.state", i == 2 ? "two" : "five"));
                _cleanup_json_ json_t *m = big_metrics(i);
                assert_int_equal(reports_seal(r, m), i);
                struct reports_stats st;
                reports_get_stats(r, &st);
                assert_true(st.metrics_bytes <= REPORTS_METRICS_MAX_BYTES);
        }
        struct reports_stats st;
        reports_get_stats(r, &st);
        print_message("reports: %llu pending, %llu bytes of metrics held, %llu reports lost their metrics\n",
                      (unsigned long long)st.pending, (unsigned long long)st.metrics_bytes,
                      (unsigned long long)st.metrics_dropped);
        /* 10 MB do not fit in 8: the two oldest lost their metrics. Report 1 had nothing else
         * and went whole; report 2 keeps its event. */
        assert_int_equal(st.metrics_dropped, 2);
        assert_int_equal(st.pending, 9);

        int64_t seq;
        _cleanup_json_ json_t *two = oldest(r, &seq);
        assert_int_equal(seq, 2);
        assert_int_equal(json_array_size(json_object_get(two, "metrics")), 0);
        json_t *ev = json_array_get(json_object_get(two, "events"), 0);
        assert_string_equal(json_string_value(json_object_get(ev, "targetId")), "two");
        close_flushed(r);

        /* The same after a restart: the trims are journaled. */
        r = open_ok(f);
        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 9);
        assert_true(st.metrics_bytes <= REPORTS_METRICS_MAX_BYTES);
        _cleanup_json_ json_t *again = oldest(r, &seq);
        assert_int_equal(seq, 2);
        assert_true(json_equal(again, two));
        /* Walk them all: metrics from report 3 on are whole, both events are there. */
        int events = 0;
        for (int64_t want = 2; want <= 10; want++) {
                _cleanup_json_ json_t *rep = oldest(r, &seq);
                assert_int_equal(seq, want);
                events += (int)json_array_size(json_object_get(rep, "events"));
                json_t *m = json_object_get(rep, "metrics");
                if (want >= 3)
                        assert_int_equal(json_integer_value(json_object_get(json_array_get(m, 0), "tag")), want);
                else
                        assert_int_equal(json_array_size(m), 0);
                reports_ack(r, want);
        }
        assert_int_equal(events, 2);
        /* Every report acknowledged, trimmed ones too: nothing is held (a trimmed report's
         * "[]" was subtracted once too often, and the count wrapped below zero). */
        reports_get_stats(r, &st);
        assert_int_equal(st.pending, 0);
        assert_int_equal(st.metrics_bytes, 0);
        close_flushed(r);
}

#define THREADS 4
#define EVENTS_EACH 250

struct adder {
        struct reports *r;
        int thread;
};

static void *adder_main(void *arg)
{
        struct adder *a = arg;
        for (int i = 0; i < EVENTS_EACH; i++) {
                char target[32];
                snprintf(target, sizeof(target), "t%d-%03d", a->thread, i);
                reports_add_event(a->r, event("app.state", target));
        }
        return NULL;
}

static void test_events_from_threads(void **state)
{
        struct unit_dir_fixture *f = *state;
        struct reports *r = open_ok(f);
        pthread_t th[THREADS];
        struct adder a[THREADS];
        for (int t = 0; t < THREADS; t++) {
                a[t] = (struct adder){ .r = r, .thread = t };
                assert_int_equal(pthread_create(&th[t], NULL, adder_main, &a[t]), 0);
        }
        for (int t = 0; t < THREADS; t++)
                pthread_join(th[t], NULL);
        assert_int_equal(reports_events_queued(r), THREADS * EVENTS_EACH);
        assert_int_equal(reports_seal(r, NULL), 1);
        int64_t seq;
        _cleanup_json_ json_t *rep = oldest(r, &seq);
        json_t *events = json_object_get(rep, "events");
        assert_int_equal(json_array_size(events), THREADS * EVENTS_EACH);
        /* Each thread's events in the order it added them. */
        int next[THREADS] = { 0 };
        size_t i;
        json_t *ev;
        json_array_foreach(events, i, ev) {
                int t, k;
                assert_int_equal(sscanf(json_string_value(json_object_get(ev, "targetId")), "t%d-%d", &t, &k), 2);
                assert_int_equal(k, next[t]);
                next[t]++;
        }
        close_flushed(r);
}

static void test_open_errors(void **state)
{
        struct unit_dir_fixture *f = *state;
        /* A well-formed journal record without a type: refused, naming the journal and offset. */
        struct na_journal *j = NULL;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_journal_open(f->path, NULL, NULL, &j, NULL, &err), 0);
        assert_int_equal(na_journal_append(j, "{\"seq\":1}", 9, &err), 0);
        na_journal_close(j);
        struct reports *r = NULL;
        assert_int_equal(reports_open(f->dir, &r, &err), -EBADMSG);
        assert_null(r);
        assert_non_null(strstr(err.message, f->path));
        assert_non_null(strstr(err.message, "record without type"));
        na_error_clear(&err);

        _cleanup_free_ char *missing = NULL;
        if (asprintf(&missing, "%s/none/here", f->dir) < 0)
                abort();
        assert_int_equal(reports_open(missing, &r, &err), -ENOENT);
        assert_null(r);
        reports_close(NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_seal_and_body, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ack, setup, teardown),
                cmocka_unit_test_setup_teardown(test_seq_and_pending_survive_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_compaction_keeps_seq, setup, teardown),
                cmocka_unit_test_setup_teardown(test_metrics_bound_events_kept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_events_from_threads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
