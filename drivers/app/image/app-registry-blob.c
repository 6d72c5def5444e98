/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One blob streamed from the registry into blobs/sha256/: a temporary file, the sha256
 * computed as the bytes arrive (never the whole blob in memory), a dropped connection
 * resumed with Range (or restarted when the server ignores it), verified, fsync'd,
 * renamed. Progress by bytes; the job's checkpoint between chunks.
 */
#include "drivers/app/image/app-registry-internal.h"

#include <inttypes.h>
#include <openssl/evp.h>

#include "common/digest.h"
#include "common/fileio.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

#define REG_BLOB_RETRIES 6
#define REG_TICK_BYTES (1024 * 1024)

int reg_progress_add(struct reg_progress *p, uint64_t n, bool force, struct na_error *err)
{
        p->done += n;
        p->since_tick += n;
        if (!force && p->since_tick < REG_TICK_BYTES)
                return 0;
        p->since_tick = 0;
        uint64_t total = p->total ? p->total : 1;
        uint64_t done = p->done < total ? p->done : total;
        int percent = (int)(done * 100 / total);
        if (force || percent != p->last_percent) {
                char msg[96];
                snprintf(msg, sizeof(msg), "%.1f of %.1f MB", (double)done / 1e6, (double)p->total / 1e6);
                na_progress_stage(p->progress, APP_REGISTRY_STAGE, percent, msg);
                p->last_percent = percent;
        }
        return na_progress_checkpoint(p->progress, err);
}

/* The download of one blob, across attempts. */
struct blob_dl {
        struct reg_client *c;
        struct reg_layout *l;
        struct reg_progress *p;
        const char *hex;
        uint64_t size;
        int fd;
        EVP_MD_CTX *ctx;
        uint64_t have;       /* bytes in the file and the digest */
        uint64_t asked_from; /* the Range start of this attempt (0: none) */
};

static int restart(struct blob_dl *b, struct na_error *err)
{
        if (ftruncate(b->fd, 0) < 0 || lseek(b->fd, 0, SEEK_SET) < 0)
                return na_error_sys(err, errno, "truncate a temporary blob in %s", b->l->path);
        if (EVP_DigestInit_ex(b->ctx, EVP_sha256(), NULL) != 1)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "cannot start a digest");
        /* Progress already counted these bytes; they are counted again as they come. */
        b->p->done = b->p->done >= b->have ? b->p->done - b->have : 0;
        b->have = 0;
        return 0;
}

static int blob_begin(void *userdata, const struct reg_response *resp, struct na_error *err)
{
        struct blob_dl *b = userdata;
        if (b->asked_from == 0)
                return resp->status == 200 ? 0
                                           : reg_fail(b->c, "http-status", err, "blob sha256:%s: HTTP %ld to a plain GET",
                                                      b->hex, resp->status);
        if (resp->status == 200)
                return restart(b, err); /* the server ignored Range: start over */
        uint64_t start = 0;
        if (resp->status != 206 || sscanf(resp->content_range, "bytes %" SCNu64 "-", &start) != 1 || start != b->asked_from)
                return reg_fail(b->c, "http-status", err,
                                "blob sha256:%s: resuming at %" PRIu64 ": HTTP %ld, Content-Range \"%.60s\"", b->hex,
                                b->asked_from, resp->status, resp->content_range);
        return 0;
}

static int blob_write(void *userdata, const void *data, size_t len, struct na_error *err)
{
        struct blob_dl *b = userdata;
        if (b->have + len > b->size)
                return reg_fail(b->c, "digest-mismatch", err,
                                "blob sha256:%s: more than the %" PRIu64 " bytes its descriptor states", b->hex, b->size);
        int r = na_write_all(b->fd, data, len, "temporary blob", err);
        if (r < 0)
                return na_error_prefix(err, "%s", b->l->path);
        EVP_DigestUpdate(b->ctx, data, len);
        b->have += len;
        return reg_progress_add(b->p, len, false, err);
}

