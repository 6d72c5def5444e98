/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Unit tests of the transfer client's pure helpers (transfer/transfer-plan.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "transfer/transfer-internal.h"

static void test_backoff(void **state)
{
        (void)state;
        assert_int_equal(transfer_backoff_ms(500, 1), 500);
        assert_int_equal(transfer_backoff_ms(500, 2), 1000);
        assert_int_equal(transfer_backoff_ms(500, 4), 4000);
        assert_int_equal(transfer_backoff_ms(500, 7), 30000);
        assert_int_equal(transfer_backoff_ms(500, 1000), 30000);
        assert_int_equal(transfer_backoff_ms(40000, 1), 30000);
}

static void test_retryable(void **state)
{
        (void)state;
        assert_true(transfer_curl_retryable(CURLE_PARTIAL_FILE));
        assert_true(transfer_curl_retryable(CURLE_RECV_ERROR));
        assert_true(transfer_curl_retryable(CURLE_COULDNT_CONNECT));
        assert_false(transfer_curl_retryable(CURLE_PEER_FAILED_VERIFICATION));
        assert_false(transfer_curl_retryable(CURLE_ABORTED_BY_CALLBACK));
        assert_false(transfer_curl_retryable(CURLE_WRITE_ERROR));
        assert_true(transfer_status_retryable(500));
        assert_true(transfer_status_retryable(503));
        assert_true(transfer_status_retryable(429));
        assert_true(transfer_status_retryable(408));
        assert_false(transfer_status_retryable(403));
        assert_false(transfer_status_retryable(404));
}

static void test_content_range(void **state)
{
        (void)state;
        uint64_t a, b, t;
        assert_true(transfer_parse_content_range(" bytes 100-199/1000\r\n", &a, &b, &t));
        assert_int_equal(a, 100);
        assert_int_equal(b, 199);
        assert_int_equal(t, 1000);
        assert_true(transfer_parse_content_range("bytes 0-0/*", &a, &b, &t));
        assert_int_equal(t, 0);
        assert_false(transfer_parse_content_range("bytes 5-4/10", &a, &b, &t));
        assert_false(transfer_parse_content_range("bytes 0-9/9", &a, &b, &t));
        assert_false(transfer_parse_content_range("bytes */10", &a, &b, &t));
        assert_false(transfer_parse_content_range("items 0-9/10", &a, &b, &t));
        assert_false(transfer_parse_content_range("bytes 0-99999999999999999999/1", &a, &b, &t));
        assert_false(transfer_parse_content_range("bytes 0-9/10 x", &a, &b, &t));
}

static void test_parts(void **state)
{
        (void)state;
        assert_int_equal(transfer_parts_needed(0, 5), 1);
        assert_int_equal(transfer_parts_needed(5, 5), 1);
        assert_int_equal(transfer_parts_needed(6, 5), 2);
        assert_int_equal(transfer_parts_needed(10, 5), 2);
        assert_int_equal(transfer_parts_needed(UINT64_MAX, 64ull << 20), UINT64_MAX / (64ull << 20) + 1);
}

static void test_etag(void **state)
{
        (void)state;
        char out[128];
        assert_true(transfer_clean_etag(" \"abc\"\r\n", 8, out));
        assert_string_equal(out, "\"abc\"");
        assert_false(transfer_clean_etag(" \r\n", 3, out));
        assert_true(transfer_clean_etag("a\x01\xffz", 4, out));
        assert_string_equal(out, "az");
        char big[300];
        memset(big, 'e', sizeof(big));
        assert_true(transfer_clean_etag(big, sizeof(big), out));
        assert_int_equal(strlen(out), 127);
}

static void test_scrub(void **state)
{
        (void)state;
        char msg[256] = "Failed on https://h/k?sig=secret&exp=1 now";
        transfer_scrub(msg, "https://h/k?sig=secret&exp=1");
        assert_null(strstr(msg, "secret"));
        assert_string_equal(msg, "Failed on https://h/k now");
        char cut[64] = "bad https://h/k?sig=sec";
        transfer_scrub(cut, "https://h/k?sig=secret&exp=1");
        assert_null(strstr(cut, "sec"));
        char none[64] = "HTTP 403";
        transfer_scrub(none, "https://h/k?sig=secret");
        assert_string_equal(none, "HTTP 403");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_backoff), cmocka_unit_test(test_retryable), cmocka_unit_test(test_content_range),
                cmocka_unit_test(test_parts),   cmocka_unit_test(test_etag),      cmocka_unit_test(test_scrub),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
