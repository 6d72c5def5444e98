/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Unpacking an image once per manifest digest into <cache_dir>/<hex>/rootfs (see app-image.h). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "common/fileio.h"
#include "drivers/app/image/app-image-internal.h"
#include "volume/volume.h"

#define ROOTFS_TMP_PREFIX "rootfs.tmp-"

/*
 * Take <cache_dir>/<hex>.lock (flock: threads and processes alike), retrying when
 * the file was unlinked by a delete while we waited. The checkpoint is asked while
 * another holder keeps it.
 */
static int lock_digest(int cache_fd, const char *hex, const char *label, const struct na_progress *progress,
                       int *ret_fd, struct na_error *err)
{
        char name[80];
        snprintf(name, sizeof(name), "%s.lock", hex);
        bool told = false;
        for (;;) {
                _cleanup_close_ int fd =
                        openat(cache_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return na_error_sys(err, errno, "image %s: open the unpack lock", label);
                while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                        if (errno != EWOULDBLOCK && errno != EINTR)
                                return na_error_sys(err, errno, "image %s: take the unpack lock", label);
                        if (!told) {
                                na_progress_stage(progress, "unpacking", 0, "waiting for another unpack of this image");
                                told = true;
                        }
                        int r = na_progress_checkpoint(progress, err);
                        if (r < 0)
                                return r;
                        nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
                }
                struct stat st;
                if (fstat(fd, &st) < 0)
                        return na_error_sys(err, errno, "image %s: stat the unpack lock", label);
                if (st.st_nlink > 0) {
                        *ret_fd = TAKE_FD(fd);
                        return 0;
                }
        }
}

/* Remove the rootfs.tmp-* left in dir_fd by a crash (we hold the lock, so nobody is writing them). */
static int remove_leftovers(int dir_fd, const char *label, struct na_error *err)
{
        int dfd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                int e = errno;
                if (dfd >= 0)
                        close(dfd);
                return na_error_sys(err, e, "image %s: read the cache directory", label);
        }
        int r = 0;
        for (struct dirent *e; r >= 0 && (e = readdir(d));)
                if (strncmp(e->d_name, ROOTFS_TMP_PREFIX, strlen(ROOTFS_TMP_PREFIX)) == 0)
                        r = app_fs_rm_rf(dir_fd, e->d_name, err);
        closedir(d);
        return r < 0 ? na_error_prefix(err, "image %s: remove a half-unpacked root", label) : 0;
}

struct unpack_progress {
        const struct na_progress *progress;
        uint64_t done, total;
        int last_percent;
        uint64_t skipped;    /* device nodes the layers held */
        char skipped_names[512];
};

static void on_skip(void *userdata, const char *path)
{
        struct unpack_progress *u = userdata;
        size_t n = strlen(u->skipped_names);
        if (u->skipped++ < 8 && n + strlen(path) + 4 < sizeof(u->skipped_names))
                snprintf(u->skipped_names + n, sizeof(u->skipped_names) - n, "%s/%s", n ? ", " : "",
                         path[0] == '/' ? path + 1 : path);
}

