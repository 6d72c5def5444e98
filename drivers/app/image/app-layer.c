/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Applying one layer tar beneath a root directory fd, never through a symbolic link (see app-image.h). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "common/digest.h"
#include "common/fileio.h"
#include "drivers/app/app-archive-dl.h"
#include "drivers/app/image/app-image-internal.h"
#include "drivers/app/image/app-layer-pathset.h"
#include "volume/volume.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct archive *, archive_read_free)

struct dir_time {
        char *path; /* "" for the root */
        struct timespec ts[2];
};

struct layer {
        int root_fd;
        int fd;
        const struct app_layer_opts *opts;
        EVP_MD_CTX *sha;
        uint64_t bytes;
        struct app_pathset made;
        struct dir_time *dirs;
        size_t n_dirs, cap_dirs;
        unsigned char buf[128 * 1024];
};

static la_ssize_t layer_read(struct archive *a, void *userdata, const void **buf)
{
        struct layer *l = userdata;
        ssize_t n = RETRY_EINTR(read(l->fd, l->buf, sizeof(l->buf)));
        if (n < 0) {
                archive_set_error(a, errno, "read: %s", strerror(errno));
                return -1;
        }
        if (l->sha && n > 0)
                EVP_DigestUpdate(l->sha, l->buf, (size_t)n);
        l->bytes += (uint64_t)n;
        if (n > 0 && l->opts && l->opts->on_read)
                l->opts->on_read(l->opts->userdata, l->bytes);
        *buf = l->buf;
        return n;
}

/* Read the rest of the blob (after the archive's end) and compare with the expected digest and size. */
static int finish_digest(struct layer *l, struct na_error *err)
{
        if (!l->sha)
                return 0;
        for (;;) {
                ssize_t n = RETRY_EINTR(read(l->fd, l->buf, sizeof(l->buf)));
                if (n < 0)
                        return na_error_sys(err, errno, "read layer %s", l->opts->digest);
                if (n == 0)
                        break;
                EVP_DigestUpdate(l->sha, l->buf, (size_t)n);
                l->bytes += (uint64_t)n;
        }
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(l->sha, d, &dl);
        EVP_MD_CTX_free(TAKE_PTR(l->sha));
        char got[72] = "sha256:";
        na_sha256_hex(d, got + 7);
        if (!streq(got, l->opts->digest) || l->bytes != l->opts->size) {
                int r = na_error_set(err, EBADMSG, NA_E_DRIVER, "blob %s does not match its digest", l->opts->digest);
                na_error_detail(err, "mismatch", json_string(got));
                return r;
        }
        return 0;
}

static int refuse(struct na_error *err, const char *entry, const char *why)
{
        int r = na_error_set(err, EPERM, NA_E_DRIVER, "entry \"%.300s\": %s", entry, why);
        na_error_detail(err, "reason", json_string(err->message));
        return r;
}

/* A tar name into a clean relative path ("" for the root); NULL and *why on a name that must be refused. */
static const char *clean_path(const char *raw, char out[PATH_MAX], const char **why)
{
        if (!raw) {
                *why = "a name that cannot be read";
                return NULL;
        }
        if (strlen(raw) >= PATH_MAX) {
                *why = "a name longer than PATH_MAX";
                return NULL;
        }
        if (raw[0] == '/') {
                *why = "an absolute path";
                return NULL;
        }
        size_t o = 0;
        for (const char *p = raw; *p;) {
                const char *e = strchrnul(p, '/');
                size_t n = (size_t)(e - p);
                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        *why = "a \"..\" component";
                        return NULL;
                }
                if (n > NAME_MAX) {
                        *why = "a component longer than NAME_MAX";
                        return NULL;
                }
                if (n > 0 && !(n == 1 && p[0] == '.')) {
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p = *e ? e + 1 : e;
        }
        out[o] = '\0';
        return out;
}

/* Split "a/b/c" into parent "a/b" (or "") and base "c", in place. */
static void split_path(char *path, const char **parent, const char **base)
{
        char *slash = strrchr(path, '/');
        if (slash) {
                *slash = '\0';
                *parent = path;
                *base = slash + 1;
        } else {
                *parent = "";
                *base = path;
        }
}

