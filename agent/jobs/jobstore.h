/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The durable job journal (<state_dir>/jobs.journal), built on common/journal:
 * a changing job is recorded before its first effect, its result is recorded
 * before it is sent, and the central API's acceptance is noted after. A job offered
 * again whose result is recorded is answered from here without running; a job
 * recorded as started without a result was interrupted and runs again from the start.
 *
 * Group commit: one writer thread appends every queued record and makes them durable
 * with one fdatasync; worker threads block in record_start/record_result until their
 * record is durable, the loop never blocks (record_acked does not wait).
 *
 * Retention (compaction, done by the writer when the file holds more than twice the
 * records the last compaction wrote, plus 1024): jobs started without result and
 * results not yet accepted are always
 * kept; accepted results are kept for JOBSTORE_KEEP_ACKED_SEC (24 h), at most
 * JOBSTORE_KEEP_ACKED_MAX (2048) of them, so that a job re-offered after its result
 * was accepted is still answered without running.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/job.h"

#define JOBSTORE_KEEP_ACKED_SEC (24 * 3600)
#define JOBSTORE_KEEP_ACKED_MAX 2048

enum jobrec_state { JOBREC_NONE = 0, JOBREC_STARTED, JOBREC_RESULT, JOBREC_ACKED };

struct jobstore;

struct jobstore_stats {
        uint64_t file_bytes;
        uint64_t file_records;
        uint64_t live_records;
        uint64_t pending_results; /* recorded, not yet accepted */
        uint64_t interrupted;     /* started, no result */
        uint64_t syncs;           /* fdatasync calls (group commit: far fewer than records) */
        uint64_t torn_bytes;      /* cut off a torn tail at open */
        uint64_t compactions;     /* rewrites since open */
};

int jobstore_open(const char *state_dir, struct jobstore **ret, struct na_error *err);
/* Flush what is queued, stop the writer and close. */
void jobstore_close(struct jobstore *js);

/* Worker threads: return once the record is durable. */
int jobstore_record_start(struct jobstore *js, const struct proto_job *pj, const char *target_key,
                          struct na_error *err);
int jobstore_record_result(struct jobstore *js, const char *id, int64_t attempt, json_t *result,
                           struct na_error *err);
/* Loop thread: the central API took the result (or said 404/409); does not wait. */
void jobstore_record_acked(struct jobstore *js, const char *id);

/* State of a job id; *result (when not NULL) receives a copy of the recorded Result. */
enum jobrec_state jobstore_get(struct jobstore *js, const char *id, json_t **result);
/* Results recorded and not yet accepted, oldest first. */
void jobstore_foreach_pending(struct jobstore *js, void (*fn)(void *userdata, const char *id, json_t *result),
                              void *userdata);
/* [{id, attempt, state: "interrupted" | "result-pending"}] for hello. */
json_t *jobstore_unfinished_json(struct jobstore *js);
void jobstore_get_stats(struct jobstore *js, struct jobstore_stats *out);
/* Make everything queued durable now (tests, shutdown). */
int jobstore_flush(struct jobstore *js, struct na_error *err);
