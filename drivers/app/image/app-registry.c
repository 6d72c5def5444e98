/* SPDX-License-Identifier: GPL-2.0-or-later */
/* app_registry_pull: manifest (through an index when needed), config and layers, then index.json. */
#include "drivers/app/image/app-registry-internal.h"

#include <inttypes.h>
#include <openssl/evp.h>

#include "common/digest.h"

#define REG_MANIFEST_MAX (4 * 1024 * 1024)
#define REG_MANIFEST_RETRIES 4

static const char *const manifest_accept =
        "Accept: " REG_MT_OCI_MANIFEST ", " REG_MT_OCI_INDEX ", " REG_MT_DOCKER_MANIFEST ", " REG_MT_DOCKER_LIST;

/* A manifest or index as served: its bytes, digest and kind. */
struct fetched {
        char *body;
        size_t len;
        char hex[REG_HEX_LEN + 1];
        char media_type[256];
        bool is_index;
};

static void fetched_done(struct fetched *f)
{
        free(f->body);
        memset(f, 0, sizeof(*f));
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
        unsigned char d[32];
        unsigned int dl = sizeof(d);
        EVP_Digest(data, len, d, &dl, EVP_sha256(), NULL);
        na_sha256_hex(d, hex);
}

static const char *repo_name(const struct reg_client *c, char buf[PROTO_IMAGE_NAME_MAX + 1])
{
        snprintf(buf, PROTO_IMAGE_NAME_MAX + 1, "%s", c->image);
        buf[strcspn(buf, ":@")] = 0;
        return buf;
}

/* GET manifests/<reference>; expect_hex: the digest it must have (NULL for a tag: then Docker-Content-Digest's). */
static int fetch_manifest(struct reg_client *c, const char *reference, const char *expect_hex, struct fetched *f,
                          struct na_error *err)
{
        char url[REG_URL_MAX], name[PROTO_IMAGE_NAME_MAX + 1], what[200];
        snprintf(what, sizeof(what), "manifest %s", reference);
        if ((size_t)snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", c->base, repo_name(c, name), reference) >= sizeof(url))
                return reg_fail(c, "network", err, "manifest URL too long");
        const char *hdrs[] = {manifest_accept, NULL};
        struct reg_response resp = {0};
        for (unsigned attempt = 0;; attempt++) {
                struct reg_get_args a = {.url = url, .headers = hdrs, .max_body = REG_MANIFEST_MAX, .timeout_sec = 120};
                CURLcode code = CURLE_OK;
                int r = reg_registry_get(c, &a, &resp, &code, err);
                bool busy = r == 0 && (resp.status >= 500 || resp.status == 429);
                if (r == 0 && !(busy && attempt + 1 < REG_MANIFEST_RETRIES))
                        break;
                reg_response_done(&resp);
                if (!busy && (!reg_curl_retryable(code) || attempt + 1 >= REG_MANIFEST_RETRIES))
                        return r;
                na_error_clear(err);
                r = na_progress_checkpoint(c->progress, err);
                if (r < 0)
                        return r;
                reg_backoff(attempt);
        }
        if (resp.status != 200) {
                int r = reg_response_error(c, &resp, what, err);
                reg_response_done(&resp);
                return r;
        }
        f->body = TAKE_PTR(resp.body);
        f->len = resp.len;
        sha256_hex(f->body ? f->body : "", f->len, f->hex);
        char header_hex[REG_HEX_LEN + 1];
        bool header = reg_digest_hex(resp.docker_digest, header_hex);
        char ct[256];
        snprintf(ct, sizeof(ct), "%s", resp.content_type);
        reg_response_done(&resp);
        if (expect_hex && !streq(f->hex, expect_hex))
                return reg_fail(c, "digest-mismatch", err, "%s: the registry served content with sha256:%s", what, f->hex);
        if (!expect_hex && header && !streq(f->hex, header_hex))
                return reg_fail(c, "digest-mismatch", err,
                                "%s: Docker-Content-Digest says sha256:%s, the content has sha256:%s", what, header_hex,
                                f->hex);
        return reg_manifest_kind(c, f->body, f->len, ct, f->media_type, &f->is_index, err);
}

/* Resolve the reference to an image manifest (through an index when it names one). */
static int resolve(struct reg_client *c, const struct proto_image_ref *ref, struct fetched *index, struct fetched *image,
                   struct na_error *err)
{
        char expect[REG_HEX_LEN + 1];
        bool by_digest = ref->digest[0] != 0;
        if (by_digest && !reg_digest_hex(ref->digest, expect))
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "%s: not a sha256 digest", c->what);
        struct fetched top = {0};
        int r = fetch_manifest(c, by_digest ? ref->digest : ref->tag, by_digest ? expect : NULL, &top, err);
        if (r < 0) {
                fetched_done(&top);
                return r;
        }
        if (!top.is_index) {
                *image = top;
                return 0;
        }
        struct reg_descriptor d;
        r = reg_index_choose(c, top.body, top.len, &d, err);
        if (r < 0) {
                fetched_done(&top);
                return r;
        }
        *index = top;
        char child_ref[80];
        snprintf(child_ref, sizeof(child_ref), "sha256:%s", d.hex);
        r = fetch_manifest(c, child_ref, d.hex, image, err);
        if (r < 0)
                return r;
        if (image->is_index || image->len != d.size)
                return reg_fail(c, "bad-manifest", err, "the index's linux entry %s is %s", child_ref,
                                image->is_index ? "another index" : "not the size the index states");
        return 0;
}

