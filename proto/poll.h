/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A poll answer taken apart job by job, so that one job the agent cannot read never
 * makes the others unreadable (AGENT-API 2, GET .../jobs; decisions in proto/README.md).
 *
 * proto_poll_split() checks the envelope's shape with a small scanner, without
 * building the document, and returns where each element of "data" lies; each job is
 * then parsed on its own. When a job's text cannot be parsed (an integer beyond 64
 * bits, a key written twice, a NUL in a key) or the answer was cut at the agent's size
 * cap, the proto_*_recover() functions find the job's "id" (and "attempt") in what is
 * there, so that the job can still be answered with VALIDATION_ERROR. No I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/job.h"

struct proto_span {
        size_t off, len;
};

/*
 * Split a poll answer. On 0: *ret_success is the envelope's "success" and, when it is
 * true, *ret (free()) holds *ret_n spans of data's elements in order. -EBADMSG when
 * the body is not a JSON object with a boolean "success" and, when true, a "data"
 * array (a failure envelope's other members are not checked here).
 */
int proto_poll_split(const char *body, size_t len, bool *ret_success, struct proto_span **ret, size_t *ret_n,
                     struct na_error *err);

/*
 * An exchange answer (AGENT-API 2.3): data is an object whose "jobs" array is split as
 * above; the texts of its "taken" and "lost" members are spanned (len 0 when absent)
 * for proto_exchange_acks_decode(). Other members ("leases") are skipped.
 */
struct proto_exchange_spans {
        struct proto_span taken, lost;
};
int proto_exchange_split(const char *body, size_t len, bool *ret_success, struct proto_span **ret, size_t *ret_n,
                         struct proto_exchange_spans *x, struct na_error *err);

/* What an exchange answer says of one job of its body: taken (code "") or lost (code set). */
struct proto_exchange_ack {
        char id[PROTO_ID_MAX + 1];
        char code[32]; /* "", JOB_NOT_FOUND, LEASE_LOST or JOB_CANCELLED */
};
/*
 * Decode the "taken" (array of ids) and "lost" (array of {jobId, code}) texts spanned
 * by proto_exchange_split() into one list (*ret, free()). An entry that cannot be read
 * is reported in err and skipped (its job stays pending); the others are returned.
 */
int proto_exchange_acks_decode(const char *body, const struct proto_exchange_spans *x,
                               struct proto_exchange_ack **ret, size_t *ret_n, struct na_error *err);

/*
 * The top-level "id" (an answerable id: 1..64 of [A-Za-z0-9._-], no escapes) and
 * "attempt" (1 when absent or unreadable) of a job whose text starts at its '{'. The
 * text may be cut short: members before the cut count. false when no id was found.
 */
bool proto_job_recover(const char *text, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt);

/* The same for the first job of an answer (a poll's or an exchange's) of which only the head is known. */
bool proto_poll_recover_head(const char *head, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt);

/*
 * The same for the last job of an answer of which only the tail is known (scanned
 * backwards from the answer's end: inside a string every '"' is escaped, so the
 * structure can be read from the end as well as from the start).
 */
bool proto_poll_recover_tail(const char *tail, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt);
/* The same in an exchange answer whose data ends with its "jobs" array (when "jobs" is
 * not data's last member, only the head can tell the job's id). */
bool proto_exchange_recover_tail(const char *tail, size_t len, char id[PROTO_ID_MAX + 1], int64_t *ret_attempt);
