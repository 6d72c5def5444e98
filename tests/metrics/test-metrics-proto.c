/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proto/metrics-params.c: params of vps.metrics (defaults, step selection, validation) and the encodings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/metrics-params.h"

/* 2026-11-21T12:00:00Z */
#define NOW_MS 1795262400000LL
#define MIN_MS 60000LL
#define HOUR_MS 3600000LL
#define DAY_MS 86400000LL

static char *iso(int64_t ms, char *buf)
{
        return na_format_time_ms((uint64_t)ms, buf, 40);
}

static int decode(const char *json, struct proto_metrics_query *q, struct na_error *err)
{
        _cleanup_json_ json_t *p = json ? json_loads(json, 0, NULL) : NULL;
        if (json)
                assert_non_null(p);
        return proto_metrics_query_decode(p, NOW_MS, q, err);
}

static int decode_range(int64_t from, int64_t to, long step, struct proto_metrics_query *q, struct na_error *err)
{
        char a[40], b[40], json[160];
        if (step)
                snprintf(json, sizeof(json), "{\"from\":\"%s\",\"to\":\"%s\",\"step\":%ld}", iso(from, a), iso(to, b),
                         step);
        else
                snprintf(json, sizeof(json), "{\"from\":\"%s\",\"to\":\"%s\"}", iso(from, a), iso(to, b));
        return decode(json, q, err);
}

/* The messages recorded for a field in a VALIDATION_ERROR. */
static const char *field_error(const struct na_error *err, const char *field)
{
        assert_string_equal(err->code, NA_E_VALIDATION);
        json_t *f = json_object_get(err->details, field);
        json_t *list = json_object_get(f, "_errors");
        return json_is_array(list) && json_array_size(list) ? json_string_value(json_array_get(list, 0)) : NULL;
}

static void test_defaults(void **state)
{
        struct proto_metrics_query q;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        assert_int_equal(decode("{}", &q, &err), 0);
        assert_int_equal(q.to_ms, NOW_MS);
        assert_int_equal(q.from_ms, NOW_MS - HOUR_MS);
        assert_int_equal(q.tier, 0);
        assert_int_equal(q.step_sec, 10); /* 1 h in 10 s: 361 points */
        assert_int_equal(q.now_ms, NOW_MS);

        assert_int_equal(decode(NULL, &q, &err), 0); /* no params at all */
        assert_int_equal(q.step_sec, 10);

        /* only "to": from is an hour before it */
        char a[40], json[100];
        snprintf(json, sizeof(json), "{\"to\":\"%s\",\"unknownKey\":1}", iso(NOW_MS - 10 * MIN_MS, a));
        assert_int_equal(decode(json, &q, &err), 0);
        assert_int_equal(q.to_ms, NOW_MS - 10 * MIN_MS);
        assert_int_equal(q.from_ms, NOW_MS - 70 * MIN_MS);
        assert_int_equal(q.tier, 1); /* 70 minutes back: beyond the 10 s ring */
        assert_int_equal(q.step_sec, 60);
}