/* APP_IMAGE_SKIPPED_FILE beside the root, when the layers held device nodes. */
static int write_skipped(int hex_fd, const struct unpack_progress *u, const char *label, struct na_error *err)
{
        (void)unlinkat(hex_fd, APP_IMAGE_SKIPPED_FILE, 0);
        if (!u->skipped)
                return 0;
        char text[800];
        int n = snprintf(text, sizeof(text),
                         "skipped %llu device node%s of its layers (%s%s): a container gets its devices from the "
                         "runtime\n",
                         (unsigned long long)u->skipped, u->skipped == 1 ? "" : "s", u->skipped_names,
                         u->skipped > 8 ? ", ..." : "");
        _cleanup_close_ int fd =
                openat(hex_fd, APP_IMAGE_SKIPPED_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return na_error_sys(err, errno, "image %s: write %s", label, APP_IMAGE_SKIPPED_FILE);
        return na_write_all(fd, text, (size_t)n, APP_IMAGE_SKIPPED_FILE, err);
}

static void on_read(void *userdata, uint64_t bytes)
{
        struct unpack_progress *u = userdata;
        int pct = u->total ? (int)((u->done + bytes) * 100 / u->total) : 100;
        if (pct > 100)
                pct = 100;
        if (pct != u->last_percent) {
                u->last_percent = pct;
                na_progress_stage(u->progress, "unpacking", pct, NULL);
        }
}

/* Apply every layer into a fresh temporary directory of hex_fd and rename it to rootfs. */
static int unpack_layers(int layout_fd, int hex_fd, const char *label, const struct app_image *img,
                         const struct app_unpack_limits *limits, const struct na_progress *progress,
                         struct na_error *err)
{
        struct app_unpack_budget budget = { .limits = limits, .label = label };
        /* We hold the digest's lock and removed the leftovers: the name is ours. */
        const char *tmp = ROOTFS_TMP_PREFIX "unpack";
        int r = 0;
        if (mkdirat(hex_fd, tmp, 0755) < 0)
                return na_error_sys(err, errno, "image %s: create a temporary root", label);
        _cleanup_close_ int root_fd = openat(hex_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0 || fchmod(root_fd, 0755) < 0)
                r = na_error_sys(err, errno, "image %s: open the temporary root", label);

        struct unpack_progress u = { .progress = progress, .last_percent = -1 };
        for (size_t i = 0; i < img->n_layers; i++)
                u.total += img->layers[i].size;
        for (size_t i = 0; r >= 0 && i < img->n_layers; i++) {
                const struct app_image_layer *ly = &img->layers[i];
                on_read(&u, 0);
                if ((r = na_progress_checkpoint(progress, err)) < 0)
                        break;
                _cleanup_close_ int fd = -1;
                if ((r = app_layout_open_blob(layout_fd, label, ly->digest, &fd, err)) < 0)
                        break;
                struct app_layer_opts opts = {
                        .digest = ly->digest, .size = ly->size, .on_read = on_read, .userdata = &u,
                        .on_skip = on_skip, .progress = progress, .budget = &budget,
                };
                r = app_layer_apply(root_fd, fd, &opts, err);
                if (r < 0 && !streq_ptr(err->code, NA_E_DRIVER) && !streq_ptr(err->code, NA_E_INTERNAL))
                        break; /* a checkpoint's own error (a stopped job) goes up as it is */
                if (r == -EFBIG)
                        break; /* too large: the message names the image and the limit already */
                if (r == -EBADMSG)
                        na_error_prefix(err, "image %s", label);
                else if (r < 0)
                        na_error_prefix(err, "image %s: layer %s", label, ly->digest);
                if (r < 0)
                        na_error_detail(err, "reason", json_string(err->message));
                u.done += ly->size;
        }
        if (r >= 0)
                r = write_skipped(hex_fd, &u, label, err);
        if (r >= 0 && syncfs(root_fd) < 0)
                r = na_error_sys(err, errno, "image %s: sync the unpacked root", label);
        if (r >= 0 && renameat(hex_fd, tmp, hex_fd, "rootfs") < 0)
                r = na_error_sys(err, errno, "image %s: rename the unpacked root into place", label);
        if (r >= 0 && fsync(hex_fd) < 0)
                r = na_error_sys(err, errno, "image %s: sync the cache directory", label);
        if (r < 0) {
                struct na_error sub = NA_ERROR_INIT;
                (void)app_fs_rm_rf(hex_fd, tmp, &sub);
                na_error_clear(&sub);
                return r;
        }
        if (u.last_percent != 100)
                na_progress_stage(progress, "unpacking", 100, NULL);
        return 0;
}

int app_image_unpack(const char *images_dir, const struct proto_image_ref *ref, const char *cache_dir,
                     const struct na_progress *progress, struct app_image *ret_img, char **ret_rootfs,
                     struct na_error *err)
{
        return app_image_unpack_bounded(images_dir, ref, cache_dir, NULL, progress, ret_img, ret_rootfs, err);
}

int app_image_unpack_bounded(const char *images_dir, const struct proto_image_ref *ref, const char *cache_dir,
                             const struct app_unpack_limits *limits, const struct na_progress *progress,
                             struct app_image *ret_img, char **ret_rootfs, struct na_error *err)
{
        char label[400];
        proto_image_ref_format(ref, label, sizeof(label));
        _cleanup_close_ int layout_fd = -1;
        int r = app_layout_open(images_dir, ref->name, label, &layout_fd, err);
        if (r < 0)
                return r;
        struct app_image img = {0};
        if ((r = app_image_resolve(images_dir, ref, false, &img, err)) < 0)
                return r;
        _cleanup_(app_image_clearp) struct app_image *guard = &img;
        const char *hex = img.manifest_digest + 7;

        if ((r = na_mkdir_p(cache_dir, 0711, err)) < 0)
                return na_error_prefix(err, "image %s: cache directory", label);
        _cleanup_close_ int cache_fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cache_fd < 0)
                return na_error_sys(err, errno, "image %s: open %s", label, cache_dir);
        _cleanup_close_ int lock_fd = -1;
        if ((r = lock_digest(cache_fd, hex, label, progress, &lock_fd, err)) < 0)
                return r;
        if (mkdirat(cache_fd, hex, 0711) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "image %s: create %s/%s", label, cache_dir, hex);
        _cleanup_close_ int hex_fd = openat(cache_fd, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (hex_fd < 0)
                return na_error_sys(err, errno, "image %s: open %s/%s", label, cache_dir, hex);

        struct stat st;
        if (fstatat(hex_fd, "rootfs", &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return na_error_sys(err, errno, "image %s: stat the unpacked root", label);
                if ((r = remove_leftovers(hex_fd, label, err)) < 0 ||
                    (r = unpack_layers(layout_fd, hex_fd, label, &img, limits, progress, err)) < 0)
                        return r;
        } else if (!S_ISDIR(st.st_mode))
                return na_error_set(err, ENOTDIR, NA_E_INTERNAL, "image %s: %s/%s/rootfs is not a directory", label,
                                    cache_dir, hex);
        if (ret_rootfs) {
                char *p = na_strdupf("%s/%s/rootfs", cache_dir, hex);
                if (!p)
                        return na_error_sys(err, ENOMEM, "image %s", label);
                *ret_rootfs = p;
        }
        if (ret_img) {
                *ret_img = img;
                guard = NULL;
        }
        return 0;
}

int app_image_cache_remove(const char *cache_dir, const char *hex, struct na_error *err)
{
        _cleanup_close_ int cache_fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cache_fd < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "open %s", cache_dir);
        struct stat st;
        if (fstatat(cache_fd, hex, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "stat %s/%s", cache_dir, hex);
        _cleanup_close_ int lock_fd = -1;
        int r = lock_digest(cache_fd, hex, hex, NULL, &lock_fd, err);
        if (r < 0)
                return r;
        _cleanup_close_ int hex_fd = openat(cache_fd, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (hex_fd >= 0) {
                const char *tmp = ROOTFS_TMP_PREFIX "deleted";
                if ((r = app_fs_rm_rf(hex_fd, tmp, err)) < 0)
                        return na_error_prefix(err, "remove the unpacked root %s", hex);
                if (renameat(hex_fd, "rootfs", hex_fd, tmp) < 0 && errno != ENOENT)
                        return na_error_sys(err, errno, "remove the unpacked root %s", hex);
                (void)fsync(hex_fd);
        }
        if ((r = app_fs_rm_rf(cache_fd, hex, err)) < 0)
                return na_error_prefix(err, "remove the unpacked root %s", hex);
        char name[80];
        snprintf(name, sizeof(name), "%s.lock", hex);
        (void)unlinkat(cache_fd, name, 0);
        (void)fsync(cache_fd);
        return 0;
}
