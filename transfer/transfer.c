/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The transfer client's core (transfer/transfer.h): options and checks, one curl easy
 * handle per transfer (kept across retries and parts, so the connection is reused),
 * one request with its retries and backoff, progress and the safe points.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/digest.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "transfer/transfer-internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

void transfer_result_clear(struct transfer_result *r)
{
        if (!r)
                return;
        free(r->etags);
        memset(r, 0, sizeof(*r));
}

int tx_invalid(struct tx *x, struct na_error *err, const char *field, const char *fmt, ...)
{
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        int r = na_error_field(err, field, "%s", msg);
        snprintf(err->message, sizeof(err->message), "%s %s: %s %s", x->verb, x->host, field, msg);
        return r;
}

/* DRIVER_ERROR naming the host; reason goes to details.reason. */
static int tx_fail(struct tx *x, struct na_error *err, int errnum, const char *reason)
{
        char r[256];
        snprintf(r, sizeof(r), "%s", reason);
        transfer_scrub(r, x->url);
        int ret = na_error_set(err, errnum, NA_E_DRIVER, "%s %s: %s", x->verb, x->host, r);
        na_error_detail(err, "reason", json_string(r));
        na_error_detail(err, "host", json_string(x->host));
        return ret;
}

int tx_begin(struct tx *x, const struct transfer_options *o, const struct proto_transfer *t,
             const struct na_progress *progress, int fd, bool put, struct na_error *err)
{
        memset(x, 0, sizeof(*x));
        x->o = o;
        x->t = t;
        x->progress = progress;
        x->fd = fd;
        x->verb = put ? "PUT to" : "GET from";
        x->last_percent = -1;
        x->url = t->url;
        (void)proto_transfer_host(t->url, x->host, sizeof(x->host));
        /* The URLs again (the params may not come from proto_transfer_decode), and the client's own rule. */
        for (size_t i = 0; i <= t->n_parts; i++) {
                const char *url = i == 0 ? t->url : t->parts[i - 1];
                char field[64];
                if (i == 0)
                        snprintf(field, sizeof(field), "transfer.url");
                else
                        snprintf(field, sizeof(field), "transfer.parts.%zu.url", i - 1);
                bool plain = false;
                const char *problem = url ? proto_transfer_url_problem(url, strlen(url), &plain) : "is required";
                if (problem)
                        return tx_invalid(x, err, field, "%s", problem);
                if (plain && !o->allow_insecure_http)
                        return tx_invalid(x, err, field,
                                          "must be an https:// URL (plain http:// to loopback needs allow_insecure_http)");
        }
        if (t->put != put)
                return tx_invalid(x, err, "transfer.method", "must be %s", put ? "PUT" : "GET");
        pthread_once(&curl_once, curl_init_once);
        if (!(x->curl = curl_easy_init()) || !(x->md = EVP_MD_CTX_new()) ||
            EVP_DigestInit_ex(x->md, EVP_sha256(), NULL) != 1) {
                tx_done(x);
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "%s %s: cannot start the client", x->verb, x->host);
        }
        return 0;
}

void tx_done(struct tx *x)
{
        if (x->curl)
                curl_easy_cleanup(x->curl);
        x->curl = NULL;
        EVP_MD_CTX_free(x->md);
        x->md = NULL;
        na_error_clear(&x->cb_err);
}

void tx_digest(struct tx *x, char out[65])
{
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(x->md, d, &dl);
        na_sha256_hex(d, out);
}

void tx_progress(struct tx *x, uint64_t bytes, bool force)
{
        uint64_t now = na_now_mono_us();
        if (!force && now - x->last_progress_us < 100000)
                return;
        int pct = -1;
        if (x->total > 0)
                pct = (int)(bytes >= x->total ? 100 : bytes * 100 / x->total);
        if (!force && pct >= 0 && pct == x->last_percent)
                return;
        x->last_progress_us = now;
        x->last_percent = pct;
        char msg[96];
        if (x->total > 0)
                snprintf(msg, sizeof(msg), "%" PRIu64 " of %" PRIu64 " bytes", bytes, x->total);
        else
                snprintf(msg, sizeof(msg), "%" PRIu64 " bytes", bytes);
        na_progress_stage(x->progress, x->o->stage ? x->o->stage : "transferring", pct, msg);
}