static const char *resolve_error(int e)
{
        switch (e) {
        case ELOOP:
                return "goes through a symbolic link";
        case ENOTDIR:
                return "goes through something that is not a directory";
        case EXDEV:
                return "leaves the root";
        default:
                return NULL;
        }
}

static int budget_charge(struct layer *l, uint64_t bytes, uint64_t files, struct na_error *err);

/*
 * The parent directory of an entry as an O_PATH fd beneath the root, creating missing
 * directories (0755, marked as made by this layer); never through a symbolic link.
 */
static int open_parent(struct layer *l, const char *parent, const char *entry, bool create, int *ret_fd,
                       struct na_error *err)
{
        const char *p = *parent ? parent : ".";
        int fd = app_openat_beneath(l->root_fd, p, O_PATH | O_DIRECTORY, true);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        char why[128];
        if (resolve_error(errno)) {
                snprintf(why, sizeof(why), "its parent path %s", resolve_error(errno));
                return refuse(err, entry, why);
        }
        if (errno != ENOENT)
                return na_error_sys(err, errno, "entry \"%.300s\": open its parent", entry);
        if (!create) {
                *ret_fd = -1;
                return 0;
        }
        /* Walk and create, one component at a time. */
        _cleanup_close_ int cur = app_openat_beneath(l->root_fd, ".", O_PATH | O_DIRECTORY, true);
        if (cur < 0)
                return na_error_sys(err, errno, "open the root");
        char walked[PATH_MAX];
        size_t wn = 0;
        for (const char *c = parent; *c;) {
                const char *e = strchrnul(c, '/');
                char comp[NAME_MAX + 1];
                size_t n = (size_t)(e - c);
                memcpy(comp, c, n);
                comp[n] = '\0';
                if (wn)
                        walked[wn++] = '/';
                memcpy(walked + wn, comp, n + 1);
                wn += n;
                int next = app_openat_beneath(cur, comp, O_PATH | O_DIRECTORY, true);
                if (next < 0 && errno == ENOENT) {
                        int k = budget_charge(l, 0, 1, err);
                        if (k < 0)
                                return k;
                        if (mkdirat(cur, comp, 0755) < 0)
                                return na_error_sys(err, errno, "entry \"%.300s\": create a parent directory", entry);
                        /* Just made by us in a directory we hold: the name is that directory, whatever the umask. */
                        if (fchmodat(cur, comp, 0755, 0) < 0)
                                return na_error_sys(err, errno, "entry \"%.300s\": create a parent directory", entry);
                        if (app_pathset_mark(&l->made, walked) < 0)
                                return na_error_sys(err, ENOMEM, "layer");
                        next = app_openat_beneath(cur, comp, O_PATH | O_DIRECTORY, true);
                }
                if (next < 0) {
                        if (resolve_error(errno)) {
                                snprintf(why, sizeof(why), "its parent path %s", resolve_error(errno));
                                return refuse(err, entry, why);
                        }
                        return na_error_sys(err, errno, "entry \"%.300s\": open a parent directory", entry);
                }
                close(cur);
                cur = next;
                c = *e ? e + 1 : e;
        }
        *ret_fd = TAKE_FD(cur);
        return 0;
}

/* Make room for base in parent: 1 when it is a directory to keep (want_dir), 0 when absent now. */
static int make_room(int parent_fd, const char *base, bool want_dir, const char *entry, struct na_error *err)
{
        struct stat st;
        if (fstatat(parent_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "entry \"%.300s\": stat", entry);
        }
        if (want_dir && S_ISDIR(st.st_mode))
                return 1;
        if (S_ISDIR(st.st_mode)) {
                int r = app_fs_rm_rf(parent_fd, base, err);
                return r < 0 ? na_error_prefix(err, "entry \"%.300s\"", entry) : 0;
        }
        if (unlinkat(parent_fd, base, 0) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "entry \"%.300s\": replace", entry);
        return 0;
}

static int remove_lower(struct layer *l, int dir_fd, const char *name, const char *path, struct na_error *err);

