/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics/history.c on disk: a file laid out by hand and written through a shared
 * mapping, as the history was written before it moved to pread/pwrite, reads back
 * bucket for bucket (in progress ones rebuilt too); what the writer puts on disk sits
 * at the documented offsets; and the file is never mapped into the process.
 * The layout here is spelled out with literal numbers (metrics/history.h), not
 * taken from history.c, so a change of format fails this test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fileio.h"
#include "fixture.h"
#include "metrics/history.h"

/* 2026-11-21T12:00:00Z: a multiple of 900 s */
#define T0 1795262400u
#define SIZE 262144u

struct fx {
        char *dir;
        char path[512];
};

/* The documented layout, byte for byte. */
struct raw_header {
        char magic[8];
        uint32_t version, header_size, bucket_size, fields, tiers, res[3], slots[3], reserved[2], crc;
};
struct raw_bucket {
        uint32_t start;
        float avg[7]; /* cpu, memory used, memory limit, disk read, disk write, rx, tx */
        float max[6]; /* the same without memory limit */
};

static size_t offset_of(unsigned tier, uint32_t start)
{
        static const size_t base[3] = { 64, 20224, 100864 };
        static const uint32_t res[3] = { 10, 60, 900 }, slots[3] = { 360, 1440, 2880 };
        return base[tier] + (size_t)((start / res[tier]) % slots[tier]) * 56;
}

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->dir = fx_mkdtemp("histfile");
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

static void put_bucket(char *map, unsigned tier, uint32_t start, double cpu_avg, double cpu_max)
{
        struct raw_bucket b = { .start = start };
        for (int i = 0; i < 7; i++)
                b.avg[i] = NAN;
        for (int i = 0; i < 6; i++)
                b.max[i] = NAN;
        b.avg[0] = (float)cpu_avg;
        b.max[0] = (float)cpu_max;
        memcpy(map + offset_of(tier, start), &b, sizeof(b));
}

/* The file as the mapped writer left it after minute T0 and 20 s of the next one. */
static void write_mapped(const char *path)
{
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, SIZE), 0);
        char *map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(map != MAP_FAILED);
        struct raw_header hd = { .magic = "NAHIST01", .version = 1, .header_size = 64, .bucket_size = 56,
                                 .fields = 7, .tiers = 3, .res = { 10, 60, 900 }, .slots = { 360, 1440, 2880 } };
        _Static_assert(sizeof(hd) == 64, "64-byte header");
        hd.crc = na_crc32c(0, &hd, offsetof(struct raw_header, crc));
        memcpy(map, &hd, sizeof(hd));
        for (uint32_t i = 0; i < 8; i++) /* minute T0 whole, and two buckets of minute T0 + 60 */
                put_bucket(map, 0, T0 + 10 * i, i, i + 0.5);
        put_bucket(map, 1, T0, 2.5, 5.5);                           /* minute T0, closed */
        put_bucket(map, 2, T0 - 86400, 7, 9);                       /* yesterday's quarter hour */
        put_bucket(map, 2, T0 - 900 - 2880u * 900, 1, 1);           /* stale: a ring ago, in T0 - 900's slot */
        assert_int_equal(munmap(map, SIZE), 0);
        close(fd);
}

static void assert_cpu(const struct history *h, unsigned tier, uint32_t start, double avg, double max)
{
        struct proto_metrics_point p;
        assert_true(history_bucket(h, tier, start, &p));
        assert_true(p.valid == PROTO_M_BIT(PROTO_M_CPU_PERCENT));
        if (fabs(p.avg[PROTO_M_CPU_PERCENT] - avg) > 1e-4 || fabs(p.max[PROTO_M_CPU_PERCENT] - max) > 1e-4)
                fail_msg("tier %u at %u: cpu avg %f max %f, want %f %f", tier, start, p.avg[PROTO_M_CPU_PERCENT],
                         p.max[PROTO_M_CPU_PERCENT], avg, max);
}

static void check_mapped_file(const struct history *h)
{
        assert_cpu(h, 0, T0 + 20, 2, 2.5);
        assert_cpu(h, 0, T0 + 70, 7, 7.5);
        assert_cpu(h, 1, T0, 2.5, 5.5);
        assert_cpu(h, 1, T0 + 60, 6.5, 7.5); /* in progress: rebuilt from the 10 s ring */
        assert_cpu(h, 2, T0, 4.5, 7.5);      /* in progress: the closed minute and the one in progress */
        assert_cpu(h, 2, T0 - 86400, 7, 9);
        struct proto_metrics_point p;
        assert_false(history_bucket(h, 2, T0 - 900, &p)); /* stale */
        assert_false(history_bucket(h, 0, T0 + 80, &p));

        struct proto_metrics_query q = { .now_ms = (T0 + 100) * 1000LL, .from_ms = (T0 - 2 * 86400) * 1000LL,
                                         .to_ms = (T0 + 100) * 1000LL, .step_sec = 900, .tier = 2 };
        struct proto_metrics_point *pts = NULL;
        size_t n = 0;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 2);
        assert_true(pts[0].at_ms == (T0 - 86400) * 1000ULL && pts[1].at_ms == T0 * 1000ULL);
        assert_true(fabs(pts[1].avg[PROTO_M_CPU_PERCENT] - 4.5) < 1e-4);
        free(pts);

        q = (struct proto_metrics_query){ .now_ms = (T0 + 100) * 1000LL, .from_ms = (T0 - 3600) * 1000LL,
                                          .to_ms = (T0 + 100) * 1000LL, .step_sec = 30, .tier = 0 };
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 3); /* T0 (0, 1, 2), T0 + 30 (3, 4, 5), T0 + 60 (6, 7) */
        assert_true(fabs(pts[0].avg[PROTO_M_CPU_PERCENT] - 1) < 1e-4 && fabs(pts[2].avg[PROTO_M_CPU_PERCENT] - 6.5) < 1e-4);
        assert_true(fabs(pts[1].max[PROTO_M_CPU_PERCENT] - 5.5) < 1e-4);
        free(pts);
}

