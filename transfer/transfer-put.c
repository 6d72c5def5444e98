/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * transfer_put (transfer/transfer.h): size bytes of fd read with pread straight into
 * curl's send buffer, hashed once each on the way (a retried request reads its bytes
 * again without hashing them twice); one PUT to the URL, or parts of part_size bytes
 * to the part URLs with each part's ETag kept.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "transfer/transfer-internal.h"

static size_t read_cb(char *buf, size_t size, size_t n, void *userdata)
{
        struct tx *x = userdata;
        uint64_t left = x->req_len - x->req_pos;
        size_t want = size * n;
        if (want > left)
                want = (size_t)left;
        if (want == 0)
                return 0;
        uint64_t at = x->req_off + x->req_pos;
        ssize_t k = RETRY_EINTR(pread(x->fd, buf, want, (off_t)at));
        if (k <= 0) {
                if (k < 0)
                        na_error_sys(&x->cb_err, errno, "%s %s: read", x->verb, x->host);
                else
                        na_error_set(&x->cb_err, EIO, NA_E_INTERNAL, "%s %s: the file shrank while it was sent",
                                     x->verb, x->host);
                return CURL_READFUNC_ABORT;
        }
        if (at + (uint64_t)k > x->done && at <= x->done) { /* hash only what was never hashed */
                uint64_t skip = x->done - at;
                EVP_DigestUpdate(x->md, buf + skip, (size_t)((uint64_t)k - skip));
                x->done = at + (uint64_t)k;
        }
        x->req_pos += (uint64_t)k;
        if (x->req_off + x->req_pos > x->sent)
                x->sent = x->req_off + x->req_pos;
        tx_progress(x, x->sent, false);
        return (size_t)k;
}

static int seek_cb(void *userdata, curl_off_t offset, int origin)
{
        struct tx *x = userdata;
        if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->req_len)
                return CURL_SEEKFUNC_CANTSEEK;
        x->req_pos = (uint64_t)offset;
        return CURL_SEEKFUNC_OK;
}

/* Each try of a request sends its range from the start. */
static int prepare_rewind(struct tx *x, struct curl_slist **hdr)
{
        (void)hdr;
        x->req_pos = 0;
        return 0;
}

int transfer_put(const struct transfer_options *o, const struct proto_transfer *t, int fd, uint64_t size,
                 const struct na_progress *progress, struct transfer_result *ret, struct na_error *err)
{
        struct tx x;
        int r = tx_begin(&x, o, t, progress, fd, true, err);
        if (r < 0)
                return r;
        x.read_fn = read_cb;
        x.seek_fn = seek_cb;
        x.total = size;
        uint64_t part_size = o->part_size ? o->part_size : TRANSFER_DEFAULT_PART_SIZE;
        uint64_t n = t->n_parts ? transfer_parts_needed(size, part_size) : 1;
        char (*etags)[128] = NULL;
        if (t->n_parts && n > t->n_parts) {
                r = tx_invalid(&x, err, "transfer.parts",
                               "has %zu part URLs; the object of %" PRIu64 " bytes needs %" PRIu64
                               " parts of %" PRIu64 " bytes",
                               t->n_parts, size, n, part_size);
                goto out;
        }
        if (t->n_parts && !(etags = calloc(n, sizeof(*etags)))) {
                r = na_error_sys(err, ENOMEM, "%s %s", x.verb, x.host);
                goto out;
        }
        tx_progress(&x, 0, true);
        for (uint64_t i = 0; i < n; i++) {
                x.req_off = t->n_parts ? i * part_size : 0;
                x.req_len = t->n_parts ? (size - x.req_off < part_size ? size - x.req_off : part_size) : size;
                r = tx_request(&x, t->n_parts ? t->parts[i] : t->url, true, prepare_rewind, err);
                if (r < 0) {
                        if (t->n_parts) {
                                size_t l = strlen(err->message);
                                snprintf(err->message + l, sizeof(err->message) - l, " (part %" PRIu64 " of %" PRIu64 ")",
                                         i + 1, n);
                        }
                        goto out;
                }
                if (etags && !x.have_etag) {
                        r = na_error_set(err, EPROTO, NA_E_DRIVER,
                                         "%s %s: part %" PRIu64 " of %" PRIu64 " was answered without an ETag", x.verb,
                                         x.host, i + 1, n);
                        na_error_detail(err, "reason", json_string("no ETag for a part"));
                        goto out;
                }
                if (etags)
                        memcpy(etags[i], x.etag, sizeof(x.etag));
        }
        if (x.done != size) {
                r = na_error_set(err, EIO, NA_E_INTERNAL, "%s %s: %" PRIu64 " bytes read of %" PRIu64, x.verb, x.host,
                                 x.done, size);
                goto out;
        }
        tx_progress(&x, size, true);
        char hex[65];
        tx_digest(&x, hex);
        if (t->has_sha256 && !streq(hex, t->sha256)) {
                r = tx_invalid(&x, err, "transfer.sha256", "does not match the file's (%s)", hex);
                goto out;
        }
        memset(ret, 0, sizeof(*ret));
        ret->bytes = size;
        memcpy(ret->sha256, hex, sizeof(hex));
        if (etags) {
                ret->etags = TAKE_PTR(etags);
                ret->n_etags = (size_t)n;
        }
out:
        free(etags);
        tx_done(&x);
        return r;
}
