/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The Job object (agent API 3.1), and the Progress (3.3) and Result (3.4) it produces. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_ID_MAX 64
#define PROTO_KIND_MAX 64
#define PROTO_PARAMS_MAX (6u << 20)      /* serialized params above this are refused: app.files.write carries 4 MiB as base64 */
#define PROTO_PARAMS_DEPTH_MAX 32         /* params nested deeper are refused: the contract's nest 4 levels */
#define PROTO_TIMEOUT_DEFAULT_SEC 3600   /* when a job carries no timeoutSec */
#define PROTO_TIMEOUT_MAX_SEC (7 * 86400)

enum proto_target_type { PROTO_TARGET_NODE, PROTO_TARGET_VPS, PROTO_TARGET_APP };
extern const char *const proto_target_types[]; /* "node", "vps", "app", NULL */

struct proto_job {
        char id[PROTO_ID_MAX + 1];
        char kind[PROTO_KIND_MAX + 1];
        int64_t attempt;
        enum proto_target_type target_type;
        char target_id[PROTO_ID_MAX + 1];
        json_t *params; /* owned reference; an empty object when the job had none */
        int64_t created_at_ms;
        int64_t lease_expires_at_ms; /* 0 when absent */
        int64_t timeout_sec;
};

/*
 * Decode and validate a Job. Returns 0, or:
 *  -EINVAL: invalid, err holds VALIDATION_ERROR and out->id (and attempt, when it
 *           could be read) are filled, so a failed result can be posted for it;
 *  -EBADMSG: not even an id that could be answered; the job cannot be answered.
 */
int proto_job_decode(json_t *in, struct proto_job *out, struct na_error *err);
void proto_job_clear(struct proto_job *job);

/* Whether s can be used as a job id in a URL path: 1..64 of [A-Za-z0-9._-]. */
bool proto_id_answerable(const char *s);

/* Progress: stage may be NULL, percent < 0 means absent, message may be NULL. */
json_t *proto_progress_encode(int64_t attempt, const char *stage, int percent, const char *message);

/* Result: failure NULL means succeeded with data (borrowed; NULL gives {}). */
json_t *proto_result_encode(int64_t attempt, json_t *data, const struct na_error *failure, uint64_t finished_ms,
                            uint64_t duration_ms);
