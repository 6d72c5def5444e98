/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Resolving an image reference in an OCI image layout: index.json, manifest, config, verified blobs. */
#include "drivers/app/image/app-image-internal.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/digest.h"
#include "common/json-cleanup.h"
#include "common/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

bool app_digest_valid(const char *digest)
{
        if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != 71)
                return false;
        for (const char *p = digest + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

bool app_media_type_is_index(const char *mt)
{
        return mt && (streq(mt, APP_MT_OCI_INDEX) || streq(mt, APP_MT_DOCKER_LIST));
}

bool app_media_type_is_manifest(const char *mt)
{
        return mt && (streq(mt, APP_MT_OCI_MANIFEST) || streq(mt, APP_MT_DOCKER_MANIFEST));
}

static bool media_type_is_config(const char *mt)
{
        return mt && (streq(mt, "application/vnd.oci.image.config.v1+json") ||
                      streq(mt, "application/vnd.docker.container.image.v1+json"));
}

static bool media_type_is_layer(const char *mt)
{
        static const char *const ok[] = {
                "application/vnd.oci.image.layer.v1.tar",
                "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd",
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
        };
        for (size_t i = 0; mt && i < ARRAY_SIZE(ok); i++)
                if (streq(mt, ok[i]))
                        return true;
        return false;
}

int app_openat_beneath(int dir_fd, const char *path, int flags, bool no_symlinks)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (no_symlinks ? RESOLVE_NO_SYMLINKS : 0),
        };
        long fd;
        /* EAGAIN: a concurrent rename made the kernel unsure the walk stayed beneath; try again. */
        for (int i = 0; (fd = RETRY_EINTR(syscall(SYS_openat2, dir_fd, path, &how, sizeof(how)))) < 0 && errno == EAGAIN &&
                        i < 16;
             i++)
                ;
        return (int)fd;
}

_printf_(3, 4) static int not_found(struct na_error *err, const char *label, const char *fmt, ...)
{
        char buf[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return na_error_set(err, ENOENT, NA_E_IMAGE_NOT_FOUND, "image %s: %s", label, buf);
}


int app_blob_mismatch(struct na_error *err, const char *label, const char *digest, const char *why)
{
        int r = na_error_set(err, EBADMSG, NA_E_DRIVER, "image %s: blob %s does not match its digest", label, digest);
        na_error_detail(err, "reason", json_string(err->message));
        if (why)
                na_error_detail(err, "mismatch", json_string(why));
        return r;
}

int app_layout_open(const char *images_dir, const char *name, const char *label, int *ret_fd, struct na_error *err)
{
        _cleanup_close_ int images_fd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (images_fd < 0) {
                if (errno == ENOENT)
                        return not_found(err, label, "no image store at %s", images_dir);
                return na_error_sys(err, errno, "image %s: open %s", label, images_dir);
        }
        int fd = app_openat_beneath(images_fd, name, O_RDONLY | O_DIRECTORY, false);
        if (fd < 0) {
                if (errno == ENOENT || errno == ENOTDIR || errno == EXDEV || errno == ELOOP)
                        return not_found(err, label, "no image layout %s", name);
                return na_error_sys(err, errno, "image %s: open layout %s", label, name);
        }
        *ret_fd = fd;
        return 0;
}

/* Read a regular file of at most max bytes beneath dir_fd; -ENOENT when absent, -EFBIG when longer. */
static int read_bounded(int fd, size_t max, char **ret, size_t *ret_len)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        size_t cap = (size_t)st.st_size + 1, len = 0;
        _cleanup_free_ char *buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = RETRY_EINTR(read(fd, buf + len, cap - len));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max)
                        return -EFBIG;
                if (len == cap) { /* the file grew: read on up to max + 1 */
                        size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
                        if (ncap <= cap)
                                return -EFBIG;
                        char *nb = realloc(buf, ncap + 1);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
        }
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int app_layout_read_index(int layout_fd, const char *label, json_t **ret, struct na_error *err)
{
        _cleanup_close_ int fd = app_openat_beneath(layout_fd, "index.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK, true);
        if (fd < 0) {
                if (errno == ENOENT)
                        return not_found(err, label, "%s", "the layout has no index.json");
                return na_error_sys(err, errno, "image %s: open index.json", label);
        }
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = read_bounded(fd, APP_IMAGE_JSON_MAX, &buf, &len);
        if (r < 0)
                return na_error_set(err, -r, NA_E_DRIVER, "image %s: read index.json: %s", label, strerror(-r));
        json_error_t jerr;
        _cleanup_json_ json_t *index = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!index || !json_is_object(index))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: index.json is not a JSON object: %s", label,
                                    index ? "wrong type" : jerr.text);
        json_t *sv = json_object_get(index, "schemaVersion");
        if (!json_is_integer(sv) || json_integer_value(sv) != 2)
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: index.json: schemaVersion is not 2", label);
        json_t *m = json_object_get(index, "manifests");
        if (m && !json_is_array(m))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: index.json: manifests is not an array", label);
        if (!m && json_object_set_new(index, "manifests", json_array()) < 0)
                return na_error_sys(err, ENOMEM, "image %s: index.json", label);
        *ret = TAKE_PTR(index);
        return 0;
}

