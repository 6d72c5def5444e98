/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * HTTPS requests on libcurl's multi-socket interface, driven by the daemon's loop
 * (after curl's docs/examples/ephiperfifo.c): no thread is parked on the long poll.
 * Certificate verification is always on; connections are reused.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent/base/loop.h"
#include "common/error.h"

#define HTTP_BODY_MAX (16u << 20) /* a larger answer is cut off and fails */

struct http_options {
        const char *node_id;
        const char *user_agent;
        const char *ca_file;       /* NULL: the system bundle */
        const char *pinned_pubkey; /* "sha256//..." or NULL */
        const char *client_cert;   /* mutual TLS, with client_key */
        const char *client_key;
        bool allow_http;           /* plain http:// (loopback only; checked by config) */
        unsigned max_connections;  /* per host */
};

struct http_response {
        long status;             /* 0 when the request did not complete (transport/TLS failure) */
        int transport_code;      /* libcurl's CURLcode when status is 0 */
        char error[256];
        const char *body;
        size_t body_len;
        int64_t retry_after_sec; /* -1 when absent */
        double total_sec;
        /*
         * An answer larger than HTTP_BODY_MAX fails (status 0), but what is known of it
         * is kept for callers that can use it: its HTTP status, the head (body,
         * body_len: the first HTTP_BODY_MAX bytes) and the tail (the last 64 KiB).
         */
        bool truncated;
        long truncated_status;
        const char *tail;
        size_t tail_len;
};

struct http;
typedef void (*http_done_fn)(void *userdata, const struct http_response *resp);

int http_new(struct loop *loop, const struct http_options *opt, struct http **ret, struct na_error *err);
void http_free(struct http *h);
/* Set the bearer token used from the next request on. */
int http_set_token(struct http *h, const char *token) _warn_unused_;
/*
 * Start a request; done is called on the loop thread exactly once. A request that
 * fails before it reaches the wire (no memory, libcurl refusing an option or the
 * handle, too many open files) is answered like a transport failure (status 0,
 * transport_code -1) on the next loop turn, so every failure takes the caller's one
 * retry path. Only when not even that can be allocated is done called before
 * http_request returns: callers mark a request in flight before they call this.
 * body may be NULL (GET).
 */
void http_request(struct http *h, const char *method, const char *url, const char *body, long timeout_ms,
                  http_done_fn done, void *userdata);
/* Answer done with a local failure (why) the same way, e.g. when a body cannot be built. */
void http_fail(struct http *h, http_done_fn done, void *userdata, const char *why);
unsigned http_in_flight(const struct http *h);