static int fetch_attempts(struct blob_dl *b, struct na_error *err)
{
        char url[REG_URL_MAX];
        char name[PROTO_IMAGE_NAME_MAX + 1];
        snprintf(name, sizeof(name), "%s", b->c->image);
        name[strcspn(name, ":@")] = 0;
        if ((size_t)snprintf(url, sizeof(url), "%s/v2/%s/blobs/sha256:%s", b->c->base, name, b->hex) >= sizeof(url))
                return reg_fail(b->c, "network", err, "blob URL too long");

        struct reg_sink sink = {.begin = blob_begin, .write = blob_write, .userdata = b};
        for (unsigned attempt = 0;; attempt++) {
                char range[64];
                const char *hdrs[] = {"Accept: */*", NULL, NULL};
                b->asked_from = b->have;
                if (b->have > 0) {
                        snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-", b->have);
                        hdrs[1] = range;
                }
                struct reg_get_args a = {.url = url, .headers = hdrs, .sink = &sink};
                struct reg_response resp = {0};
                CURLcode code = CURLE_OK;
                int r = reg_registry_get(b->c, &a, &resp, &code, err);
                long status = resp.status;
                if (r == 0 && status >= 200 && status < 300) {
                        reg_response_done(&resp);
                        if (b->have == b->size)
                                return 0;
                        /* The body ended early without a transport error: treat it as a drop. */
                        r = reg_fail(b->c, "network", err, "blob sha256:%s: %" PRIu64 " of %" PRIu64 " bytes", b->hex,
                                     b->have, b->size);
                        code = CURLE_PARTIAL_FILE;
                } else if (r == 0 && status == 404) {
                        /* The manifest names it, the registry lost it: a broken image, not an unknown one. */
                        reg_response_done(&resp);
                        return reg_fail(b->c, "blob-unknown", err, "blob sha256:%s: the registry does not have it (HTTP 404)",
                                        b->hex);
                } else if (r == 0) {
                        char what[100];
                        snprintf(what, sizeof(what), "blob sha256:%s", b->hex);
                        r = reg_response_error(b->c, &resp, what, err);
                        reg_response_done(&resp);
                        /* A registry that is restarting or throttling: worth another try. */
                        if (!(status >= 500 || status == 429 || status == 408))
                                return r;
                        code = CURLE_RECV_ERROR;
                } else {
                        reg_response_done(&resp);
                        /* Every byte came before the connection broke: the digest decides. */
                        if (reg_curl_retryable(code) && b->size > 0 && b->have == b->size) {
                                na_error_clear(err);
                                return 0;
                        }
                }
                if (!reg_curl_retryable(code) || attempt + 1 >= REG_BLOB_RETRIES)
                        return r;
                na_error_clear(err);
                r = na_progress_checkpoint(b->p->progress, err);
                if (r < 0)
                        return r;
                reg_backoff(attempt);
        }
}

int reg_blob_fetch(struct reg_client *c, struct reg_layout *l, const char *hex, uint64_t size,
                   struct reg_progress *p, struct na_error *err)
{
        int r = reg_layout_blob_present(l, hex, size, err);
        if (r < 0)
                return r;
        if (r > 0)
                return reg_progress_add(p, size, true, err);

        char tmp[64];
        _cleanup_close_ int fd = reg_layout_tmp_open(l, tmp, err);
        if (fd < 0)
                return fd;
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
                unlinkat(l->blobsfd, tmp, 0);
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "cannot start a digest");
        }
        struct blob_dl b = {.c = c, .l = l, .p = p, .hex = hex, .size = size, .fd = fd, .ctx = ctx};
        r = fetch_attempts(&b, err);
        if (r < 0) {
                unlinkat(l->blobsfd, tmp, 0);
                return r;
        }
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned int dl = 0;
        char got[65];
        EVP_DigestFinal_ex(ctx, d, &dl);
        na_sha256_hex(d, got);
        if (!streq(got, hex)) {
                unlinkat(l->blobsfd, tmp, 0);
                r = reg_fail(c, "digest-mismatch", err, "blob sha256:%s: the registry served content with sha256:%s", hex, got);
                na_error_detail(err, "expected", json_sprintf("sha256:%s", hex));
                na_error_detail(err, "actual", json_sprintf("sha256:%s", got));
                return r;
        }
        return reg_layout_tmp_publish(l, fd, tmp, hex, err);
}