int app_layout_open_blob(int layout_fd, const char *label, const char *digest, int *ret_fd, struct na_error *err)
{
        if (!app_digest_valid(digest))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: unsupported digest \"%.80s\"", label, digest);
        char path[96];
        snprintf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
        /* O_NONBLOCK: a FIFO planted as a blob must not hang the open (it is refused below). */
        _cleanup_close_ int fd = app_openat_beneath(layout_fd, path, O_RDONLY | O_NONBLOCK, false);
        if (fd < 0) {
                if (errno == ENOENT || errno == ENOTDIR || errno == EXDEV || errno == ELOOP)
                        return not_found(err, label, "blob %s is missing", digest);
                return na_error_sys(err, errno, "image %s: open blob %s", label, digest);
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "image %s: stat blob %s", label, digest);
        if (!S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: blob %s is not a regular file", label, digest);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static void sha256_buf(const void *data, size_t len, char out[72])
{
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_Digest(data, len, d, &dl, EVP_sha256(), NULL);
        memcpy(out, "sha256:", 7);
        na_sha256_hex(d, out + 7);
}

int app_layout_read_json_blob(int layout_fd, const char *label, const char *digest, uint64_t size, json_t **ret,
                              struct na_error *err)
{
        if (size > APP_IMAGE_JSON_MAX)
                return na_error_set(err, EFBIG, NA_E_DRIVER, "image %s: blob %s: %llu bytes, more than %u for JSON",
                                    label, digest, (unsigned long long)size, APP_IMAGE_JSON_MAX);
        _cleanup_close_ int fd = -1;
        int r = app_layout_open_blob(layout_fd, label, digest, &fd, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        r = read_bounded(fd, (size_t)size, &buf, &len);
        if (r == -EFBIG)
                return app_blob_mismatch(err, label, digest, "longer than its descriptor says");
        if (r < 0)
                return na_error_set(err, -r, NA_E_DRIVER, "image %s: read blob %s: %s", label, digest, strerror(-r));
        if (len != size)
                return app_blob_mismatch(err, label, digest, "shorter than its descriptor says");
        char got[72];
        sha256_buf(buf, len, got);
        if (!streq(got, digest))
                return app_blob_mismatch(err, label, digest, got);
        json_error_t jerr;
        json_t *j = json_loadb(buf, len, 0, &jerr);
        if (!j || !json_is_object(j)) {
                json_decref(j);
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: blob %s is not a JSON object", label, digest);
        }
        *ret = j;
        return 0;
}

/* Hash a whole layer blob and compare it with its digest and size. */
static int verify_blob_file(int layout_fd, const char *label, const char *digest, uint64_t size, bool hash,
                            struct na_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = app_layout_open_blob(layout_fd, label, digest, &fd, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "image %s: stat blob %s", label, digest);
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size)
                return app_blob_mismatch(err, label, digest, "its size differs from its descriptor's");
        if (!hash)
                return 0;
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
                return na_error_sys(err, ENOMEM, "image %s: sha256", label);
        _cleanup_free_ unsigned char *buf = malloc(1 << 20);
        if (!buf)
                return na_error_sys(err, ENOMEM, "image %s: sha256", label);
        for (;;) {
                ssize_t n = RETRY_EINTR(read(fd, buf, 1 << 20));
                if (n < 0)
                        return na_error_sys(err, errno, "image %s: read blob %s", label, digest);
                if (n == 0)
                        break;
                EVP_DigestUpdate(ctx, buf, (size_t)n);
        }
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(ctx, d, &dl);
        char got[72] = "sha256:";
        na_sha256_hex(d, got + 7);
        if (!streq(got, digest))
                return app_blob_mismatch(err, label, digest, got);
        return 0;
}

int app_descriptor_parse(json_t *desc, const char *label, const char **ret_digest, uint64_t *ret_size,
                         const char **ret_media_type, struct na_error *err)
{
        if (!json_is_object(desc))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: a descriptor is not an object", label);
        const char *digest = json_string_value(json_object_get(desc, "digest"));
        json_t *size = json_object_get(desc, "size");
        json_t *mt = json_object_get(desc, "mediaType");
        if (!app_digest_valid(digest))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: unsupported or malformed digest \"%.80s\"",
                                    label, digest ? digest : "");
        if (!json_is_integer(size) || json_integer_value(size) < 0)
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: descriptor %s has no valid size", label,
                                    digest);
        if (mt && !json_is_string(mt))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: descriptor %s: mediaType is not a string",
                                    label, digest);
        *ret_digest = digest;
        *ret_size = (uint64_t)json_integer_value(size);
        if (ret_media_type)
                *ret_media_type = json_string_value(mt);
        return 0;
}