static void test_step_selection(void **state)
{
        struct proto_metrics_query q;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;

        /* 10 minutes: 10 s buckets */
        assert_int_equal(decode_range(NOW_MS - 10 * MIN_MS, NOW_MS, 0, &q, &err), 0);
        assert_int_equal(q.tier, 0);
        assert_int_equal(q.step_sec, 10);

        /* 6 hours: 1 min tier, 360 points */
        assert_int_equal(decode_range(NOW_MS - 6 * HOUR_MS, NOW_MS, 0, &q, &err), 0);
        assert_int_equal(q.tier, 1);
        assert_int_equal(q.step_sec, 60);

        /* 24 hours: 1 min tier gives 1441 points at 60 s; 120 s gives 721 */
        assert_int_equal(decode_range(NOW_MS - DAY_MS, NOW_MS, 0, &q, &err), 0);
        assert_int_equal(q.tier, 1);
        assert_int_equal(q.step_sec, 120);
        assert_true(proto_metrics_point_count(q.from_ms, q.to_ms, q.step_sec) <= 1000);

        /* 7 days: 15 min tier, 673 points */
        assert_int_equal(decode_range(NOW_MS - 7 * DAY_MS, NOW_MS, 0, &q, &err), 0);
        assert_int_equal(q.tier, 2);
        assert_int_equal(q.step_sec, 900);

        /* 30 days: 15 min tier would be 2881 points; 2700 s gives 961 */
        assert_int_equal(decode_range(NOW_MS - 30 * DAY_MS, NOW_MS, 0, &q, &err), 0);
        assert_int_equal(q.tier, 2);
        assert_int_equal(q.step_sec, 2700);
        assert_true(proto_metrics_point_count(q.from_ms, q.to_ms, q.step_sec) <= 1000);

        /* a range inside the last hour that does not end now still uses the 10 s ring */
        assert_int_equal(decode_range(NOW_MS - 50 * MIN_MS, NOW_MS - 40 * MIN_MS, 0, &q, &err), 0);
        assert_int_equal(q.tier, 0);
        assert_int_equal(q.step_sec, 10);

        /* an unaligned 10000 s range cannot fit 1000 points of 10 s (1001 intervals touched) */
        assert_int_equal(proto_metrics_point_count(5000, 5000 + 10000 * 1000, 10), 1001);

        /* given steps */
        assert_int_equal(decode_range(NOW_MS - HOUR_MS + MIN_MS, NOW_MS, 30, &q, &err), 0);
        assert_int_equal(q.step_sec, 30);
        assert_int_equal(decode_range(NOW_MS - 6 * HOUR_MS, NOW_MS, 300, &q, &err), 0);
        assert_int_equal(q.step_sec, 300);
        assert_int_equal(q.tier, 1);
        assert_int_equal(decode_range(NOW_MS - 3 * DAY_MS, NOW_MS, 3600, &q, &err), 0);
        assert_int_equal(q.step_sec, 3600);
        assert_int_equal(q.tier, 2);
}

static void test_validation(void **state)
{
        struct proto_metrics_query q;
        struct na_error err = NA_ERROR_INIT;

        /* from after to */
        assert_int_equal(decode_range(NOW_MS, NOW_MS - MIN_MS, 0, &q, &err), -EINVAL);
        assert_string_equal(field_error(&err, "from"), "must not be after to");
        assert_int_equal(err.http_status, 422);
        na_error_clear(&err);

        /* a range over 30 days */
        assert_int_equal(decode_range(NOW_MS - 31 * DAY_MS, NOW_MS, 0, &q, &err), -EINVAL);
        assert_string_equal(field_error(&err, "from"), "must be at most 30 days before to");
        na_error_clear(&err);

        /* step below 10, not a multiple of 10 */
        assert_int_equal(decode("{\"step\":5}", &q, &err), -EINVAL);
        assert_string_equal(field_error(&err, "step"), "must be at least 10 seconds");
        na_error_clear(&err);
        assert_int_equal(decode("{\"step\":25}", &q, &err), -EINVAL);
        assert_string_equal(field_error(&err, "step"), "must be a multiple of 10 seconds");
        na_error_clear(&err);
        assert_int_equal(decode("{\"step\":-10}", &q, &err), -EINVAL);
        assert_non_null(field_error(&err, "step"));
        na_error_clear(&err);

        /* step finer than the tier that holds `from` */
        assert_int_equal(decode_range(NOW_MS - 2 * HOUR_MS, NOW_MS, 10, &q, &err), -EINVAL);
        assert_non_null(strstr(field_error(&err, "step"), "multiple of 60"));
        na_error_clear(&err);
        assert_int_equal(decode_range(NOW_MS - 2 * HOUR_MS, NOW_MS, 90, &q, &err), -EINVAL);
        assert_non_null(strstr(field_error(&err, "step"), "multiple of 60"));
        na_error_clear(&err);
        assert_int_equal(decode_range(NOW_MS - 2 * DAY_MS, NOW_MS, 600, &q, &err), -EINVAL);
        assert_non_null(strstr(field_error(&err, "step"), "multiple of 900"));
        na_error_clear(&err);

        /* too many points */
        assert_int_equal(decode_range(NOW_MS - 20 * HOUR_MS, NOW_MS, 60, &q, &err), -EINVAL);
        assert_non_null(strstr(field_error(&err, "step"), "at most 1000"));
        na_error_clear(&err);

        /* bad types, every field reported at once */
        assert_int_equal(decode("{\"from\":\"yesterday\",\"to\":12,\"step\":\"ten\"}", &q, &err), -EINVAL);
        assert_string_equal(field_error(&err, "from"), "must be an RFC 3339 date-time");
        assert_string_equal(field_error(&err, "to"), "must be an RFC 3339 date-time");
        assert_string_equal(field_error(&err, "step"), "must be an integer");
        na_error_clear(&err);

        /* params not an object */
        _cleanup_json_ json_t *arr = json_array();
        assert_int_equal(proto_metrics_query_decode(arr, NOW_MS, &q, &err), -EINVAL);
        assert_string_equal(err.code, NA_E_VALIDATION);
        na_error_clear(&err);
}

