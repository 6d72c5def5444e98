/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The archive writer of app.backup.create (drivers/app/backup/app-backup-parts.h): a depth-first
 * walk of the volume that never follows a link and never climbs with "..": each
 * directory is held open (O_DIRECTORY|O_NOFOLLOW) and read with getdents64 into a
 * small buffer of its own, each entry opened from its parent's fd with openat2
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV).
 * Entries go to libarchive (pax, zstd), whose output is hashed and written to the
 * backup's file as it comes: memory stays bounded (a read buffer, zstd's window, 4 KiB
 * per directory level, the data regions of one file) whatever the volume holds.
 *
 * Holes stay holes: a file's data regions are found with SEEK_DATA/SEEK_HOLE and
 * stored as a GNU sparse file (pax, "GNU.sparse.major=1"), so a 15 TB file made with
 * truncate costs a few bytes, not 15 TB of zeros read, compressed and hashed. What is
 * read of a file (its data regions, holes under 64 KiB between them, and everything
 * after its first 65,536 regions) may not exceed max_file_bytes (the volume's size):
 * such a file could only be a hostile one, it is refused by name. The stop flag is
 * asked between entries and every 128 KiB read, so a cancel ends the walk within
 * milliseconds; after a failure the archive is marked failed (archive_write_fail) before
 * it is closed, so libarchive does not pad the open entry to its announced size with zeros.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/fault.h"
#include "common/macro.h"
#include "drivers/app/app-archive-dl.h"
#include "drivers/app/backup/app-backup-parts.h"

#define WALK_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define PATH_BYTES 4096
#define DEPTH_MAX 1024
#define DENTS_BUF 4096
#define COPY_BUF (128 * 1024)
#define REPORT_EVERY_BYTES (16u << 20)
#define SPARSE_EXTENTS_MAX 65536      /* data regions kept apart per file; the rest is read as one */
#define SPARSE_GAP_MIN (64u << 10)    /* a hole shorter than this is read (zeros) with the data around it */
#define ZEROS_BYTES (1ull << 30)      /* a read-only zero mapping the holes are fed from (never touched) */
#define EXTENT_CHECK_EVERY 4096       /* lseek pairs between two stop checks */

struct extent {
        uint64_t off, len;
};

struct dirent64_raw {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

struct level {
        int fd;
        size_t pos, len, path_len;
        bool eof;
        _Alignas(8) char buf[DENTS_BUF]; /* getdents64 records are 8-byte aligned within it */
};

struct sink {
        int fd;
        EVP_MD_CTX *md;
        uint64_t size;
        int errno_;
};

struct walk {
        const struct app_backup_write_opts *o;
        struct archive *a;
        struct archive_entry *e;
        struct level **stack;
        size_t depth;
        char path[PATH_BYTES + 256];
        unsigned char *copy;
        const unsigned char *zeros; /* ZEROS_BYTES, PROT_READ */
        struct extent *ext;         /* SPARSE_EXTENTS_MAX */
        uint64_t bytes_in, files, since_report;
        int last_percent;
        struct na_error *err;
};

static int open_below(int dir_fd, const char *name, int flags)
{
        struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW), .resolve = WALK_RESOLVE };
        return (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
}

static la_ssize_t sink_write(struct archive *a, void *userdata, const void *buf, size_t len)
{
        struct sink *s = userdata;
        const unsigned char *p = buf;
        size_t left = len;
        while (left > 0) {
                ssize_t n = write(s->fd, p, left);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        s->errno_ = errno;
                        archive_set_error(a, errno, "write the backup file: %s", strerror(errno));
                        return -1;
                }
                p += n;
                left -= (size_t)n;
        }
        EVP_DigestUpdate(s->md, buf, len);
        s->size += len;
        return (la_ssize_t)len;
}

