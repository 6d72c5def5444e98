/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "metrics/history.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"

#define HIST_MAGIC "NAHIST01"
#define HIST_VERSION 1u
#define HIST_MAXES (PROTO_M__COUNT - 1)

struct hist_header {
        char magic[8];
        uint32_t version;
        uint32_t header_size;
        uint32_t bucket_size;
        uint32_t fields;
        uint32_t tiers;
        uint32_t res[PROTO_METRICS_TIERS];
        uint32_t slots[PROTO_METRICS_TIERS];
        uint32_t reserved[2];
        uint32_t crc; /* crc32c of everything before it */
};

struct hist_bucket {
        uint32_t start;
        float avg[PROTO_M__COUNT];
        float max[HIST_MAXES];
};

_Static_assert(sizeof(struct hist_header) == 64, "history header is 64 bytes");
_Static_assert(sizeof(struct hist_bucket) == 56, "history bucket is 56 bytes");
_Static_assert(sizeof(struct hist_header) + (360 + 1440 + 2880) * sizeof(struct hist_bucket) == HISTORY_FILE_SIZE,
               "history file is 256 KiB");

/* A bucket in progress: sums and counts per value (a sample or a finer bucket is one unit). */
struct hist_acc {
        uint32_t start; /* 0: none */
        uint16_t n[PROTO_M__COUNT];
        double sum[PROTO_M__COUNT];
        double max[PROTO_M__COUNT];
};

/* Closed buckets held until a flush, per tier: 2 minutes of 10 s buckets, the minutes and quarter hour closing meanwhile. */
static const unsigned pend_cap[PROTO_METRICS_TIERS] = { HISTORY_FLUSH_BUCKETS, 3, 1 };
#define PEND_TOTAL (HISTORY_FLUSH_BUCKETS + 3 + 1)

/*
 * No copy of the file: only its descriptor, the buckets in progress and the closed
 * buckets not written yet. Buckets are read and written with pread/pwrite, so the
 * file's pages stay in the page cache and never count in the process's RSS.
 */
struct history {
        int fd; /* -1: no intact file (read-only open of a bad one): everything reads empty */
        bool readonly;
        struct hist_acc acc[PROTO_METRICS_TIERS];
        uint8_t npend[PROTO_METRICS_TIERS];
        struct hist_bucket pend[PEND_TOTAL]; /* per tier from pend_base(k), oldest first */
};

/* Where the closed buckets of tier k (k < PROTO_METRICS_TIERS) held in memory start in h->pend. */
static unsigned pend_base(unsigned k)
{
        static const unsigned base[PROTO_METRICS_TIERS] = { 0, HISTORY_FLUSH_BUCKETS, HISTORY_FLUSH_BUCKETS + 3 };
        return base[k % PROTO_METRICS_TIERS];
}

static int max_index(int f)
{
        return f < PROTO_M_MEMORY_LIMIT_MB ? f : (f == PROTO_M_MEMORY_LIMIT_MB ? -1 : f - 1);
}

static void header_fill(struct hist_header *hd)
{
        memset(hd, 0, sizeof(*hd));
        memcpy(hd->magic, HIST_MAGIC, 8);
        hd->version = HIST_VERSION;
        hd->header_size = sizeof(struct hist_header);
        hd->bucket_size = sizeof(struct hist_bucket);
        hd->fields = PROTO_M__COUNT;
        hd->tiers = PROTO_METRICS_TIERS;
        for (int k = 0; k < PROTO_METRICS_TIERS; k++) {
                hd->res[k] = proto_metrics_tiers[k].res_sec;
                hd->slots[k] = proto_metrics_tiers[k].slots;
        }
        hd->crc = na_crc32c(0, hd, offsetof(struct hist_header, crc));
}

static bool header_ok(const struct hist_header *hd)
{
        struct hist_header want;
        header_fill(&want);
        return memcmp(hd, &want, sizeof(want)) == 0;
}

static uint32_t slot_of(unsigned k, uint32_t start)
{
        return (start / proto_metrics_tiers[k].res_sec) % proto_metrics_tiers[k].slots;
}

/* Where slot of tier k lies in the file. */
static off_t slot_offset(unsigned k, uint32_t slot)
{
        size_t before = 0;
        for (unsigned j = 0; j < k; j++)
                before += proto_metrics_tiers[j].slots;
        return (off_t)(sizeof(struct hist_header) + (before + slot) * sizeof(struct hist_bucket));
}

