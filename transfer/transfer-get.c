/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * transfer_get (transfer/transfer.h): the object streamed from curl's receive buffer
 * into fd with pwrite and hashed on the way; a dropped connection is resumed with
 * Range from the bytes already written (a store that answers 200 to a Range starts
 * the file over).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "transfer/transfer-internal.h"

static int body_fail(struct tx *x, int errnum, const char *what)
{
        if (errnum)
                return na_error_sys(&x->cb_err, errnum, "%s %s: %s", x->verb, x->host, what);
        int r = na_error_set(&x->cb_err, EPROTO, NA_E_DRIVER, "%s %s: %s", x->verb, x->host, what);
        na_error_detail(&x->cb_err, "reason", json_string(what));
        return r;
}

static bool too_large(struct tx *x, uint64_t bytes)
{
        if (!x->o->max_bytes || bytes <= x->o->max_bytes)
                return false;
        na_error_set(&x->cb_err, EFBIG, NA_E_QUOTA_EXCEEDED,
                     "%s %s: the object is larger than %s (%" PRIu64 " bytes); nothing was kept", x->verb, x->host,
                     x->o->max_bytes_what ? x->o->max_bytes_what : "the limit", x->o->max_bytes);
        na_error_detail(&x->cb_err, "limitBytes", json_integer((json_int_t)x->o->max_bytes));
        return true;
}

/* The first bytes of an answer: where they go, and the object's size. */
static bool body_start(struct tx *x)
{
        long status = 0;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
        x->status = status;
        if (status < 200 || status > 299) {
                x->discard = true; /* an error page: read and dropped, the status decides */
                return true;
        }
        if (status == 206) {
                if (!x->have_range || x->range_start != x->done) {
                        body_fail(x, 0, "the store answered a range that does not follow the bytes already received");
                        return false;
                }
                if (x->range_total)
                        x->total = x->range_total;
                return !too_large(x, x->total);
        }
        if (x->done > 0) { /* the whole object again: start over */
                if (ftruncate(x->fd, 0) < 0) {
                        body_fail(x, errno, "truncate");
                        return false;
                }
                x->done = 0;
                EVP_DigestInit_ex(x->md, EVP_sha256(), NULL);
        }
        curl_off_t cl = -1;
        if (curl_easy_getinfo(x->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK && cl >= 0)
                x->total = (uint64_t)cl;
        return !too_large(x, x->total);
}

static size_t write_cb(char *buf, size_t size, size_t n, void *userdata)
{
        struct tx *x = userdata;
        size_t len = size * n;
        if (!x->body_started) {
                x->body_started = true;
                if (!body_start(x))
                        return 0;
        }
        if (x->discard)
                return len;
        if (too_large(x, x->done + len)) /* a body longer than it said, or one that never said */
                return 0;
        for (size_t off = 0; off < len;) {
                ssize_t k = RETRY_EINTR(pwrite(x->fd, buf + off, len - off, (off_t)(x->done + off)));
                if (k < 0) {
                        body_fail(x, errno, "write");
                        return 0;
                }
                off += (size_t)k;
        }
        EVP_DigestUpdate(x->md, buf, len);
        x->done += len;
        tx_progress(x, x->done, false);
        return len;
}

static int prepare_range(struct tx *x, struct curl_slist **hdr)
{
        if (x->done == 0)
                return 0;
        char line[64];
        snprintf(line, sizeof(line), "Range: bytes=%" PRIu64 "-", x->done);
        struct curl_slist *tmp = curl_slist_append(*hdr, line);
        if (!tmp)
                return -ENOMEM;
        *hdr = tmp;
        return 0;
}

int transfer_get(const struct transfer_options *o, const struct proto_transfer *t, int fd,
                 const struct na_progress *progress, struct transfer_result *ret, struct na_error *err)
{
        struct tx x;
        int r = tx_begin(&x, o, t, progress, fd, false, err);
        if (r < 0)
                return r;
        if (ftruncate(fd, 0) < 0) {
                r = na_error_sys(err, errno, "%s %s: truncate", x.verb, x.host);
                goto out;
        }
        x.write_fn = write_cb;
        tx_progress(&x, 0, true);
        r = tx_request(&x, t->url, false, prepare_range, err);
        if (r < 0)
                goto out;
        if (x.total && x.done != x.total) {
                r = na_error_set(err, EPROTO, NA_E_DRIVER, "%s %s: %" PRIu64 " bytes received of %" PRIu64, x.verb,
                                 x.host, x.done, x.total);
                goto out;
        }
        tx_progress(&x, x.done, true);
        char hex[65];
        tx_digest(&x, hex);
        if (t->has_sha256 && !streq(hex, t->sha256)) {
                r = tx_invalid(&x, err, "transfer.sha256", "does not match the object's (%s)", hex);
                goto out;
        }
        memset(ret, 0, sizeof(*ret));
        ret->bytes = x.done;
        memcpy(ret->sha256, hex, sizeof(hex));
out:
        tx_done(&x);
        return r;
}