static size_t header_cb(char *buf, size_t size, size_t n, void *userdata)
{
        struct tx *x = userdata;
        size_t len = size * n;
        if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) { /* a new answer (after 100 Continue, too) */
                x->have_range = x->have_etag = false;
                return len;
        }
        const char *colon = memchr(buf, ':', len);
        if (!colon)
                return len;
        size_t nlen = (size_t)(colon - buf);
        const char *v = colon + 1;
        size_t vlen = len - nlen - 1;
        if (nlen == 4 && strncasecmp(buf, "ETag", 4) == 0)
                x->have_etag = transfer_clean_etag(v, vlen, x->etag);
        else if (nlen == 13 && strncasecmp(buf, "Content-Range", 13) == 0 && vlen < 128) {
                char tmp[128];
                memcpy(tmp, v, vlen);
                tmp[vlen] = '\0';
                x->have_range = transfer_parse_content_range(tmp, &x->range_start, &x->range_end, &x->range_total);
        }
        return len;
}

/* The safe point between chunks, at most every 100 ms: a cancelled job stops the request. */
static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
        (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
        struct tx *x = userdata;
        uint64_t now = na_now_mono_us();
        if (now - x->last_check_us < 100000)
                return 0;
        x->last_check_us = now;
        if (na_progress_checkpoint(x->progress, &x->cb_err) < 0)
                return 1;
        return 0;
}

static size_t drop_cb(char *buf, size_t size, size_t n, void *userdata)
{
        (void)buf, (void)userdata;
        return size * n;
}

