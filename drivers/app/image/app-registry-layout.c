/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The OCI image layout a pull fills: directories opened beneath images_dir, blobs, index.json. */
#include "drivers/app/image/app-registry-internal.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "common/digest.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

#define REG_INDEX_MAX (16 * 1024 * 1024)
#define REF_NAME_ANNOTATION "org.opencontainers.image.ref.name"

/* A directory entry of dirfd, never through a symbolic link and never outside dirfd. */
static int open_dir_beneath(int dirfd, const char *name)
{
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
        };
        long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

static int mkdir_open(int dirfd, const char *name, bool *ret_created)
{
        *ret_created = false;
        if (mkdirat(dirfd, name, 0755) == 0)
                *ret_created = true;
        else if (errno != EEXIST)
                return -errno;
        return open_dir_beneath(dirfd, name);
}

static void sleep_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void free_created(struct reg_layout *l)
{
        for (size_t i = 0; i < l->n_created; i++)
                free(l->created_dirs[i]);
        l->n_created = 0;
}

/* Make and open <root>/<name> one component at a time; remember what was created. */
static int open_name(struct reg_layout *l, const char *name, struct na_error *err)
{
        _cleanup_close_ int cur = fcntl(l->rootfd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return na_error_sys(err, errno, "%s", l->path);
        const char *p = name;
        while (*p) {
                size_t n = strcspn(p, "/");
                char comp[PROTO_IMAGE_NAME_MAX + 1];
                if (n == 0 || n >= sizeof(comp))
                        return na_error_set(err, EINVAL, NA_E_VALIDATION, "%s: bad image name", l->path);
                memcpy(comp, p, n);
                comp[n] = 0;
                bool created;
                int fd = mkdir_open(cur, comp, &created);
                if (fd < 0)
                        return na_error_sys(err, -fd, "open %s (component %s)", l->path, comp);
                closep(&cur);
                cur = fd;
                if (created && l->n_created < ARRAY_SIZE(l->created_dirs)) {
                        l->created_dirs[l->n_created] = strndup(name, (size_t)(p - name) + n);
                        if (!l->created_dirs[l->n_created])
                                return na_error_sys(err, ENOMEM, "%s", l->path);
                        l->n_created++;
                }
                p += n;
                if (*p == '/')
                        p++;
        }
        l->dirfd = TAKE_FD(cur);
        return 0;
}

int reg_layout_open(const char *images_dir, const char *name, const struct na_progress *progress,
                    struct reg_layout *l, struct na_error *err)
{
        memset(l, 0, sizeof(*l));
        l->dirfd = l->blobsfd = l->rootfd = -1;
        if ((size_t)snprintf(l->path, sizeof(l->path), "%s/%s", images_dir, name) >= sizeof(l->path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s: path too long", images_dir);
        int r = na_mkdir_p(images_dir, 0755, err);
        if (r < 0)
                return r;
        l->rootfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l->rootfd < 0)
                return na_error_sys(err, errno, "open %s", images_dir);

        /* Serialize with other pulls of this image; a pull that failed may remove the directory under us. */
        for (int round = 0;; round++) {
                r = open_name(l, name, err);
                if (r < 0)
                        return r;
                for (;;) {
                        if (flock(l->dirfd, LOCK_EX | LOCK_NB) == 0)
                                break;
                        if (errno != EWOULDBLOCK)
                                return na_error_sys(err, errno, "lock %s", l->path);
                        r = na_progress_checkpoint(progress, err);
                        if (r < 0)
                                return r;
                        sleep_ms(100);
                }
                struct stat st;
                if (fstat(l->dirfd, &st) < 0)
                        return na_error_sys(err, errno, "stat %s", l->path);
                if (st.st_nlink > 0)
                        break;
                closep(&l->dirfd);
                l->dirfd = -1;
                free_created(l);
                if (round >= 10)
                        return na_error_set(err, EAGAIN, NA_E_INTERNAL, "%s: removed again and again while waiting", l->path);
        }
        bool created;
        _cleanup_close_ int blobs = mkdir_open(l->dirfd, "blobs", &created);
        if (blobs < 0)
                return na_error_sys(err, -blobs, "open %s/blobs", l->path);
        l->blobsfd = mkdir_open(blobs, "sha256", &created);
        if (l->blobsfd < 0)
                return na_error_sys(err, -l->blobsfd, "open %s/blobs/sha256", l->path);
        return 0;
}

void reg_layout_abort(struct reg_layout *l)
{
        for (size_t i = 0; i < l->n_new && l->blobsfd >= 0; i++)
                unlinkat(l->blobsfd, l->new_blobs[i], 0);
        l->n_new = 0;
        if (l->n_created == 0 || l->dirfd < 0)
                return;
        /* This pull made the layout directory: take it away again with what it holds. */
        unlinkat(l->dirfd, "index.json", 0);
        unlinkat(l->dirfd, "oci-layout", 0);
        unlinkat(l->dirfd, "blobs/sha256", AT_REMOVEDIR);
        unlinkat(l->dirfd, "blobs", AT_REMOVEDIR);
        for (size_t i = l->n_created; i > 0; i--)
                unlinkat(l->rootfd, l->created_dirs[i - 1], AT_REMOVEDIR); /* fails when others use it: fine */
}

void reg_layout_close(struct reg_layout *l)
{
        closep(&l->blobsfd);
        closep(&l->dirfd); /* drops the lock */
        closep(&l->rootfd);
        l->blobsfd = l->dirfd = l->rootfd = -1;
        free_created(l);
        free(l->new_blobs);
        l->new_blobs = NULL;
        l->n_new = l->cap_new = 0;
}

int reg_layout_blob_note(struct reg_layout *l, const char *hex, struct na_error *err)
{
        if (l->n_new == l->cap_new) {
                size_t cap = l->cap_new ? l->cap_new * 2 : 16;
                void *p = realloc(l->new_blobs, cap * sizeof(*l->new_blobs));
                if (!p)
                        return na_error_sys(err, ENOMEM, "%s", l->path);
                l->new_blobs = p;
                l->cap_new = cap;
        }
        snprintf(l->new_blobs[l->n_new++], REG_HEX_LEN + 1, "%s", hex);
        return 0;
}

int reg_layout_blob_present(struct reg_layout *l, const char *hex, uint64_t size, struct na_error *err)
{
        _cleanup_close_ int fd = openat(l->blobsfd, hex, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                if (errno != ELOOP)
                        return na_error_sys(err, errno, "open %s/blobs/sha256/%s", l->path, hex);
        }
        struct stat st;
        bool good = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
        if (good) {
                _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
                if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
                        return na_error_set(err, ENOMEM, NA_E_INTERNAL, "%s: cannot start a digest", l->path);
                _cleanup_free_ unsigned char *buf = malloc(1 << 20);
                if (!buf)
                        return na_error_sys(err, ENOMEM, "%s", l->path);
                for (;;) {
                        ssize_t n = RETRY_EINTR(read(fd, buf, 1 << 20));
                        if (n < 0)
                                return na_error_sys(err, errno, "read %s/blobs/sha256/%s", l->path, hex);
                        if (n == 0)
                                break;
                        EVP_DigestUpdate(ctx, buf, (size_t)n);
                }
                unsigned char d[EVP_MAX_MD_SIZE];
                unsigned int dl = 0;
                char got[65];
                EVP_DigestFinal_ex(ctx, d, &dl);
                na_sha256_hex(d, got);
                good = streq(got, hex);
        }
        if (good)
                return 1;
        /* A wrong or truncated blob (an old crash, a tampered store): fetch it again. */
        if (unlinkat(l->blobsfd, hex, 0) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "remove %s/blobs/sha256/%s", l->path, hex);
        return 0;
}

static int tmp_open_at(int dirfd, const char *dirpath, char name[64], struct na_error *err)
{
        for (int i = 0; i < 16; i++) {
                unsigned char rnd[8];
                if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                        return na_error_sys(err, errno ? errno : EIO, "getrandom");
                snprintf(name, 64, ".tmp-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                         rnd[5], rnd[6], rnd[7]);
                int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return na_error_sys(err, errno, "create a temporary file in %s", dirpath);
        }
        return na_error_set(err, EEXIST, NA_E_INTERNAL, "%s: no free temporary name", dirpath);
}

int reg_layout_tmp_open(struct reg_layout *l, char name[64], struct na_error *err)
{
        return tmp_open_at(l->blobsfd, l->path, name, err);
}

int reg_layout_tmp_publish(struct reg_layout *l, int fd, const char *tmpname, const char *hex, struct na_error *err)
{
        if (fsync(fd) < 0) {
                int e = errno;
                unlinkat(l->blobsfd, tmpname, 0);
                return na_error_sys(err, e, "fsync %s/blobs/sha256/%s", l->path, tmpname);
        }
        if (renameat(l->blobsfd, tmpname, l->blobsfd, hex) < 0) {
                int e = errno;
                unlinkat(l->blobsfd, tmpname, 0);
                return na_error_sys(err, e, "rename %s/blobs/sha256/%s", l->path, tmpname);
        }
        int r = reg_layout_blob_note(l, hex, err);
        if (r < 0)
                return r;
        if (fsync(l->blobsfd) < 0)
                return na_error_sys(err, errno, "fsync %s/blobs/sha256", l->path);
        return 0;
}

/* Replace dirfd/name with data: temporary file, fsync, rename, fsync of the directory. */
static int write_atomic_at(struct reg_layout *l, int dirfd, const char *name, const void *data, size_t len,
                           struct na_error *err)
{
        char tmp[64];
        _cleanup_close_ int fd = tmp_open_at(dirfd, l->path, tmp, err);
        if (fd < 0)
                return fd;
        int r = na_write_all(fd, data, len, name, err);
        if (r < 0) {
                unlinkat(dirfd, tmp, 0);
                return na_error_prefix(err, "%s", l->path);
        }
        if (fsync(fd) < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
                int e = errno;
                unlinkat(dirfd, tmp, 0);
                return na_error_sys(err, e, "write %s/%s", l->path, name);
        }
        if (fsync(dirfd) < 0)
                return na_error_sys(err, errno, "fsync %s", l->path);
        return 0;
}

int reg_layout_blob_store(struct reg_layout *l, const char *hex, const void *data, size_t len, struct na_error *err)
{
        int r = reg_layout_blob_present(l, hex, len, err);
        if (r != 0)
                return r < 0 ? r : 0;
        r = write_atomic_at(l, l->blobsfd, hex, data, len, err);
        if (r < 0)
                return r;
        return reg_layout_blob_note(l, hex, err);
}

static json_t *load_index(struct reg_layout *l, struct na_error *err)
{
        _cleanup_close_ int fd = openat(l->dirfd, "index.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                if (errno != ENOENT) {
                        na_error_sys(err, errno, "open %s/index.json", l->path);
                        return NULL;
                }
                return json_pack("{s:i, s:[]}", "schemaVersion", 2, "manifests");
        }
        json_error_t je;
        json_t *j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
        if (!j || !json_is_object(j) || !json_is_array(json_object_get(j, "manifests"))) {
                json_decref(j);
                na_error_set(err, EINVAL, NA_E_DRIVER, "%s/index.json: not an OCI image index, left as it is", l->path);
                na_error_detail(err, "reason", json_string("bad-layout"));
                return NULL;
        }
        return j;
}

int reg_layout_finish(struct reg_layout *l, const char *media_type, const char *hex, uint64_t size, const char *tag,
                      struct na_error *err)
{
        if (faccessat(l->dirfd, "oci-layout", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
                int r = write_atomic_at(l, l->dirfd, "oci-layout", layout, strlen(layout), err);
                if (r < 0)
                        return r;
        }
        _cleanup_json_ json_t *index = load_index(l, err);
        if (!index)
                return -(err->errnum ? err->errnum : EIO);
        char digest[80];
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        json_t *manifests = json_object_get(index, "manifests");
        size_t i = 0;
        while (i < json_array_size(manifests)) {
                json_t *m = json_array_get(manifests, i);
                const char *name = json_string_value(json_object_get(json_object_get(m, "annotations"), REF_NAME_ANNOTATION));
                const char *d = json_string_value(json_object_get(m, "digest"));
                /* A tag names one manifest: the old entry goes. A digest entry is needed once. */
                if ((tag && name && streq(name, tag)) || (!tag && d && streq(d, digest) && !name))
                        json_array_remove(manifests, i);
                else
                        i++;
        }
        json_t *entry = json_pack("{s:s, s:s, s:I}", "mediaType", media_type, "digest", digest, "size", (json_int_t)size);
        if (entry && tag)
                json_object_set_new(entry, "annotations", json_pack("{s:s}", REF_NAME_ANNOTATION, tag));
        if (!entry || json_array_append_new(manifests, entry) < 0)
                return na_error_sys(err, ENOMEM, "%s/index.json", l->path);
        _cleanup_free_ char *text = json_dumps(index, JSON_COMPACT);
        if (!text)
                return na_error_sys(err, ENOMEM, "%s/index.json", l->path);
        return write_atomic_at(l, l->dirfd, "index.json", text, strlen(text), err);
}
