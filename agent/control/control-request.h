/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The control socket's request lines (agent/control/control.h lists them), decoded without a
 * socket: agent/control/control.c reads a line and hands it here, then acts on what comes
 * back; the fuzz target tests/agent/control/fuzz-control.c feeds lines straight in.
 *
 *   enum control_cmd cmd;
 *   _cleanup_json_ json_t *req = NULL;
 *   if (control_request_parse(line, len, &cmd, &req, &err) < 0)
 *           answer {"ok":false,"error":err.message};
 *   else if (cmd == CONTROL_CMD_RUN && control_run_decode(req, &pj, &err) < 0)
 *           answer {"ok":false,"error":err.message,"details":<err as JSON>};
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/uuid.h"
#include "proto/job.h"

enum control_cmd {
        CONTROL_CMD_STATUS,
        CONTROL_CMD_JOBS,
        CONTROL_CMD_RUN,
        CONTROL_CMD_APPS,
        CONTROL_CMD_LOGS,
        CONTROL_CMD_DRAIN,
};

/* "status", "jobs", ... */
const char *control_cmd_name(enum control_cmd cmd);

/*
 * One request line (len bytes, no newline): a JSON object with a known "cmd".
 * Returns 0 with *ret_cmd and *ret_req (a new reference); < 0 (-EINVAL) with err's
 * message saying what is wrong (not JSON, not an object, no cmd, unknown cmd).
 */
int control_request_parse(const char *line, size_t len, enum control_cmd *ret_cmd, json_t **ret_req,
                          struct na_error *err);

/*
 * A run request's fields into pj: kind, target, timeoutSec (default
 * PROTO_TIMEOUT_DEFAULT_SEC) and params (a copy; an empty object when absent). The
 * job's id, attempt and creation time are the caller's. On failure
 * VALIDATION_ERROR with the fields in err's details, and pj holds nothing.
 */
int control_run_decode(json_t *req, struct proto_job *pj, struct na_error *err);

/* A logs request: app (a UUID), sinceSeq (-1 when absent), limit (default and bound of app.output). */
struct control_logs_request {
        char app_id[NA_UUID_STRLEN + 1];
        int64_t since_seq;
        int64_t limit;
};
int control_logs_decode(json_t *req, struct control_logs_request *ret, struct na_error *err);

/* A drain request: "on" (a boolean, default true; false ends the drain). */
int control_drain_decode(json_t *req, bool *ret_on, struct na_error *err);
