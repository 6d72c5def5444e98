/* SPDX-License-Identifier: GPL-2.0-or-later */
/* common/: timeutil.h, uuid.h, names.h and crc32c.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/macro.h"
#include "common/names.h"
#include "common/timeutil.h"
#include "common/uuid.h"

/* ---- timeutil ---- */

static void test_format_time(void **state)
{
        (void)state;
        char buf[40];
        assert_string_equal(na_format_time_ms(0, buf, sizeof(buf)), "1970-01-01T00:00:00.000Z");
        assert_string_equal(na_format_time_ms(1795262400000ULL, buf, sizeof(buf)), "2026-11-21T12:00:00.000Z");
        assert_string_equal(na_format_time_ms(1795255203042ULL, buf, sizeof(buf)), "2026-11-21T10:00:03.042Z");
        assert_string_equal(na_format_time_ms(1709251199999ULL, buf, sizeof(buf)), "2024-02-29T23:59:59.999Z");
}

static int64_t parse_ok(const char *s)
{
        int64_t ms = -42;
        if (!na_parse_time_ms(s, &ms))
                fail_msg("refused %s", s);
        return ms;
}

static void test_parse_time(void **state)
{
        (void)state;
        assert_int_equal(parse_ok("2026-11-21T10:00:03Z"), 1795255203000LL);
        assert_int_equal(parse_ok("2026-11-21t10:00:03z"), 1795255203000LL);
        assert_int_equal(parse_ok("2026-11-21T10:00:03.1Z"), 1795255203100LL);
        assert_int_equal(parse_ok("2026-11-21T10:00:03.042Z"), 1795255203042LL);
        assert_int_equal(parse_ok("2026-11-21T10:00:03.123456789Z"), 1795255203123LL); /* truncated to ms */
        assert_int_equal(parse_ok("2026-11-21T12:00:03+02:00"), 1795255203000LL);
        assert_int_equal(parse_ok("2026-11-21T04:30:03-05:30"), 1795255203000LL);
        assert_int_equal(parse_ok("2026-11-21T10:00:03.5+00:00"), 1795255203500LL);
        assert_int_equal(parse_ok("1970-01-01T00:00:00Z"), 0);
        assert_int_equal(parse_ok("1969-12-31T23:59:59Z"), -1000);
        assert_int_equal(parse_ok("2024-02-29T23:59:59Z"), 1709251199000LL);
        assert_int_equal(parse_ok("2000-03-01T00:00:00Z"), 951868800000LL);
        /* A leap second is read as :59 (no clock here can name it). */
        assert_int_equal(parse_ok("2016-12-31T23:59:60Z"), parse_ok("2016-12-31T23:59:59Z"));

        /* Round trip through the formatter. */
        char buf[40];
        for (uint64_t ms = 0; ms < 4000000000000ULL; ms += 97654321987ULL)
                assert_int_equal(parse_ok(na_format_time_ms(ms, buf, sizeof(buf))), (int64_t)ms);
}

static void test_parse_time_refused(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "",
                "2026-11-21",
                "2026-11-21T10:00:03",       /* no zone */
                "2026-11-21T10:00:03.Z",     /* empty fraction */
                "2026-11-21T10:00:03Zjunk",
                "2026-11-21T10:00:03+0200",  /* offset without colon */
                "2026-11-21T10:00:03+24:00",
                "2026-13-01T10:00:00Z",
                "2026-00-01T10:00:00Z",
                "2026-11-00T10:00:00Z",
                "2026-11-32T10:00:00Z",
                "2026-11-21T24:00:00Z",
                "2026-11-21T10:60:00Z",
                "2026-11-21T10:00:61Z",
                "2026-11-21X10:00:00Z",
                "2026/11/21T10:00:00Z",
                "+2026-11-21T10:00:00Z",
                "2026-1-21T10:00:00Z",
                "2026-11-21T10:00:00 Z",
                "２０２６-11-21T10:00:00Z",
                /* days that do not exist in their month */
                "2026-02-29T00:00:00Z",
                "2026-02-30T00:00:00Z",
                "2026-04-31T00:00:00Z",
                "1900-02-29T00:00:00Z",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                int64_t ms = 7;
                if (na_parse_time_ms(bad[i], &ms))
                        fail_msg("accepted \"%s\" as %lld", bad[i], (long long)ms);
        }
        int64_t ms;
        assert_false(na_parse_time_ms(NULL, &ms));
        assert_true(na_parse_time_ms("2000-02-29T00:00:00Z", &ms)); /* a leap year by the 400 rule */
}

static void test_clocks(void **state)
{
        (void)state;
        uint64_t a = na_now_mono_us(), b = na_now_mono_us();
        assert_true(b >= a);
        /* After 2020 and before 2200: the clock is set and in milliseconds. */
        uint64_t now = na_now_real_ms();
        assert_true(now > 1577836800000ULL && now < 7258118400000ULL);
}

/* ---- uuid ---- */