static int arch_fail(struct walk *w, const char *what)
{
        int e = archive_errno(w->a);
        if (e == ENOSPC || e == EDQUOT)
                return na_error_set(w->err, ENOSPC, NA_E_DRIVER, "%s: the backups directory is full", what);
        return na_error_set(w->err, e > 0 ? e : EIO, NA_E_INTERNAL, "%s: %s", what, archive_error_string(w->a));
}

static uint32_t to_container(const struct app_backup_write_opts *o, uint32_t host)
{
        return host >= o->id_base && host - o->id_base < o->id_count ? host - o->id_base : 0;
}

static void entry_fill(struct walk *w, const struct stat *st)
{
        archive_entry_clear(w->e);
        archive_entry_set_pathname(w->e, w->path);
        archive_entry_set_mode(w->e, st->st_mode);
        archive_entry_set_uid(w->e, to_container(w->o, st->st_uid));
        archive_entry_set_gid(w->e, to_container(w->o, st->st_gid));
        archive_entry_set_mtime(w->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

/* add bytes more were read: percent when it moved, a report every 16 MiB, and the stop flag. */
static int progress(struct walk *w, uint64_t add)
{
        w->bytes_in += add;
        w->since_report += add;
        if (w->o->total_bytes > 0) {
                int pct = (int)(w->bytes_in * 100 / w->o->total_bytes);
                if (pct > 99)
                        pct = 99;
                if (pct != w->last_percent) {
                        w->last_percent = pct;
                        na_progress_stage(w->o->progress, "archiving", pct, NULL);
                }
        }
        if (w->since_report >= REPORT_EVERY_BYTES) {
                w->since_report = 0;
                na_progress_stage(w->o->progress, "archiving", w->last_percent < 0 ? 0 : w->last_percent, NULL);
        }
        return na_progress_checkpoint(w->o->progress, w->err);
}

/*
 * The regions of fd (size bytes) to read: data as SEEK_DATA/SEEK_HOLE see it, holes
 * under SPARSE_GAP_MIN joined to their neighbours, past SPARSE_EXTENTS_MAX regions the
 * rest as one. A file system without SEEK_DATA gives one region, the whole file.
 */
static int file_extents(struct walk *w, int fd, uint64_t size, size_t *ret_n, uint64_t *ret_data)
{
        size_t n = 0;
        uint64_t off = 0, data = 0;
        unsigned steps = 0;
        while (off < size) {
                if (++steps % EXTENT_CHECK_EVERY == 0) {
                        int r = na_progress_checkpoint(w->o->progress, w->err);
                        if (r < 0)
                                return r;
                }
                off_t d = lseek(fd, (off_t)off, SEEK_DATA);
                if (d < 0 && errno == ENXIO)
                        break; /* a hole to the end */
                if (d < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
                        n = 0; /* no SEEK_DATA here: the whole file is data */
                        w->ext[n++] = (struct extent){ 0, size };
                        data = size;
                        break;
                }
                if (d < 0)
                        return na_error_sys(w->err, errno, "seek the data of %s", w->path);
                if ((uint64_t)d >= size)
                        break;
                off_t h = lseek(fd, d, SEEK_HOLE);
                uint64_t end = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
                struct extent *last = n ? &w->ext[n - 1] : NULL;
                if (last && ((uint64_t)d - (last->off + last->len) < SPARSE_GAP_MIN || n == SPARSE_EXTENTS_MAX)) {
                        data += end - (last->off + last->len);
                        last->len = end - last->off;
                } else {
                        w->ext[n++] = (struct extent){ (uint64_t)d, end - (uint64_t)d };
                        data += end - (uint64_t)d;
                }
                if (end <= off)
                        break; /* never loop on a file system that answers strangely */
                off = end;
        }
        *ret_n = n;
        *ret_data = data;
        return 0;
}

/* Hand libarchive len bytes of a hole: it skips them (a sparse entry), the mapping is only their address. */
static int put_hole(struct walk *w, uint64_t len)
{
        while (len > 0) {
                size_t chunk = len < ZEROS_BYTES ? (size_t)len : (size_t)ZEROS_BYTES;
                if (archive_write_data(w->a, w->zeros, chunk) != (la_ssize_t)chunk)
                        return arch_fail(w, w->path);
                len -= chunk;
                int r = na_progress_checkpoint(w->o->progress, w->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Exactly len bytes from off: what is gone since (the file shrank) is zeros. */
static int put_data(struct walk *w, int fd, uint64_t off, uint64_t len)
{
        bool eof = false;
        while (len > 0) {
                size_t want = len < COPY_BUF ? (size_t)len : COPY_BUF;
                ssize_t n = 0;
                if (NA_FAULT("app-backup.slow-data")) /* tests: a long backup to cancel */
                        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
                if (!eof) {
                        n = pread(fd, w->copy, want, (off_t)off);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return na_error_sys(w->err, errno, "read %s", w->path);
                }
                if (n == 0) {
                        eof = true;
                        memset(w->copy, 0, want);
                        n = (ssize_t)want;
                }
                if (archive_write_data(w->a, w->copy, (size_t)n) != n)
                        return arch_fail(w, w->path);
                off += (uint64_t)n;
                len -= (uint64_t)n;
                int r = progress(w, (uint64_t)n);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int put_file(struct walk *w, int dir_fd, const char *name)
{
        if (NA_FAULT("app-backup.slow")) /* tests: a backup slow enough to be cancelled */
                nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
        _cleanup_close_ int fd = open_below(dir_fd, name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return errno == ENOENT ? 0 : na_error_sys(w->err, errno, "open %s", w->path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(w->err, errno, "stat %s", w->path);
        if (!S_ISREG(st.st_mode))
                return 0; /* replaced meanwhile */
        uint64_t size = (uint64_t)st.st_size, data = 0;
        size_t n = 0;
        int r = file_extents(w, fd, size, &n, &data);
        if (r < 0)
                return r;
        if (w->o->max_file_bytes > 0 && data > w->o->max_file_bytes)
                return na_error_set(w->err, EFBIG, NA_E_QUOTA_EXCEEDED,
                                    "file \"%s\": %llu bytes of data to archive, more than the volume's quota of %llu bytes: refused", w->path,
                                    (unsigned long long)data, (unsigned long long)w->o->max_file_bytes);
        entry_fill(w, &st);
        archive_entry_set_size(w->e, st.st_size);
        bool sparse = data < size;
        if (sparse) {
                for (size_t i = 0; i < n; i++)
                        archive_entry_sparse_add_entry(w->e, (la_int64_t)w->ext[i].off, (la_int64_t)w->ext[i].len);
                if (n == 0) /* all hole: one empty region at the end says so */
                        archive_entry_sparse_add_entry(w->e, (la_int64_t)size, 0);
        }
        if (archive_write_header(w->a, w->e) != ARCHIVE_OK)
                return arch_fail(w, w->path);
        if (!sparse)
                r = put_data(w, fd, 0, size);
        else if (archive_write_data(w->a, w->zeros, 0) != 0) /* the sparse map goes out with the first write, even of nothing */
                r = arch_fail(w, w->path);
        uint64_t at = 0;
        for (size_t i = 0; sparse && r >= 0 && i < n; i++) {
                r = put_hole(w, w->ext[i].off - at);
                if (r >= 0)
                        r = put_data(w, fd, w->ext[i].off, w->ext[i].len);
                at = w->ext[i].off + w->ext[i].len;
        }
        /* The hole after the last region is not handed over: libarchive ends the entry there. */
        if (r < 0)
                return r;
        w->files++;
        return 0;
}

static int put_link(struct walk *w, int dir_fd, const char *name, const struct stat *st)
{
        char target[PATH_BYTES + 1];
        ssize_t n = readlinkat(dir_fd, name, target, sizeof(target) - 1);
        if (n < 0)
                return errno == ENOENT || errno == EINVAL ? 0 : na_error_sys(w->err, errno, "readlink %s", w->path);
        target[n] = '\0';
        entry_fill(w, st);
        archive_entry_set_symlink(w->e, target);
        if (archive_write_header(w->a, w->e) != ARCHIVE_OK)
                return arch_fail(w, w->path);
        return 0;
}

static int push_dir(struct walk *w, int dir_fd, const char *name, size_t path_len)
{
        if (w->depth >= DEPTH_MAX)
                return na_error_set(w->err, ELOOP, NA_E_INTERNAL, "%s: more than %d levels of directories", w->path,
                                    DEPTH_MAX);
        int fd = open_below(dir_fd, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return errno == ENOENT || errno == ENOTDIR ? 0 : na_error_sys(w->err, errno, "open %s", w->path);
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int e = errno;
                close(fd);
                return na_error_sys(w->err, e, "stat %s", w->path);
        }
        if (name[0] != '.' || name[1] != '\0') {
                entry_fill(w, &st);
                if (archive_write_header(w->a, w->e) != ARCHIVE_OK) {
                        close(fd);
                        return arch_fail(w, w->path);
                }
        }
        struct level *l = malloc(sizeof(*l));
        if (!l) {
                close(fd);
                return na_error_sys(w->err, ENOMEM, "%s", w->path);
        }
        *l = (struct level){ .fd = fd, .path_len = path_len };
        w->stack[w->depth++] = l;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* the level is stored in w->stack, which owns it */
        return 0;
        NA_ANALYZER_FP_END
}

static void pop_dir(struct walk *w)
{
        struct level *l = w->stack[--w->depth];
        close(l->fd);
        free(l);
}

/* The next name of the top directory, or NULL at its end. */
static struct dirent64_raw *next_entry(struct walk *w, struct level *l)
{
        for (;;) {
                if (l->pos < l->len) {
                        struct dirent64_raw *d = (struct dirent64_raw *)(l->buf + l->pos);
                        l->pos += d->d_reclen;
                        if (streq(d->d_name, ".") || streq(d->d_name, ".."))
                                continue;
                        return d;
                }
                if (l->eof)
                        return NULL;
                long n = syscall(SYS_getdents64, l->fd, l->buf, sizeof(l->buf));
                if (n < 0) {
                        na_error_sys(w->err, errno, "read directory %s", w->path[0] ? w->path : "/");
                        return (struct dirent64_raw *)-1;
                }
                if (n == 0)
                        l->eof = true;
                l->pos = 0;
                l->len = (size_t)n;
        }
}

static int walk_tree(struct walk *w, int volume_fd)
{
        w->path[0] = '\0';
        int r = push_dir(w, volume_fd, ".", 0);
        if (r < 0)
                return r;
        unsigned entries = 0;
        while (w->depth > 0) {
                struct level *l = w->stack[w->depth - 1];
                w->path[l->path_len] = '\0';
                struct dirent64_raw *d = next_entry(w, l);
                if (d == (struct dirent64_raw *)-1)
                        return -EIO;
                if (!d) {
                        pop_dir(w);
                        continue;
                }
                size_t nlen = strlen(d->d_name);
                size_t plen = l->path_len + (l->path_len ? 1 : 0) + nlen;
                if (plen > PATH_BYTES)
                        return na_error_set(w->err, ENAMETOOLONG, NA_E_INTERNAL, "%s/%s: the path is over %d bytes",
                                            w->path, d->d_name, PATH_BYTES);
                if (l->path_len)
                        w->path[l->path_len] = '/';
                memcpy(w->path + l->path_len + (l->path_len ? 1 : 0), d->d_name, nlen + 1);
                struct stat st;
                if (fstatat(l->fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue; /* gone meanwhile */
                        return na_error_sys(w->err, errno, "stat %s", w->path);
                }
                bool is_dir = S_ISDIR(st.st_mode);
                if (app_backup_ignored(w->o->ignore, w->path, is_dir))
                        continue;
                if (++entries % 64 == 0) /* a progress report now and then also carries a cancel back (the link answers it) */
                        na_progress_stage(w->o->progress, "archiving", w->last_percent < 0 ? 0 : w->last_percent, NULL);
                if ((r = na_progress_checkpoint(w->o->progress, w->err)) < 0)
                        return r;
                if (is_dir)
                        r = push_dir(w, l->fd, d->d_name, plen);
                else if (S_ISREG(st.st_mode))
                        r = put_file(w, l->fd, d->d_name);
                else if (S_ISLNK(st.st_mode))
                        r = put_link(w, l->fd, d->d_name, &st);
                else
                        r = 0; /* sockets, fifos, devices: not archived */
                if (r < 0)
                        return r;
        }
        return 0;
}

int app_backup_write(int volume_fd, int out_fd, const struct app_backup_write_opts *o, struct app_backup_written *ret,
                     struct na_error *err)
{
        struct sink s = { .fd = out_fd, .md = EVP_MD_CTX_new() };
        struct walk w = { .o = o, .err = err, .last_percent = -1 };
        w.stack = calloc(DEPTH_MAX, sizeof(*w.stack));
        w.copy = malloc(COPY_BUF);
        w.ext = calloc(SPARSE_EXTENTS_MAX, sizeof(*w.ext));
        void *zeros = mmap(NULL, ZEROS_BYTES, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        w.zeros = zeros == MAP_FAILED ? NULL : zeros;
        w.a = archive_write_new();
        w.e = archive_entry_new();
        int r = 0;
        if (!s.md || !w.stack || !w.copy || !w.ext || !w.zeros || !w.a || !w.e ||
            EVP_DigestInit_ex(s.md, EVP_sha256(), NULL) != 1) {
                r = app_archive_failed(err, "archive");
                goto out;
        }
        char level[16];
        snprintf(level, sizeof(level), "%d", o->zstd_level > 0 ? o->zstd_level : 3);
        if (archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK || archive_write_add_filter_zstd(w.a) != ARCHIVE_OK ||
            archive_write_set_filter_option(w.a, "zstd", "compression-level", level) != ARCHIVE_OK ||
            archive_write_set_bytes_per_block(w.a, 64 * 1024) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(w.a, 1) != ARCHIVE_OK ||
            archive_write_open2(w.a, &s, NULL, sink_write, NULL, NULL) != ARCHIVE_OK) {
                r = arch_fail(&w, "archive");
                goto out;
        }
        na_progress_stage(o->progress, "archiving", 0, NULL);
        r = walk_tree(&w, volume_fd);
        if (r >= 0 && archive_write_close(w.a) != ARCHIVE_OK)
                r = arch_fail(&w, "archive: close");
        if (r >= 0) {
                unsigned char md[32];
                unsigned int mdlen = 0;
                if (EVP_DigestFinal_ex(s.md, md, &mdlen) != 1) {
                        r = na_error_set(err, EIO, NA_E_INTERNAL, "sha256");
                        goto out;
                }
                *ret = (struct app_backup_written){ .size_bytes = s.size, .files = w.files, .bytes_in = w.bytes_in };
                na_sha256_hex(md, ret->sha256);
        }
out:
        while (w.depth > 0)
                pop_dir(&w);
        if (w.a) {
                /* A failed or stopped archive is dropped as it is: a plain close would first pad
                 * the open entry to its announced size with zeros (15 TB for a 15 TB file). Marked
                 * failed, the close skips the entry and only releases the filters' buffers. */
                if (r < 0) {
                        archive_write_fail(w.a);
                        archive_write_close(w.a);
                }
                archive_write_free(w.a);
        }
        archive_entry_free(w.e);
        if (w.zeros)
                munmap((void *)w.zeros, ZEROS_BYTES);
        free(w.ext);
        free(w.copy);
        free(w.stack);
        EVP_MD_CTX_free(s.md);
        return r;
}
