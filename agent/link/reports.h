/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The report outbox (agent API 5): reports get consecutive seq numbers that survive
 * restarts; a report stays in the outbox, and in <state_dir>/reports.journal, until
 * the central API acknowledges its seq. Through an outage the outbox grows; past
 * REPORTS_METRICS_MAX_BYTES of metrics, the oldest reports lose their metrics first.
 * Events are never dropped. A report left with neither is dropped whole (seq then
 * has a gap, which the central API accepts: it only drops a seq it has seen).
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"

#define REPORTS_METRICS_MAX_BYTES (8u << 20)

struct reports;

struct reports_stats {
        uint64_t pending;        /* reports not yet acknowledged */
        uint64_t metrics_bytes;  /* serialized metrics held */
        uint64_t events_queued;  /* events waiting for the next report */
        uint64_t metrics_dropped;/* reports whose metrics were dropped for the bound */
        int64_t next_seq;
};

int reports_open(const char *state_dir, struct reports **ret, struct na_error *err);
void reports_close(struct reports *r);

/* Any thread: queue an event (stolen) for the next report. */
void reports_add_event(struct reports *r, json_t *event);
uint64_t reports_events_queued(struct reports *r);

/*
 * Loop thread: seal a report from the queued events and metrics (a borrowed array,
 * may be NULL). Returns its seq, or 0 when there was nothing to send.
 */
int64_t reports_seal(struct reports *r, json_t *metrics);
/* Loop thread: the body of the oldest unacknowledged report (caller frees), or NULL. */
char *reports_oldest_body(struct reports *r, uint64_t sent_ms, int64_t *seq);
/* Loop thread: everything up to ack_seq is acknowledged. */
void reports_ack(struct reports *r, int64_t ack_seq);
void reports_get_stats(struct reports *r, struct reports_stats *out);
int reports_flush(struct reports *r, struct na_error *err);
