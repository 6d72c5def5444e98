/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/control/control-request.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/macro.h"
#include "proto/app-params.h"
#include "proto/decode.h"

static const char *const cmd_names[] = {
        [CONTROL_CMD_STATUS] = "status", [CONTROL_CMD_JOBS] = "jobs", [CONTROL_CMD_RUN] = "run",
        [CONTROL_CMD_APPS] = "apps",     [CONTROL_CMD_LOGS] = "logs", [CONTROL_CMD_DRAIN] = "drain",
};

const char *control_cmd_name(enum control_cmd cmd)
{
        return (size_t)cmd < ARRAY_SIZE(cmd_names) ? cmd_names[cmd] : "?";
}

int control_request_parse(const char *line, size_t len, enum control_cmd *ret_cmd, json_t **ret_req,
                          struct na_error *err)
{
        json_error_t jerr;
        _cleanup_json_ json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        /* jansson's text quotes the input near the error, cut anywhere: na_error_set keeps the message UTF-8. */
        if (!req || !json_is_object(req))
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "request is not a JSON object: %s",
                                    req ? "wrong type" : jerr.text);
        const char *cmd = json_string_value(json_object_get(req, "cmd"));
        if (!cmd)
                return na_error_set(err, EINVAL, NA_E_VALIDATION,
                                    "request has no \"cmd\" (status, jobs, run, apps, logs or drain)");
        for (size_t i = 0; i < ARRAY_SIZE(cmd_names); i++)
                if (streq(cmd, cmd_names[i])) {
                        *ret_cmd = (enum control_cmd)i;
                        *ret_req = TAKE_PTR(req);
                        return 0;
                }
        /* At most 64 bytes of it, cut before a UTF-8 lead byte: the answer is JSON, a cut sequence could not be sent. */
        size_t shown = strlen(cmd);
        if (shown > 64)
                for (shown = 64; shown > 0 && ((unsigned char)cmd[shown] & 0xc0) == 0x80; shown--)
                        ;
        return na_error_set(err, EINVAL, NA_E_VALIDATION, "unknown cmd \"%.*s\" (status, jobs, run, apps, logs or drain)",
                            (int)shown, cmd);
}

int control_run_decode(json_t *req, struct proto_job *pj, struct na_error *err)
{
        const char *kind = NULL;
        json_t *target = NULL, *params = NULL;

        memset(pj, 0, sizeof(*pj));
        proto_string(req, NULL, "kind", PROTO_REQUIRED, 1, PROTO_KIND_MAX, &kind, err);
        proto_object(req, NULL, "params", 0, &params, err);
        pj->timeout_sec = PROTO_TIMEOUT_DEFAULT_SEC;
        proto_int(req, NULL, "timeoutSec", 0, 1, PROTO_TIMEOUT_MAX_SEC, &pj->timeout_sec, err);
        if (proto_object(req, NULL, "target", 0, &target, err) == PROTO_PRESENT) {
                int type = 0;
                const char *id = NULL;
                proto_enum(target, "target", "type", PROTO_REQUIRED, proto_target_types, &type, err);
                proto_string(target, "target", "id", 0, 1, PROTO_ID_MAX, &id, err);
                pj->target_type = (enum proto_target_type)type;
                snprintf(pj->target_id, sizeof(pj->target_id), "%s", id ? id : "");
        }
        if (na_error_is_set(err)) {
                memset(pj, 0, sizeof(*pj));
                return -EINVAL;
        }
        snprintf(pj->kind, sizeof(pj->kind), "%s", kind);
        pj->params = params ? json_deep_copy(params) : json_object();
        if (!pj->params)
                return na_error_sys(err, ENOMEM, "run: params");
        return 0;
}

int control_logs_decode(json_t *req, struct control_logs_request *ret, struct na_error *err)
{
        const char *id = NULL;
        ret->since_seq = -1;
        ret->limit = PROTO_APP_OUTPUT_LIMIT_DEFAULT;
        proto_uuid(req, NULL, "app", PROTO_REQUIRED, &id, err);
        proto_int(req, NULL, "sinceSeq", 0, 0, INT64_MAX, &ret->since_seq, err);
        proto_int(req, NULL, "limit", 0, 1, PROTO_APP_OUTPUT_LIMIT_MAX, &ret->limit, err);
        if (na_error_is_set(err)) {
                na_error_prefix(err, "logs");
                return -EINVAL;
        }
        snprintf(ret->app_id, sizeof(ret->app_id), "%s", id);
        return 0;
}

int control_drain_decode(json_t *req, bool *ret_on, struct na_error *err)
{
        bool on = true;
        int r = proto_bool(req, NULL, "on", 0, &on, err);
        if (r < 0)
                return r;
        *ret_on = on;
        return 0;
}