/*
 * Read n consecutive buckets of tier k from the one holding first (n <= slots; the
 * ring wraps) into buf. What the file does not hold (cut short) reads as zeros,
 * that is empty. -errno on a read error.
 */
static int read_buckets(const struct history *h, unsigned k, uint32_t first, size_t n, struct hist_bucket *buf)
{
        memset(buf, 0, n * sizeof(*buf));
        uint32_t slots = proto_metrics_tiers[k].slots, slot = slot_of(k, first);
        size_t done = 0;
        while (done < n) {
                size_t run = n - done < slots - slot ? n - done : slots - slot;
                size_t len = run * sizeof(*buf);
                ssize_t r = pread(h->fd, (char *)(buf + done), len, slot_offset(k, slot));
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if ((size_t)r < len)
                        break; /* end of a file cut short under us */
                done += run;
                slot = 0;
        }
        return 0;
}

/* Is b, read from the slot of start, the bucket of tier k that starts there (not stale or corrupt)? */
static bool bucket_is(unsigned k, const struct hist_bucket *b, uint32_t start)
{
        return start != 0 && start % proto_metrics_tiers[k].res_sec == 0 && b->start == start;
}

/* The file's bucket of tier k that holds start into *out; false when its slot holds something else. */
static bool bucket_read(const struct history *h, unsigned k, uint32_t start, struct hist_bucket *out)
{
        if (h->fd < 0 || start == 0 || start % proto_metrics_tiers[k].res_sec != 0)
                return false;
        return read_buckets(h, k, start, 1, out) == 0 && bucket_is(k, out, start);
}

static bool value_ok(float v)
{
        return isfinite(v) && v >= 0;
}

/* ---- accumulating ---- */

static void acc_init(struct hist_acc *a, uint32_t start)
{
        memset(a, 0, sizeof(*a));
        a->start = start;
}

static void acc_add(struct hist_acc *a, int f, double avg, double max)
{
        if (a->n[f] == UINT16_MAX)
                return;
        a->sum[f] += avg;
        if (a->n[f] == 0 || max > a->max[f])
                a->max[f] = max;
        a->n[f]++;
}

/* Fold a finished (or partial) bucket into a coarser one as one unit. */
static void acc_add_bucket(struct hist_acc *a, const struct hist_bucket *b)
{
        for (int f = 0; f < PROTO_M__COUNT; f++) {
                if (!value_ok(b->avg[f]))
                        continue;
                int mi = max_index(f);
                double mx = mi >= 0 && value_ok(b->max[mi]) ? b->max[mi] : b->avg[f];
                acc_add(a, f, b->avg[f], mx);
        }
}

static void acc_to_bucket(const struct hist_acc *a, struct hist_bucket *b)
{
        b->start = a->start;
        for (int f = 0; f < PROTO_M__COUNT; f++) {
                b->avg[f] = a->n[f] ? (float)(a->sum[f] / a->n[f]) : NAN;
                int mi = max_index(f);
                if (mi >= 0)
                        b->max[mi] = a->n[f] ? (float)a->max[f] : NAN;
        }
}

/*
 * n buckets of tier k in consecutive slots with one pwrite into the page cache. A
 * failure (a full disk when the file was not preallocated) loses these buckets
 * only, where a mapping would have killed the process with SIGBUS.
 */
static void write_buckets(const struct history *h, unsigned k, const struct hist_bucket *b, size_t n)
{
        ssize_t r;
        do
                r = pwrite(h->fd, b, n * sizeof(*b), slot_offset(k, slot_of(k, b->start)));
        while (r < 0 && errno == EINTR);
}

unsigned history_flush(struct history *h)
{
        unsigned writes = 0;
        if (!h || h->readonly || h->fd < 0)
                return 0;
        /*
         * Coarser tiers first: a finer bucket reaches the file only with or after the
         * coarser ones that closed before it, so after a crash every bucket older
         * than the newest 10 s bucket in the file is there too, and the ones in
         * progress are rebuilt from the finer tiers as after a clean stop.
         */
        for (unsigned k = PROTO_METRICS_TIERS; k-- > 0;) {
                const struct hist_bucket *p = &h->pend[pend_base(k)];
                unsigned n = h->npend[k];
                for (unsigned i = 0; i < n;) {
                        unsigned run = 1;
                        while (i + run < n && slot_of(k, p[i + run].start) == slot_of(k, p[i].start) + run)
                                run++;
                        write_buckets(h, k, &p[i], run);
                        writes++;
                        i += run;
                }
                h->npend[k] = 0;
        }
        return writes;
}

