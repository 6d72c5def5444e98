/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The output ring of one app: two append-only segment files of CRC-checked records (see app-ring.h). */
#include "ring/app-ring.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>

#include "common/crc32c.h"

#define REC_HDR 25u
#define REC_MAX (REC_HDR + APP_RING_TEXT_MAX)
#define SCAN_BUF (4u * REC_MAX)
#define LOCK_NAME "output.lock"

static const char *const seg_names[2] = { "output.0", "output.1" };

struct app_ring {
        int dirfd, lockfd, fd[2];
        size_t seg_bytes;
        int cur;                /* index of the segment appended to */
        uint64_t cur_size;      /* its size after our last append */
        uint64_t cur_first_seq; /* its first seq, 0 while empty */
        uint64_t next_seq;
        bool synced;
};

const char *app_ring_stream_name(enum app_ring_stream stream)
{
        switch (stream) {
        case APP_RING_STDOUT:
                return "stdout";
        case APP_RING_STDERR:
                return "stderr";
        case APP_RING_SYSTEM:
                return "system";
        }
        return NULL;
}

static bool stream_valid(unsigned s) { return s >= APP_RING_STDOUT && s <= APP_RING_SYSTEM; }

static void put_u32(unsigned char *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
        uint32_t v = 0;
        for (int i = 3; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}
static uint64_t get_u64(const unsigned char *p)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

static uint32_t rec_crc(const unsigned char *hdr, const void *text, size_t len)
{
        uint32_t c = na_crc32c(0, hdr, 4);
        c = na_crc32c(c, hdr + 8, REC_HDR - 8);
        return na_crc32c(c, text, len);
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- sequential reading of one segment ---- */

struct scan {
        int fd;
        uint64_t off;     /* file offset of buf[0] */
        size_t pos, len;  /* next record at buf[pos]; buf[0..len) is valid */
        bool eof;
        uint64_t prev_seq;
        unsigned char buf[SCAN_BUF + 1]; /* +1: room to NUL-terminate the last text */
};

struct rec {
        uint64_t seq;
        int64_t ts_ms;
        unsigned stream;
        unsigned char *text;
        size_t len;
};

static void scan_init(struct scan *s, int fd)
{
        s->fd = fd;
        s->off = 0;
        s->pos = s->len = 0;
        s->eof = fd < 0;
        s->prev_seq = 0;
}

/* Make at least need bytes available at buf[pos] unless the file ends first. */
static int scan_fill(struct scan *s, size_t need)
{
        if (s->len - s->pos >= need || s->eof)
                return 0;
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->off += s->pos;
        s->len -= s->pos;
        s->pos = 0;
        while (s->len < SCAN_BUF) {
                ssize_t n = pread(s->fd, s->buf + s->len, SCAN_BUF - s->len, (off_t)(s->off + s->len));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0) {
                        s->eof = true;
                        break;
                }
                s->len += (size_t)n;
        }
        return 0;
}

/* 1 and the next valid record; 0 at the end or at the first torn or invalid record; < 0 on I/O errors. */
static int scan_next(struct scan *s, struct rec *rec)
{
        int r = scan_fill(s, REC_HDR);
        if (r < 0)
                return r;
        if (s->len - s->pos < REC_HDR)
                return 0;
        unsigned char *h = s->buf + s->pos;
        uint32_t len = get_u32(h);
        if (len > APP_RING_TEXT_MAX)
                return 0;
        r = scan_fill(s, REC_HDR + len);
        if (r < 0)
                return r;
        if (s->len - s->pos < REC_HDR + len)
                return 0;
        h = s->buf + s->pos;
        uint64_t seq = get_u64(h + 8);
        if (get_u32(h + 4) != rec_crc(h, h + REC_HDR, len) || !stream_valid(h[24]) || seq <= s->prev_seq)
                return 0;
        rec->seq = seq;
        rec->ts_ms = (int64_t)get_u64(h + 16);
        rec->stream = h[24];
        rec->text = h + REC_HDR;
        rec->len = len;
        s->prev_seq = seq;
        s->pos += REC_HDR + len;
        return 1;
}

static uint64_t scan_offset(const struct scan *s) { return s->off + s->pos; }

struct seg_info {
        uint64_t first_seq, last_seq; /* 0 when the segment holds no valid record */
        uint64_t valid_end, size;
};

static int seg_scan_all(struct scan *s, int fd, struct seg_info *si)
{
        *si = (struct seg_info){ 0 };
        if (fd < 0)
                return 0;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        si->size = (uint64_t)st.st_size;
        scan_init(s, fd);
        struct rec rec;
        int r;
        while ((r = scan_next(s, &rec)) > 0) {
                if (!si->first_seq)
                        si->first_seq = rec.seq;
                si->last_seq = rec.seq;
        }
        if (r < 0)
                return r;
        si->valid_end = scan_offset(s);
        return 0;
}

/* The seq of a segment's first record, without checking it (0 when it has none). */
static int seg_first_seq(int fd, uint64_t *ret)
{
        unsigned char h[REC_HDR];
        ssize_t n = RETRY_EINTR(pread(fd, h, sizeof(h), 0));
        if (n < 0)
                return -errno;
        *ret = n == (ssize_t)sizeof(h) ? get_u64(h + 8) : 0;
        return 0;
}

/* ---- writer ---- */

static int ring_rescan(struct app_ring *r, struct na_error *err)
{
        struct scan *s = malloc(sizeof(*s));
        if (!s)
                return na_error_sys(err, ENOMEM, "output ring: scan");
        struct seg_info si[2];
        for (int i = 0; i < 2; i++) {
                int q = seg_scan_all(s, r->fd[i], &si[i]);
                if (q < 0) {
                        free(s);
                        return na_error_sys(err, -q, "output ring: read %s", seg_names[i]);
                }
                if (si[i].valid_end < si[i].size && ftruncate(r->fd[i], (off_t)si[i].valid_end) < 0) {
                        q = errno;
                        free(s);
                        return na_error_sys(err, q, "output ring: cut the torn tail of %s", seg_names[i]);
                }
        }
        free(s);
        if (si[0].first_seq && si[1].first_seq)
                r->cur = si[1].first_seq > si[0].first_seq;
        else
                r->cur = si[1].first_seq ? 1 : 0;
        const struct seg_info *c = &si[r->cur], *o = &si[1 - r->cur];
        uint64_t last = c->last_seq ? c->last_seq : o->last_seq;
        r->cur_size = c->valid_end;
        r->cur_first_seq = c->first_seq;
        if (last + 1 > r->next_seq)
                r->next_seq = last + 1;
        r->synced = true;
        return 0;
}

/* With the lock held: is our picture of the ring still true? Rescan when another writer changed it. */
static int ring_sync(struct app_ring *r, struct na_error *err)
{
        if (r->synced) {
                struct stat st[2];
                if (fstat(r->fd[0], &st[0]) < 0 || fstat(r->fd[1], &st[1]) < 0)
                        return na_error_sys(err, errno, "output ring: stat");
                int o = 1 - r->cur;
                uint64_t other_first = 0;
                if (st[o].st_size > 0) {
                        int q = seg_first_seq(r->fd[o], &other_first);
                        if (q < 0)
                                return na_error_sys(err, -q, "output ring: read %s", seg_names[o]);
                }
                bool other_older = st[o].st_size == 0 || (other_first != 0 && other_first < r->cur_first_seq);
                if ((uint64_t)st[r->cur].st_size == r->cur_size && other_older)
                        return 0;
        }
        return ring_rescan(r, err);
}

int app_ring_open(const char *dir, size_t segment_bytes, struct app_ring **ret, struct na_error *err)
{
        if (segment_bytes == 0)
                segment_bytes = APP_RING_SEGMENT_DEFAULT;
        if (segment_bytes < APP_RING_SEGMENT_MIN || segment_bytes > APP_RING_SEGMENT_MAX)
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "output ring: segment size %zu outside [%u, %u]",
                                    segment_bytes, APP_RING_SEGMENT_MIN, APP_RING_SEGMENT_MAX);
        struct app_ring *r = calloc(1, sizeof(*r));
        if (!r)
                return na_error_sys(err, ENOMEM, "output ring: open %s", dir);
        r->dirfd = r->lockfd = r->fd[0] = r->fd[1] = -1;
        r->seg_bytes = segment_bytes;
        r->next_seq = 1;
        _cleanup_app_ring_ struct app_ring *owned = r;

        r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r->dirfd < 0)
                return na_error_sys(err, errno, "output ring: open directory %s", dir);
        r->lockfd = openat(r->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (r->lockfd < 0)
                return na_error_sys(err, errno, "output ring: open %s/%s", dir, LOCK_NAME);
        for (int i = 0; i < 2; i++) {
                r->fd[i] = openat(r->dirfd, seg_names[i], O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (r->fd[i] < 0)
                        return na_error_sys(err, errno, "output ring: open %s/%s", dir, seg_names[i]);
        }
        if (RETRY_EINTR(flock(r->lockfd, LOCK_EX)) < 0)
                return na_error_sys(err, errno, "output ring: lock %s", dir);
        int q = ring_rescan(r, err);
        flock(r->lockfd, LOCK_UN);
        if (q < 0)
                return na_error_prefix(err, "%s", dir);
        *ret = TAKE_PTR(owned);
        return 0;
}

void app_ring_close(struct app_ring *r)
{
        if (!r)
                return;
        closep(&r->fd[0]);
        closep(&r->fd[1]);
        closep(&r->lockfd);
        closep(&r->dirfd);
        free(r);
}

uint64_t app_ring_next_seq(const struct app_ring *r) { return r->next_seq; }

/*
 * Records of one append, written with one pwritev per WBATCH_RECS records (not one
 * per line: a flood of short lines cost a system call each, issue 20). The seqs are
 * given as records are queued and taken back when the write fails.
 */
#define WBATCH_RECS 64

struct wbatch {
        unsigned char hdr[WBATCH_RECS][REC_HDR];
        struct iovec iov[2 * WBATCH_RECS];
        size_t nrec, bytes;
        uint64_t first_seq, saved_first_seq; /* the batch's first seq; cur_first_seq before it */
};

static int wbatch_flush(struct app_ring *r, struct wbatch *b, struct na_error *err)
{
        if (!b->nrec)
                return 0;
        size_t nrec = b->nrec, bytes = b->bytes;
        b->nrec = b->bytes = 0;
        ssize_t n = RETRY_EINTR(pwritev(r->fd[r->cur], b->iov, (int)(2 * nrec), (off_t)r->cur_size));
        if (n != (ssize_t)bytes) {
                int e = n < 0 ? errno : ENOSPC;
                if (ftruncate(r->fd[r->cur], (off_t)r->cur_size) < 0)
                        r->synced = false;
                r->next_seq = b->first_seq;
                r->cur_first_seq = b->saved_first_seq;
                return na_error_sys(err, e, "output ring: write %s", seg_names[r->cur]);
        }
        r->cur_size += bytes;
        return 0;
}

/* One record at the end of the current segment (switching segments when it is full). */
static int ring_put(struct app_ring *r, struct wbatch *b, unsigned stream, int64_t ts, const void *text, size_t len,
                    struct na_error *err)
{
        uint64_t size = REC_HDR + len;
        if (b->nrec == WBATCH_RECS || (r->cur_size + b->bytes > 0 && r->cur_size + b->bytes + size > r->seg_bytes)) {
                int q = wbatch_flush(r, b, err);
                if (q < 0)
                        return q;
        }
        if (r->cur_size > 0 && r->cur_size + size > r->seg_bytes) {
                int o = 1 - r->cur;
                if (ftruncate(r->fd[o], 0) < 0)
                        return na_error_sys(err, errno, "output ring: empty %s", seg_names[o]);
                r->cur = o;
                r->cur_size = 0;
                r->cur_first_seq = 0;
        }
        if (!b->nrec) {
                b->first_seq = r->next_seq;
                b->saved_first_seq = r->cur_first_seq;
        }
        unsigned char *h = b->hdr[b->nrec];
        put_u32(h, (uint32_t)len);
        put_u64(h + 8, r->next_seq);
        put_u64(h + 16, (uint64_t)ts);
        h[24] = (unsigned char)stream;
        put_u32(h + 4, rec_crc(h, text, len));
        b->iov[2 * b->nrec] = (struct iovec){ h, REC_HDR };
        b->iov[2 * b->nrec + 1] = (struct iovec){ (void *)text, len };
        b->nrec++;
        b->bytes += size;
        if (!r->cur_first_seq)
                r->cur_first_seq = r->next_seq;
        r->next_seq++;
        return 0;
}

int app_ring_append(struct app_ring *r, enum app_ring_stream stream, const void *text, size_t len,
                    uint64_t *ret_last_seq, struct na_error *err)
{
        if (!stream_valid(stream))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "output ring: unknown stream %d", (int)stream);
        if (!text && len)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "output ring: no text");
        if (RETRY_EINTR(flock(r->lockfd, LOCK_EX)) < 0)
                return na_error_sys(err, errno, "output ring: lock");
        int q = ring_sync(r, err);
        int64_t ts = now_ms();
        const char *p = text ? text : "", *end = p + len;
        if (len > 0 && end[-1] == '\n')
                end--;
        struct wbatch b;
        b.nrec = b.bytes = 0;
        while (q >= 0) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *stop = nl ? nl : end;
                if ((size_t)(stop - p) > APP_RING_TEXT_MAX)
                        stop = p + APP_RING_TEXT_MAX, nl = NULL;
                q = ring_put(r, &b, stream, ts, p, (size_t)(stop - p), err);
                p = nl ? nl + 1 : stop;
                if (!nl && p >= end)
                        break;
        }
        if (q >= 0)
                q = wbatch_flush(r, &b, err);
        flock(r->lockfd, LOCK_UN);
        if (q < 0)
                return q;
        if (ret_last_seq)
                *ret_last_seq = r->next_seq - 1;
        return 0;
}