/* Remove what earlier layers put in the directory fd (at path), sparing what this layer made. */
static int remove_lower_children(struct layer *l, int fd, const char *path, struct na_error *err)
{
        /* Collect the names first: the directory changes while we remove. */
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                int e = errno;
                if (dfd >= 0)
                        close(dfd);
                return na_error_sys(err, e, "whiteout: read %s", *path ? path : "/");
        }
        char **names = NULL;
        size_t n = 0;
        int r = 0;
        for (struct dirent *e; (e = readdir(d));) {
                if (streq(e->d_name, ".") || streq(e->d_name, ".."))
                        continue;
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it (realloc keeps names valid: it is names or nn below) */
                char **nn = realloc(names, (n + 1) * sizeof(char *));
                NA_ANALYZER_FP_END
                if (!nn || !(nn[n] = strdup(e->d_name))) {
                        names = nn ? nn : names;
                        r = na_error_sys(err, ENOMEM, "whiteout %s", path);
                        break;
                }
                names = nn;
                n++;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++) {
                if (r >= 0) {
                        _cleanup_free_ char *child = na_strdupf("%s%s%s", path, *path ? "/" : "", names[i]);
                        r = child ? remove_lower(l, fd, names[i], child, err)
                                  : na_error_sys(err, ENOMEM, "whiteout %s", path);
                }
                free(names[i]);
        }
        free(names);
        return r;
}

/* Remove what earlier layers made at dir_fd/name (path), sparing what this layer made. */
static int remove_lower(struct layer *l, int dir_fd, const char *name, const char *path, struct na_error *err)
{
        unsigned flags = app_pathset_get(&l->made, path);
        if (!flags)
                return app_fs_rm_rf(dir_fd, name, err);
        struct stat st;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "whiteout: stat %s", path);
        if (!S_ISDIR(st.st_mode))
                return 0;
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "whiteout: open %s", path);
        return remove_lower_children(l, fd, path, err);
}

static int whiteout(struct layer *l, const char *raw, const char *parent, const char *base, struct na_error *err)
{
        bool opaque = streq(base, ".wh..wh..opq");
        const char *name = base + 4;
        if (!opaque && (!*name || streq(name, ".") || streq(name, "..")))
                return refuse(err, raw, "a whiteout of no name");
        _cleanup_close_ int pfd = -1;
        int r = open_parent(l, parent, raw, opaque, &pfd, err);
        if (r < 0 || pfd < 0)
                return r; /* a whiteout in a directory that does not exist hides nothing */
        if (opaque)
                return remove_lower_children(l, pfd, parent, err) < 0 ? na_error_prefix(err, "entry \"%.300s\"", raw)
                                                                      : 0;
        _cleanup_free_ char *path = na_strdupf("%s%s%s", parent, *parent ? "/" : "", name);
        if (!path)
                return na_error_sys(err, ENOMEM, "entry %s", raw);
        if (app_pathset_get(&l->made, path) & APP_PATH_MADE)
                return 0; /* a whiteout hides what lower layers made, never its own layer's */
        if (remove_lower(l, pfd, name, path, err) < 0)
                return na_error_prefix(err, "entry \"%.300s\"", raw);
        return 0;
}

static int too_large(struct na_error *err, const char *label, const char *limit_key, const char *fmt, ...)
        _printf_(4, 5);
