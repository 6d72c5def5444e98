/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/journal.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "common/crc32c.h"
#include "common/fileio.h"

#define FILE_MAGIC "NAJRNL1\n"
#define FILE_MAGIC_LEN 8
#define REC_MAGIC 0x4e414a52u
#define REC_HDR 12

struct na_journal {
        int fd;
        uint64_t size;
        char *path;
        bool torn; /* a failed append could not be cut off: the file ends in a half record */
};

struct na_journal_out {
        int fd;
        uint64_t size;
        const char *path;
};

static void put_le32(unsigned char *p, uint32_t v)
{
        p[0] = (unsigned char)v;
        p[1] = (unsigned char)(v >> 8);
        p[2] = (unsigned char)(v >> 16);
        p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_le32(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t record_crc(uint32_t len, const void *data)
{
        unsigned char l[4];
        put_le32(l, len);
        return na_crc32c(na_crc32c(0, l, 4), data, len);
}

static int write_record(int fd, const char *path, const void *data, size_t len, struct na_error *err)
{
        if (len > NA_JOURNAL_MAX_RECORD)
                return na_error_set(err, EMSGSIZE, NA_E_INTERNAL, "journal %s: record of %zu bytes is too large", path, len);
        unsigned char hdr[REC_HDR];
        put_le32(hdr, REC_MAGIC);
        put_le32(hdr + 4, (uint32_t)len);
        put_le32(hdr + 8, record_crc((uint32_t)len, data));
        struct iovec iov[2] = { { hdr, REC_HDR }, { (void *)data, len } };
        size_t total = REC_HDR + len, done = 0;
        while (done < total) {
                ssize_t n = writev(fd, iov, 2);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return na_error_sys(err, errno, "journal %s: append", path);
                }
                done += (size_t)n;
                if (done < total) {
                        /* Short write (disk full): finish the record byte-exact. */
                        for (int i = 0; i < 2; i++) {
                                size_t take = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
                                iov[i].iov_base = (char *)iov[i].iov_base + take;
                                iov[i].iov_len -= take;
                                n -= (ssize_t)take;
                        }
                }
        }
        return 0;
}

static bool all_zero(const unsigned char *p, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (p[i])
                        return false;
        return true;
}

/*
 * Decide what the bytes at off are. Returns 1 for a valid record (its end in *next),
 * 0 for a torn tail (cut it), or a negative error for a corrupt middle.
 */
static int classify(const struct na_journal *j, const unsigned char *buf, size_t size, size_t off, size_t *next,
                    struct na_error *err)
{
        size_t left = size - off;
        const char *why;

        if (left < REC_HDR || all_zero(buf + off, left))
                return 0; /* header cut short, or a zero-filled tail */
        if (get_le32(buf + off) != REC_MAGIC)
                why = "bad record magic";
        else if (get_le32(buf + off + 4) > NA_JOURNAL_MAX_RECORD)
                why = "impossible record length";
        else {
                uint32_t len = get_le32(buf + off + 4);
                if (len > left - REC_HDR)
                        return 0; /* the last write did not finish */
                *next = off + REC_HDR + len;
                if (get_le32(buf + off + 8) == record_crc(len, buf + off + REC_HDR))
                        return 1;
                if (*next == size || all_zero(buf + *next, size - *next))
                        return 0; /* the last record, torn */
                why = "checksum mismatch";
        }
        return na_error_set(err, EBADMSG, NA_E_INTERNAL,
                            "journal %s: corrupt record at offset %zu (%s) with %zu bytes after it; refusing to "
                            "replay a damaged history (move the file aside to start afresh)",
                            j->path, off, why, left);
}

static int replay_all(struct na_journal *j, const unsigned char *buf, size_t size, na_journal_replay_fn replay,
                      void *userdata, struct na_journal_stats *stats, struct na_error *err)
{
        size_t off = FILE_MAGIC_LEN;
        uint64_t records = 0;

        while (off < size) {
                size_t next = 0;
                int r = classify(j, buf, size, off, &next, err);
                if (r < 0)
                        return r;
                if (r == 0) {
                        if (ftruncate(j->fd, (off_t)off) < 0 || fsync(j->fd) < 0)
                                return na_error_sys(err, errno, "journal %s: cut torn tail at %zu", j->path, off);
                        if (stats)
                                stats->torn_bytes = size - off;
                        size = off;
                        break;
                }
                r = replay(userdata, buf + off + REC_HDR, next - off - REC_HDR, err);
                if (r < 0)
                        return na_error_prefix(err, "journal %s: record at offset %zu", j->path, off);
                records++;
                off = next;
        }
        j->size = size;
        if (stats)
                stats->records = records;
        return 0;
}

int na_journal_open(const char *path, na_journal_replay_fn replay, void *userdata, struct na_journal **ret,
                    struct na_journal_stats *stats, struct na_error *err)
{
        if (stats)
                *stats = (struct na_journal_stats){ 0 };
        _cleanup_(na_journal_closep) struct na_journal *j = calloc(1, sizeof(*j));
        if (!j)
                return na_error_sys(err, ENOMEM, "journal %s", path);
        j->fd = -1;
        j->path = strdup(path);
        if (!j->path)
                return na_error_sys(err, ENOMEM, "journal %s", path);

        j->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (j->fd < 0)
                return na_error_sys(err, errno, "journal %s: open", path);
        struct stat st;
        if (fstat(j->fd, &st) < 0)
                return na_error_sys(err, errno, "journal %s: stat", path);

        if (st.st_size < FILE_MAGIC_LEN) {
                /* New (or torn while being created): start it. */
                if (ftruncate(j->fd, 0) < 0 || write(j->fd, FILE_MAGIC, FILE_MAGIC_LEN) != FILE_MAGIC_LEN ||
                    fsync(j->fd) < 0)
                        return na_error_sys(err, errno, "journal %s: initialise", path);
                int r = na_fsync_parent(path, err);
                if (r < 0)
                        return r;
                j->size = FILE_MAGIC_LEN;
                *ret = TAKE_PTR(j);
                return 0;
        }

        size_t size = (size_t)st.st_size;
        _cleanup_free_ unsigned char *buf = malloc(size);
        if (!buf)
                return na_error_sys(err, ENOMEM, "journal %s: %zu bytes", path, size);
        size_t got = 0;
        while (got < size) {
                ssize_t n = pread(j->fd, buf + got, size - got, (off_t)got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return na_error_sys(err, n < 0 ? errno : EIO, "journal %s: read", path);
                got += (size_t)n;
        }
        if (memcmp(buf, FILE_MAGIC, FILE_MAGIC_LEN) != 0)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "journal %s: not a nodeagent journal (bad header)", path);

        int r = replay_all(j, buf, size, replay, userdata, stats, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(j);
        return 0;
}

void na_journal_close(struct na_journal *j)
{
        if (!j)
                return;
        if (j->fd >= 0)
                close(j->fd);
        free(j->path);
        free(j);
}

int na_journal_append(struct na_journal *j, const void *data, size_t len, struct na_error *err)
{
        if (j->torn) {
                /* Try again to cut the half record off before anything goes after it. */
                if (ftruncate(j->fd, (off_t)j->size) < 0)
                        return na_error_sys(err, errno, "journal %s: cut a half record off", j->path);
                j->torn = false;
        }
        int r = write_record(j->fd, j->path, data, len, err);
        if (r < 0) {
                /* Never leave a half record in front of later ones; if even this
                 * fails, no append goes on until it succeeds (and the torn tail is cut
                 * at the next open). */
                if (ftruncate(j->fd, (off_t)j->size) < 0)
                        j->torn = true;
                return r;
        }
        j->size += REC_HDR + len;
        return 0;
}

bool na_journal_whole(const struct na_journal *j)
{
        return !j->torn;
}

int na_journal_sync(struct na_journal *j, struct na_error *err)
{
        if (fdatasync(j->fd) < 0)
                return na_error_sys(err, errno, "journal %s: fdatasync", j->path);
        return 0;
}

int na_journal_truncate(struct na_journal *j, uint64_t size, struct na_error *err)
{
        if (size > j->size)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "journal %s: cut to %llu of %llu bytes", j->path,
                                    (unsigned long long)size, (unsigned long long)j->size);
        if (ftruncate(j->fd, (off_t)size) < 0)
                return na_error_sys(err, errno, "journal %s: cut back to %llu bytes", j->path, (unsigned long long)size);
        j->size = size;
        return 0;
}

uint64_t na_journal_size(const struct na_journal *j)
{
        return j->size;
}

const char *na_journal_path(const struct na_journal *j)
{
        return j->path;
}

int na_journal_emit(struct na_journal_out *out, const void *data, size_t len, struct na_error *err)
{
        int r = write_record(out->fd, out->path, data, len, err);
        if (r < 0)
                return r;
        out->size += REC_HDR + len;
        return 0;
}

int na_journal_rewrite(struct na_journal *j, na_journal_emit_fn emit, void *userdata, struct na_error *err)
{
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.compact", j->path);
        _cleanup_close_ int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "journal %s: create %s", j->path, tmp);
        struct na_journal_out out = { .fd = fd, .size = FILE_MAGIC_LEN, .path = tmp };
        int r;
        if (write(fd, FILE_MAGIC, FILE_MAGIC_LEN) != FILE_MAGIC_LEN) {
                r = na_error_sys(err, errno, "journal %s: write", tmp);
                goto fail;
        }
        r = emit(userdata, &out, err);
        if (r < 0)
                goto fail;
        if (fsync(fd) < 0) {
                r = na_error_sys(err, errno, "journal %s: fsync", tmp);
                goto fail;
        }
        if (rename(tmp, j->path) < 0) {
                r = na_error_sys(err, errno, "journal %s: rename compacted file", j->path);
                goto fail;
        }
        /* The new file is the journal from here on, whatever the directory fsync says:
         * appends must not go on into the old, now unlinked, file. */
        close(j->fd);
        j->fd = TAKE_FD(fd);
        j->size = out.size;
        return na_fsync_parent(j->path, err);
fail:
        unlink(tmp);
        return r;
}