/* A file in the layout the mapped history wrote reads back the same, read-only and for recording. */
static void test_mapped_layout_reads_back(void **state)
{
        struct fx *f = *state;
        write_mapped(f->path);
        struct na_error err = NA_ERROR_INIT;
        struct history *h = NULL;
        assert_int_equal(history_open_readonly(f->path, &h, &err), 0);
        check_mapped_file(h);
        history_close(h);

        enum history_open_result res;
        assert_int_equal(history_open(f->path, false, &h, &res, &err), 0);
        assert_int_equal(res, HISTORY_OPENED);
        check_mapped_file(h);
        history_close(h);
}

static struct raw_bucket raw_at(const char *path, unsigned tier, uint32_t start)
{
        struct raw_bucket b;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, &b, sizeof(b), (off_t)offset_of(tier, start)), (ssize_t)sizeof(b));
        close(fd);
        return b;
}

static void record_cpu(struct history *h, uint32_t t, double v)
{
        struct proto_metrics_sample s = { .at_ms = (uint64_t)t * 1000, .valid = PROTO_M_BIT(PROTO_M_CPU_PERCENT) };
        s.v[PROTO_M_CPU_PERCENT] = v;
        history_record(h, &s);
}

/* What recording writes lands where the mapped writer put it, and nothing else moves. */
static void test_writer_offsets(void **state)
{
        struct fx *f = *state;
        write_mapped(f->path);
        char *before = NULL, *after = NULL;
        size_t len_b = 0, len_a = 0;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_read_file(f->path, SIZE, &before, &len_b, &err), 0);

        struct history *h = NULL;
        assert_int_equal(history_open(f->path, false, &h, NULL, &err), 0);
        record_cpu(h, T0 + 80, 8);
        struct raw_bucket b = raw_at(f->path, 0, T0 + 80); /* in progress: in memory only */
        assert_int_not_equal(b.start, T0 + 80);
        struct proto_metrics_point p;
        assert_true(history_bucket(h, 0, T0 + 80, &p) && p.avg[0] == 8.0);
        record_cpu(h, T0 + 120, 12); /* closes 10 s bucket T0 + 80 and minute T0 + 60: held until a flush */
        assert_int_not_equal(raw_at(f->path, 0, T0 + 80).start, T0 + 80);
        assert_int_not_equal(raw_at(f->path, 1, T0 + 60).start, T0 + 60);
        history_flush(h);
        b = raw_at(f->path, 0, T0 + 80);
        assert_int_equal(b.start, T0 + 80);
        assert_true(b.avg[0] == 8.0f && b.max[0] == 8.0f && isnan(b.avg[1]) && isnan(b.max[5]));
        assert_int_not_equal(raw_at(f->path, 0, T0 + 120).start, T0 + 120); /* still in progress */
        history_close(h);                                                    /* writes it */
        assert_int_equal(raw_at(f->path, 0, T0 + 120).start, T0 + 120);

        b = raw_at(f->path, 1, T0 + 60);
        assert_int_equal(b.start, T0 + 60);
        assert_true(fabsf(b.avg[0] - 7.0f) < 1e-5f && b.max[0] == 8.0f);
        assert_int_equal(na_read_file(f->path, SIZE, &after, &len_a, &err), 0);
        assert_int_equal(len_a, SIZE);
        /* Only the three buckets written differ: the header and every other byte are as they were. */
        size_t changed[] = { offset_of(0, T0 + 80), offset_of(0, T0 + 120), offset_of(1, T0 + 60) };
        for (size_t i = 0; i < ARRAY_SIZE(changed); i++) {
                memset(before + changed[i], 0, 56);
                memset(after + changed[i], 0, 56);
        }
        assert_memory_equal(before, after, SIZE);
        free(before);
        free(after);
}

/* However much is recorded and read, no page of the file is in the process's address space. */
static void test_never_mapped(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct history *h = NULL;
        assert_int_equal(history_open(f->path, true, &h, NULL, &err), 0);
        for (uint32_t t = T0; t < T0 + 7200; t += 10)
                record_cpu(h, t, t % 100);
        struct proto_metrics_query q = { .now_ms = (T0 + 7200) * 1000LL, .from_ms = 0, .to_ms = (T0 + 7200) * 1000LL,
                                         .step_sec = 900, .tier = 2 };
        struct proto_metrics_point *pts = NULL;
        size_t n = 0;
        assert_int_equal(history_series(h, &q, &pts, &n, &err), 0);
        assert_int_equal(n, 8);
        free(pts);
        char *maps = NULL;
        size_t len = 0;
        assert_int_equal(na_read_file("/proc/self/maps", 1 << 24, &maps, &len, &err), 0);
        if (strstr(maps, f->path))
                fail_msg("%s is mapped:\n%s", f->path, maps);
        free(maps);
        history_close(h);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_mapped_layout_reads_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_writer_offsets, setup, teardown),
                cmocka_unit_test_setup_teardown(test_never_mapped, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