/* Hold a closed bucket of tier k for the next flush (flushing first when the tier's room is full). */
static unsigned pend_push(struct history *h, unsigned k, const struct hist_bucket *b)
{
        unsigned writes = 0;
        k %= PROTO_METRICS_TIERS;
        if (h->npend[k] >= pend_cap[k])
                writes = history_flush(h);
        h->pend[pend_base(k) + h->npend[k]++] = *b;
        return writes;
}

/* A closed bucket not written yet into *out; false when none holds start. */
static bool pend_find(const struct history *h, unsigned k, uint32_t start, struct hist_bucket *out)
{
        const struct hist_bucket *p = &h->pend[pend_base(k)];
        for (unsigned i = h->npend[k % PROTO_METRICS_TIERS]; i-- > 0;)
                if (p[i].start == start) {
                        *out = p[i];
                        return true;
                }
        return false;
}

static uint32_t parent_start(unsigned k, uint32_t start)
{
        return start - start % proto_metrics_tiers[k + 1].res_sec;
}

/* Tier k's bucket is finished: hold it for the next flush and fold it into tier k + 1. Returns the writes made. */
static unsigned close_bucket(struct history *h, unsigned k)
{
        struct hist_bucket b;
        acc_to_bucket(&h->acc[k], &b);
        unsigned writes = pend_push(h, k, &b);
        if (k + 1 < PROTO_METRICS_TIERS) {
                uint32_t p = parent_start(k, h->acc[k].start);
                if (h->acc[k + 1].start && h->acc[k + 1].start != p)
                        writes += close_bucket(h, k + 1);
                if (!h->acc[k + 1].start)
                        acc_init(&h->acc[k + 1], p);
                acc_add_bucket(&h->acc[k + 1], &b);
        }
        h->acc[k].start = 0;
        return writes;
}

/*
 * The bucket in progress of tier k as a query sees it: what tier k has gathered plus
 * the finer bucket in progress as one more unit. A bucket is written after it
 * closes (at the next flush); the ones in progress are rebuilt from the finer tiers
 * after a restart.
 */
static bool current_view(const struct history *h, unsigned k, struct hist_bucket *out)
{
        if (!h->acc[0].start)
                return false;
        acc_to_bucket(&h->acc[0], out);
        for (unsigned j = 1; j <= k; j++) {
                if (!h->acc[j].start)
                        return false;
                struct hist_acc view = h->acc[j];
                acc_add_bucket(&view, out);
                acc_to_bucket(&view, out);
        }
        return true;
}

/* The bucket of tier k at start from memory (in progress, or closed and not written yet); false when not there. */
static bool bucket_mem(const struct history *h, unsigned k, uint32_t start, struct hist_bucket *out)
{
        if (!start)
                return false;
        if (h->acc[k].start == start)
                return current_view(h, k, out);
        return pend_find(h, k, start, out);
}

/* The start of the newest bucket of tier k in memory (in progress or not written yet), 0 when none. */
static uint32_t newest_in_memory(const struct history *h, unsigned k)
{
        uint32_t n = h->npend[k] ? h->pend[pend_base(k) + h->npend[k] - 1].start : 0;
        return h->acc[k].start > n ? h->acc[k].start : n;
}

/* Still in tier k's ring: no newer bucket in memory takes (or will take) its slot. */
static bool in_ring(const struct history *h, unsigned k, int64_t start)
{
        const struct proto_metrics_tier *T = &proto_metrics_tiers[k];
        return start > (int64_t)newest_in_memory(h, k) - (int64_t)T->res_sec * T->slots;
}

/* The bucket of tier k at start as a query sees it into *out: from memory, or the file's. */
static bool bucket_get(const struct history *h, unsigned k, uint32_t start, struct hist_bucket *out)
{
        return in_ring(h, k, start) && (bucket_mem(h, k, start, out) || bucket_read(h, k, start, out));
}