static int pull_blobs(struct reg_client *c, struct reg_layout *l, const struct reg_manifest *m, struct reg_progress *p,
                      struct na_error *err)
{
        int r = reg_blob_fetch(c, l, m->config.hex, m->config.size, p, err);
        for (size_t i = 0; r >= 0 && i < m->n_layers; i++)
                r = reg_blob_fetch(c, l, m->layers[i].hex, m->layers[i].size, p, err);
        return r;
}

/*
 * What the pull downloads, bounded before a blob is fetched (issue 20): the sizes come
 * from the registry, which can lie about nothing else (each blob stops at its stated
 * size and must match its digest).
 */
static int pull_size(struct reg_client *c, const struct fetched *image, const struct reg_manifest *m,
                     uint64_t *ret_total, struct na_error *err)
{
        uint64_t max = c->opt->max_bytes ? c->opt->max_bytes : APP_REGISTRY_MAX_BYTES_DEFAULT;
        uint64_t total = m->config.size > max ? max + 1 : image->len + m->config.size;
        for (size_t i = 0; i < m->n_layers && total <= max; i++)
                total = m->layers[i].size > max ? max + 1 : total + m->layers[i].size;
        if (total <= max) {
                *ret_total = total;
                return 0;
        }
        reg_fail(c, "image-too-large", err,
                 "the image is larger than [apps] image_pull_max_mb = %llu MB; nothing was downloaded",
                 (unsigned long long)(max >> 20));
        err->errnum = EFBIG;
        na_error_detail(err, "limitBytes", json_integer((json_int_t)max));
        return -EFBIG;
}

static int pull(struct reg_client *c, const struct proto_image_ref *ref, const char *images_dir,
                const struct na_progress *progress, char ret_digest[72], uint64_t *ret_bytes, struct na_error *err)
{
        na_progress_stage(progress, APP_REGISTRY_STAGE, 0, "fetching the manifest");
        struct fetched index = {0}, image = {0};
        struct reg_manifest m = {0};
        struct reg_layout l = {.dirfd = -1, .blobsfd = -1, .rootfd = -1};
        struct reg_progress p = {.progress = progress, .last_percent = -1};
        int r = resolve(c, ref, &index, &image, err);
        if (r >= 0)
                r = reg_manifest_parse(c, image.body, image.len, image.media_type, &m, err);
        if (r < 0)
                goto out;

        if ((r = pull_size(c, &image, &m, &p.total, err)) < 0)
                goto out;
        r = reg_layout_open(images_dir, ref->name, progress, &l, err);
        if (r < 0)
                goto out;
        r = pull_blobs(c, &l, &m, &p, err);
        if (r >= 0)
                r = reg_layout_blob_store(&l, image.hex, image.body, image.len, err);
        if (r >= 0 && index.body)
                r = reg_layout_blob_store(&l, index.hex, index.body, index.len, err);
        /*
         * A tag names the platform's manifest (as skopeo writes it). A digest names what it
         * named in the registry, so "<name>@<digest>" resolves in the layout: for an index,
         * the index (readers pick the platform's manifest from it, as we did).
         */
        if (r >= 0 && ref->digest[0] && index.body)
                r = reg_layout_finish(&l, index.media_type, index.hex, index.len, NULL, err);
        else if (r >= 0)
                r = reg_layout_finish(&l, image.media_type, image.hex, image.len, ref->digest[0] ? NULL : ref->tag, err);
        if (r >= 0)
                r = reg_progress_add(&p, image.len, true, err);
        if (r < 0) {
                reg_layout_abort(&l);
                goto out;
        }
        if (ret_digest)
                snprintf(ret_digest, 72, "sha256:%s", image.hex);
        if (ret_bytes)
                *ret_bytes = p.total;
out:
        reg_layout_close(&l);
        reg_manifest_done(&m);
        fetched_done(&index);
        fetched_done(&image);
        return r;
}

int app_registry_pull(const struct app_registry_options *o, const struct proto_image_ref *ref, const char *images_dir,
                      const struct na_progress *progress, char ret_manifest_digest[72], uint64_t *ret_bytes,
                      struct na_error *err)
{
        if (!ref || !ref->name[0] || !images_dir || !images_dir[0] || (!ref->tag[0] == !ref->digest[0]))
                return na_error_set(err, EINVAL, NA_E_VALIDATION,
                                    "image pull: needs an image name with a tag or a digest, and an images directory");
        struct reg_client c;
        int r = reg_client_init(&c, o, ref, err);
        c.progress = progress;
        if (r >= 0)
                r = pull(&c, ref, images_dir, progress, ret_manifest_digest, ret_bytes, err);
        reg_client_done(&c);
        return r;
}
