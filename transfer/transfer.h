/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Transfers (AGENT-API 4.4): bytes too large for a job's params or result move
 * between the node and object storage over HTTPS, never through the job channel.
 * One streaming client for GET and PUT of pre-signed URLs, over the same libcurl the
 * link uses, with bounded memory (one buffer of a fixed size whatever the object's
 * size), progress in the `transferring` stage, sha256 checked, a dropped connection
 * resumed (GET, with Range) or retried (PUT, a part at a time) with backoff, and
 * S3-style multipart uploads when the transfer carries part URLs.
 *
 *   struct transfer_options o;
 *   services_transfer_options(job_services(ctx), &o);  // agent/base/services.h: ca_file, part_size, allow_insecure_http
 *   struct transfer_result res;
 *   r = transfer_get(&o, t, fd, progress, &res, &err);          // into fd (truncated first)
 *   r = transfer_put(&o, t, fd, size, progress, &res, &err);    // size bytes of fd from offset 0
 *
 * The params (struct proto_transfer) are decoded and validated by proto/transfer-spec.h:
 * https only (http:// only to a loopback host and only with allow_insecure_http, which
 * is checked here again), an expiresAt in the past refused. Errors: 422
 * VALIDATION_ERROR on "transfer.sha256" for a sha256 mismatch (the caller keeps
 * nothing), on "transfer.expiresAt" when the URL expired before or while it was used;
 * a transport failure after the retries, or an HTTP status other than 2xx, is 502
 * DRIVER_ERROR whose message and details.reason name the host (never the signed
 * query) and the status or curl's reason. Blocking: call from a job's worker, never
 * from the loop.
 *
 * Also (refined with the implementation): the checkpoint runs at most every 100 ms
 * while bytes move and between retries, and its error (JOB_CANCELLED, ...) is
 * returned as is; a failed pwrite/pread is INTERNAL_ERROR with errnum set (ENOSPC or
 * EDQUOT: the caller says QUOTA_EXCEEDED for its volume); an object larger than
 * t->n_parts parts of part_size is VALIDATION_ERROR on "transfer.parts" before a byte
 * is sent; a part answered without an ETag is DRIVER_ERROR. Retried: curl's transport
 * errors (connect, timeout, dropped, partial) and HTTP 5xx, 408, 429, each request
 * (or part) at most 1 + retries times, waiting backoff_ms << n (at most 30 s). On
 * failure *ret is untouched; on success the caller clears it with
 * transfer_result_clear.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"
#include "proto/transfer-spec.h"

struct transfer_options {
        const char *ca_file;      /* [apps] transfer_ca_file; NULL: the system's bundle */
        bool allow_insecure_http; /* [controller] allow_insecure_http: http:// to loopback only */
        uint64_t part_size;       /* [apps] transfer_part_size_mb in bytes; 0: 64 MiB */
        unsigned retries;         /* per request after the first try; 0: 5 */
        unsigned backoff_ms;      /* first wait, doubled each time; 0: 500 */
        const char *stage;        /* progress stage; NULL: "transferring" */
        /* GET: the most bytes the object may have; 0: unbounded. A larger Content-Length
         * (or Content-Range total) is refused before a byte is written, a body that
         * grows past it as soon as it does: QUOTA_EXCEEDED (409, errnum EFBIG) naming
         * max_bytes_what, details.limitBytes; nothing is kept. */
        uint64_t max_bytes;
        const char *max_bytes_what; /* "the app's volume quota": what the bound is; NULL: "the limit" */
};

struct transfer_result {
        uint64_t bytes;
        char sha256[65];           /* lowercase hex of what went over the wire */
        char (*etags)[128];        /* PUT in parts: one ETag per part, as the store answered */
        size_t n_etags;
};
void transfer_result_clear(struct transfer_result *r);

/* GET t->url into fd (from offset 0; fd is truncated first). */
int transfer_get(const struct transfer_options *o, const struct proto_transfer *t, int fd,
                 const struct na_progress *progress, struct transfer_result *ret, struct na_error *err);

/* PUT size bytes of fd (read with pread from offset 0) to t->url, or to t->parts. */
int transfer_put(const struct transfer_options *o, const struct proto_transfer *t, int fd, uint64_t size,
                 const struct na_progress *progress, struct transfer_result *ret, struct na_error *err);