static int too_large(struct na_error *err, const char *label, const char *limit_key, const char *fmt, ...)
{
        char what[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        int r = na_error_set(err, EFBIG, NA_E_DRIVER, "image %s is too large to unpack: %s", label ? label : "?",
                             what);
        na_error_detail(err, "reason", json_string("image-too-large"));
        na_error_detail(err, "limit", json_string(limit_key));
        return r;
}

/*
 * Charge bytes of data and files entries to the unpack before they are written: the
 * image's own limits first, then (every APP_UNPACK_CHECK_* of them) what the file
 * system of the root still has above its reserve.
 */
static int budget_charge(struct layer *l, uint64_t bytes, uint64_t files, struct na_error *err)
{
        struct app_unpack_budget *b = l->opts ? l->opts->budget : NULL;
        if (!b)
                return 0;
        static const struct app_unpack_limits defaults = { .reserve_percent = APP_UNPACK_RESERVE_PERCENT_DEFAULT };
        const struct app_unpack_limits *lim = b->limits ? b->limits : &defaults;
        uint64_t max_bytes = lim->max_bytes ? lim->max_bytes : APP_UNPACK_MAX_BYTES_DEFAULT;
        uint64_t max_files = lim->max_files ? lim->max_files : APP_UNPACK_MAX_FILES_DEFAULT;
        if (b->bytes + bytes > max_bytes)
                return too_large(err, b->label, "image_unpack_max_mb",
                                 "more than [apps] image_unpack_max_mb = %llu MB of data (stopped after %llu bytes)",
                                 (unsigned long long)(max_bytes >> 20), (unsigned long long)b->bytes);
        if (b->files + files > max_files)
                return too_large(err, b->label, "image_unpack_max_files",
                                 "more than [apps] image_unpack_max_files = %llu entries (stopped after %llu entries)",
                                 (unsigned long long)max_files, (unsigned long long)b->files);
        b->bytes += bytes;
        b->files += files;
        if (!lim->reserve_percent || (b->bytes < b->next_check_bytes && b->files < b->next_check_files))
                return 0;
        b->next_check_bytes = b->bytes + APP_UNPACK_CHECK_BYTES;
        b->next_check_files = b->files + APP_UNPACK_CHECK_FILES;
        struct statvfs sv;
        if (fstatvfs(l->root_fd, &sv) < 0)
                return na_error_sys(err, errno, "image %s: statvfs of the unpack root", b->label ? b->label : "?");
        uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
        uint64_t avail = (uint64_t)sv.f_bavail * unit, total = (uint64_t)sv.f_blocks * unit;
        uint64_t reserve = total / 100 * lim->reserve_percent;
        /* What the next window may write must fit above the reserve too. */
        if (avail < reserve + APP_UNPACK_CHECK_BYTES)
                return too_large(err, b->label, "image_unpack_reserve_percent",
                                 "the file system would have less than [apps] image_unpack_reserve_percent = %u%% "
                                 "free (%llu MB free of %llu MB; stopped after %llu bytes)",
                                 lim->reserve_percent, (unsigned long long)(avail >> 20),
                                 (unsigned long long)(total >> 20), (unsigned long long)b->bytes);
        /* f_files 0: a file system without an inode count (btrfs): only bytes matter. */
        uint64_t ireserve = (uint64_t)sv.f_files / 100 * lim->reserve_percent;
        if (sv.f_files && (uint64_t)sv.f_favail < ireserve + APP_UNPACK_CHECK_FILES)
                return too_large(err, b->label, "image_unpack_reserve_percent",
                                 "the file system would have less than [apps] image_unpack_reserve_percent = %u%% "
                                 "of its inodes free (%llu free of %llu; stopped after %llu entries)",
                                 lim->reserve_percent, (unsigned long long)sv.f_favail,
                                 (unsigned long long)sv.f_files, (unsigned long long)b->files);
        return 0;
}

static int write_data(struct layer *l, struct archive *a, int fd, const char *entry, struct na_error *err)
{
        uint64_t since_checkpoint = 0;
        for (;;) {
                const void *buf;
                size_t size;
                la_int64_t offset;
                int r = archive_read_data_block(a, &buf, &size, &offset);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r < ARCHIVE_WARN)
                        return na_error_set(err, EIO, NA_E_DRIVER, "entry \"%.300s\": %s", entry,
                                            archive_error_string(a) ?: "cannot read its data");
                since_checkpoint += size;
                if (since_checkpoint >= (64u << 20) && l->opts) {
                        since_checkpoint = 0;
                        if ((r = na_progress_checkpoint(l->opts->progress, err)) < 0)
                                return r;
                }
                if ((r = budget_charge(l, size, 0, err)) < 0)
                        return r;
                const char *p = buf;
                while (size > 0) {
                        ssize_t n = RETRY_EINTR(pwrite(fd, p, size, (off_t)offset));
                        if (n < 0)
                                return na_error_sys(err, errno, "entry \"%.300s\": write", entry);
                        p += n;
                        size -= (size_t)n;
                        offset += n;
                }
        }
}

