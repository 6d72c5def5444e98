/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metrics on the wire (agent API 5.1): the params of vps.metrics and app.metrics
 * ({from?, to?, step?}), the Sample, and the Metrics answer. No I/O, no logging.
 *
 * History tiers (shared with metrics/history.c, which stores them):
 *   tier 0: 10 s buckets for 1 hour     (360 buckets)
 *   tier 1: 1 min buckets for 24 hours  (1440 buckets)
 *   tier 2: 15 min buckets for 30 days  (2880 buckets)
 *
 * Query rules (decided here, where the contract leaves room):
 *  - to defaults to now, from to `to` - 1 h; both are RFC 3339 date-times.
 *  - from after to: VALIDATION_ERROR on "from"; to - from over 30 days:
 *    VALIDATION_ERROR on "from".
 *  - The tier is the finest whose retention reaches back to `from` (from >= now -
 *    retention); a `from` older than 30 days uses the 15 min tier (and finds nothing
 *    there for the part that has expired).
 *  - Without step: the smallest multiple of that tier's resolution that covers
 *    from..to in at most 1000 points (24 h from the 1 min tier is step 120).
 *  - With step: it must be an integer >= 10 and a multiple of 10 (VALIDATION_ERROR
 *    on "step" otherwise), a multiple of the tier's resolution (so every point is
 *    made of whole buckets; "step must be a multiple of 60 for history older than
 *    1 hour"), and give at most 1000 points. Anything else is a VALIDATION_ERROR on
 *    "step" that names the reason.
 *  - Points are aligned to multiples of step since the epoch; a point's `at` is the
 *    start of its interval; intervals without any data are left out (no nulls).
 *  - Keys other than from, to and step are ignored (forward compatible).
 *
 * Series points: a Sample without targetId whose values are the averages over the
 * point's interval, plus the maximum of each varying value under the same name with
 * "Max" appended: cpuPercentMax, memoryUsedMBMax, diskReadBpsMax, diskWriteBpsMax,
 * netRxBpsMax, netTxBpsMax (memoryLimitMB has no max). A value that was not measured
 * in an interval is absent, as in a Sample.
 *
 * Units: cpuPercent is 0..100 with two decimals (node: of all CPUs; guest: of its
 * vCPUs); memoryUsedMB/memoryLimitMB are MiB (1048576 bytes), rounded; *Bps are
 * bytes per second, rounded.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_METRICS_TIERS 3
#define PROTO_METRICS_MAX_POINTS 1000
#define PROTO_METRICS_MIN_STEP 10
#define PROTO_METRICS_DEFAULT_RANGE_MS (3600LL * 1000)
#define PROTO_METRICS_MAX_RANGE_MS (30LL * 86400 * 1000)

struct proto_metrics_tier {
        uint32_t res_sec; /* bucket width */
        uint32_t slots;   /* buckets kept: retention = res_sec * slots */
};
extern const struct proto_metrics_tier proto_metrics_tiers[PROTO_METRICS_TIERS];

/* The values of a Sample, in wire order. */
enum proto_metric {
        PROTO_M_CPU_PERCENT,
        PROTO_M_MEMORY_USED_MB,
        PROTO_M_MEMORY_LIMIT_MB,
        PROTO_M_DISK_READ_BPS,
        PROTO_M_DISK_WRITE_BPS,
        PROTO_M_NET_RX_BPS,
        PROTO_M_NET_TX_BPS,
        PROTO_M__COUNT
};
extern const char *const proto_metric_names[PROTO_M__COUNT];     /* "cpuPercent", ... */
extern const char *const proto_metric_max_names[PROTO_M__COUNT]; /* "cpuPercentMax", ...; NULL: no max */
#define PROTO_M_BIT(f) (1u << (f))
#define PROTO_M_ALL ((1u << PROTO_M__COUNT) - 1)

/* A Sample: valid has PROTO_M_BIT(f) set for every value that was measured. */
struct proto_metrics_sample {
        uint64_t at_ms;
        uint32_t valid;
        double v[PROTO_M__COUNT];
};

/* A series point: averages and maxima over [at, at + step). */
struct proto_metrics_point {
        uint64_t at_ms;
        uint32_t valid; /* the averages present; a max is present with its average */
        double avg[PROTO_M__COUNT];
        double max[PROTO_M__COUNT];
};

/* A resolved query: every field is filled, defaults applied, tier and step chosen. */
struct proto_metrics_query {
        int64_t now_ms;
        int64_t from_ms;
        int64_t to_ms;
        uint32_t step_sec;
        unsigned tier;
};

/*
 * Decode vps.metrics / app.metrics params against the clock value now_ms. Every
 * field is read before failing; problems are VALIDATION_ERROR with per-field
 * _errors. params may be NULL (all defaults).
 */
int proto_metrics_query_decode(json_t *params, int64_t now_ms, struct proto_metrics_query *out,
                               struct na_error *err);

/* The finest tier whose retention reaches from_ms, seen at now_ms. */
unsigned proto_metrics_tier_for(int64_t from_ms, int64_t now_ms);
/* Points a query from..to gives at step (aligned intervals touched). */
int64_t proto_metrics_point_count(int64_t from_ms, int64_t to_ms, uint32_t step_sec);

/* Sample; target_id NULL leaves targetId out. NULL only when out of memory. */
json_t *proto_metrics_sample_encode(const char *target_id, const struct proto_metrics_sample *s);
/* Series point: a Sample without targetId plus the *Max values. */
json_t *proto_metrics_point_encode(const struct proto_metrics_point *p);
/* Metrics: {now: Sample, series: {step, points: [...]}}. */
json_t *proto_metrics_encode(const char *target_id, const struct proto_metrics_sample *now, uint32_t step_sec,
                             const struct proto_metrics_point *points, size_t n_points);