void app_image_clear(struct app_image *img)
{
        if (!img)
                return;
        free(img->layers);
        char **vecs[] = { img->entrypoint, img->cmd, img->env };
        for (size_t i = 0; i < ARRAY_SIZE(vecs); i++) {
                for (char **p = vecs[i]; p && *p; p++)
                        free(*p);
                free(vecs[i]);
        }
        free(img->working_dir);
        free(img->user);
        free(img->stop_signal);
        memset(img, 0, sizeof(*img));
}

/* A JSON array of strings (or null/absent) into a NULL-terminated vector. */
static int string_vector(json_t *a, const char *label, const char *field, char ***ret, struct na_error *err)
{
        *ret = NULL;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: config %s is not an array", label, field);
        size_t n = json_array_size(a);
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return na_error_sys(err, ENOMEM, "image %s: config", label);
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(a, i));
                if (!s || !(v[i] = strdup(s))) {
                        for (size_t k = 0; k < i; k++)
                                free(v[k]);
                        free(v);
                        return s ? na_error_sys(err, ENOMEM, "image %s: config", label)
                                 : na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: config %s holds a non-string",
                                                label, field);
                }
        }
        *ret = v;
        return 0;
}

static int optional_string(json_t *s, const char *label, const char *field, char **ret, struct na_error *err)
{
        *ret = NULL;
        if (!s || json_is_null(s))
                return 0;
        if (!json_is_string(s))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: config %s is not a string", label, field);
        if (json_string_length(s) == 0)
                return 0;
        if (!(*ret = strdup(json_string_value(s))))
                return na_error_sys(err, ENOMEM, "image %s: config", label);
        return 0;
}

