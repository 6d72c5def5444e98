/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The layouts under images_dir: walking them, listing their tagged images, deleting one, the layout lock. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/app/image/app-image-internal.h"

#define WALK_DEPTH_MAX 64

static bool is_regular_at(int dir_fd, const char *name)
{
        struct stat st;
        return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

static int walk_dir(int dir_fd, char *name, size_t len, int depth,
                    int (*fn)(void *userdata, const char *name, int layout_fd, struct na_error *err), void *userdata,
                    struct na_error *err)
{
        /* A layout may hold more layouts below it ("games" and "games/mc"), beside its blobs. */
        bool layout = len && is_regular_at(dir_fd, "oci-layout") && is_regular_at(dir_fd, "index.json");
        if (layout) {
                int r = fn(userdata, name, dir_fd, err);
                if (r != 0)
                        return r;
        }
        if (depth >= WALK_DEPTH_MAX)
                return 0;
        /* Sorted, so the walk (and the list) does not depend on directory order. */
        struct dirent **names = NULL;
        int n = scandirat(dir_fd, ".", &names, NULL, alphasort);
        if (n < 0)
                return na_error_sys(err, errno, "images: read %s", len ? name : ".");
        int r = 0;
        for (int i = 0; i < n; i++) {
                const char *c = names[i]->d_name;
                size_t cl = strlen(c);
                /* Only names a reference can spell: lowercase, digits, '.', '_', '-', never "." or "..". */
                bool ok = r == 0 && !streq(c, ".") && !streq(c, "..") && !(layout && streq(c, "blobs")) &&
                          len + 1 + cl <= PROTO_IMAGE_NAME_MAX;
                for (const char *p = c; ok && *p; p++)
                        ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
                             *p == '-';
                if (ok) {
                        int sub = openat(dir_fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                size_t nl = len;
                                if (nl)
                                        name[nl++] = '/';
                                memcpy(name + nl, c, cl + 1);
                                r = walk_dir(sub, name, nl + cl, depth + 1, fn, userdata, err);
                                name[len] = '\0';
                                close(sub);
                        }
                }
                free(names[i]);
        }
        free(names);
        return r;
}

int app_layouts_walk(const char *images_dir, int (*fn)(void *userdata, const char *name, int layout_fd, struct na_error *err),
                     void *userdata, struct na_error *err)
{
        _cleanup_close_ int fd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "images: open %s", images_dir);
        }
        char name[PROTO_IMAGE_NAME_MAX + 2] = "";
        return walk_dir(fd, name, 0, 0, fn, userdata, err);
}

static const char *tag_of(json_t *desc)
{
        return json_string_value(json_object_get(json_object_get(desc, "annotations"), APP_REF_NAME_ANNOTATION));
}

static int list_one(void *userdata, const char *name, int layout_fd, struct na_error *err)
{
        json_t *out = userdata;
        struct na_error sub = NA_ERROR_INIT;
        _cleanup_json_ json_t *index = NULL;
        if (app_layout_read_index(layout_fd, name, &index, &sub) < 0) {
                na_error_clear(&sub);
                return 0; /* a broken layout lists nothing */
        }
        size_t i;
        json_t *d;
        json_array_foreach (json_object_get(index, "manifests"), i, d) {
                const char *tag = tag_of(d);
                if (!tag)
                        continue;
                _cleanup_free_ char *image = na_strdupf("%s:%s", name, tag);
                struct proto_image_ref ref;
                if (!image)
                        return na_error_sys(err, ENOMEM, "images");
                if (proto_image_ref_parse(image, NULL, &ref, &sub) < 0) {
                        na_error_clear(&sub);
                        continue;
                }
                struct app_image img = {0};
                if (app_image_resolve_descriptor(layout_fd, image, d, false, &img, NULL, &sub) < 0) {
                        na_error_clear(&sub);
                        continue;
                }
                json_t *o = json_pack("{s:s, s:s, s:I}", "image", image, "digest",
                                      json_string_value(json_object_get(d, "digest")), "sizeBytes",
                                      (json_int_t)img.size_bytes);
                app_image_clear(&img);
                if (!o || json_array_append_new(out, o) < 0)
                        return na_error_sys(err, ENOMEM, "images");
        }
        return 0;
}

