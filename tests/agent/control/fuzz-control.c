/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the control socket's lines (agent/control/control-request.c): the
 * input is what a client writes, cut at newlines as agent/control/control.c cuts it, and each
 * non-empty line goes through control_request_parse, then control_run_decode,
 * control_logs_decode or control_drain_decode as its cmd says. Contracts: no crash or leak; every refusal
 * can be sent (its message makes a JSON answer, as control.c builds it: a client
 * must never wait for an answer that could not be written); a run refusal is a
 * VALIDATION_ERROR with per-field details; what is accepted is within its bounds.
 * Built as a libFuzzer target by fuzz/CMakeLists.txt (scripts/fuzz.sh), and run
 * under CTest with gcc by tests/proto/fuzz-driver.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/control/control-request.h"
#include "common/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long refused, runs, runs_refused, logs, logs_refused, others;

#define CHECK(cond, ...)                                                               \
        do {                                                                           \
                if (!(cond)) {                                                         \
                        fprintf(stderr, "fuzz-control: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                                  \
                        fputc('\n', stderr);                                           \
                        abort();                                                       \
                }                                                                      \
        } while (0)

/* The answer control.c sends for a refusal must exist. */
static void check_answer(const struct na_error *err, bool details)
{
        json_t *d = details ? na_error_to_json(err) : json_null();
        json_t *o = json_pack("{s:b, s:s, s:O}", "ok", 0, "error", err->message, "details", d);
        CHECK(o, "no answer can carry the message \"%s\"", err->message);
        char *text = json_dumps(o, JSON_COMPACT);
        CHECK(text && !strchr(text, '\n'), "the answer is not one line");
        free(text);
        json_decref(o);
        json_decref(d);
}

static void one_line(const char *line, size_t len)
{
        struct na_error err = NA_ERROR_INIT;
        enum control_cmd cmd;
        json_t *req = NULL;
        if (control_request_parse(line, len, &cmd, &req, &err) < 0) {
                refused++;
                CHECK(!req && na_error_is_set(&err), "refused without a reason");
                check_answer(&err, false);
                na_error_clear(&err);
                return;
        }
        CHECK(req && json_is_object(req) && !na_error_is_set(&err), "accepted with an error set");
        if (cmd == CONTROL_CMD_RUN) {
                struct proto_job pj;
                if (control_run_decode(req, &pj, &err) == 0) {
                        runs++;
                        CHECK(!na_error_is_set(&err), "run accepted with an error set");
                        CHECK(pj.kind[0] && json_is_object(pj.params), "run without kind or params");
                        CHECK(pj.timeout_sec >= 1 && pj.timeout_sec <= PROTO_TIMEOUT_MAX_SEC, "timeout %lld",
                              (long long)pj.timeout_sec);
                        proto_job_clear(&pj);
                } else {
                        runs_refused++;
                        CHECK(!pj.params && streq(err.code, NA_E_VALIDATION), "run refused with %s: %s", err.code,
                              err.message);
                        check_answer(&err, true);
                }
        } else if (cmd == CONTROL_CMD_LOGS) {
                struct control_logs_request lr;
                if (control_logs_decode(req, &lr, &err) == 0) {
                        logs++;
                        CHECK(strlen(lr.app_id) == NA_UUID_STRLEN, "app id %s", lr.app_id);
                        CHECK(lr.since_seq >= -1 && lr.limit >= 1 && lr.limit <= 1000, "logs bounds");
                } else {
                        logs_refused++;
                        CHECK(streq(err.code, NA_E_VALIDATION), "logs refused with %s", err.code);
                        check_answer(&err, true);
                }
        } else if (cmd == CONTROL_CMD_DRAIN) {
                bool on;
                if (control_drain_decode(req, &on, &err) < 0) {
                        CHECK(streq(err.code, NA_E_VALIDATION), "drain refused with %s", err.code);
                        check_answer(&err, true);
                }
        } else
                others++;
        na_error_clear(&err);
        json_decref(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *start = (const char *)data, *end = start + size;
        while (start < end) {
                const char *nl = memchr(start, '\n', (size_t)(end - start));
                const char *stop = nl ? nl : end;
                if (stop > start)
                        one_line(start, (size_t)(stop - start));
                start = stop + 1;
        }
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "%lu lines refused, %lu runs (%lu refused), %lu logs (%lu refused), %lu status/jobs/apps\n",
                refused, runs, runs_refused, logs, logs_refused, others);
        return !refused || !runs || !runs_refused || !logs || !logs_refused || !others;
}