unsigned history_record(struct history *h, const struct proto_metrics_sample *s)
{
        unsigned writes = 0;
        if (!h || h->readonly || h->fd < 0)
                return 0;
        uint64_t secs = s->at_ms / 1000;
        if (secs == 0 || secs > UINT32_MAX)
                return 0;
        uint32_t t = (uint32_t)secs;
        uint32_t b[PROTO_METRICS_TIERS];
        for (unsigned k = 0; k < PROTO_METRICS_TIERS; k++)
                b[k] = t - t % proto_metrics_tiers[k].res_sec;

        if (h->acc[0].start && b[0] < h->acc[0].start) {
                writes += history_flush(h); /* the clock went back: what closed stays, the rest starts over */
                for (unsigned k = 0; k < PROTO_METRICS_TIERS; k++)
                        h->acc[k].start = 0;
        }

        for (unsigned k = 0; k < PROTO_METRICS_TIERS; k++)
                if (h->acc[k].start && h->acc[k].start != b[k])
                        writes += close_bucket(h, k);
        for (unsigned k = 0; k < PROTO_METRICS_TIERS; k++)
                if (!h->acc[k].start)
                        acc_init(&h->acc[k], b[k]);

        for (int f = 0; f < PROTO_M__COUNT; f++)
                if ((s->valid & PROTO_M_BIT(f)) && isfinite(s->v[f]) && s->v[f] >= 0)
                        acc_add(&h->acc[0], f, s->v[f], s->v[f]);
        return writes;
}

/*
 * Rebuild the buckets in progress from the file after an open: the newest 10 s
 * bucket, the minute it belongs to from the 10 s ring, the quarter hour from the
 * minute ring. Reads tier 0 whole (20 KB) and up to 15 minutes; -errno on a read error.
 */