static void test_encode(void **state)
{
        struct proto_metrics_sample s = { .at_ms = NOW_MS + 123 };
        s.valid = PROTO_M_BIT(PROTO_M_CPU_PERCENT) | PROTO_M_BIT(PROTO_M_MEMORY_USED_MB) |
                  PROTO_M_BIT(PROTO_M_NET_RX_BPS);
        s.v[PROTO_M_CPU_PERCENT] = 12.3456;
        s.v[PROTO_M_MEMORY_USED_MB] = 811.6;
        s.v[PROTO_M_NET_RX_BPS] = 1199.5;
        s.v[PROTO_M_DISK_READ_BPS] = 77; /* not valid: left out */

        _cleanup_json_ json_t *j = proto_metrics_sample_encode("node", &s);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "targetId")), "node");
        assert_string_equal(json_string_value(json_object_get(j, "at")), "2026-11-21T12:00:00.123Z");
        assert_true(fabs(json_real_value(json_object_get(j, "cpuPercent")) - 12.35) < 1e-9);
        assert_int_equal(json_integer_value(json_object_get(j, "memoryUsedMB")), 812);
        assert_int_equal(json_integer_value(json_object_get(j, "netRxBps")), 1200);
        assert_null(json_object_get(j, "diskReadBps"));
        assert_null(json_object_get(j, "memoryLimitMB"));

        struct proto_metrics_point p = { .at_ms = NOW_MS };
        p.valid = PROTO_M_BIT(PROTO_M_CPU_PERCENT) | PROTO_M_BIT(PROTO_M_MEMORY_LIMIT_MB);
        p.avg[PROTO_M_CPU_PERCENT] = 10;
        p.max[PROTO_M_CPU_PERCENT] = 40;
        p.avg[PROTO_M_MEMORY_LIMIT_MB] = 2048;
        p.max[PROTO_M_MEMORY_LIMIT_MB] = 2048;
        _cleanup_json_ json_t *m = proto_metrics_encode("6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", &s, 60, &p, 1);
        assert_non_null(m);
        json_t *now = json_object_get(m, "now");
        assert_string_equal(json_string_value(json_object_get(now, "targetId")), "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
        json_t *series = json_object_get(m, "series");
        assert_int_equal(json_integer_value(json_object_get(series, "step")), 60);
        json_t *pt = json_array_get(json_object_get(series, "points"), 0);
        assert_null(json_object_get(pt, "targetId"));
        assert_string_equal(json_string_value(json_object_get(pt, "at")), "2026-11-21T12:00:00.000Z");
        assert_true(json_real_value(json_object_get(pt, "cpuPercent")) == 10.0);
        assert_true(json_real_value(json_object_get(pt, "cpuPercentMax")) == 40.0);
        assert_int_equal(json_integer_value(json_object_get(pt, "memoryLimitMB")), 2048);
        assert_null(json_object_get(pt, "memoryLimitMBMax")); /* the limit has no max */
        assert_int_equal(json_object_size(pt), 4);
}

static void test_tier_for(void **state)
{
        assert_int_equal(proto_metrics_tier_for(NOW_MS - HOUR_MS, NOW_MS), 0);
        assert_int_equal(proto_metrics_tier_for(NOW_MS - HOUR_MS - 1, NOW_MS), 1);
        assert_int_equal(proto_metrics_tier_for(NOW_MS - DAY_MS, NOW_MS), 1);
        assert_int_equal(proto_metrics_tier_for(NOW_MS - DAY_MS - 1, NOW_MS), 2);
        assert_int_equal(proto_metrics_tier_for(NOW_MS - 60 * DAY_MS, NOW_MS), 2);
        assert_int_equal(proto_metrics_tier_for(NOW_MS + DAY_MS, NOW_MS), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),   cmocka_unit_test(test_step_selection),
                cmocka_unit_test(test_validation), cmocka_unit_test(test_encode),
                cmocka_unit_test(test_tier_for),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
