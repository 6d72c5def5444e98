/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Templates: the templates file (a JSON array of {id, imageSlug, os, format, path,
 * sha256, inputs?, kernel?, initrd?, cmdline?}, paths relative to images_dir),
 * reloaded when it changes; lookups by (id, imageSlug); the image's sha256
 * verified before first use and remembered by (path, size, mtime) in a cache file.
 */
#include "drivers/vm/vm-util.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "proto/decode.h"

#define TEMPLATES_MAX (4u << 20)

struct vm_templates {
        char *file;
        char *images_dir;
        char *cache_file;
        pthread_mutex_t lock;
        struct vm_template *list;
        size_t n;
        char load_error[512]; /* why the file cannot be used; "" when it can */
        bool loaded;
        struct timespec mtime;
        off_t size;
        ino_t ino;
        json_t *verified; /* path -> {size, mtimeNs, sha256} */
};

void vm_template_clear(struct vm_template *t)
{
        if (!t)
                return;
        free(t->id);
        free(t->image_slug);
        free(t->format);
        free(t->path);
        free(t->sha256);
        free(t->kernel);
        free(t->initrd);
        free(t->cmdline);
        if (t->inputs)
                json_decref(t->inputs);
        memset(t, 0, sizeof(*t));
}

static void list_free(struct vm_template *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                vm_template_clear(&list[i]);
        free(list);
}

void vm_templates_free(struct vm_templates *t)
{
        if (!t)
                return;
        list_free(t->list, t->n);
        free(t->file);
        free(t->images_dir);
        free(t->cache_file);
        if (t->verified)
                json_decref(t->verified);
        pthread_mutex_destroy(&t->lock);
        free(t);
}

int vm_templates_new(const char *file, const char *images_dir, const char *cache_file, struct vm_templates **ret,
                     struct na_error *err)
{
        struct vm_templates *t = calloc(1, sizeof(*t));
        if (!t)
                return na_error_sys(err, ENOMEM, "templates");
        pthread_mutex_init(&t->lock, NULL);
        t->file = file ? strdup(file) : NULL;
        t->images_dir = strdup(images_dir ? images_dir : "/var/lib/nodeagent/images");
        t->cache_file = cache_file ? strdup(cache_file) : NULL;
        if ((file && !t->file) || !t->images_dir || (cache_file && !t->cache_file)) {
                vm_templates_free(t);
                return na_error_sys(err, ENOMEM, "templates");
        }
        json_t *cache = cache_file ? na_json_load(cache_file, 16u << 20) : NULL;
        t->verified = json_is_object(cache) ? cache : json_object();
        if (cache && !json_is_object(cache))
                json_decref(cache);
        *ret = t;
        return 0;
}

/* A relative path that stays inside images_dir, joined to it. */
static char *image_path(const char *images_dir, const char *rel)
{
        if (!rel || !*rel || rel[0] == '/')
                return NULL;
        char copy[PATH_MAX];
        if ((size_t)snprintf(copy, sizeof(copy), "%s", rel) >= sizeof(copy))
                return NULL;
        char *save = NULL;
        for (char *seg = strtok_r(copy, "/", &save); seg; seg = strtok_r(NULL, "/", &save))
                if (streq(seg, ".."))
                        return NULL;
        return na_strdupf("%s/%s", images_dir, rel);
}

