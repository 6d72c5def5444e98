/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Manifests and indexes as registries serve them: media types, descriptors, the platform's image. */
#include "drivers/app/image/app-registry-internal.h"

#include <ctype.h>
#include <inttypes.h>

#include "common/json-cleanup.h"

#define REG_MAX_LAYERS 1024
#define REG_MAX_BLOB_SIZE ((uint64_t)1 << 40)

#if defined(__x86_64__)
#define REG_ARCH "amd64"
#elif defined(__aarch64__)
#define REG_ARCH "arm64"
#else
#error "nodeagent pulls images for x86-64 and arm64 only"
#endif

bool reg_digest_hex(const char *d, char hex[REG_HEX_LEN + 1])
{
        if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d + 7) != REG_HEX_LEN)
                return false;
        for (const char *p = d + 7; *p; p++)
                if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
                        return false;
        memcpy(hex, d + 7, REG_HEX_LEN + 1);
        return true;
}

static bool known_type(const char *t, bool *ret_index)
{
        if (streq(t, REG_MT_OCI_MANIFEST) || streq(t, REG_MT_DOCKER_MANIFEST)) {
                *ret_index = false;
                return true;
        }
        if (streq(t, REG_MT_OCI_INDEX) || streq(t, REG_MT_DOCKER_LIST)) {
                *ret_index = true;
                return true;
        }
        return false;
}

static json_t *load(const struct reg_client *c, const char *body, size_t len, struct na_error *err)
{
        json_error_t je;
        json_t *j = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
        if (!j || !json_is_object(j)) {
                json_decref(j);
                reg_fail(c, "bad-manifest", err, "the manifest is not a JSON object (%s)", j ? "not an object" : je.text);
                return NULL;
        }
        return j;
}

int reg_manifest_kind(const struct reg_client *c, const char *body, size_t len, const char *content_type,
                      char media_type[256], bool *ret_index, struct na_error *err)
{
        _cleanup_json_ json_t *j = load(c, body, len, err);
        if (!j)
                return -EINVAL;
        const char *t = json_string_value(json_object_get(j, "mediaType"));
        char ct[256];
        snprintf(ct, sizeof(ct), "%s", content_type ? content_type : "");
        ct[strcspn(ct, "; \t")] = 0;
        if (!t && ct[0] && !streq(ct, "application/json") && !streq(ct, "application/octet-stream"))
                t = ct;
        if (!t)
                t = json_object_get(j, "manifests") ? REG_MT_OCI_INDEX
                    : json_object_get(j, "config")  ? REG_MT_OCI_MANIFEST
                                                    : "(none)";
        if (!known_type(t, ret_index))
                return reg_fail(c, "unsupported-media-type", err, "manifest of media type %.200s (OCI manifest, OCI index, "
                                "Docker manifest v2 schema 2 and Docker manifest list are supported)", t);
        snprintf(media_type, 256, "%s", t);
        return 0;
}

static int descriptor(const struct reg_client *c, json_t *j, const char *what, struct reg_descriptor *d,
                      struct na_error *err)
{
        memset(d, 0, sizeof(*d));
        const char *digest = json_string_value(json_object_get(j, "digest"));
        json_t *size = json_object_get(j, "size");
        const char *mt = json_string_value(json_object_get(j, "mediaType"));
        if (!json_is_object(j) || !digest)
                return reg_fail(c, "bad-manifest", err, "%s: no descriptor with a digest", what);
        if (!reg_digest_hex(digest, d->hex))
                return reg_fail(c, "bad-manifest", err, "%s: digest %.100s is not sha256:<64 lower-case hex>", what, digest);
        if (!json_is_integer(size) || json_integer_value(size) < 0 || (uint64_t)json_integer_value(size) > REG_MAX_BLOB_SIZE)
                return reg_fail(c, "bad-manifest", err, "%s: no usable size", what);
        d->size = (uint64_t)json_integer_value(size);
        snprintf(d->media_type, sizeof(d->media_type), "%s", mt ? mt : "");
        return 0;
}

void reg_manifest_done(struct reg_manifest *m)
{
        free(m->layers);
        memset(m, 0, sizeof(*m));
}

int reg_manifest_parse(const struct reg_client *c, const char *body, size_t len, const char *media_type,
                       struct reg_manifest *m, struct na_error *err)
{
        memset(m, 0, sizeof(*m));
        _cleanup_json_ json_t *j = load(c, body, len, err);
        if (!j)
                return -EINVAL;
        snprintf(m->media_type, sizeof(m->media_type), "%s", media_type);
        if (json_integer_value(json_object_get(j, "schemaVersion")) != 2)
                return reg_fail(c, "bad-manifest", err, "manifest: schemaVersion is not 2");
        int r = descriptor(c, json_object_get(j, "config"), "manifest config", &m->config, err);
        if (r < 0)
                return r;
        json_t *layers = json_object_get(j, "layers");
        if (!json_is_array(layers) || json_array_size(layers) > REG_MAX_LAYERS)
                return reg_fail(c, "bad-manifest", err, "manifest: layers is not an array of at most %d", REG_MAX_LAYERS);
        m->n_layers = json_array_size(layers);
        m->layers = calloc(m->n_layers ? m->n_layers : 1, sizeof(*m->layers));
        if (!m->layers)
                return na_error_sys(err, ENOMEM, "%s: manifest", c->what);
        for (size_t i = 0; i < m->n_layers; i++) {
                char what[64];
                snprintf(what, sizeof(what), "manifest layer %zu", i);
                r = descriptor(c, json_array_get(layers, i), what, &m->layers[i], err);
                if (r < 0) {
                        reg_manifest_done(m);
                        return r;
                }
        }
        return 0;
}

int reg_index_choose(const struct reg_client *c, const char *body, size_t len, struct reg_descriptor *ret,
                     struct na_error *err)
{
        _cleanup_json_ json_t *j = load(c, body, len, err);
        if (!j)
                return -EINVAL;
        json_t *list = json_object_get(j, "manifests");
        if (!json_is_array(list))
                return reg_fail(c, "bad-manifest", err, "index: manifests is not an array");
        size_t i;
        json_t *m;
        json_array_foreach(list, i, m) {
                json_t *plat = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(plat, "os"));
                const char *arch = json_string_value(json_object_get(plat, "architecture"));
                const char *mt = json_string_value(json_object_get(m, "mediaType"));
                bool is_index = false;
                if (!os || !arch || !streq(os, "linux") || !streq(arch, REG_ARCH))
                        continue;
                if (mt && (!known_type(mt, &is_index) || is_index))
                        continue; /* a nested index or something else: not an image for us */
                int r = descriptor(c, m, "index entry", ret, err);
                if (r < 0)
                        return r;
                if (!ret->media_type[0])
                        snprintf(ret->media_type, sizeof(ret->media_type), "%s", REG_MT_OCI_MANIFEST);
                return 0;
        }
        return reg_fail(c, "no-platform", err, "the index has no linux/%s image", REG_ARCH);
}