static int defer_dir_time(struct layer *l, const char *path, const struct timespec ts[2], struct na_error *err)
{
        if (l->n_dirs == l->cap_dirs) {
                size_t ncap = l->cap_dirs ? l->cap_dirs * 2 : 64;
                struct dir_time *nd = realloc(l->dirs, ncap * sizeof(*nd));
                if (!nd)
                        return na_error_sys(err, ENOMEM, "layer");
                l->dirs = nd;
                l->cap_dirs = ncap;
        }
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
        if (!(l->dirs[l->n_dirs].path = strdup(path)))
                return na_error_sys(err, ENOMEM, "layer");
        NA_ANALYZER_FP_END
        memcpy(l->dirs[l->n_dirs].ts, ts, sizeof(struct timespec[2]));
        l->n_dirs++;
        return 0;
}

/* The entry proper: type dispatch beneath parent_fd, with owner, mode and times. */
static int make_entry(struct layer *l, struct archive *a, struct archive_entry *e, const char *raw, const char *path,
                      int parent_fd, const char *base, struct na_error *err)
{
        la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
        if (uid < 0 || uid >= (la_int64_t)UINT32_MAX || gid < 0 || gid >= (la_int64_t)UINT32_MAX)
                return refuse(err, raw, "an owner out of range");
        mode_t mode = archive_entry_perm(e) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
        struct timespec ts[2] = {
                { archive_entry_mtime(e), archive_entry_mtime_nsec(e) },
                { archive_entry_mtime(e), archive_entry_mtime_nsec(e) },
        };
        if (archive_entry_atime_is_set(e))
                ts[0] = (struct timespec){ archive_entry_atime(e), archive_entry_atime_nsec(e) };
        if (ts[0].tv_nsec < 0 || ts[0].tv_nsec > 999999999 || ts[1].tv_nsec < 0 || ts[1].tv_nsec > 999999999)
                ts[0].tv_nsec = ts[1].tv_nsec = 0;

        int r;
        switch (archive_entry_filetype(e)) {
        case AE_IFDIR: {
                if ((r = make_room(parent_fd, base, true, raw, err)) < 0)
                        return r;
                if (r == 0 && mkdirat(parent_fd, base, 0700) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": mkdir", raw);
                _cleanup_close_ int fd = openat(parent_fd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fchown(fd, (uid_t)uid, (gid_t)gid) < 0 || fchmod(fd, mode) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": set up the directory", raw);
                return defer_dir_time(l, path, ts, err);
        }
        case AE_IFREG: {
                if ((r = make_room(parent_fd, base, false, raw, err)) < 0)
                        return r;
                _cleanup_close_ int fd =
                        openat(parent_fd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": create", raw);
                if ((r = write_data(l, a, fd, raw, err)) < 0)
                        return r;
                if (archive_entry_size_is_set(e) && ftruncate(fd, (off_t)archive_entry_size(e)) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": truncate", raw);
                if (fchown(fd, (uid_t)uid, (gid_t)gid) < 0 || fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": set owner, mode and times", raw);
                return 0;
        }
        case AE_IFLNK: {
                const char *target = archive_entry_symlink(e);
                if (!target)
                        target = archive_entry_symlink_utf8(e);
                if (!target || !*target || strlen(target) >= PATH_MAX)
                        return refuse(err, raw, "a symbolic link without a usable target");
                if ((r = make_room(parent_fd, base, false, raw, err)) < 0)
                        return r;
                if (symlinkat(target, parent_fd, base) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": symlink", raw);
                if (fchownat(parent_fd, base, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0 ||
                    utimensat(parent_fd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": set owner and times", raw);
                return 0;
        }
        case AE_IFIFO:
                if ((r = make_room(parent_fd, base, false, raw, err)) < 0)
                        return r;
                /* base is the FIFO just made in a directory held by fd: fchmodat has nothing to follow. */
                if (mknodat(parent_fd, base, S_IFIFO | 0600, 0) < 0 ||
                    fchownat(parent_fd, base, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0 ||
                    fchmodat(parent_fd, base, mode, 0) < 0 || utimensat(parent_fd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": fifo", raw);
                return 0;
        case AE_IFCHR:
        case AE_IFBLK:
                /* A container gets its devices from the runtime: skipped, said to the caller. */
                if (l->opts && l->opts->on_skip)
                        l->opts->on_skip(l->opts->userdata, raw);
                return 0;
        default:
                return refuse(err, raw, "an unsupported file type");
        }
}

static int make_hardlink(struct layer *l, const char *raw, const char *target_raw, int parent_fd, const char *base,
                         struct na_error *err)
{
        char tbuf[PATH_MAX];
        const char *why = NULL;
        char *tpath = (char *)clean_path(target_raw, tbuf, &why);
        if (!tpath || !*tpath)
                return refuse(err, raw, "a hard link whose target leaves the root");
        const char *tparent, *tbase;
        split_path(tpath, &tparent, &tbase);
        _cleanup_close_ int tfd = app_openat_beneath(l->root_fd, *tparent ? tparent : ".", O_PATH | O_DIRECTORY, true);
        if (tfd < 0) {
                char msg[128];
                snprintf(msg, sizeof(msg), "a hard link whose target %s",
                         resolve_error(errno) ?: "does not exist");
                return refuse(err, raw, msg);
        }
        struct stat st;
        if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return refuse(err, raw, "a hard link whose target does not exist");
        if (S_ISDIR(st.st_mode))
                return refuse(err, raw, "a hard link to a directory");
        struct stat self;
        if (fstatat(parent_fd, base, &self, AT_SYMLINK_NOFOLLOW) == 0 && self.st_dev == st.st_dev &&
            self.st_ino == st.st_ino)
                return 0; /* already that file */
        int r = make_room(parent_fd, base, false, raw, err);
        if (r < 0)
                return r;
        if (linkat(tfd, tbase, parent_fd, base, 0) < 0)
                return na_error_sys(err, errno, "entry \"%.300s\": link", raw);
        return 0;
}

/* A name for messages: at most 300 bytes, control and non-ASCII bytes as '?' (messages stay valid UTF-8). */
static const char *shown_name(const char *name, char out[301])
{
        size_t i = 0;
        for (; name && name[i] && i < 300; i++)
                out[i] = (unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7f ? '?' : name[i];
        out[i] = '\0';
        return out;
}

static int apply_entry(struct layer *l, struct archive *a, struct archive_entry *e, struct na_error *err)
{
        const char *name = archive_entry_pathname(e);
        if (!name)
                name = archive_entry_pathname_utf8(e);
        char shown[301];
        const char *raw = shown_name(name, shown); /* only for messages */
        char pbuf[PATH_MAX];
        const char *why = NULL;
        const char *clean = clean_path(name, pbuf, &why);
        if (!clean)
                return refuse(err, raw, why);
        const char *target = archive_entry_hardlink(e);
        if (!target)
                target = archive_entry_hardlink_utf8(e);
        int r;
        if (!*clean) { /* the root itself: only its owner, mode and times */
                if (target || archive_entry_filetype(e) != AE_IFDIR)
                        return refuse(err, raw, "the root that is not a directory");
                _cleanup_close_ int fd = openat(l->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
                if (uid < 0 || uid >= (la_int64_t)UINT32_MAX || gid < 0 || gid >= (la_int64_t)UINT32_MAX)
                        return refuse(err, raw, "an owner out of range");
                mode_t mode = archive_entry_perm(e) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
                if (fd < 0 || fchown(fd, (uid_t)uid, (gid_t)gid) < 0 || fchmod(fd, mode) < 0)
                        return na_error_sys(err, errno, "entry \"%.300s\": the root", raw);
                struct timespec ts[2] = { { archive_entry_mtime(e), 0 }, { archive_entry_mtime(e), 0 } };
                return defer_dir_time(l, "", ts, err);
        }
        char path[PATH_MAX];
        memcpy(path, clean, strlen(clean) + 1);
        char split[PATH_MAX];
        memcpy(split, clean, strlen(clean) + 1);
        const char *parent, *base;
        split_path(split, &parent, &base);
        if (strncmp(base, ".wh.", 4) == 0)
                return whiteout(l, raw, parent, base, err);

        /* Every entry is an inode or a name (its parent directories are few beside it). */
        if ((r = budget_charge(l, 0, 1, err)) < 0)
                return r;
        _cleanup_close_ int pfd = -1;
        if ((r = open_parent(l, parent, raw, true, &pfd, err)) < 0)
                return r;
        if (target)
                r = make_hardlink(l, raw, target, pfd, base, err);
        else
                r = make_entry(l, a, e, raw, path, pfd, base, err);
        if (r < 0)
                return r;
        if (app_pathset_mark(&l->made, path) < 0)
                return na_error_sys(err, ENOMEM, "layer");
        return 0;
}

static void apply_dir_times(struct layer *l)
{
        for (size_t i = l->n_dirs; i > 0; i--) {
                struct dir_time *d = &l->dirs[i - 1];
                _cleanup_close_ int fd =
                        app_openat_beneath(l->root_fd, *d->path ? d->path : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                                           true);
                if (fd >= 0)
                        (void)futimens(fd, d->ts);
        }
}

static void layer_free(struct layer *l)
{
        app_pathset_free(&l->made);
        for (size_t i = 0; i < l->n_dirs; i++)
                free(l->dirs[i].path);
        free(l->dirs);
        EVP_MD_CTX_free(l->sha);
        free(l);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct layer *, layer_free)

static int read_entries(struct layer *l, struct archive *a, struct na_error *err)
{
        for (unsigned n = 1;; n++) {
                struct archive_entry *e;
                int r;
                if (n % 256 == 0 && l->opts && (r = na_progress_checkpoint(l->opts->progress, err)) < 0)
                        return r;
                r = archive_read_next_header(a, &e);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r < ARCHIVE_WARN)
                        return na_error_set(err, EIO, NA_E_DRIVER, "read layer: %s",
                                            archive_error_string(a) ?: "not a tar archive");
                if ((r = apply_entry(l, a, e, err)) < 0)
                        return r;
        }
}

int app_layer_apply(int root_fd, int layer_fd, const struct app_layer_opts *opts, struct na_error *err)
{
        _cleanup_(layer_freep) struct layer *l = calloc(1, sizeof(*l));
        if (!l)
                return na_error_sys(err, ENOMEM, "layer");
        l->root_fd = root_fd;
        l->fd = layer_fd;
        l->opts = opts;
        if (opts && opts->digest) {
                if (!app_digest_valid(opts->digest))
                        return na_error_set(err, EINVAL, NA_E_DRIVER, "layer: unsupported digest %.80s", opts->digest);
                if (!(l->sha = EVP_MD_CTX_new()) || EVP_DigestInit_ex(l->sha, EVP_sha256(), NULL) != 1)
                        return na_error_sys(err, ENOMEM, "layer: sha256");
        }
        _cleanup_(archive_read_freep) struct archive *a = archive_read_new();
        if (!a)
                return app_archive_failed(err, "layer");
        /* ARCHIVE_WARN would mean an external program: refuse rather than spawn one. */
        if (archive_read_support_filter_gzip(a) != ARCHIVE_OK || archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
            archive_read_support_format_tar(a) != ARCHIVE_OK || archive_read_support_format_empty(a) != ARCHIVE_OK)
                return na_error_set(err, ENOTSUP, NA_E_INTERNAL, "layer: libarchive lacks gzip, zstd or tar: %s",
                                    archive_error_string(a) ?: "?");
        int r;
        if (archive_read_open(a, l, NULL, layer_read, NULL) != ARCHIVE_OK)
                r = na_error_set(err, EIO, NA_E_DRIVER, "read layer: %s", archive_error_string(a) ?: "cannot open");
        else
                r = read_entries(l, a, err);
        if (r < 0) {
                /* A corrupt blob explains a broken archive better than the archive does. */
                struct na_error sub = NA_ERROR_INIT;
                if (l->sha && finish_digest(l, &sub) == -EBADMSG)
                        na_error_move(err, &sub);
                na_error_clear(&sub);
                return -err->errnum;
        }
        apply_dir_times(l);
        return finish_digest(l, err);
}