static int cmp_image(const void *a, const void *b)
{
        json_t *const *x = a, *const *y = b;
        return strcmp(json_string_value(json_object_get(*x, "image")), json_string_value(json_object_get(*y, "image")));
}

int app_image_list(const char *images_dir, json_t **ret, struct na_error *err)
{
        _cleanup_json_ json_t *out = json_array();
        if (!out)
                return na_error_sys(err, ENOMEM, "images");
        int r = app_layouts_walk(images_dir, list_one, out, err);
        if (r < 0)
                return r;
        size_t n = json_array_size(out);
        _cleanup_free_ json_t **v = calloc(n ? n : 1, sizeof(json_t *));
        if (!v)
                return na_error_sys(err, ENOMEM, "images");
        for (size_t i = 0; i < n; i++)
                v[i] = json_incref(json_array_get(out, i));
        qsort(v, n, sizeof(json_t *), cmp_image);
        json_array_clear(out);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(out, v[i]);
        *ret = TAKE_PTR(out);
        return 0;
}

int app_image_layout_lock(const char *images_dir, const char *name, int *ret_fd, struct na_error *err)
{
        _cleanup_close_ int cur = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0)
                return na_error_sys(err, errno, "image %s: open %s", name, images_dir);
        for (const char *c = name; *c;) {
                const char *e = strchrnul(c, '/');
                char comp[PROTO_IMAGE_NAME_MAX + 1];
                size_t n = (size_t)(e - c);
                if (n == 0 || n > PROTO_IMAGE_NAME_MAX || (n == 2 && c[0] == '.' && c[1] == '.') ||
                    (n == 1 && c[0] == '.'))
                        return na_error_set(err, EINVAL, NA_E_VALIDATION, "image %s: not a layout name", name);
                memcpy(comp, c, n);
                comp[n] = '\0';
                if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                        return na_error_sys(err, errno, "image %s: create the layout directory", name);
                int next = app_openat_beneath(cur, comp, O_RDONLY | O_DIRECTORY, true);
                if (next < 0)
                        return na_error_sys(err, errno, "image %s: open the layout directory", name);
                close(cur);
                cur = next;
                c = *e ? e + 1 : e;
        }
        if (RETRY_EINTR(flock(cur, LOCK_EX)) < 0)
                return na_error_sys(err, errno, "image %s: lock the layout", name);
        *ret_fd = TAKE_FD(cur);
        return 0;
}

