/* SPDX-License-Identifier: GPL-2.0-or-later */
/* metrics/history.c: bucket rollups (average and maximum) across tiers, reopen, corrupt files, series. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "metrics/history.h"

/* 2026-11-21T12:00:00Z: a multiple of 900 s */
#define T0 1795262400u

struct fx {
        char *dir;
        char path[512];
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->dir = fx_mkdtemp("hist");
        snprintf(f->path, sizeof(f->path), "%s/vps-x.hist", f->dir);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        fx_remove(f->dir);
        free(f->dir);
        free(f);
        return 0;
}

static struct history *open_hist(const char *path, enum history_open_result *res)
{
        struct na_error err = NA_ERROR_INIT;
        struct history *h = NULL;
        enum history_open_result r0;
        assert_int_equal(history_open(path, false, &h, res ? res : &r0, &err), 0);
        assert_non_null(h);
        return h;
}

/* A sample at t seconds: cpu = v, memory used = 100 + v, disk read = 10 * v only when v is even. */
static void put(struct history *h, uint32_t t, double v)
{
        struct proto_metrics_sample s = { .at_ms = (uint64_t)t * 1000 };
        s.valid = PROTO_M_BIT(PROTO_M_CPU_PERCENT) | PROTO_M_BIT(PROTO_M_MEMORY_USED_MB) |
                  PROTO_M_BIT(PROTO_M_MEMORY_LIMIT_MB);
        s.v[PROTO_M_CPU_PERCENT] = v;
        s.v[PROTO_M_MEMORY_USED_MB] = 100 + v;
        s.v[PROTO_M_MEMORY_LIMIT_MB] = 2048;
        if ((long)v % 2 == 0) {
                s.valid |= PROTO_M_BIT(PROTO_M_DISK_READ_BPS);
                s.v[PROTO_M_DISK_READ_BPS] = 10 * v;
        }
        history_record(h, &s);
}

static struct proto_metrics_point bucket(struct history *h, unsigned tier, uint32_t start)
{
        struct proto_metrics_point p;
        assert_true(history_bucket(h, tier, start, &p));
        return p;
}

static void assert_cpu(const struct proto_metrics_point *p, double avg, double max)
{
        assert_true(p->valid & PROTO_M_BIT(PROTO_M_CPU_PERCENT));
        if (fabs(p->avg[PROTO_M_CPU_PERCENT] - avg) > 1e-4 || fabs(p->max[PROTO_M_CPU_PERCENT] - max) > 1e-4)
                fail_msg("cpu avg %f max %f, want %f %f", p->avg[PROTO_M_CPU_PERCENT], p->max[PROTO_M_CPU_PERCENT],
                         avg, max);
}

static void test_file_size(void **state)
{
        struct fx *f = *state;
        enum history_open_result res;
        struct history *h = open_hist(f->path, &res);
        assert_int_equal(res, HISTORY_CREATED);
        struct stat st;
        assert_int_equal(stat(f->path, &st), 0);
        assert_int_equal(st.st_size, 262144);
        history_close(h);
        h = open_hist(f->path, &res);
        assert_int_equal(res, HISTORY_OPENED);
        history_close(h);
}

/* One sample per 10 s from T0 for 16 minutes: values 0..95. */
static void test_rollups(void **state)
{
        struct fx *f = *state;
        struct history *h = open_hist(f->path, NULL);
        for (uint32_t i = 0; i < 96; i++)
                put(h, T0 + 10 * i, (double)i);

        /* 10 s bucket: the sample itself */
        struct proto_metrics_point p = bucket(h, 0, T0 + 30);
        assert_cpu(&p, 3, 3);
        assert_false(p.valid & PROTO_M_BIT(PROTO_M_DISK_READ_BPS)); /* odd: no disk value */
        p = bucket(h, 0, T0 + 40);
        assert_true(p.valid & PROTO_M_BIT(PROTO_M_DISK_READ_BPS));
        assert_true(p.avg[PROTO_M_DISK_READ_BPS] == 40);

        /* minute 0: values 0..5 */
        p = bucket(h, 1, T0);
        assert_cpu(&p, 2.5, 5);
        assert_true(p.avg[PROTO_M_MEMORY_USED_MB] == 102.5);
        assert_true(p.max[PROTO_M_MEMORY_USED_MB] == 105);
        assert_true(p.avg[PROTO_M_MEMORY_LIMIT_MB] == 2048);
        /* disk only in 3 of the 6 buckets (0, 20, 40): average over those */
        assert_true(p.avg[PROTO_M_DISK_READ_BPS] == 20);
        assert_true(p.max[PROTO_M_DISK_READ_BPS] == 40);
        /* minute 14: values 84..89 */
        p = bucket(h, 1, T0 + 14 * 60);
        assert_cpu(&p, 86.5, 89);

        /* the first quarter hour: values 0..89 */
        p = bucket(h, 2, T0);
        assert_cpu(&p, 44.5, 89);
        /* the quarter hour in progress holds minute 15 (values 90..95) */
        p = bucket(h, 2, T0 + 900);
        assert_cpu(&p, 92.5, 95);
        /* and so does its minute */
        p = bucket(h, 1, T0 + 900);
        assert_cpu(&p, 92.5, 95);
        history_close(h);
}

