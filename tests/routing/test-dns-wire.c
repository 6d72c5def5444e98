/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The DNS verifier's wire format: queries, and the parser against hostile answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "routing/app-dns-internal.h"

static void test_query(void **state)
{
        (void)state;
        uint8_t b[512];
        size_t len;
        assert_int_equal(app_dns_build_query(0xBEEF, "Play.Example.com.", APP_DNS_T_A, b, sizeof(b), &len), 0);
        static const uint8_t want[] = { 0xBE, 0xEF, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 4, 'p', 'l', 'a', 'y', 7, 'e', 'x',
                                        'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1 };
        assert_int_equal(len, sizeof(want));
        assert_memory_equal(b, want, sizeof(want));
        assert_int_equal(app_dns_build_query(1, "a..b", APP_DNS_T_A, b, sizeof(b), &len), -EINVAL);
        assert_int_equal(app_dns_build_query(1, "a b", APP_DNS_T_A, b, sizeof(b), &len), -EINVAL);
        assert_int_equal(app_dns_build_query(1, ".", APP_DNS_T_A, b, sizeof(b), &len), -EINVAL);
        assert_int_equal(app_dns_build_query(1, "a.com", APP_DNS_T_A, b, 10, &len), -ENOBUFS);
        char n[256];
        assert_true(app_dns_name_normalize("App1.APPS.example.com.", n));
        assert_string_equal(n, "app1.apps.example.com");
        assert_false(app_dns_name_normalize("x\\046y.com", n));
}

/* An answer: header (id 0x1234, QR, RD, RA), the question a.example.com/A, then raw records. */
static size_t answer(uint8_t *b, unsigned an, unsigned rcode, const uint8_t *rr, size_t rrlen)
{
        static const uint8_t q[] = { 1, 'a', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1 };
        uint8_t h[12] = { 0x12, 0x34, 0x81, (uint8_t)(0x80 | rcode), 0, 1, 0, (uint8_t)an, 0, 0, 0, 0 };
        memcpy(b, h, 12);
        memcpy(b + 12, q, sizeof(q));
        if (rrlen)
                memcpy(b + 12 + sizeof(q), rr, rrlen);
        return 12 + sizeof(q) + rrlen;
}

static void test_parse(void **state)
{
        (void)state;
        uint8_t b[600];
        struct app_dns_msg *m = malloc(sizeof(*m));
        /* a CNAME (target "www" + pointer to example.com) and an A for it */
        static const uint8_t rr[] = { 0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 6, 3, 'W', 'w', 'W', 0xC0, 14,
                                      3, 'w', 'w', 'w', 0xC0, 14, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7 };
        size_t len = answer(b, 2, 0, rr, sizeof(rr));
        assert_int_equal(app_dns_parse(b, len, m), 0);
        assert_int_equal(m->id, 0x1234);
        assert_true(m->qr);
        assert_false(m->tc);
        assert_string_equal(m->qname, "a.example.com");
        assert_int_equal(m->n_answers, 2);
        assert_int_equal(m->answers[0].type, APP_DNS_T_CNAME);
        assert_string_equal(m->answers[0].name, "a.example.com");
        assert_string_equal(m->answers[0].cname, "www.example.com");
        assert_string_equal(m->answers[1].name, "www.example.com");
        assert_memory_equal(m->answers[1].addr, ((uint8_t[]){ 192, 0, 2, 7 }), 4);
        /* every prefix of it is refused (or, for the header alone, parsed as far as it goes) */
        for (size_t cut = 0; cut < len; cut++)
                assert_int_equal(app_dns_parse(b, cut, m), -EBADMSG);

        /* odd bytes in a name come out escaped */
        static const uint8_t odd[] = { 0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 7, 5, 'a', '.', ' ', 0xFF, '\n', 0 };
        len = answer(b, 1, 0, odd, sizeof(odd));
        assert_int_equal(app_dns_parse(b, len, m), 0);
        assert_string_equal(m->answers[0].cname, "a\\046\\032\\255\\010");

        /* a pointer to itself, forward, or into the record's own label: refused */
        static const uint8_t self[] = { 0xC0, 31, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4 };
        len = answer(b, 1, 0, self, sizeof(self));
        assert_int_equal(app_dns_parse(b, len, m), -EBADMSG);
        static const uint8_t fwd[] = { 0xC0, 40, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4 };
        len = answer(b, 1, 0, fwd, sizeof(fwd));
        assert_int_equal(app_dns_parse(b, len, m), -EBADMSG);
        /* an A of 5 bytes, a CNAME whose name overruns its data */
        static const uint8_t a5[] = { 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 5, 1, 2, 3, 4, 5 };
        len = answer(b, 1, 0, a5, sizeof(a5));
        assert_int_equal(app_dns_parse(b, len, m), -EBADMSG);
        static const uint8_t over[] = { 0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 3, 'w', 'w', 'w', 0 };
        len = answer(b, 1, 0, over, sizeof(over));
        assert_int_equal(app_dns_parse(b, len, m), -EBADMSG);
        /* other classes and types are skipped, not kept */
        static const uint8_t ch[] = { 0xC0, 12, 0, 1, 0, 3, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4,
                                      0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 3, 2, 'h', 'i' };
        len = answer(b, 2, 0, ch, sizeof(ch));
        assert_int_equal(app_dns_parse(b, len, m), 0);
        assert_int_equal(m->n_answers, 0);
        assert_int_equal(m->n_answers_seen, 2);
        /* NXDOMAIN: the rcode */
        len = answer(b, 0, 3, NULL, 0);
        assert_int_equal(app_dns_parse(b, len, m), 0);
        assert_int_equal(m->rcode, APP_DNS_RCODE_NXDOMAIN);
        /* a name over 255 octets */
        uint8_t longq[12 + 5 * 64 + 5] = { 0x12, 0x34, 0x81, 0x80, 0, 1 };
        for (int i = 0; i < 5; i++) {
                longq[12 + i * 64] = 63;
                memset(longq + 13 + i * 64, 'x', 63);
        }
        assert_int_equal(app_dns_parse(longq, sizeof(longq), m), -EBADMSG);
        /* two questions */
        len = answer(b, 0, 0, NULL, 0);
        b[5] = 2;
        assert_int_equal(app_dns_parse(b, len, m), -EBADMSG);
        free(m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_query),
                cmocka_unit_test(test_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
