/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Seeding a new volume from its image (AGENT-API 4.2 "Volume seeding", volume.h
 * app_fs_seed): the files an image holds at the volume's path are copied into the
 * empty volume once, owned by the app's user. The source is an unpacked image, as
 * hostile as any: it is walked with openat(O_NOFOLLOW) from a directory fd opened
 * beneath the image's root, links are copied as links and never followed, device
 * nodes, fifos and sockets are skipped, set-id bits dropped, and the depth bounded.
 * The destination is the new volume, which no app runs on yet.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "volume/volume-internal.h"

#define SEED_DEPTH_MAX 128
#define SEED_COPY_CHUNK (1u << 20)

struct seed {
        uid_t uid;
        gid_t gid;
        uint64_t entries;
        char *buf;
};

static int seed_fail(struct na_error *err, int e, const char *name, const char *what)
{
        if (e == ENOSPC || e == EDQUOT)
                return na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                    "seeding the volume: %s does not fit in the app's volume", name);
        return na_error_set(err, e, NA_E_DRIVER, "seeding the volume: %s %s: %s", what, name, strerror(e));
}

/*
 * Call fn for every entry of dir_fd but "." and ".." (on a duplicate, so dir_fd stays
 * usable), until it returns < 0; 1 from fn stops early with success.
 */
static int each_entry(int dir_fd, int (*fn)(int dir_fd, const char *name, void *ud), void *ud, struct na_error *err)
{
        int dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        if (!d) {
                int e = errno;
                if (dup_fd >= 0)
                        close(dup_fd);
                return seed_fail(err, e, ".", "read");
        }
        int r = 0;
        for (struct dirent *e; r == 0 && (errno = 0, e = readdir(d));)
                if (!streq(e->d_name, ".") && !streq(e->d_name, ".."))
                        r = fn(dir_fd, e->d_name, ud);
        if (r == 0 && errno != 0)
                r = seed_fail(err, errno, ".", "read");
        closedir(d);
        return r < 0 ? r : 0;
}

static int copy_file(struct seed *s, int src_dir, int dst_dir, const char *name, mode_t mode, struct na_error *err)
{
        _cleanup_close_ int in = openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0)
                return seed_fail(err, errno, name, "open");
        _cleanup_close_ int out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return seed_fail(err, errno, name, "create");
        for (;;) {
                ssize_t n = read(in, s->buf, SEED_COPY_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return seed_fail(err, errno, name, "read");
                if (n == 0)
                        break;
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(out, s->buf + off, (size_t)(n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0)
                                return seed_fail(err, errno, name, "write");
                        off += w;
                }
        }
        if (fchown(out, s->uid, s->gid) < 0 || fchmod(out, mode & 0777) < 0)
                return seed_fail(err, errno, name, "give");
        return 0;
}

struct copy_ctx {
        struct seed *s;
        int dst_dir;
        unsigned depth;
        struct na_error *err;
};

static int copy_dir(struct seed *s, int src_dir, int dst_dir, unsigned depth, struct na_error *err);

static int copy_entry(int src_dir, const char *name, void *ud)
{
        struct copy_ctx *c = ud;
        struct stat st;
        if (fstatat(src_dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return seed_fail(c->err, errno, name, "stat");
        int r = 0;
        if (S_ISDIR(st.st_mode)) {
                if (mkdirat(c->dst_dir, name, 0700) < 0)
                        return seed_fail(c->err, errno, name, "mkdir");
                _cleanup_close_ int sub_src = openat(src_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int sub_dst = openat(c->dst_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub_src < 0 || sub_dst < 0)
                        return seed_fail(c->err, errno, name, "open");
                r = copy_dir(c->s, sub_src, sub_dst, c->depth + 1, c->err);
                if (r >= 0 && (fchown(sub_dst, c->s->uid, c->s->gid) < 0 || fchmod(sub_dst, st.st_mode & 0777) < 0))
                        r = seed_fail(c->err, errno, name, "give");
        } else if (S_ISREG(st.st_mode)) {
                r = copy_file(c->s, src_dir, c->dst_dir, name, st.st_mode, c->err);
        } else if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlinkat(src_dir, name, target, sizeof(target) - 1);
                if (n < 0)
                        return seed_fail(c->err, errno, name, "readlink");
                target[n] = '\0';
                if (symlinkat(target, c->dst_dir, name) < 0 ||
                    fchownat(c->dst_dir, name, c->s->uid, c->s->gid, AT_SYMLINK_NOFOLLOW) < 0)
                        r = seed_fail(c->err, errno, name, "link");
        } else {
                return 0; /* devices, fifos, sockets: not a volume's content */
        }
        if (r >= 0)
                c->s->entries++;
        return r < 0 ? r : 0;
}

static int copy_dir(struct seed *s, int src_dir, int dst_dir, unsigned depth, struct na_error *err)
{
        if (depth > SEED_DEPTH_MAX)
                return na_error_set(err, ELOOP, NA_E_DRIVER, "seeding the volume: directories nest deeper than %d",
                                    SEED_DEPTH_MAX);
        struct copy_ctx c = { .s = s, .dst_dir = dst_dir, .depth = depth, .err = err };
        return each_entry(src_dir, copy_entry, &c, err);
}

static int found_one(int dir_fd, const char *name, void *ud)
{
        (void)dir_fd;
        (void)name;
        *(bool *)ud = true;
        return 1;
}

static int remove_one(int dir_fd, const char *name, void *ud)
{
        (void)ud;
        struct na_error e = NA_ERROR_INIT;
        (void)app_fs_rm_rf(dir_fd, name, &e);
        na_error_clear(&e);
        return 0;
}

int app_fs_seed(int image_root_fd, const char *volume_path, int volume_fd, uid_t uid, gid_t gid, uint64_t *ret_entries,
                struct na_error *err)
{
        *ret_entries = 0;
        const char *rel = volume_path;
        while (*rel == '/')
                rel++;
        if (!*rel)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "seeding the volume: the volume path is the root");
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        _cleanup_close_ int src = (int)syscall(SYS_openat2, image_root_fd, rel, &how, sizeof(how));
        if (src < 0) {
                if (errno == ENOENT || errno == ENOTDIR)
                        return 0; /* the image holds nothing there */
                return seed_fail(err, errno, volume_path, "open the image's");
        }
        bool used = false;
        int r = each_entry(volume_fd, found_one, &used, err);
        if (r < 0 || used)
                return r; /* a volume that holds anything is the customer's: never seeded over */
        _cleanup_free_ char *buf = malloc(SEED_COPY_CHUNK);
        if (!buf)
                return na_error_sys(err, ENOMEM, "seeding the volume");
        struct seed s = { .uid = uid, .gid = gid, .buf = buf };
        r = copy_dir(&s, src, volume_fd, 0, err);
        if (r < 0) {
                /* Nothing half-seeded stays: seeding again finds the volume empty and seeds it whole. */
                struct na_error e = NA_ERROR_INIT;
                (void)each_entry(volume_fd, remove_one, NULL, &e);
                na_error_clear(&e);
                return r;
        }
        *ret_entries = s.entries;
        return 0;
}