static int rebuild(struct history *h)
{
        const struct proto_metrics_tier *T = proto_metrics_tiers;
        memset(h->acc, 0, sizeof(h->acc));
        _cleanup_free_ struct hist_bucket *t0 = calloc(T[0].slots, sizeof(*t0));
        struct hist_bucket t1[15];
        _Static_assert(900 / 60 == 15, "15 minutes in a quarter hour");
        if (!t0)
                return -ENOMEM;
        int r = read_buckets(h, 0, 0, T[0].slots, t0);
        if (r < 0)
                return r;
        uint32_t newest = 0;
        for (uint32_t i = 0; i < T[0].slots; i++)
                if (t0[i].start > newest && bucket_is(0, &t0[i], t0[i].start) && slot_of(0, t0[i].start) == i)
                        newest = t0[i].start;
        if (!newest)
                return 0;

        acc_init(&h->acc[0], newest);
        acc_add_bucket(&h->acc[0], &t0[slot_of(0, newest)]);

        uint32_t p1 = parent_start(0, newest);
        acc_init(&h->acc[1], p1);
        for (uint32_t s = p1; s < newest; s += T[0].res_sec) {
                const struct hist_bucket *b = &t0[slot_of(0, s)];
                if (bucket_is(0, b, s))
                        acc_add_bucket(&h->acc[1], b);
        }
        uint32_t p2 = parent_start(1, p1);
        acc_init(&h->acc[2], p2);
        size_t n = (p1 - p2) / T[1].res_sec;
        if (n > 0 && (r = read_buckets(h, 1, p2, n, t1)) < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (bucket_is(1, &t1[i], p2 + (uint32_t)i * T[1].res_sec))
                        acc_add_bucket(&h->acc[2], &t1[i]);
        return 0;
}

/* ---- files ---- */

static int file_reset(int fd, bool preallocate, const char *path, struct na_error *err)
{
        struct hist_header hd;
        header_fill(&hd);
        if (ftruncate(fd, 0) < 0 || ftruncate(fd, HISTORY_FILE_SIZE) < 0)
                return na_error_sys(err, errno, "history %s: truncate", path);
        if (preallocate) {
                int r = posix_fallocate(fd, 0, HISTORY_FILE_SIZE);
                if (r != 0 && r != EOPNOTSUPP && r != EINVAL)
                        return na_error_sys(err, r, "history %s: allocate %u bytes", path, HISTORY_FILE_SIZE);
        }
        /* The header last: a crash before it leaves a file that is recreated at the next open. */
        if (pwrite(fd, &hd, sizeof(hd), 0) != (ssize_t)sizeof(hd))
                return na_error_sys(err, errno ? errno : EIO, "history %s: write header", path);
        return 0;
}


/* Read h's buckets from *fd; on success h owns the descriptor. */
static int load(struct history *h, int *fd, const char *path, struct na_error *err)
{
        h->fd = *fd;
        int r = rebuild(h);
        if (r < 0) {
                h->fd = -1;
                return na_error_sys(err, -r, "history %s: read", path);
        }
        h->fd = TAKE_FD(*fd);
        return 0;
}
int history_open(const char *path, bool preallocate, struct history **ret, enum history_open_result *result,
                 struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (fd < 0)
                return na_error_sys(err, errno, "history %s: open", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "history %s: stat", path);
        if (!S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "history %s: not a regular file", path);

        enum history_open_result res = HISTORY_OPENED;
        struct hist_header hd;
        bool intact = st.st_size == HISTORY_FILE_SIZE && pread(fd, &hd, sizeof(hd), 0) == (ssize_t)sizeof(hd) &&
                      header_ok(&hd);
        if (!intact) {
                res = st.st_size == 0 ? HISTORY_CREATED : HISTORY_RECREATED;
                int r = file_reset(fd, preallocate, path, err);
                if (r < 0)
                        return r;
        }

        _cleanup_free_ struct history *h = calloc(1, sizeof(*h));
        if (!h)
                return na_error_sys(err, ENOMEM, "history %s", path);
        /* Buckets are read a few at a time: readahead would only fill the page cache. */
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        int r = load(h, &fd, path, err);
        if (r < 0)
                return r;
        if (result)
                *result = res;
        *ret = TAKE_PTR(h);
        return 0;
}

int history_open_readonly(const char *path, struct history **ret, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? -ENOENT : na_error_sys(err, errno, "history %s: open", path);
        _cleanup_free_ struct history *h = calloc(1, sizeof(*h));
        if (!h)
                return na_error_sys(err, ENOMEM, "history %s", path);
        h->readonly = true;
        h->fd = -1;
        struct stat st;
        struct hist_header hd;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == HISTORY_FILE_SIZE &&
            pread(fd, &hd, sizeof(hd), 0) == (ssize_t)sizeof(hd) && header_ok(&hd)) {
                int r = load(h, &fd, path, err);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(h);
        return 0;
}

void history_close(struct history *h)
{
        if (!h)
                return;
        if (!h->readonly && h->fd >= 0) {
                /* What closed, then the 10 s bucket in progress: the next open rebuilds the rest from them. */
                history_flush(h);
                if (h->acc[0].start) {
                        struct hist_bucket b;
                        acc_to_bucket(&h->acc[0], &b);
                        write_buckets(h, 0, &b, 1);
                }
        }
        if (h->fd >= 0)
                close(h->fd);
        free(h);
}

/* ---- reading ---- */

struct group {
        uint64_t at_ms;
        uint16_t n[PROTO_M__COUNT];
        double sum[PROTO_M__COUNT];
        double max[PROTO_M__COUNT];
};

static void group_flush(struct group *g, struct proto_metrics_point *out, size_t *n)
{
        struct proto_metrics_point p = { .at_ms = g->at_ms };
        for (int f = 0; f < PROTO_M__COUNT; f++) {
                if (!g->n[f])
                        continue;
                p.valid |= PROTO_M_BIT(f);
                p.avg[f] = g->sum[f] / g->n[f];
                p.max[f] = g->max[f];
        }
        if (p.valid)
                out[(*n)++] = p;
}

static void group_add(struct group *g, const struct hist_bucket *b)
{
        for (int f = 0; f < PROTO_M__COUNT; f++) {
                if (!value_ok(b->avg[f]))
                        continue;
                int mi = max_index(f);
                double mx = mi >= 0 && value_ok(b->max[mi]) ? b->max[mi] : b->avg[f];
                g->sum[f] += b->avg[f];
                if (g->n[f] == 0 || mx > g->max[f])
                        g->max[f] = mx;
                g->n[f]++;
        }
}

int history_series(const struct history *h, const struct proto_metrics_query *q, struct proto_metrics_point **ret,
                   size_t *ret_n, struct na_error *err)
{
        *ret = NULL;
        *ret_n = 0;
        if (q->tier >= PROTO_METRICS_TIERS || q->step_sec == 0 || q->step_sec % proto_metrics_tiers[q->tier].res_sec)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "history: step %u does not fit tier %u", q->step_sec,
                                    q->tier);
        if (!h || h->fd < 0)
                return 0;
        int64_t to_ms = q->to_ms < q->now_ms ? q->to_ms : q->now_ms;
        if (to_ms < q->from_ms || to_ms <= 0)
                return 0;
        uint32_t res = proto_metrics_tiers[q->tier].res_sec;
        int64_t from_s = q->from_ms > 0 ? q->from_ms / 1000 : 0, to_s = to_ms / 1000;
        if (to_s > UINT32_MAX)
                to_s = UINT32_MAX;
        int64_t first = from_s - from_s % res;
        /* Nothing older than the ring can still be in it. */
        int64_t oldest = to_s - to_s % res - (int64_t)res * (proto_metrics_tiers[q->tier].slots - 1);
        if (first < oldest)
                first = oldest;
        if (first < res)
                first = res;

        /* A bucket in memory may take the slot of one in the file (the ring goes round at the next flush). */
        if (!in_ring(h, q->tier, first)) {
                int64_t gone = (int64_t)newest_in_memory(h, q->tier) - (int64_t)res * proto_metrics_tiers[q->tier].slots;
                first = gone - gone % res + res;
        }
        if (first > to_s)
                return 0;
        int64_t cap = proto_metrics_point_count(first * 1000, to_s * 1000, q->step_sec);
        if (cap <= 0)
                return 0;
        _cleanup_free_ struct proto_metrics_point *pts = calloc((size_t)cap, sizeof(*pts));
        if (!pts)
                return na_error_sys(err, ENOMEM, "history: %lld points", (long long)cap);

        /* The file's buckets of the range in one or two reads (first is at most one ring back). */
        size_t nb = (size_t)((to_s - first) / res) + 1;
        _cleanup_free_ struct hist_bucket *buf = calloc(nb, sizeof(*buf));
        if (!buf)
                return na_error_sys(err, ENOMEM, "history: %zu buckets", nb);
        int r = read_buckets(h, q->tier, (uint32_t)first, nb, buf);
        if (r < 0)
                return na_error_sys(err, -r, "history: read tier %u", q->tier);

        /* Buckets from the oldest one not written yet on may be in memory. */
        int64_t mem_from = h->acc[q->tier].start ? h->acc[q->tier].start : INT64_MAX;
        if (h->npend[q->tier] && h->pend[pend_base(q->tier)].start < mem_from)
                mem_from = h->pend[pend_base(q->tier)].start;
        size_t n = 0;
        struct group g = { 0 };
        bool open_group = false;
        for (int64_t s = first; s <= to_s; s += res) {
                struct hist_bucket tmp;
                const struct hist_bucket *b = &buf[(s - first) / res];
                if (s >= mem_from && bucket_mem(h, q->tier, (uint32_t)s, &tmp))
                        b = &tmp;
                else if (!bucket_is(q->tier, b, (uint32_t)s))
                        continue;
                uint64_t gs = (uint64_t)(s - s % q->step_sec) * 1000;
                if (open_group && gs != g.at_ms) {
                        group_flush(&g, pts, &n);
                        open_group = false;
                }
                if (!open_group) {
                        memset(&g, 0, sizeof(g));
                        g.at_ms = gs;
                        open_group = true;
                }
                group_add(&g, b);
        }
        if (open_group)
                group_flush(&g, pts, &n);
        *ret = TAKE_PTR(pts);
        *ret_n = n;
        return 0;
}

bool history_bucket(const struct history *h, unsigned tier, uint32_t start, struct proto_metrics_point *ret)
{
        if (!h || tier >= PROTO_METRICS_TIERS)
                return false;
        struct hist_bucket b;
        if (!bucket_get(h, tier, start, &b))
                return false;
        struct group g = { .at_ms = (uint64_t)start * 1000 };
        group_add(&g, &b);
        size_t n = 0;
        struct proto_metrics_point p[1];
        group_flush(&g, p, &n);
        if (n == 0) {
                *ret = (struct proto_metrics_point){ .at_ms = (uint64_t)start * 1000 };
                return true;
        }
        *ret = p[0];
        return true;
}
