/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The envelopes and the node-level messages of the agent API: Hello, Settings, Report. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_VERSION 1

/* A decoded answer envelope; pointers borrow from root. */
struct proto_envelope {
        bool success;
        json_t *data;        /* success: data (may be JSON null) */
        const char *code;    /* failure: code, "" when missing */
        const char *error;   /* failure: message, "" when missing */
        json_t *details;
};

/* Parse body as an envelope. *root receives the parsed document (caller decrefs). */
int proto_envelope_decode(const char *body, size_t len, json_t **root, struct proto_envelope *env,
                          struct na_error *err);

/* Host facts, as in hello and node.status. */
struct proto_host {
        const char *hostname;
        const char *kernel;
        int64_t cpus;
        int64_t memory_mb;
        const char *cgroup; /* "v1", "v2", "hybrid" or "none" */
};
json_t *proto_host_encode(const struct proto_host *h);

/* Hello (2.1). capabilities, inventory and unfinished are stolen. */
json_t *proto_hello_encode(const char *agent_version, const char *boot_id, const struct proto_host *host,
                           json_t *capabilities, json_t *inventory, json_t *unfinished);

/* Settings (2.2); -1 marks a field the answer did not carry. */
struct proto_settings {
        int64_t poll_wait_sec;
        int64_t max_jobs;
        int64_t lease_sec;
        int64_t report_interval_sec;
        int64_t metrics_interval_sec;
        int exchange; /* 1 or 0: "exchange" (2.3) as given; -1 absent */
};
/*
 * Decode Settings. A field of the wrong type or out of range is reported in err
 * and left at -1 (the agent keeps its own value); the others still apply.
 */
int proto_settings_decode(json_t *data, struct proto_settings *out, struct na_error *err);

/* Progress answer {leaseExpiresAt}; report answer {ackSeq}. */
int proto_lease_decode(json_t *data, int64_t *lease_expires_ms, struct na_error *err);
int proto_ack_decode(json_t *data, int64_t *ack_seq, struct na_error *err);

/* Event (5): type one of proto_event_types; data is stolen (NULL gives {}). */
extern const char *const proto_event_types[];
json_t *proto_event_encode(const char *type, const char *target_id, uint64_t at_ms, json_t *data);
/* Report (5): metrics and events are borrowed arrays. */
json_t *proto_report_encode(int64_t seq, uint64_t sent_ms, json_t *metrics, json_t *events);