int app_ring_append_once(const char *dir, enum app_ring_stream stream, const void *text, size_t len,
                         uint64_t *ret_last_seq, struct na_error *err)
{
        _cleanup_app_ring_ struct app_ring *r = NULL;
        int q = app_ring_open(dir, 0, &r, err);
        if (q < 0)
                return q;
        return app_ring_append(r, stream, text, len, ret_last_seq, err);
}

/* ---- reader ---- */

struct reader {
        int fd[2]; /* oldest first; -1 when absent */
        struct scan *s;
};

static void reader_close(struct reader *rd)
{
        closep(&rd->fd[0]);
        closep(&rd->fd[1]);
        free(rd->s);
}

/*
 * Walk both segments oldest first, calling visit for every valid record with
 * seq >= since (strictly increasing over the whole walk). visit returns > 0 to stop,
 * < 0 to fail. *ret_last gets the last seq seen in the ring when the walk was complete.
 */
static int reader_walk(struct reader *rd, uint64_t since, int (*visit)(const struct rec *, void *), void *ud,
                       uint64_t *ret_last)
{
        uint64_t last = 0;
        for (int i = 0; i < 2; i++) {
                if (rd->fd[i] < 0)
                        continue;
                scan_init(rd->s, rd->fd[i]);
                rd->s->prev_seq = last;
                struct rec rec;
                int q;
                while ((q = scan_next(rd->s, &rec)) > 0) {
                        last = rec.seq;
                        if (rec.seq < since)
                                continue;
                        q = visit(&rec, ud);
                        if (q != 0)
                                return q;
                }
                if (q < 0)
                        return q;
        }
        *ret_last = last;
        return 0;
}