/* Two samples per 10 s bucket and a start in the middle of a minute and a quarter hour. */
static void test_boundaries(void **state)
{
        struct fx *f = *state;
        struct history *h = open_hist(f->path, NULL);
        /* from T0 - 30 s to T0 + 85 s every 5 s: values 0, 1, 2, ... */
        double v = 0;
        for (uint32_t t = T0 - 30; t <= T0 + 85; t += 5)
                put(h, t, v++);

        /* T0-30 holds values 0,1; T0-20: 2,3; T0-10: 4,5 */
        struct proto_metrics_point p = bucket(h, 0, T0 - 30);
        assert_cpu(&p, 0.5, 1);
        /* the minute before T0 has only its last 30 s: buckets of 0.5, 2.5, 4.5 */
        p = bucket(h, 1, T0 - 60);
        assert_cpu(&p, 2.5, 5);
        /* so has the quarter hour before T0 */
        p = bucket(h, 2, T0 - 900);
        assert_cpu(&p, 2.5, 5);
        /* minute T0: values 6..17, buckets 6.5, 8.5, ..., 16.5 */
        p = bucket(h, 1, T0);
        assert_cpu(&p, 11.5, 17);
        /* minute T0+60 in progress: values 18..23 (T0+60..T0+85) */
        p = bucket(h, 1, T0 + 60);
        assert_cpu(&p, 20.5, 23);
        /* quarter T0 in progress: minute averages 11.5 and 20.5 weigh the same */
        p = bucket(h, 2, T0);
        assert_cpu(&p, 16, 23);
        /* nothing there */
        assert_false(history_bucket(h, 1, T0 - 120, &p));
        history_close(h);
}

/* A restart mid-minute and mid-quarter gives the same buckets as no restart. */
static void test_reopen(void **state)
{
        struct fx *f = *state;
        char other[600];
        snprintf(other, sizeof(other), "%s/reference.hist", f->dir);
        struct history *ref = open_hist(other, NULL);
        struct history *h = open_hist(f->path, NULL);
        uint32_t t = T0 + 300;
        for (int i = 0; i < 40; i++, t += 10) {
                put(ref, t, i);
                put(h, t, i);
                if (i == 13 || i == 27) { /* mid-minute: closes the file, opens it again */
                        history_close(h);
                        enum history_open_result res;
                        h = open_hist(f->path, &res);
                        assert_int_equal(res, HISTORY_OPENED);
                }
        }
        for (unsigned k = 0; k < 3; k++)
                for (uint32_t s = T0; s < T0 + 1800; s += 10) {
                        struct proto_metrics_point a, b;
                        bool ha = history_bucket(ref, k, s, &a), hb = history_bucket(h, k, s, &b);
                        assert_int_equal(ha, hb);
                        if (ha) {
                                assert_int_equal(a.valid, b.valid);
                                for (int fld = 0; fld < PROTO_M__COUNT; fld++)
                                        if (a.valid & PROTO_M_BIT(fld)) {
                                                assert_true(a.avg[fld] == b.avg[fld]);
                                                assert_true(a.max[fld] == b.max[fld]);
                                        }
                        }
                }
        struct proto_metrics_point p = bucket(h, 2, T0);
        /* minutes 5..10 hold 6 samples each (averages 2.5 .. 32.5), minute 11 four (37.5): minutes weigh the same */
        assert_cpu(&p, 142.5 / 7, 39);
        history_close(h);
        history_close(ref);
}

/* The file as a crash of the process would leave it: its bytes now, copied elsewhere. */
static void copy_file(const char *from, const char *to)
{
        static char buf[262144];
        int in = open(from, O_RDONLY | O_CLOEXEC), out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
        assert_true(in >= 0 && out >= 0);
        ssize_t n = read(in, buf, sizeof(buf));
        assert_int_equal(n, (ssize_t)sizeof(buf));
        assert_int_equal(write(out, buf, (size_t)n), n);
        close(in);
        close(out);
}