static int parse_config(json_t *cfg, const char *label, struct app_image *img, struct na_error *err)
{
        json_t *c = json_object_get(cfg, "config");
        if (!c || json_is_null(c))
                return 0;
        if (!json_is_object(c))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: config.config is not an object", label);
        int r;
        if ((r = string_vector(json_object_get(c, "Entrypoint"), label, "Entrypoint", &img->entrypoint, err)) < 0 ||
            (r = string_vector(json_object_get(c, "Cmd"), label, "Cmd", &img->cmd, err)) < 0 ||
            (r = string_vector(json_object_get(c, "Env"), label, "Env", &img->env, err)) < 0 ||
            (r = optional_string(json_object_get(c, "WorkingDir"), label, "WorkingDir", &img->working_dir, err)) < 0 ||
            (r = optional_string(json_object_get(c, "User"), label, "User", &img->user, err)) < 0 ||
            (r = optional_string(json_object_get(c, "StopSignal"), label, "StopSignal", &img->stop_signal, err)) < 0)
                return r;
        return 0;
}

static void add_blob(json_t *blobs, const char *digest)
{
        if (blobs)
                json_object_set_new(blobs, digest, json_true());
}

static int resolve_manifest(int layout_fd, const char *label, const char *digest, uint64_t size, bool verify_layers,
                            struct app_image *ret, json_t *blobs, struct na_error *err)
{
        _cleanup_json_ json_t *m = NULL;
        int r = app_layout_read_json_blob(layout_fd, label, digest, size, &m, err);
        if (r < 0)
                return r;
        add_blob(blobs, digest);
        const char *mt = json_string_value(json_object_get(m, "mediaType"));
        if (mt && !app_media_type_is_manifest(mt))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: manifest %s has media type %s", label, digest,
                                    mt);
        json_t *sv = json_object_get(m, "schemaVersion");
        if (!json_is_integer(sv) || json_integer_value(sv) != 2)
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: manifest %s: schemaVersion is not 2", label,
                                    digest);
        const char *cdigest, *cmt;
        uint64_t csize;
        if ((r = app_descriptor_parse(json_object_get(m, "config"), label, &cdigest, &csize, &cmt, err)) < 0)
                return r;
        if (!media_type_is_config(cmt))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: unsupported config media type %s", label,
                                    cmt ? cmt : "(none)");
        json_t *layers = json_object_get(m, "layers");
        if (!json_is_array(layers))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: manifest %s has no layers array", label,
                                    digest);

        struct app_image img = {0};
        _cleanup_(app_image_clearp) struct app_image *guard = &img;
        snprintf(img.manifest_digest, sizeof(img.manifest_digest), "%s", digest);
        snprintf(img.config_digest, sizeof(img.config_digest), "%s", cdigest);
        img.size_bytes = size + csize;
        img.n_layers = json_array_size(layers);
        img.layers = calloc(img.n_layers ? img.n_layers : 1, sizeof(*img.layers));
        if (!img.layers)
                return na_error_sys(err, ENOMEM, "image %s", label);
        for (size_t i = 0; i < img.n_layers; i++) {
                const char *ld = NULL, *lmt = NULL; /* set by app_descriptor_parse; NULL reads as no type */
                uint64_t lsize;
                if ((r = app_descriptor_parse(json_array_get(layers, i), label, &ld, &lsize, &lmt, err)) < 0)
                        return r;
                if (!media_type_is_layer(lmt))
                        return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: unsupported layer media type %s",
                                            label, lmt ? lmt : "(none)");
                snprintf(img.layers[i].digest, sizeof(img.layers[i].digest), "%s", ld);
                snprintf(img.layers[i].media_type, sizeof(img.layers[i].media_type), "%s", lmt);
                img.layers[i].size = lsize;
                img.size_bytes += lsize;
                add_blob(blobs, ld);
        }
        add_blob(blobs, cdigest);
        if (!ret) /* only the blobs were asked for */
                return 0;

        _cleanup_json_ json_t *cfg = NULL;
        if ((r = app_layout_read_json_blob(layout_fd, label, cdigest, csize, &cfg, err)) < 0)
                return r;
        if ((r = parse_config(cfg, label, &img, err)) < 0)
                return r;
        for (size_t i = 0; i < img.n_layers; i++)
                if ((r = verify_blob_file(layout_fd, label, img.layers[i].digest, img.layers[i].size, verify_layers,
                                          err)) < 0)
                        return r;
        guard = NULL;
        *ret = img;
        return 0;
}

