/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/poll.h: a poll answer (and an exchange answer, AGENT-API 2.3) taken apart job
 * by job, and the ids of jobs that cannot be parsed found from either end of what is
 * known of the answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "proto/poll.h"

static void split_ok(const char *body, bool want_success, size_t want_n)
{
        struct na_error err = NA_ERROR_INIT;
        bool success = !want_success;
        struct proto_span *spans = NULL;
        size_t n = 99;
        assert_int_equal(proto_poll_split(body, strlen(body), &success, &spans, &n, &err), 0);
        assert_int_equal(success, want_success);
        assert_int_equal(n, want_n);
        free(spans);
}

static void split_bad(const char *body)
{
        struct na_error err = NA_ERROR_INIT;
        bool success;
        struct proto_span *spans = NULL;
        size_t n;
        assert_int_equal(proto_poll_split(body, strlen(body), &success, &spans, &n, &err), -EBADMSG);
        assert_null(spans);
        assert_string_equal(err.code, NA_E_VALIDATION);
        na_error_clear(&err);
}

static void test_split(void **state)
{
        (void)state;
        split_ok("{\"success\":true,\"data\":[]}", true, 0);
        split_ok(" { \"message\" : \"OK\", \"data\" : [ {\"id\":\"a\"} , {\"x\":[1,{\"y\":\"]}\"}]} ], \"success\": true } ",
                 true, 2);
        split_ok("{\"success\":false,\"code\":\"X\",\"error\":\"no\",\"details\":null}", false, 0);
        /* An element that no parser takes still has its span: 1e999999, a NUL, a key twice. */
        split_ok("{\"success\":true,\"data\":[{\"a\":1000000000000000000000000000000},{\"a\":\"\\u0000\"},{\"k\":1,\"k\":2}]}",
                 true, 3);
        split_bad("");
        split_bad("[]");
        split_bad("<html>oops</html>");
        split_bad("{\"success\":true}");                    /* no data */
        split_bad("{\"success\":true,\"data\":{}}");        /* data not an array */
        split_bad("{\"data\":[]}");                         /* no success */
        split_bad("{\"success\":true,\"success\":true,\"data\":[]}");
        split_bad("{\"success\":true,\"data\":[],\"data\":[]}");
        split_bad("{\"success\":true,\"data\":[{\"id\":\"a\"}");  /* cut short */
        split_bad("{\"success\":true,\"data\":[]} trailing");
        split_bad("{\"success\":\"yes\",\"data\":[]}");
        /* Deeper than the scanner goes: refused, not a stack overflow. */
        char deep[4096] = "{\"success\":true,\"data\":[";
        for (int i = 0; i < 1000; i++)
                strcat(deep, "[");
        split_bad(deep);
}

static void test_recover(void **state)
{
        (void)state;
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;
        const char *job = "{\"kind\":\"x\",\"target\":{\"type\":\"app\",\"id\":\"not-this-one\"},\"id\":\"job-1\","
                          "\"attempt\":3,\"params\":{\"graceSec\":100000000000000000000000000000}}";
        assert_true(proto_job_recover(job, strlen(job), id, &attempt));
        assert_string_equal(id, "job-1");
        assert_int_equal(attempt, 3);
        /* Cut short after the id: still found; before it: not. */
        assert_true(proto_job_recover(job, 90, id, &attempt));
        assert_false(proto_job_recover(job, 40, id, &attempt));
        /* Ids that cannot be answered in a URL are not ids. */
        const char *bad = "{\"id\":\"a/b\"}", *esc = "{\"id\":\"a\\u0041\"}", *num = "{\"id\":7}";
        assert_false(proto_job_recover(bad, strlen(bad), id, &attempt));
        assert_false(proto_job_recover(esc, strlen(esc), id, &attempt));
        assert_false(proto_job_recover(num, strlen(num), id, &attempt));
        assert_int_equal(attempt, 1);
}

static void test_recover_head_and_tail(void **state)
{
        (void)state;
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;
        const char *head = "{\"success\": true, \"data\": [{\"id\": \"first\", \"attempt\": 2, \"params\": {\"blob\": \"xxxxx";
        assert_true(proto_poll_recover_head(head, strlen(head), id, &attempt));
        assert_string_equal(id, "first");
        assert_int_equal(attempt, 2);
        /* The tail of an answer whose id comes after the huge field. */
        const char *tail = "xxxx\\\"\\\\\", \"target\": {\"type\": \"app\", \"id\": \"inner\"}, \"attempt\": 4, "
                           "\"id\": \"last-one\", \"note\": \"a \\\"quoted\\\" } ] word\"}], \"message\": \"OK\"}";
        assert_true(proto_poll_recover_tail(tail, strlen(tail), id, &attempt));
        assert_string_equal(id, "last-one");
        assert_int_equal(attempt, 4);
        /* Only the nested id is in the tail: not taken for the job's. */
        const char *nested = "xx\", \"target\": {\"type\": \"app\", \"id\": \"inner\"}}]}";
        assert_false(proto_poll_recover_tail(nested, strlen(nested), id, &attempt));
        assert_false(proto_poll_recover_tail("", 0, id, &attempt));
        assert_false(proto_poll_recover_head("<html>", 6, id, &attempt));
}