static int setup(struct tx *x, const char *url, bool put, struct curl_slist *hdr, char *errbuf)
{
        CURL *c = x->curl;
        CURLcode rc = CURLE_OK;
        curl_easy_reset(c);
#define SET(opt, val)                                      \
        do {                                               \
                if (rc == CURLE_OK)                        \
                        rc = curl_easy_setopt(c, opt, val); \
        } while (0)
        SET(CURLOPT_URL, url);
        SET(CURLOPT_PROTOCOLS_STR, x->o->allow_insecure_http ? "http,https" : "https");
        SET(CURLOPT_FOLLOWLOCATION, 0L);
        SET(CURLOPT_NOSIGNAL, 1L);
        SET(CURLOPT_SSL_VERIFYPEER, 1L);
        SET(CURLOPT_SSL_VERIFYHOST, 2L);
        if (x->o->ca_file)
                SET(CURLOPT_CAINFO, x->o->ca_file);
        SET(CURLOPT_HTTPHEADER, hdr);
        SET(CURLOPT_USERAGENT, "nodeagent/" NA_VERSION);
        SET(CURLOPT_HEADERFUNCTION, header_cb);
        SET(CURLOPT_HEADERDATA, x);
        SET(CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
        SET(CURLOPT_XFERINFODATA, x);
        SET(CURLOPT_NOPROGRESS, 0L);
        SET(CURLOPT_ERRORBUFFER, errbuf);
        SET(CURLOPT_CONNECTTIMEOUT, 30L);
        SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        SET(CURLOPT_LOW_SPEED_TIME, 60L);
        SET(CURLOPT_HTTP_CONTENT_DECODING, 0L);
        SET(CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
        SET(CURLOPT_BUFFERSIZE, TRANSFER_BUFFER_SIZE);
        SET(CURLOPT_UPLOAD_BUFFERSIZE, TRANSFER_BUFFER_SIZE);
        SET(CURLOPT_WRITEFUNCTION, x->write_fn ? x->write_fn : drop_cb);
        SET(CURLOPT_WRITEDATA, x);
        if (put) {
                SET(CURLOPT_READFUNCTION, x->read_fn);
                SET(CURLOPT_READDATA, x);
                SET(CURLOPT_SEEKFUNCTION, x->seek_fn);
                SET(CURLOPT_SEEKDATA, x);
                SET(CURLOPT_UPLOAD, 1L);
                SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->req_len);
        }
#undef SET
        return rc == CURLE_OK ? 0 : -EINVAL;
}

/* Sleep ms, with a safe point every 100 ms. */
static int backoff(struct tx *x, unsigned ms, struct na_error *err)
{
        while (ms > 0) {
                unsigned step = ms < 100 ? ms : 100;
                struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)step * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
                ms -= step;
                int r = na_progress_checkpoint(x->progress, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int expired(struct tx *x, unsigned attempt, struct na_error *err)
{
        if (x->t->expires_at_ms <= 0 || (int64_t)na_now_real_ms() < x->t->expires_at_ms)
                return 0;
        return tx_invalid(x, err, "transfer.expiresAt", "has passed: the URL expired%s",
                          attempt > 0 ? " while the transfer was retried" : "");
}

/*
 * One try: 0 on 2xx, -EAGAIN (err filled) when another try may help, another
 * negative value when not.
 */
static int try_once(struct tx *x, const char *url, bool put, struct curl_slist *hdr, struct na_error *err)
{
        char errbuf[CURL_ERROR_SIZE] = "";
        x->status = 0;
        x->body_started = x->discard = false;
        x->have_range = x->have_etag = false;
        if (setup(x, url, put, hdr, errbuf) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "%s %s: libcurl refused an option", x->verb, x->host);
        CURLcode rc = curl_easy_perform(x->curl);
        long status = 0;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
        x->status = status;
        if (na_error_is_set(&x->cb_err)) { /* a callback stopped it: cancelled, a full disk, a bad answer */
                na_error_move(err, &x->cb_err);
                return -(err->errnum ? err->errnum : EIO);
        }
        char reason[CURL_ERROR_SIZE + 64];
        if (rc != CURLE_OK) {
                snprintf(reason, sizeof(reason), "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
                int r = tx_fail(x, err, EIO, reason);
                return transfer_curl_retryable(rc) ? -EAGAIN : r;
        }
        if (status >= 200 && status <= 299)
                return 0;
        snprintf(reason, sizeof(reason), "HTTP %ld", status);
        int r = tx_fail(x, err, EIO, reason);
        return transfer_status_retryable(status) ? -EAGAIN : r;
}

int tx_request(struct tx *x, const char *url, bool put, int (*prepare)(struct tx *x, struct curl_slist **hdr),
               struct na_error *err)
{
        unsigned retries = x->o->retries ? x->o->retries : TRANSFER_DEFAULT_RETRIES;
        unsigned first = x->o->backoff_ms ? x->o->backoff_ms : TRANSFER_DEFAULT_BACKOFF_MS;
        x->url = url;
        (void)proto_transfer_host(url, x->host, sizeof(x->host)); /* a part's URL may name another host */
        for (unsigned attempt = 0;; attempt++) {
                int r = expired(x, attempt, err);
                if (r < 0)
                        return r;
                if ((r = na_progress_checkpoint(x->progress, err)) < 0)
                        return r;
                /* "Expect:" turns off 100-continue (one round trip less per PUT); then the transfer's headers. */
                struct curl_slist *hdr = curl_slist_append(NULL, "Expect:");
                bool oom = !hdr;
                for (size_t i = 0; !oom && i < x->t->n_headers; i++) {
                        char line[4096 + 128 + 4];
                        snprintf(line, sizeof(line), "%s: %s", x->t->headers[i].name, x->t->headers[i].value);
                        struct curl_slist *tmp = curl_slist_append(hdr, line);
                        oom = !tmp;
                        hdr = tmp ? tmp : hdr;
                }
                if (!oom && prepare && prepare(x, &hdr) < 0)
                        oom = true;
                if (oom) {
                        curl_slist_free_all(hdr);
                        return na_error_sys(err, ENOMEM, "%s %s", x->verb, x->host);
                }
                na_error_clear(err);
                r = try_once(x, url, put, hdr, err);
                curl_slist_free_all(hdr);
                if (r != -EAGAIN)
                        return r;
                if (attempt >= retries) {
                        size_t l = strlen(err->message);
                        snprintf(err->message + l, sizeof(err->message) - l, " (after %u tries)", attempt + 1);
                        return -(err->errnum ? err->errnum : EIO);
                }
                struct na_error werr = NA_ERROR_INIT;
                if ((r = backoff(x, transfer_backoff_ms(first, attempt + 1), &werr)) < 0) {
                        na_error_move(err, &werr);
                        return r;
                }
        }
}