/* Every bucket of every tier that starts in [from, to) (a coarser one: that ends by to) reads the same in a and b. */
static void assert_same_buckets(struct history *a, struct history *b, uint32_t from, uint32_t to)
{
        static const uint32_t res[3] = { 10, 60, 900 };
        for (unsigned k = 0; k < 3; k++)
                for (uint32_t s = from; s + res[k] <= to - to % 10 + 10; s += 10) {
                        struct proto_metrics_point pa, pb;
                        bool ha = history_bucket(a, k, s, &pa), hb = history_bucket(b, k, s, &pb);
                        if (ha != hb)
                                fail_msg("tier %u at T0 + %u: %d against %d", k, s - T0, ha, hb);
                        if (!ha)
                                continue;
                        assert_int_equal(pa.valid, pb.valid);
                        for (int fld = 0; fld < PROTO_M__COUNT; fld++)
                                if (pa.valid & PROTO_M_BIT(fld))
                                        assert_true(pa.avg[fld] == pb.avg[fld] && pa.max[fld] == pb.max[fld]);
                }
}

/*
 * Closed buckets are held in memory until a flush: a crash loses at most the last
 * HISTORY_FLUSH_BUCKETS of them and the one in progress, never an older bucket of any
 * tier, and the file it leaves goes on (the lost samples recorded again) exactly as if
 * nothing had happened.
 */
static void test_crash_loses_only_unflushed(void **state)
{
        struct fx *f = *state;
        char ref_path[600], crash[600];
        snprintf(ref_path, sizeof(ref_path), "%s/reference.hist", f->dir);
        snprintf(crash, sizeof(crash), "%s/crash.hist", f->dir);
        struct history *ref = open_hist(ref_path, NULL), *h = open_hist(f->path, NULL);
        const uint32_t first = T0 + 300;
        const int n = 150, crash_at = 97; /* across minutes and the quarter hour T0 + 900 */
        for (int i = 0; i < n; i++)
                put(ref, first + 10 * (uint32_t)i, i % 37);
        for (int i = 0; i <= crash_at; i++) {
                put(h, first + 10 * (uint32_t)i, i % 37);
                if (i == 70)
                        history_flush(h); /* the collector's flush of this target */
        }
        copy_file(f->path, crash);
        history_close(h); /* the process goes on (and stops cleanly): nothing of it reaches the copy */

        struct history *c = open_hist(crash, NULL);
        struct proto_metrics_point p;
        int kept = -1;
        for (int i = 0; i <= crash_at; i++)
                if (history_bucket(c, 0, first + 10 * (uint32_t)i, &p))
                        kept = i;
                else
                        break;
        assert_true(kept >= crash_at - HISTORY_FLUSH_BUCKETS - 1);
        assert_false(history_bucket(c, 0, first + 10 * (uint32_t)(kept + 1), &p));
        /* what the file kept is what the reference has: each tier up to the bucket the newest 10 s bucket is in */
        assert_same_buckets(ref, c, T0, first + 10 * (uint32_t)kept);
        for (int i = kept + 1; i < n; i++)
                put(c, first + 10 * (uint32_t)i, i % 37);
        assert_same_buckets(ref, c, T0, first + 10 * (uint32_t)n);
        history_close(c);
        history_close(ref);
}

static void test_series(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct history *h = open_hist(f->path, NULL);
        for (uint32_t i = 0; i < 96; i++)
                put(h, T0 + 10 * i, (double)i);

        /* minutes in pairs: (0..5, 6..11) -> 5.5 max 11; ... */
        struct proto_metrics_query q = { .now_ms = (T0 + 960) * 1000LL, .from_ms = (int64_t)T0 * 1000,
                                         .to_ms = (T0 + 959) * 1000LL, .step_sec = 120, .tier = 1 };
        struct proto_metrics_point *pts = NULL;
        size_t n = 0;
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 8);
        assert_int_equal(pts[0].at_ms, (uint64_t)T0 * 1000);
        assert_cpu(&pts[0], 5.5, 11);
        assert_int_equal(pts[7].at_ms, (uint64_t)(T0 + 840) * 1000);
        assert_cpu(&pts[7], 89.5, 95);
        free(pts);

        /* 10 s points over the first minute, from an unaligned from */
        q = (struct proto_metrics_query){ .now_ms = (T0 + 960) * 1000LL, .from_ms = (T0 + 5) * 1000LL,
                                          .to_ms = (T0 + 59) * 1000LL, .step_sec = 10, .tier = 0 };
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 6);
        assert_cpu(&pts[5], 5, 5);
        free(pts);

        /* points after now are not given */
        q = (struct proto_metrics_query){ .now_ms = (T0 + 30) * 1000LL, .from_ms = (int64_t)T0 * 1000,
                                          .to_ms = (T0 + 600) * 1000LL, .step_sec = 10, .tier = 0 };
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 4);
        free(pts);

        /* a step that does not fit the tier is refused */
        q.step_sec = 30;
        q.tier = 1;
        assert_int_equal(history_series(h, &q, &pts, &n, &err), -EINVAL);
        na_error_clear(&err);
        history_close(h);
}

