/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "proto/job.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"
#include "proto/decode.h"

const char *const proto_target_types[] = { "node", "vps", "app", NULL };

bool proto_id_answerable(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > PROTO_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return !streq(s, ".") && !streq(s, "..");
}

void proto_job_clear(struct proto_job *job)
{
        if (job->params)
                json_decref(job->params);
        memset(job, 0, sizeof(*job));
}

/*
 * The first string (value or key) holding a NUL anywhere below v, as a field path
 * relative to the params as every kind's own errors are ("env.X", not "params.env.X",
 * which a public caller would not recognise); the document is parsed with
 * JSON_ALLOW_NUL so that such a job can be answered on that field instead of making
 * the whole poll answer unreadable.
 */
static bool find_nul(json_t *v, const char *path, char *buf, size_t len)
{
        if (json_is_string(v)) {
                if (strlen(json_string_value(v)) != json_string_length(v)) {
                        snprintf(buf, len, "%s", path);
                        return true;
                }
                return false;
        }
        char sub[256];
        if (json_is_object(v)) {
                const char *k;
                size_t klen;
                json_t *x;
                void *tmp;
                json_object_keylen_foreach_safe(v, tmp, k, klen, x) {
                        snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", k);
                        if (strlen(k) != klen) {
                                snprintf(buf, len, "%s", sub);
                                return true;
                        }
                        if (find_nul(x, sub, buf, len))
                                return true;
                }
        } else if (json_is_array(v)) {
                size_t i;
                json_t *x;
                json_array_foreach(v, i, x) {
                        snprintf(sub, sizeof(sub), "%s%s%zu", path, *path ? "." : "", i);
                        if (find_nul(x, sub, buf, len))
                                return true;
                }
        }
        return false;
}

/* Whether v holds arrays or objects nested more than max levels deep (recursion stops at max + 1). */
static bool nests_deeper(json_t *v, unsigned max)
{
        if (!json_is_object(v) && !json_is_array(v))
                return false;
        if (max == 0)
                return true;
        json_t *x;
        if (json_is_object(v)) {
                const char *k;
                json_object_foreach(v, k, x)
                        if (nests_deeper(x, max - 1))
                                return true;
        } else {
                size_t i;
                json_array_foreach(v, i, x)
                        if (nests_deeper(x, max - 1))
                                return true;
        }
        return false;
}

int proto_job_decode(json_t *in, struct proto_job *out, struct na_error *err)
{
        char nul_path[256];
        memset(out, 0, sizeof(*out));
        if (!json_is_object(in)) {
                na_error_field(err, NULL, "a job must be a JSON object");
                return -EBADMSG;
        }
        json_t *id = json_object_get(in, "id");
        if (!json_is_string(id) || !proto_id_answerable(json_string_value(id))) {
                na_error_field(err, "id", "must be a UUID");
                return -EBADMSG;
        }
        snprintf(out->id, sizeof(out->id), "%s", json_string_value(id));
        proto_uuid(in, NULL, "id", PROTO_REQUIRED, NULL, err);

        const char *kind = NULL;
        if (proto_string(in, NULL, "kind", PROTO_REQUIRED, 1, PROTO_KIND_MAX, &kind, err) == PROTO_PRESENT)
                snprintf(out->kind, sizeof(out->kind), "%s", kind);
        proto_int(in, NULL, "attempt", PROTO_REQUIRED, 1, INT32_MAX, &out->attempt, err);

        json_t *target = NULL;
        if (proto_object(in, NULL, "target", PROTO_REQUIRED, &target, err) == PROTO_PRESENT) {
                int type = 0;
                if (proto_enum(target, "target", "type", PROTO_REQUIRED, proto_target_types, &type, err) == PROTO_PRESENT) {
                        out->target_type = (enum proto_target_type)type;
                        const char *tid = NULL;
                        int r = type == PROTO_TARGET_NODE
                                        ? proto_string(target, "target", "id", 0, 1, PROTO_ID_MAX, &tid, err)
                                        : proto_uuid(target, "target", "id", PROTO_REQUIRED, &tid, err);
                        if (r == PROTO_PRESENT)
                                snprintf(out->target_id, sizeof(out->target_id), "%s", tid);
                }
        }

        json_t *params = json_object_get(in, "params");
        if (!params || json_is_null(params))
                out->params = json_object();
        else if (!json_is_object(params))
                na_error_field(err, "params", "must be an object");
        else if (nests_deeper(params, PROTO_PARAMS_DEPTH_MAX))
                na_error_field(err, "params", "must not nest arrays and objects more than %d levels deep",
                               PROTO_PARAMS_DEPTH_MAX);
        else if (json_dumpb(params, NULL, 0, JSON_COMPACT) > PROTO_PARAMS_MAX)
                na_error_field(err, "params", "must be at most %u bytes", PROTO_PARAMS_MAX);
        else if (find_nul(params, "", nul_path, sizeof(nul_path)))
                na_error_field(err, nul_path, "must not contain NUL characters");
        else
                out->params = json_incref(params);

        proto_time(in, NULL, "createdAt", PROTO_REQUIRED, &out->created_at_ms, err);
        proto_time(in, NULL, "leaseExpiresAt", 0, &out->lease_expires_at_ms, err);
        out->timeout_sec = PROTO_TIMEOUT_DEFAULT_SEC;
        proto_int(in, NULL, "timeoutSec", 0, 1, PROTO_TIMEOUT_MAX_SEC, &out->timeout_sec, err);

        if (na_error_is_set(err)) {
                if (out->params) {
                        json_decref(out->params);
                        out->params = NULL;
                }
                if (out->attempt < 1)
                        out->attempt = 1;
                return -EINVAL;
        }
        return 0;
}

json_t *proto_progress_encode(int64_t attempt, const char *stage, int percent, const char *message)
{
        json_t *o = json_pack("{s:I}", "attempt", (json_int_t)attempt);
        if (stage)
                json_object_set_new(o, "stage", json_string(stage));
        if (percent >= 0)
                json_object_set_new(o, "percent", json_integer(percent > 100 ? 100 : percent));
        if (message && *message)
                json_object_set_new(o, "message", json_string(message));
        return o;
}

json_t *proto_result_encode(int64_t attempt, json_t *data, const struct na_error *failure, uint64_t finished_ms,
                            uint64_t duration_ms)
{
        char at[40];
        na_format_time_ms(finished_ms, at, sizeof(at));
        json_t *o = json_pack("{s:I, s:s, s:s, s:I}", "attempt", (json_int_t)attempt, "status",
                              failure ? "failed" : "succeeded", "finishedAt", at, "durationMs",
                              (json_int_t)duration_ms);
        if (failure)
                json_object_set_new(o, "error", na_error_to_json(failure));
        else
                json_object_set_new(o, "data", data ? json_incref(data) : json_object());
        return o;
}
