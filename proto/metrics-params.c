/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "proto/metrics-params.h"

#include <math.h>
#include <stdio.h>

#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/decode.h"

const struct proto_metrics_tier proto_metrics_tiers[PROTO_METRICS_TIERS] = {
        { .res_sec = 10, .slots = 360 },   /* 1 hour */
        { .res_sec = 60, .slots = 1440 },  /* 24 hours */
        { .res_sec = 900, .slots = 2880 }, /* 30 days */
};

const char *const proto_metric_names[PROTO_M__COUNT] = {
        [PROTO_M_CPU_PERCENT] = "cpuPercent",     [PROTO_M_MEMORY_USED_MB] = "memoryUsedMB",
        [PROTO_M_MEMORY_LIMIT_MB] = "memoryLimitMB", [PROTO_M_DISK_READ_BPS] = "diskReadBps",
        [PROTO_M_DISK_WRITE_BPS] = "diskWriteBps", [PROTO_M_NET_RX_BPS] = "netRxBps",
        [PROTO_M_NET_TX_BPS] = "netTxBps",
};

const char *const proto_metric_max_names[PROTO_M__COUNT] = {
        [PROTO_M_CPU_PERCENT] = "cpuPercentMax",   [PROTO_M_MEMORY_USED_MB] = "memoryUsedMBMax",
        [PROTO_M_MEMORY_LIMIT_MB] = NULL,          [PROTO_M_DISK_READ_BPS] = "diskReadBpsMax",
        [PROTO_M_DISK_WRITE_BPS] = "diskWriteBpsMax", [PROTO_M_NET_RX_BPS] = "netRxBpsMax",
        [PROTO_M_NET_TX_BPS] = "netTxBpsMax",
};