static void test_gaps_and_clock(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct history *h = open_hist(f->path, NULL);
        put(h, T0, 7);
        put(h, T0 + 2 * 3600, 9); /* two hours later: the 10 s ring went round */

        struct proto_metrics_point p;
        assert_false(history_bucket(h, 0, T0, &p)); /* its slot holds T0 + 2 h now */
        struct proto_metrics_query q = { .now_ms = (T0 + 7200) * 1000LL, .from_ms = (T0 + 3600) * 1000LL,
                                         .to_ms = (T0 + 7200) * 1000LL, .step_sec = 10, .tier = 0 };
        struct proto_metrics_point *pts = NULL;
        size_t n = 0;
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 1);
        assert_cpu(&pts[0], 9, 9);
        free(pts);
        /* the old minute and quarter are still there */
        p = bucket(h, 1, T0);
        assert_cpu(&p, 7, 7);

        /* the clock goes back: recording goes on from there */
        put(h, T0 + 3600, 4);
        p = bucket(h, 0, T0 + 3600);
        assert_cpu(&p, 4, 4);
        put(h, T0 + 3610, 6);
        p = bucket(h, 1, T0 + 3600);
        assert_cpu(&p, 5, 6);
        history_close(h);
}

static void corrupt(const char *path, off_t off, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, data, len, off), (ssize_t)len);
        close(fd);
}

static void test_corrupt(void **state)
{
        struct fx *f = *state;
        enum history_open_result res;
        struct history *h = open_hist(f->path, NULL);
        for (uint32_t i = 0; i < 12; i++)
                put(h, T0 + 10 * i, (double)i);
        history_close(h);

        /* a bucket whose start does not belong in its slot, one with NaN and negative values */
        uint32_t bad = 12345;
        corrupt(f->path, 64 + 56 * (int)((T0 / 10) % 360), &bad, sizeof(bad));
        float junk[2] = { NAN, -5.0f };
        corrupt(f->path, 64 + 56 * (int)(((T0 + 10) / 10) % 360) + 4, junk, sizeof(junk));
        h = open_hist(f->path, &res);
        assert_int_equal(res, HISTORY_OPENED);
        struct proto_metrics_point p;
        assert_false(history_bucket(h, 0, T0, &p));
        assert_true(history_bucket(h, 0, T0 + 10, &p));
        assert_false(p.valid & PROTO_M_BIT(PROTO_M_CPU_PERCENT));    /* NaN */
        assert_false(p.valid & PROTO_M_BIT(PROTO_M_MEMORY_USED_MB)); /* negative */
        p = bucket(h, 0, T0 + 20);
        assert_cpu(&p, 2, 2);
        history_close(h);

        /* a bad header: recreated empty */
        corrupt(f->path, 0, "XXXX", 4);
        h = open_hist(f->path, &res);
        assert_int_equal(res, HISTORY_RECREATED);
        assert_false(history_bucket(h, 0, T0 + 20, &p));
        put(h, T0 + 200, 1);
        history_close(h);

        /* a short file: recreated */
        assert_int_equal(truncate(f->path, 1000), 0);
        h = open_hist(f->path, &res);
        assert_int_equal(res, HISTORY_RECREATED);
        struct stat st;
        assert_int_equal(stat(f->path, &st), 0);
        assert_int_equal(st.st_size, 262144);
        history_close(h);

        /* a long one too */
        assert_int_equal(truncate(f->path, 300000), 0);
        h = open_hist(f->path, &res);
        assert_int_equal(res, HISTORY_RECREATED);
        history_close(h);

        /* read-only opens never fail on a bad file, and say when there is none */
        struct na_error err = NA_ERROR_INIT;
        corrupt(f->path, 0, "YYYY", 4);
        assert_int_equal(history_open_readonly(f->path, &h, &err), 0);
        assert_false(history_bucket(h, 0, T0, &p));
        history_close(h);
        char none[600];
        snprintf(none, sizeof(none), "%s/none.hist", f->dir);
        assert_int_equal(history_open_readonly(none, &h, &err), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_file_size, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rollups, setup, teardown),
                cmocka_unit_test_setup_teardown(test_boundaries, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_loses_only_unflushed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_series, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gaps_and_clock, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
