/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "proto/wire.h"

#include <stddef.h>
#include <string.h>

#include "common/timeutil.h"
#include "proto/decode.h"

const char *const proto_event_types[] = { "vps.state", "app.state", "app.exited", "exposure.verified",
                                          "backup.finished", "firewall.drift", NULL };

int proto_envelope_decode(const char *body, size_t len, json_t **root, struct proto_envelope *env,
                          struct na_error *err)
{
        memset(env, 0, sizeof(*env));
        *root = NULL;
        json_error_t jerr;
        json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc)
                return na_error_set(err, EBADMSG, NA_E_VALIDATION, "answer is not JSON: %s (line %d)", jerr.text,
                                    jerr.line);
        if (!json_is_object(doc)) {
                json_decref(doc);
                return na_error_set(err, EBADMSG, NA_E_VALIDATION, "answer is not a JSON object");
        }
        json_t *success = json_object_get(doc, "success");
        if (!json_is_boolean(success)) {
                json_decref(doc);
                return na_error_set(err, EBADMSG, NA_E_VALIDATION, "answer has no boolean \"success\"");
        }
        env->success = json_is_true(success);
        env->data = json_object_get(doc, "data");
        json_t *code = json_object_get(doc, "code"), *msg = json_object_get(doc, "error");
        env->code = json_is_string(code) ? json_string_value(code) : "";
        env->error = json_is_string(msg) ? json_string_value(msg) : "";
        env->details = json_object_get(doc, "details");
        *root = doc;
        return 0;
}

json_t *proto_host_encode(const struct proto_host *h)
{
        return json_pack("{s:s, s:s, s:I, s:I, s:s}", "hostname", h->hostname ? h->hostname : "", "kernel",
                         h->kernel ? h->kernel : "", "cpus", (json_int_t)h->cpus, "memoryMB", (json_int_t)h->memory_mb,
                         "cgroup", h->cgroup ? h->cgroup : "v2");
}

json_t *proto_hello_encode(const char *agent_version, const char *boot_id, const struct proto_host *host,
                           json_t *capabilities, json_t *inventory, json_t *unfinished)
{
        return json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:o}", "agentVersion", agent_version, "protocol", PROTO_VERSION,
                         "bootId", boot_id ? boot_id : "", "host", proto_host_encode(host), "capabilities",
                         capabilities ? capabilities : json_object(), "inventory",
                         inventory ? inventory : json_pack("{s:[], s:[]}", "vps", "apps"), "unfinishedJobs",
                         unfinished ? unfinished : json_array());
}

int proto_settings_decode(json_t *data, struct proto_settings *out, struct na_error *err)
{
        static const struct {
                const char *key;
                size_t off;
                int64_t min, max;
        } fields[] = {
                { "pollWaitSec", offsetof(struct proto_settings, poll_wait_sec), 1, 60 },
                { "maxJobs", offsetof(struct proto_settings, max_jobs), 1, 256 },
                { "leaseSec", offsetof(struct proto_settings, lease_sec), 3, 86400 },
                { "reportIntervalSec", offsetof(struct proto_settings, report_interval_sec), 1, 3600 },
                { "metricsIntervalSec", offsetof(struct proto_settings, metrics_interval_sec), 1, 3600 },
        };
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
                *(int64_t *)((char *)out + fields[i].off) = -1;
        out->exchange = -1;
        if (!data || json_is_null(data))
                return 0;
        if (!json_is_object(data))
                return na_error_field(err, NULL, "settings must be an object");
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                int64_t v;
                if (proto_int(data, NULL, fields[i].key, 0, fields[i].min, fields[i].max, &v, err) == PROTO_PRESENT)
                        *(int64_t *)((char *)out + fields[i].off) = v;
        }
        bool exchange;
        if (proto_bool(data, NULL, "exchange", 0, &exchange, err) == PROTO_PRESENT)
                out->exchange = exchange;
        return na_error_is_set(err) ? -EINVAL : 0;
}

int proto_lease_decode(json_t *data, int64_t *lease_expires_ms, struct na_error *err)
{
        *lease_expires_ms = 0;
        int r = proto_time(data, NULL, "leaseExpiresAt", 0, lease_expires_ms, err);
        return r < 0 ? r : 0;
}

int proto_ack_decode(json_t *data, int64_t *ack_seq, struct na_error *err)
{
        int r = proto_int(data, NULL, "ackSeq", PROTO_REQUIRED, 0, INT64_MAX, ack_seq, err);
        return r < 0 ? r : 0;
}

json_t *proto_event_encode(const char *type, const char *target_id, uint64_t at_ms, json_t *data)
{
        char at[40];
        return json_pack("{s:s, s:s, s:s, s:o}", "type", type, "targetId", target_id, "at",
                         na_format_time_ms(at_ms, at, sizeof(at)), "data", data ? data : json_object());
}

json_t *proto_report_encode(int64_t seq, uint64_t sent_ms, json_t *metrics, json_t *events)
{
        char at[40];
        return json_pack("{s:I, s:s, s:o, s:o}", "seq", (json_int_t)seq, "sentAt",
                         na_format_time_ms(sent_ms, at, sizeof(at)), "metrics",
                         metrics ? json_incref(metrics) : json_array(), "events",
                         events ? json_incref(events) : json_array());
}