/* index.json replaced atomically beneath the layout fd. */
static int write_index(int layout_fd, const char *label, json_t *index, struct na_error *err)
{
        _cleanup_free_ char *text = json_dumps(index, JSON_COMPACT);
        if (!text)
                return na_error_sys(err, ENOMEM, "image %s: index.json", label);
        char tmp[64];
        snprintf(tmp, sizeof(tmp), "index.json.tmp-%d", (int)getpid());
        (void)unlinkat(layout_fd, tmp, 0);
        _cleanup_close_ int fd = openat(layout_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return na_error_sys(err, errno, "image %s: create %s", label, tmp);
        int r = na_write_all(fd, text, strlen(text), tmp, err);
        if (r >= 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
                r = na_error_sys(err, errno, "image %s: sync %s", label, tmp);
        if (r >= 0 && renameat(layout_fd, tmp, layout_fd, "index.json") < 0)
                r = na_error_sys(err, errno, "image %s: replace index.json", label);
        if (r < 0) {
                (void)unlinkat(layout_fd, tmp, 0);
                return r;
        }
        if (fsync(layout_fd) < 0)
                return na_error_sys(err, errno, "image %s: sync the layout", label);
        return 0;
}

struct digest_search {
        const char *digest; /* a platform manifest digest */
        bool found;
};

static int search_one(void *userdata, const char *name, int layout_fd, struct na_error *err)
{
        struct digest_search *s = userdata;
        struct na_error sub = NA_ERROR_INIT;
        _cleanup_json_ json_t *index = NULL;
        if (app_layout_read_index(layout_fd, name, &index, &sub) < 0) {
                na_error_clear(&sub);
                return 0;
        }
        size_t i;
        json_t *d;
        json_array_foreach (json_object_get(index, "manifests"), i, d) {
                if (streq_ptr(json_string_value(json_object_get(d, "digest")), s->digest)) {
                        s->found = true;
                        return 1;
                }
                struct app_image img = {0};
                if (app_image_resolve_descriptor(layout_fd, name, d, false, &img, NULL, &sub) == 0) {
                        bool same = streq(img.manifest_digest, s->digest);
                        app_image_clear(&img);
                        if (same) {
                                s->found = true;
                                return 1;
                        }
                }
                na_error_clear(&sub);
        }
        return 0;
}

/* Remove the blobs in removed that keep does not hold (best effort: a blob that stays is only space). */
static void remove_blobs(int layout_fd, json_t *removed, json_t *keep)
{
        _cleanup_close_ int blobs_fd = app_openat_beneath(layout_fd, "blobs/sha256", O_PATH | O_DIRECTORY, true);
        if (blobs_fd < 0)
                return;
        const char *digest;
        json_t *v;
        json_object_foreach (removed, digest, v)
                if (!json_object_get(keep, digest) && app_digest_valid(digest))
                        (void)unlinkat(blobs_fd, digest + 7, 0);
}

int app_image_delete(const char *images_dir, const char *cache_dir, const struct proto_image_ref *ref,
                     struct na_error *err)
{
        char label[400];
        proto_image_ref_format(ref, label, sizeof(label));
        _cleanup_close_ int layout_fd = -1;
        int r = app_layout_open(images_dir, ref->name, label, &layout_fd, err);
        if (r < 0)
                return r;
        if (RETRY_EINTR(flock(layout_fd, LOCK_EX)) < 0)
                return na_error_sys(err, errno, "image %s: lock the layout", label);
        _cleanup_json_ json_t *index = NULL;
        if ((r = app_layout_read_index(layout_fd, label, &index, err)) < 0)
                return r;

        _cleanup_json_ json_t *kept = json_array(), *removed_blobs = json_object(), *removed_manifests = json_object();
        if (!kept || !removed_blobs || !removed_manifests)
                return na_error_sys(err, ENOMEM, "image %s", label);
        size_t i, n_removed = 0;
        json_t *d;
        struct na_error sub = NA_ERROR_INIT;
        json_array_foreach (json_object_get(index, "manifests"), i, d) {
                bool match = *ref->digest ? streq_ptr(json_string_value(json_object_get(d, "digest")), ref->digest)
                                          : streq_ptr(tag_of(d), ref->tag);
                if (!match) {
                        json_array_append(kept, d);
                        continue;
                }
                n_removed++;
                (void)app_image_resolve_descriptor(layout_fd, label, d, false, NULL, removed_blobs, &sub);
                na_error_clear(&sub);
                struct app_image img = {0};
                if (app_image_resolve_descriptor(layout_fd, label, d, false, &img, NULL, &sub) == 0)
                        json_object_set_new(removed_manifests, img.manifest_digest, json_true());
                na_error_clear(&sub);
                app_image_clear(&img);
        }
        if (n_removed == 0)
                return na_error_set(err, ENOENT, NA_E_IMAGE_NOT_FOUND, "image %s: not in the layout", label);
        if (json_object_set(index, "manifests", kept) < 0)
                return na_error_sys(err, ENOMEM, "image %s", label);
        if ((r = write_index(layout_fd, label, index, err)) < 0)
                return r;

        /* What the remaining entries reach stays; when one cannot be read, every blob stays. */
        _cleanup_json_ json_t *keep = json_object();
        bool complete = keep != NULL;
        json_array_foreach (kept, i, d) {
                if (complete && app_image_resolve_descriptor(layout_fd, label, d, false, NULL, keep, &sub) < 0)
                        complete = false;
                na_error_clear(&sub);
        }
        if (complete)
                remove_blobs(layout_fd, removed_blobs, keep);

        if (!cache_dir)
                return 0;
        const char *digest;
        json_t *v;
        json_object_foreach (removed_manifests, digest, v) {
                struct digest_search s = { .digest = digest };
                if ((r = app_layouts_walk(images_dir, search_one, &s, err)) < 0)
                        return na_error_prefix(err, "image %s: deleted, but its unpacked root was not", label);
                if (s.found)
                        continue;
                if ((r = app_image_cache_remove(cache_dir, digest + 7, err)) < 0)
                        return na_error_prefix(err, "image %s: deleted, but its unpacked root was not", label);
        }
        return 0;
}