static int64_t floor_div(int64_t a, int64_t b)
{
        int64_t q = a / b;
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

unsigned proto_metrics_tier_for(int64_t from_ms, int64_t now_ms)
{
        for (unsigned k = 0; k < PROTO_METRICS_TIERS; k++) {
                int64_t retention_ms = (int64_t)proto_metrics_tiers[k].res_sec * proto_metrics_tiers[k].slots * 1000;
                if (from_ms >= now_ms - retention_ms)
                        return k;
        }
        return PROTO_METRICS_TIERS - 1;
}

int64_t proto_metrics_point_count(int64_t from_ms, int64_t to_ms, uint32_t step_sec)
{
        if (step_sec == 0 || to_ms < from_ms)
                return 0;
        int64_t step_ms = (int64_t)step_sec * 1000;
        return floor_div(to_ms, step_ms) - floor_div(from_ms, step_ms) + 1;
}

static uint32_t auto_step(int64_t from_ms, int64_t to_ms, uint32_t res)
{
        int64_t range_s = (to_ms - from_ms + 999) / 1000;
        int64_t units = (range_s + (int64_t)res * PROTO_METRICS_MAX_POINTS - 1) / ((int64_t)res * PROTO_METRICS_MAX_POINTS);
        uint32_t step = (uint32_t)(units < 1 ? 1 : units) * res;
        while (proto_metrics_point_count(from_ms, to_ms, step) > PROTO_METRICS_MAX_POINTS)
                step += res;
        return step;
}

int proto_metrics_query_decode(json_t *params, int64_t now_ms, struct proto_metrics_query *out,
                               struct na_error *err)
{
        int64_t from = 0, to = 0, step = 0;

        *out = (struct proto_metrics_query){ .now_ms = now_ms };
        if (params && !json_is_object(params) && !json_is_null(params))
                return na_error_field(err, NULL, "params must be an object");

        int rf = proto_time(params, NULL, "from", 0, &from, err);
        int rt = proto_time(params, NULL, "to", 0, &to, err);
        int rs = proto_int(params, NULL, "step", 0, INT64_MIN, INT64_MAX, &step, err);

        bool range_ok = rf >= 0 && rt >= 0;
        if (range_ok) {
                if (rt != PROTO_PRESENT)
                        to = now_ms;
                if (rf != PROTO_PRESENT)
                        from = to - PROTO_METRICS_DEFAULT_RANGE_MS;
                if (from > to) {
                        na_error_field(err, "from", "must not be after to");
                        range_ok = false;
                } else if (to - from > PROTO_METRICS_MAX_RANGE_MS) {
                        na_error_field(err, "from", "must be at most 30 days before to");
                        range_ok = false;
                }
        }

        bool step_ok = rs >= 0;
        if (rs == PROTO_PRESENT) {
                if (step < PROTO_METRICS_MIN_STEP) {
                        na_error_field(err, "step", "must be at least %d seconds", PROTO_METRICS_MIN_STEP);
                        step_ok = false;
                } else if (step > PROTO_METRICS_MAX_RANGE_MS / 1000) {
                        na_error_field(err, "step", "must be at most %lld seconds",
                                       (long long)(PROTO_METRICS_MAX_RANGE_MS / 1000));
                        step_ok = false;
                } else if (step % 10 != 0) {
                        na_error_field(err, "step", "must be a multiple of 10 seconds");
                        step_ok = false;
                }
        }

        if (range_ok) {
                unsigned tier = proto_metrics_tier_for(from, now_ms);
                uint32_t res = proto_metrics_tiers[tier].res_sec;
                out->from_ms = from;
                out->to_ms = to;
                out->tier = tier;
                if (rs != PROTO_PRESENT) {
                        out->step_sec = auto_step(from, to, res);
                } else if (step_ok) {
                        int64_t points = proto_metrics_point_count(from, to, (uint32_t)step);
                        if (step % res != 0)
                                na_error_field(err, "step",
                                               "must be a multiple of %u seconds: history from %s back is kept in "
                                               "%u s buckets",
                                               res, tier == 1 ? "1 hour" : "24 hours", res);
                        else if (points > PROTO_METRICS_MAX_POINTS)
                                na_error_field(err, "step",
                                               "gives %lld points from..to; at most %d: use a larger step or a "
                                               "shorter range",
                                               (long long)points, PROTO_METRICS_MAX_POINTS);
                        else
                                out->step_sec = (uint32_t)step;
                }
        }

        if (na_error_is_set(err))
                return -EINVAL;
        return 0;
}

static json_t *value_json(enum proto_metric f, double v)
{
        if (v < 0)
                v = 0;
        if (f == PROTO_M_CPU_PERCENT)
                return json_real(round(v * 100.0) / 100.0);
        return json_integer((json_int_t)llround(v));
}

static int put_time(json_t *obj, uint64_t at_ms)
{
        char buf[40];
        return json_object_set_new(obj, "at", json_string(na_format_time_ms(at_ms, buf, sizeof(buf))));
}

json_t *proto_metrics_sample_encode(const char *target_id, const struct proto_metrics_sample *s)
{
        _cleanup_json_ json_t *o = json_object();
        if (!o)
                return NULL;
        if (target_id && json_object_set_new(o, "targetId", json_string(target_id)) < 0)
                return NULL;
        if (put_time(o, s->at_ms) < 0)
                return NULL;
        for (int f = 0; f < PROTO_M__COUNT; f++)
                if ((s->valid & PROTO_M_BIT(f)) && isfinite(s->v[f]) &&
                    json_object_set_new(o, proto_metric_names[f], value_json(f, s->v[f])) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

json_t *proto_metrics_point_encode(const struct proto_metrics_point *p)
{
        _cleanup_json_ json_t *o = json_object();
        if (!o || put_time(o, p->at_ms) < 0)
                return NULL;
        for (int f = 0; f < PROTO_M__COUNT; f++) {
                if (!(p->valid & PROTO_M_BIT(f)) || !isfinite(p->avg[f]))
                        continue;
                if (json_object_set_new(o, proto_metric_names[f], value_json(f, p->avg[f])) < 0)
                        return NULL;
                if (proto_metric_max_names[f] && isfinite(p->max[f]) &&
                    json_object_set_new(o, proto_metric_max_names[f], value_json(f, p->max[f])) < 0)
                        return NULL;
        }
        return TAKE_PTR(o);
}

json_t *proto_metrics_encode(const char *target_id, const struct proto_metrics_sample *now, uint32_t step_sec,
                             const struct proto_metrics_point *points, size_t n_points)
{
        _cleanup_json_ json_t *arr = json_array();
        if (!arr)
                return NULL;
        for (size_t i = 0; i < n_points; i++) {
                json_t *p = proto_metrics_point_encode(&points[i]);
                if (!p || json_array_append_new(arr, p) < 0)
                        return NULL;
        }
        json_t *now_json = proto_metrics_sample_encode(target_id, now);
        if (!now_json)
                return NULL;
        return json_pack("{s:o, s:{s:I, s:O}}", "now", now_json, "series", "step", (json_int_t)step_sec, "points",
                         arr);
}