static bool hex64(const char *s)
{
        if (!s || strlen(s) != 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
                        return false;
        return true;
}

static const char *const formats[] = { "qcow2", "raw", NULL };

static int entry_parse(struct vm_templates *t, json_t *e, size_t idx, struct vm_template *out, struct na_error *err)
{
        char pre[32];
        snprintf(pre, sizeof(pre), "%zu", idx);
        const char *id = NULL, *slug = NULL, *path = NULL, *sha = NULL, *kernel = NULL, *initrd = NULL,
                   *cmdline = NULL;
        int os = 0, fmt = 0;
        json_t *inputs = NULL;
        if (!json_is_object(e))
                return na_error_field(err, pre, "must be an object");
        bool ok = proto_string(e, pre, "id", PROTO_REQUIRED, 1, PROTO_VPS_TEMPLATE_ID_MAX, &id, err) > 0;
        ok &= proto_string(e, pre, "imageSlug", PROTO_REQUIRED, 1, PROTO_VPS_TEMPLATE_ID_MAX, &slug, err) > 0;
        ok &= proto_enum(e, pre, "os", PROTO_REQUIRED, proto_vps_os_names, &os, err) > 0;
        ok &= proto_enum(e, pre, "format", PROTO_REQUIRED, formats, &fmt, err) > 0;
        ok &= proto_string(e, pre, "path", PROTO_REQUIRED, 1, 4096, &path, err) > 0;
        ok &= proto_string(e, pre, "sha256", PROTO_REQUIRED, 64, 64, &sha, err) > 0;
        ok &= proto_object(e, pre, "inputs", 0, &inputs, err) >= 0;
        ok &= proto_string(e, pre, "kernel", 0, 1, 4096, &kernel, err) >= 0;
        ok &= proto_string(e, pre, "initrd", 0, 1, 4096, &initrd, err) >= 0;
        ok &= proto_string(e, pre, "cmdline", 0, 0, 4096, &cmdline, err) >= 0;
        if (!ok)
                return -EINVAL;
        char field[64];
        if (!hex64(sha))
                return na_error_field(err, proto_path(field, sizeof(field), pre, "sha256"), "must be 64 hex digits");
        memset(out, 0, sizeof(*out));
        out->id = strdup(id);
        out->image_slug = strdup(slug);
        out->os = (enum proto_vps_os)os;
        out->format = strdup(formats[fmt]);
        out->path = image_path(t->images_dir, path);
        out->sha256 = strdup(sha);
        for (char *p = out->sha256; p && *p; p++)
                *p = (char)(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
        out->inputs = inputs ? json_incref(inputs) : NULL;
        out->kernel = kernel ? image_path(t->images_dir, kernel) : NULL;
        out->initrd = initrd ? image_path(t->images_dir, initrd) : NULL;
        out->cmdline = cmdline ? strdup(cmdline) : NULL;
        if (!out->path)
                return na_error_field(err, proto_path(field, sizeof(field), pre, "path"),
                                      "must be a path inside images_dir");
        if ((kernel && !out->kernel) || (initrd && !out->initrd))
                return na_error_field(err, proto_path(field, sizeof(field), pre, kernel && !out->kernel ? "kernel" : "initrd"),
                                      "must be a path inside images_dir");
        if (!out->id || !out->image_slug || !out->format || !out->sha256 || (cmdline && !out->cmdline))
                return na_error_sys(err, ENOMEM, "templates");
        return 0;
}

/* (Re)load the file when it changed; lock held. */
static void reload(struct vm_templates *t)
{
        struct stat st;
        if (!t->file) {
                snprintf(t->load_error, sizeof(t->load_error), "no templates_file is configured");
                return;
        }
        if (stat(t->file, &st) < 0) {
                snprintf(t->load_error, sizeof(t->load_error), "templates file %s: %s", t->file, strerror(errno));
                list_free(t->list, t->n);
                t->list = NULL;
                t->n = 0;
                t->loaded = false;
                return;
        }
        if (t->loaded && st.st_mtim.tv_sec == t->mtime.tv_sec && st.st_mtim.tv_nsec == t->mtime.tv_nsec &&
            st.st_size == t->size && st.st_ino == t->ino)
                return;
        t->loaded = true;
        t->mtime = st.st_mtim;
        t->size = st.st_size;
        t->ino = st.st_ino;

        struct na_error e = NA_ERROR_INIT;
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_t *doc = NULL;
        struct vm_template *list = NULL;
        size_t n = 0, i;
        json_t *entry;
        json_error_t jerr;
        if (na_read_file(t->file, TEMPLATES_MAX, &text, NULL, &e) < 0) {
                snprintf(t->load_error, sizeof(t->load_error), "%s", e.message);
                goto fail;
        }
        doc = json_loads(text, 0, &jerr);
        if (!doc || !json_is_array(doc)) {
                snprintf(t->load_error, sizeof(t->load_error), "templates file %s: %s", t->file,
                         doc ? "must hold a JSON array" : jerr.text);
                goto fail;
        }
        list = calloc(json_array_size(doc) + 1, sizeof(*list));
        if (!list) {
                snprintf(t->load_error, sizeof(t->load_error), "templates file %s: out of memory", t->file);
                goto fail;
        }
        json_array_foreach(doc, i, entry) {
                if (entry_parse(t, entry, i, &list[n], &e) < 0) {
                        vm_template_clear(&list[n]);
                        continue;
                }
                for (size_t j = 0; j < n; j++)
                        if (streq(list[j].id, list[n].id) && streq(list[j].image_slug, list[n].image_slug)) {
                                char field[32];
                                snprintf(field, sizeof(field), "%zu", i);
                                na_error_field(&e, field, "repeats template %s image %s", list[n].id,
                                               list[n].image_slug);
                        }
                n++;
        }
        if (na_error_is_set(&e)) {
                snprintf(t->load_error, sizeof(t->load_error), "templates file %s: %s", t->file, e.message);
                goto fail;
        }
        list_free(t->list, t->n);
        t->list = list;
        t->n = n;
        t->load_error[0] = '\0';
        return;
fail:
        na_error_clear(&e);
        list_free(list, n);
        list_free(t->list, t->n);
        t->list = NULL;
        t->n = 0;
}

static int template_copy(const struct vm_template *src, struct vm_template *dst, struct na_error *err)
{
        memset(dst, 0, sizeof(*dst));
        dst->id = strdup(src->id);
        dst->image_slug = strdup(src->image_slug);
        dst->os = src->os;
        dst->format = strdup(src->format);
        dst->path = strdup(src->path);
        dst->sha256 = strdup(src->sha256);
        dst->inputs = src->inputs ? json_incref(src->inputs) : NULL;
        dst->kernel = src->kernel ? strdup(src->kernel) : NULL;
        dst->initrd = src->initrd ? strdup(src->initrd) : NULL;
        dst->cmdline = src->cmdline ? strdup(src->cmdline) : NULL;
        if (!dst->id || !dst->image_slug || !dst->format || !dst->path || !dst->sha256 ||
            (src->kernel && !dst->kernel) || (src->initrd && !dst->initrd) || (src->cmdline && !dst->cmdline)) {
                vm_template_clear(dst);
                return na_error_sys(err, ENOMEM, "template %s", src->id);
        }
        return 0;
}

/* path must exist and resolve (symbolic links included) inside images_dir. */
static bool inside_images(const char *images_dir, const char *path)
{
        char root[PATH_MAX], real[PATH_MAX];
        if (!realpath(images_dir, root) || !realpath(path, real))
                return false;
        size_t n = strlen(root);
        return strncmp(real, root, n) == 0 && real[n] == '/';
}

int vm_templates_get(struct vm_templates *t, const char *id, const char *image_slug,
                     const struct vm_template_fields *fields, struct vm_template *ret, struct na_error *err)
{
        pthread_mutex_lock(&t->lock);
        reload(t);
        if (t->load_error[0]) {
                int r = na_error_set(err, ENOENT, NA_E_INTERNAL, "%s", t->load_error);
                pthread_mutex_unlock(&t->lock);
                return r;
        }
        const struct vm_template *found = NULL;
        bool id_known = false;
        for (size_t i = 0; i < t->n; i++)
                if (streq(t->list[i].id, id)) {
                        id_known = true;
                        if (streq(t->list[i].image_slug, image_slug))
                                found = &t->list[i];
                }
        int r = 0;
        if (!id_known)
                r = na_error_field(err, fields->id, "unknown template %s", id);
        else if (!found)
                r = na_error_field(err, fields->image_slug, "template %s has no image %s", id, image_slug);
        else
                r = template_copy(found, ret, err);
        pthread_mutex_unlock(&t->lock);
        if (r < 0)
                return r;

        const char *bad = !inside_images(t->images_dir, ret->path)                   ? ret->path
                          : ret->kernel && !inside_images(t->images_dir, ret->kernel) ? ret->kernel
                          : ret->initrd && !inside_images(t->images_dir, ret->initrd) ? ret->initrd
                                                                                      : NULL;
        if (bad) {
                r = na_error_field(err, fields->image_slug,
                                   "image %s of template %s is not available on this node (%s missing or outside images_dir)",
                                   image_slug, id, bad);
                vm_template_clear(ret);
                return r;
        }
        return 0;
}

int vm_template_check_inputs(const struct vm_template *t, json_t *inputs, const char *field, struct na_error *err)
{
        bool ok = true;
        char path[256];
        const char *key;
        json_t *val;
        json_object_foreach(inputs, key, val) {
                snprintf(path, sizeof(path), "%s.%s", field, key);
                json_t *spec = t->inputs ? json_object_get(t->inputs, key) : NULL;
                if (!json_is_object(spec)) {
                        na_error_field(err, path, "is not an input of template %s", t->id);
                        ok = false;
                        continue;
                }
                const char *type = json_string_value(json_object_get(spec, "type"));
                type = type ? type : "string";
                json_t *en = json_object_get(spec, "enum");
                if (streq(type, "string")) {
                        json_t *ml = json_object_get(spec, "maxLength");
                        if (!json_is_string(val)) {
                                na_error_field(err, path, "must be a string");
                                ok = false;
                        } else if (json_is_integer(ml) &&
                                   (json_int_t)proto_utf8_chars(json_string_value(val)) > json_integer_value(ml)) {
                                na_error_field(err, path, "must be at most %lld characters",
                                               (long long)json_integer_value(ml));
                                ok = false;
                        }
                } else if (streq(type, "integer")) {
                        json_t *mn = json_object_get(spec, "min"), *mx = json_object_get(spec, "max");
                        if (!json_is_integer(val)) {
                                na_error_field(err, path, "must be an integer");
                                ok = false;
                        } else if ((json_is_integer(mn) && json_integer_value(val) < json_integer_value(mn)) ||
                                   (json_is_integer(mx) && json_integer_value(val) > json_integer_value(mx))) {
                                na_error_field(err, path, "must be between %lld and %lld",
                                               (long long)(json_is_integer(mn) ? json_integer_value(mn) : LLONG_MIN),
                                               (long long)(json_is_integer(mx) ? json_integer_value(mx) : LLONG_MAX));
                                ok = false;
                        }
                } else if (streq(type, "boolean")) {
                        if (!json_is_boolean(val)) {
                                na_error_field(err, path, "must be true or false");
                                ok = false;
                        }
                }
                if (json_is_array(en)) {
                        bool member = false;
                        size_t i;
                        json_t *v;
                        json_array_foreach(en, i, v) member |= json_equal(v, val);
                        if (!member) {
                                na_error_field(err, path, "is not one of the allowed values");
                                ok = false;
                        }
                }
        }
        if (t->inputs)
                json_object_foreach(t->inputs, key, val) {
                        if (json_is_true(json_object_get(val, "required")) &&
                            !(inputs && json_object_get(inputs, key))) {
                                snprintf(path, sizeof(path), "%s.%s", field, key);
                                na_error_field(err, path, "is required by template %s", t->id);
                                ok = false;
                        }
                }
        return ok ? 0 : -EINVAL;
}

static json_t *stat_key(const struct stat *st)
{
        return json_pack("{s:I, s:I, s:I}", "size", (json_int_t)st->st_size, "mtimeNs",
                         (json_int_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec, "ino",
                         (json_int_t)st->st_ino);
}

int vm_templates_verify(struct vm_templates *t, const struct vm_template *tmpl, const struct na_progress *progress,
                        struct na_error *err)
{
        struct stat st;
        if (stat(tmpl->path, &st) < 0)
                return na_error_sys(err, errno, "template %s image %s: %s", tmpl->id, tmpl->image_slug, tmpl->path);
        _cleanup_json_ json_t *key = stat_key(&st);
        if (!key)
                return na_error_sys(err, ENOMEM, "template %s", tmpl->id);

        pthread_mutex_lock(&t->lock);
        json_t *seen = json_object_get(t->verified, tmpl->path);
        bool cached = json_is_object(seen) && json_equal(json_object_get(seen, "stat"), key) &&
                      streq_ptr(json_string_value(json_object_get(seen, "sha256")), tmpl->sha256);
        pthread_mutex_unlock(&t->lock);
        if (cached)
                return 0;

        char hex[65];
        struct na_progress_meter meter;
        na_progress_meter_init(&meter, progress, NULL, "verifying the template image", 0, 100);
        int r = na_sha256_file(tmpl->path, &meter, hex, err);
        if (r < 0)
                return na_error_prefix(err, "template %s image %s", tmpl->id, tmpl->image_slug);
        if (!streq(hex, tmpl->sha256)) {
                na_error_set(err, EBADMSG, NA_E_DRIVER,
                             "template %s image %s: checksum mismatch: %s has sha256 %s, the templates file says %s",
                             tmpl->id, tmpl->image_slug, tmpl->path, hex, tmpl->sha256);
                na_error_detail(err, "reason", json_string("template image checksum mismatch"));
                return -EBADMSG;
        }
        pthread_mutex_lock(&t->lock);
        json_object_set_new(t->verified, tmpl->path, json_pack("{s:O, s:s}", "stat", key, "sha256", hex));
        _cleanup_free_ char *text = t->cache_file ? json_dumps(t->verified, JSON_COMPACT) : NULL;
        if (text) {
                /* A cache that cannot be written costs a checksum next time, nothing more. */
                struct na_error ignore = NA_ERROR_INIT;
                na_atomic_write(t->cache_file, text, strlen(text), 0600, &ignore);
                na_error_clear(&ignore);
        }
        pthread_mutex_unlock(&t->lock);
        return 0;
}