static void test_uuid_valid(void **state)
{
        (void)state;
        assert_true(na_uuid_valid("6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"));
        assert_true(na_uuid_valid("6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B"));
        assert_true(na_uuid_valid("00000000-0000-0000-0000-000000000000"));
        assert_false(na_uuid_valid(NULL));
        assert_false(na_uuid_valid(""));
        assert_false(na_uuid_valid("6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5"));   /* short */
        assert_false(na_uuid_valid("6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5bb")); /* long */
        assert_false(na_uuid_valid("6f1c2a3b4c5d-4e6f-8a9b-0c1d2e3f4a5b-"));  /* dashes moved */
        assert_false(na_uuid_valid("6f1c2a3g-4c5d-4e6f-8a9b-0c1d2e3f4a5b"));  /* not hex */
        assert_false(na_uuid_valid("{f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"));
        assert_false(na_uuid_valid("6f1c2a3b 4c5d-4e6f-8a9b-0c1d2e3f4a5b"));
}

static void test_uuid_random(void **state)
{
        (void)state;
        char a[NA_UUID_STRLEN + 1], b[NA_UUID_STRLEN + 1];
        assert_int_equal(na_uuid_random(a, sizeof(a)), 0);
        assert_int_equal(na_uuid_random(b, sizeof(b)), 0);
        assert_true(na_uuid_valid(a));
        assert_true(na_uuid_valid(b));
        assert_string_not_equal(a, b);
        assert_int_equal(a[14], '4');                         /* version 4 */
        assert_non_null(strchr("89ab", a[19]));               /* RFC 4122 variant */
        for (const char *p = a; *p; p++)
                assert_true(*p == '-' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
        char small[NA_UUID_STRLEN];
        assert_int_equal(na_uuid_random(small, sizeof(small)), -ENOBUFS);
}

/* ---- names ---- */

static void test_names(void **state)
{
        (void)state;
        char ifname[NA_IFNAME_LEN];
        assert_int_equal(na_vps_ifname("6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", ifname), 0);
        assert_string_equal(ifname, "nav6f1c2a3b4c5d");
        assert_int_equal(strlen(ifname), NA_IFNAME_LEN - 1);
        assert_int_equal(na_vps_ifname("6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B", ifname), 0);
        assert_string_equal(ifname, "nav6f1c2a3b4c5d");
        assert_int_equal(na_vps_ifname("../../etc/passwd", ifname), -EINVAL);
        assert_int_equal(na_vps_ifname(NULL, ifname), -EINVAL);
        /* An app's veth: what the app driver makes and the metrics count (issue 24). */
        assert_int_equal(na_app_ifname("6F1C2A3B-4c5d-4e6f-8a9b-0c1d2e3f4a5b", ifname), 0);
        assert_string_equal(ifname, "nap6f1c2a3b4c5d");
        assert_int_equal(na_app_ifname("x", ifname), -EINVAL);

        char dom[41];
        assert_int_equal(na_vps_domain_name("6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B", dom, sizeof(dom)), 0);
        assert_string_equal(dom, "vps-6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b");
        assert_int_equal(na_vps_domain_name("6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", dom, 40), -EINVAL);
        assert_int_equal(na_vps_domain_name("vps-1", dom, sizeof(dom)), -EINVAL);
}

/* ---- crc32c ---- */

static uint32_t crc32c_bitwise(const unsigned char *p, size_t len)
{
        uint32_t c = 0xffffffffu;
        while (len--) {
                c ^= *p++;
                for (int k = 0; k < 8; k++)
                        c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        return ~c;
}

static void test_crc32c_vectors(void **state)
{
        (void)state;
        assert_int_equal(na_crc32c(0, "123456789", 9), 0xE3069283u);
        assert_int_equal(na_crc32c(0, "", 0), 0);
        /* RFC 3720 (iSCSI) B.4 */
        unsigned char buf[32];
        memset(buf, 0, sizeof(buf));
        assert_int_equal(na_crc32c(0, buf, 32), 0x8A9136AAu);
        memset(buf, 0xff, sizeof(buf));
        assert_int_equal(na_crc32c(0, buf, 32), 0x62A8AB43u);
        for (int i = 0; i < 32; i++)
                buf[i] = (unsigned char)i;
        assert_int_equal(na_crc32c(0, buf, 32), 0x46DD794Eu);
        for (int i = 0; i < 32; i++)
                buf[i] = (unsigned char)(31 - i);
        assert_int_equal(na_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void test_crc32c_incremental_and_unaligned(void **state)
{
        (void)state;
        unsigned char data[300];
        uint32_t x = 12345;
        for (size_t i = 0; i < sizeof(data); i++) {
                x = x * 1103515245u + 12345u;
                data[i] = (unsigned char)(x >> 16);
        }
        for (size_t off = 0; off < 8; off++)
                for (size_t len = 0; len + off <= 130; len++) {
                        uint32_t want = crc32c_bitwise(data + off, len);
                        assert_int_equal(na_crc32c(0, data + off, len), want);
                        for (size_t cut = 0; cut <= len; cut += 7)
                                assert_int_equal(na_crc32c(na_crc32c(0, data + off, cut), data + off + cut, len - cut), want);
                }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format_time),
                cmocka_unit_test(test_parse_time),
                cmocka_unit_test(test_parse_time_refused),
                cmocka_unit_test(test_clocks),
                cmocka_unit_test(test_uuid_valid),
                cmocka_unit_test(test_uuid_random),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_crc32c_vectors),
                cmocka_unit_test(test_crc32c_incremental_and_unaligned),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
