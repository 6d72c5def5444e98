/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for what the controller sends: the input is tried as a Job on its
 * own (proto_job_decode) and as an answer body (proto_envelope_decode, then every job
 * of a data array, and Settings, lease and ack from a data object). Decoders must
 * never crash, leak or break their contract; a broken contract aborts with the
 * reason on stderr.
 *
 * Built two ways: with tests/proto/fuzz-driver.c (a plain main over a corpus and
 * seeded mutations, run by CTest with gcc), or with clang -fsanitize=fuzzer as a real
 * libFuzzer target (fuzz/CMakeLists.txt, run by scripts/fuzz.sh).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/uuid.h"
#include "proto/job.h"
#include "proto/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Counters for the driver's summary line. */
static unsigned long fuzz_jobs_valid, fuzz_jobs_invalid, fuzz_jobs_unanswerable, fuzz_envelopes;

int fuzz_summary(FILE *out);
int fuzz_summary(FILE *out)
{
        fprintf(out, "jobs %lu valid, %lu invalid, %lu unanswerable; %lu envelopes\n", fuzz_jobs_valid,
                fuzz_jobs_invalid, fuzz_jobs_unanswerable, fuzz_envelopes);
        return !fuzz_jobs_valid || !fuzz_jobs_invalid || !fuzz_jobs_unanswerable || !fuzz_envelopes;
}

#define CHECK(cond, ...)                                                  \
        do {                                                              \
                if (!(cond)) {                                            \
                        fprintf(stderr, "fuzz-job: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                     \
                        fputc('\n', stderr);                              \
                        abort();                                          \
                }                                                         \
        } while (0)

static void check_details_shape(json_t *node)
{
        CHECK(json_is_object(node), "a details node is not an object");
        CHECK(json_is_array(json_object_get(node, "_errors")), "a details node has no _errors array");
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
                if (streq(key, "_errors")) {
                        size_t i;
                        json_t *m;
                        json_array_foreach(v, i, m)
                                CHECK(json_is_string(m) && json_string_length(m) > 0, "an error message is not a string");
                } else
                        check_details_shape(v);
        }
}

static void job_one(json_t *in)
{
        struct proto_job job;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_job_decode(in, &job, &err);
        CHECK(r == 0 || r == -EINVAL || r == -EBADMSG, "returned %d", r);
        if (r == 0) {
                fuzz_jobs_valid++;
                CHECK(!na_error_is_set(&err), "success with an error set: %s", err.message);
                CHECK(na_uuid_valid(job.id), "id %s", job.id);
                CHECK(job.kind[0] && strlen(job.kind) <= PROTO_KIND_MAX, "kind");
                CHECK(job.attempt >= 1 && job.attempt <= INT32_MAX, "attempt %lld", (long long)job.attempt);
                CHECK(json_is_object(job.params), "params is not an object");
                CHECK(job.timeout_sec >= 1 && job.timeout_sec <= PROTO_TIMEOUT_MAX_SEC, "timeout");
                CHECK(job.target_type == PROTO_TARGET_NODE || na_uuid_valid(job.target_id), "target id %s", job.target_id);
                char *params = json_dumps(job.params, JSON_COMPACT);
                CHECK(params && strlen(params) <= PROTO_PARAMS_MAX, "params size");
                free(params);
                json_t *progress = proto_progress_encode(job.attempt, job.kind, 50, job.target_id);
                CHECK(progress != NULL, "progress encode");
                json_decref(progress);
                json_t *res = proto_result_encode(job.attempt, job.params, NULL, (uint64_t)job.created_at_ms, 1);
                CHECK(res != NULL, "result encode");
                json_decref(res);
        } else if (r == -EINVAL) {
                fuzz_jobs_invalid++;
                CHECK(na_error_is_set(&err) && streq(err.code, NA_E_VALIDATION), "invalid without VALIDATION_ERROR");
                CHECK(proto_id_answerable(job.id), "an invalid job must be answerable, id \"%s\"", job.id);
                CHECK(job.attempt >= 1, "attempt %lld", (long long)job.attempt);
                CHECK(job.params == NULL, "params held after a failure");
                check_details_shape(err.details);
                /* The failed result that would be posted for it. */
                json_t *res = proto_result_encode(job.attempt, NULL, &err, 0, 0);
                CHECK(res != NULL, "failed result encode");
                char *text = json_dumps(res, JSON_COMPACT);
                CHECK(text != NULL, "failed result dump");
                free(text);
                json_decref(res);
        } else {
                fuzz_jobs_unanswerable++;
                CHECK(na_error_is_set(&err), "unanswerable without an error");
                CHECK(job.params == NULL, "params held after a failure");
        }
        proto_job_clear(&job);
        na_error_clear(&err);
}

static void settings_one(json_t *data)
{
        struct proto_settings s;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_settings_decode(data, &s, &err);
        CHECK(r == 0 || r == -EINVAL, "settings returned %d", r);
        CHECK((r == 0) == !na_error_is_set(&err), "settings result and error disagree");
        CHECK(s.poll_wait_sec == -1 || (s.poll_wait_sec >= 1 && s.poll_wait_sec <= 60), "pollWaitSec");
        CHECK(s.max_jobs == -1 || (s.max_jobs >= 1 && s.max_jobs <= 256), "maxJobs");
        CHECK(s.lease_sec == -1 || (s.lease_sec >= 3 && s.lease_sec <= 86400), "leaseSec");
        CHECK(s.report_interval_sec == -1 || (s.report_interval_sec >= 1 && s.report_interval_sec <= 3600), "report");
        CHECK(s.metrics_interval_sec == -1 || (s.metrics_interval_sec >= 1 && s.metrics_interval_sec <= 3600), "metrics");
        if (r < 0)
                check_details_shape(err.details);
        na_error_clear(&err);

        int64_t v = 0;
        r = proto_lease_decode(data, &v, &err);
        CHECK(r <= 0 && (r == 0 || na_error_is_set(&err)), "lease");
        na_error_clear(&err);
        r = proto_ack_decode(data, &v, &err);
        CHECK(r < 0 || v >= 0, "ackSeq %lld", (long long)v);
        na_error_clear(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* As a Job on its own. */
        json_error_t jerr;
        json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
        if (doc) {
                job_one(doc);
                json_decref(doc);
        }

        /* As an answer envelope. */
        json_t *root = NULL;
        struct proto_envelope env;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_envelope_decode((const char *)data, size, &root, &env, &err);
        CHECK(r == 0 || r == -EBADMSG, "envelope returned %d", r);
        if (r == 0) {
                fuzz_envelopes++;
                CHECK(root && env.code && env.error, "envelope pointers");
                if (json_is_array(env.data)) {
                        size_t i;
                        json_t *item;
                        json_array_foreach(env.data, i, item)
                                job_one(item);
                } else
                        settings_one(env.data);
                json_decref(root);
        } else
                CHECK(root == NULL, "root set on failure");
        na_error_clear(&err);
        return 0;
}
