/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shared by the transfer client's files (transfer/transfer.h): one transfer's state,
 * the request loop with retries, and the pure helpers (transfer-plan.c) that the unit
 * tests reach directly.
 */
#pragma once

#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>

#include "transfer/transfer.h"

#define TRANSFER_DEFAULT_PART_SIZE (64ull << 20)
#define TRANSFER_DEFAULT_RETRIES 5u
#define TRANSFER_DEFAULT_BACKOFF_MS 500u
#define TRANSFER_BACKOFF_MAX_MS 30000u
#define TRANSFER_BUFFER_SIZE (256L << 10) /* curl's receive and send buffers: the only buffers, whatever the size */

/* ---- pure helpers (transfer-plan.c) ---- */

/* Milliseconds to wait before retry number n (1 for the first retry): first << (n-1), at most 30 s. */
unsigned transfer_backoff_ms(unsigned first_ms, unsigned n);
/* Whether a curl result is worth another try (a dropped or refused connection, a timeout). */
bool transfer_curl_retryable(CURLcode code);
/* Whether an HTTP status is worth another try: 5xx, 408, 429. */
bool transfer_status_retryable(long status);
/* "Content-Range: bytes a-b/total" (the value: "bytes a-b/total", or "bytes a-b/" and a star, whose total is 0). */
bool transfer_parse_content_range(const char *value, uint64_t *ret_start, uint64_t *ret_end, uint64_t *ret_total);
/* Parts an object of size bytes needs with parts of part_size bytes (an empty object: one). */
uint64_t transfer_parts_needed(uint64_t size, uint64_t part_size);
/* An ETag as the store sent it, trimmed, printable ASCII only, at most 127 bytes: false when none is left. */
bool transfer_clean_etag(const char *value, size_t len, char out[128]);
/* Remove from msg every occurrence of url's query (from '?'), which holds the signature. */
void transfer_scrub(char *msg, const char *url);

/* ---- one transfer ---- */

struct tx {
        const struct transfer_options *o;
        const struct proto_transfer *t;
        const struct na_progress *progress;
        const char *verb;     /* "GET from", "PUT to" */
        char host[256];       /* the URL's host[:port], for messages */
        CURL *curl;
        int fd;
        EVP_MD_CTX *md;
        uint64_t total;       /* bytes of the object; 0 while unknown (GET) */
        uint64_t done;        /* GET: bytes written at the start of fd; PUT: bytes hashed so far */
        uint64_t sent;        /* PUT: end of what was read for the current request, for progress */
        int last_percent;
        uint64_t last_progress_us, last_check_us;
        struct na_error cb_err; /* set by a callback that stopped the request */
        curl_write_callback write_fn; /* GET: the body into fd; NULL: answers are read and dropped */
        curl_read_callback read_fn;   /* PUT: the part from fd */
        curl_seek_callback seek_fn;
        /* The request in flight. */
        const char *url;
        uint64_t req_off, req_len, req_pos; /* PUT: the part's range and the read position in it */
        long status;
        bool body_started, discard;
        bool have_range;
        uint64_t range_start, range_end, range_total;
        char etag[128];
        bool have_etag;
};

/* Check o and t, set up x (curl handle, digest, host). Frees with tx_done. */
int tx_begin(struct tx *x, const struct transfer_options *o, const struct proto_transfer *t,
             const struct na_progress *progress, int fd, bool put, struct na_error *err);
void tx_done(struct tx *x);
/*
 * Run one request of x (url, with x->req_* set for a PUT) with the retries: 0 on a
 * 2xx answer. prepare() runs before each try (GET: the Range header). Messages name
 * the host, never the query.
 */
int tx_request(struct tx *x, const char *url, bool put, int (*prepare)(struct tx *x, struct curl_slist **hdr),
               struct na_error *err);
/* Progress in the transfer's stage, by bytes (at most every 100 ms, and at the end). */
void tx_progress(struct tx *x, uint64_t bytes, bool force);
/* VALIDATION_ERROR on field whose message also says what: "<verb> <host>: <field> <msg>". */
int tx_invalid(struct tx *x, struct na_error *err, const char *field, const char *fmt, ...) _printf_(4, 5);
/* The digest's hex into out (65 bytes). */
void tx_digest(struct tx *x, char out[65]);