static bool platform_is_linux_amd64(json_t *desc)
{
        json_t *p = json_object_get(desc, "platform");
        return streq_ptr(json_string_value(json_object_get(p, "os")), "linux") &&
               streq_ptr(json_string_value(json_object_get(p, "architecture")), "amd64");
}

static int resolve_at(int layout_fd, const char *label, json_t *desc, bool verify_layers, struct app_image *ret,
                      json_t *blobs, int depth, struct na_error *err)
{
        const char *digest, *mt;
        uint64_t size;
        int r = app_descriptor_parse(desc, label, &digest, &size, &mt, err);
        if (r < 0)
                return r;
        if (!mt || app_media_type_is_manifest(mt))
                return resolve_manifest(layout_fd, label, digest, size, verify_layers, ret, blobs, err);
        if (!app_media_type_is_index(mt))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: unsupported media type %s of %s", label, mt,
                                    digest);
        if (depth >= 4)
                return na_error_set(err, ELOOP, NA_E_DRIVER, "image %s: image indexes nested too deep", label);

        _cleanup_json_ json_t *index = NULL;
        if ((r = app_layout_read_json_blob(layout_fd, label, digest, size, &index, err)) < 0)
                return r;
        add_blob(blobs, digest);
        json_t *ms = json_object_get(index, "manifests");
        if (!json_is_array(ms))
                return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: image index %s has no manifests", label,
                                    digest);
        bool found = false;
        size_t i;
        json_t *d;
        json_array_foreach (ms, i, d) {
                bool want = !found && platform_is_linux_amd64(d);
                if (!want && !blobs)
                        continue;
                /* The other platforms are only walked for their blob names: they need not be present. */
                struct na_error sub = NA_ERROR_INIT;
                r = resolve_at(layout_fd, label, d, verify_layers, want ? ret : NULL, blobs, depth + 1,
                               want ? err : &sub);
                na_error_clear(&sub);
                if (want) {
                        if (r < 0)
                                return r;
                        found = true;
                }
        }
        if (!found && ret)
                return not_found(err, label, "image index %s has no linux/amd64 manifest", digest);
        return 0;
}

int app_image_resolve_descriptor(int layout_fd, const char *label, json_t *desc, bool verify_layers,
                                 struct app_image *ret, json_t *ret_blobs, struct na_error *err)
{
        return resolve_at(layout_fd, label, desc, verify_layers, ret, ret_blobs, 0, err);
}

int app_image_resolve(const char *images_dir, const struct proto_image_ref *ref, bool verify_layers,
                      struct app_image *ret, struct na_error *err)
{
        char label[400];
        proto_image_ref_format(ref, label, sizeof(label));
        _cleanup_close_ int layout_fd = -1;
        int r = app_layout_open(images_dir, ref->name, label, &layout_fd, err);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *index = NULL;
        if ((r = app_layout_read_index(layout_fd, label, &index, err)) < 0)
                return r;
        size_t i;
        json_t *d;
        json_array_foreach (json_object_get(index, "manifests"), i, d) {
                if (*ref->digest) {
                        if (!streq_ptr(json_string_value(json_object_get(d, "digest")), ref->digest))
                                continue;
                } else {
                        json_t *ann = json_object_get(d, "annotations");
                        if (!streq_ptr(json_string_value(json_object_get(ann, APP_REF_NAME_ANNOTATION)), ref->tag))
                                continue;
                }
                return app_image_resolve_descriptor(layout_fd, label, d, verify_layers, ret, NULL, err);
        }
        if (*ref->digest)
                return not_found(err, label, "no manifest %s in the layout", ref->digest);
        return not_found(err, label, "no manifest tagged %s in the layout", ref->tag);
}