static void test_exchange_split(void **state)
{
        (void)state;
        const char *body = "{\"success\": true, \"message\": \"OK\", \"data\": {\"taken\": [\"r1\", \"r2\"], "
                           "\"lost\": [{\"jobId\": \"r3\", \"code\": \"JOB_NOT_FOUND\"}, {\"jobId\": \"p1\", "
                           "\"code\": \"JOB_CANCELLED\"}], \"leases\": [{\"jobId\": \"p2\", \"leaseExpiresAt\": \"x\"}], "
                           "\"jobs\": [{\"id\": \"a\", \"n\": 123456789012345678901234567890}, {\"id\": \"b\"}]}}";
        struct na_error err = NA_ERROR_INIT;
        bool success = false;
        struct proto_span *spans = NULL;
        size_t n = 0;
        struct proto_exchange_spans x;
        assert_int_equal(proto_exchange_split(body, strlen(body), &success, &spans, &n, &x, &err), 0);
        assert_true(success);
        assert_int_equal(n, 2); /* the job with a huge integer is still its own span */
        assert_memory_equal(body + spans[1].off, "{\"id\": \"b\"}", spans[1].len);
        free(spans);
        struct proto_exchange_ack *acks = NULL;
        size_t na = 0;
        assert_int_equal(proto_exchange_acks_decode(body, &x, &acks, &na, &err), 0);
        assert_int_equal(na, 4);
        assert_string_equal(acks[0].id, "r1");
        assert_string_equal(acks[0].code, "");
        assert_string_equal(acks[2].id, "r3");
        assert_string_equal(acks[2].code, "JOB_NOT_FOUND");
        assert_string_equal(acks[3].code, "JOB_CANCELLED");
        free(acks);

        /* An entry that cannot be read is named and skipped; the others count. */
        const char *odd = "{\"success\": true, \"data\": {\"jobs\": [], \"taken\": [\"ok\", 7], "
                          "\"lost\": [{\"jobId\": \"z\", \"code\": \"GONE\"}]}}";
        assert_int_equal(proto_exchange_split(odd, strlen(odd), &success, &spans, &n, &x, &err), 0);
        assert_int_equal(n, 0);
        free(spans);
        assert_int_equal(proto_exchange_acks_decode(odd, &x, &acks, &na, &err), -EINVAL);
        assert_int_equal(na, 1);
        assert_string_equal(acks[0].id, "ok");
        assert_non_null(strstr(err.message, "taken"));
        free(acks);
        na_error_clear(&err);

        /* A poll's array is not an exchange answer, nor is data without "jobs"; a failure envelope is. */
        const char *bad[] = { "{\"success\": true, \"data\": []}", "{\"success\": true, \"data\": {\"taken\": []}}",
                              "{\"success\": true, \"data\": {\"jobs\": {}}}" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(proto_exchange_split(bad[i], strlen(bad[i]), &success, &spans, &n, &x, &err), -EBADMSG);
                assert_null(spans);
                na_error_clear(&err);
        }
        const char *fail = "{\"success\": false, \"code\": \"INTERNAL_ERROR\"}";
        assert_int_equal(proto_exchange_split(fail, strlen(fail), &success, &spans, &n, &x, &err), 0);
        assert_false(success);
}

static void test_exchange_recover(void **state)
{
        (void)state;
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;
        const char *head = "{\"success\": true, \"data\": {\"taken\": [\"t\"], \"jobs\": [{\"attempt\": 3, \"id\": \"big\", "
                           "\"params\": {\"blob\": \"xxxx";
        assert_true(proto_poll_recover_head(head, strlen(head), id, &attempt));
        assert_string_equal(id, "big");
        assert_int_equal(attempt, 3);
        const char *tail = "xxx\", \"attempt\": 2, \"id\": \"tail-one\"}]}, \"message\": \"OK\"}";
        assert_true(proto_exchange_recover_tail(tail, strlen(tail), id, &attempt));
        assert_string_equal(id, "tail-one");
        assert_int_equal(attempt, 2);
        assert_false(proto_poll_recover_tail(tail, strlen(tail), id, &attempt));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exchange_split),
                cmocka_unit_test(test_exchange_recover),
                cmocka_unit_test(test_split),
                cmocka_unit_test(test_recover),
                cmocka_unit_test(test_recover_head_and_tail),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