static int count_visit(const struct rec *rec, void *ud)
{
        (*(size_t *)ud)++;
        return 0;
}

struct deliver {
        size_t skip, limit, n;
        uint64_t last;
        app_ring_line_fn cb;
        void *userdata;
};

static int deliver_visit(const struct rec *rec, void *ud)
{
        struct deliver *d = ud;
        if (d->skip > 0) {
                d->skip--;
                return 0;
        }
        unsigned char saved = rec->text[rec->len];
        rec->text[rec->len] = '\0';
        struct app_ring_line line = {
                .seq = rec->seq, .ts_ms = rec->ts_ms, .stream = rec->stream,
                .text = (const char *)rec->text, .len = rec->len,
        };
        int q = d->cb(&line, d->userdata);
        rec->text[rec->len] = saved;
        if (q < 0)
                return q;
        d->n++;
        d->last = rec->seq;
        return d->n >= d->limit ? 1 : 0;
}

int app_ring_read(const char *dir, uint64_t since_seq, size_t limit, unsigned flags, app_ring_line_fn cb,
                  void *userdata, uint64_t *ret_next_seq, struct na_error *err)
{
        if (limit < 1 || limit > APP_RING_READ_LIMIT_MAX || !cb || (flags & ~APP_RING_TAIL))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "output ring: bad read arguments");
        _cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return na_error_sys(err, errno, "output ring: open directory %s", dir);
        _cleanup_close_ int lockfd = openat(dirfd, LOCK_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (lockfd < 0) {
                if (errno != ENOENT)
                        return na_error_sys(err, errno, "output ring: open %s/%s", dir, LOCK_NAME);
                if (ret_next_seq)
                        *ret_next_seq = since_seq > 1 ? since_seq : 1;
                return 0;
        }
        if (RETRY_EINTR(flock(lockfd, LOCK_SH)) < 0)
                return na_error_sys(err, errno, "output ring: lock %s", dir);

        struct reader rd = { .fd = { -1, -1 } };
        int q = 0;
        uint64_t first[2] = { 0, 0 };
        for (int i = 0; i < 2 && q == 0; i++) {
                rd.fd[i] = openat(dirfd, seg_names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (rd.fd[i] < 0 && errno != ENOENT)
                        q = -errno;
                else if (rd.fd[i] >= 0)
                        q = seg_first_seq(rd.fd[i], &first[i]);
        }
        if (q == 0 && first[1] && (!first[0] || first[1] < first[0])) {
                int t = rd.fd[0];
                rd.fd[0] = rd.fd[1];
                rd.fd[1] = t;
        }
        if (q == 0 && !(rd.s = malloc(sizeof(*rd.s))))
                q = -ENOMEM;

        struct deliver d = { .limit = limit, .cb = cb, .userdata = userdata };
        uint64_t last = 0;
        if (q == 0 && (flags & APP_RING_TAIL)) {
                size_t count = 0;
                q = reader_walk(&rd, since_seq, count_visit, &count, &last);
                d.skip = count > limit ? count - limit : 0;
        }
        if (q == 0) {
                q = reader_walk(&rd, since_seq, deliver_visit, &d, &last);
                if (q > 0)
                        q = 0;
        }
        reader_close(&rd);
        flock(lockfd, LOCK_UN);
        if (q < 0) {
                if (na_error_is_set(err))
                        return q;
                return na_error_sys(err, -q, "output ring: read %s", dir);
        }
        if (ret_next_seq) {
                if (d.n > 0)
                        *ret_next_seq = d.last + 1;
                else
                        *ret_next_seq = since_seq > last + 1 ? since_seq : last + 1;
        }
        return 0;
}
