/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the DNS verifier's answer parser (routing/app-dns-wire.c),
 * run under CTest by tests/proto/fuzz-driver.c over dns-corpus/ (real dnsmasq answers
 * and hostile hand-made ones) and seeded mutations. Nothing may crash or read outside
 * the input; every name that comes out is NUL-terminated printable text without
 * spaces (it goes into messages for customers); a parsed question name that is a
 * plain DNS name makes the same question again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routing/app-dns-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long parsed, rejected, with_cname, with_addr, truncated;

static void check_name(const char *n)
{
        size_t len = strnlen(n, APP_DNS_NAME_MAX);
        if (len >= APP_DNS_NAME_MAX) {
                fprintf(stderr, "name not terminated\n");
                abort();
        }
        for (size_t i = 0; i < len; i++)
                if (n[i] <= ' ' || n[i] > '~') {
                        fprintf(stderr, "unprintable byte 0x%02x in a name\n", (unsigned char)n[i]);
                        abort();
                }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *copy = malloc(size ? size : 1); /* exact size: reads past the end are caught */
        struct app_dns_msg *m = malloc(sizeof(*m));
        if (!copy || !m) {
                free(copy);
                free(m);
                return 0;
        }
        memcpy(copy, data, size);
        if (app_dns_parse(copy, size, m) < 0) {
                rejected++;
        } else {
                parsed++;
                truncated += m->tc;
                if (m->n_answers > APP_DNS_MAX_RR || m->n_answers > m->n_answers_seen) {
                        fprintf(stderr, "answer count\n");
                        abort();
                }
                check_name(m->qname);
                for (size_t i = 0; i < m->n_answers; i++) {
                        check_name(m->answers[i].name);
                        if (m->answers[i].type == APP_DNS_T_CNAME) {
                                check_name(m->answers[i].cname);
                                with_cname++;
                        } else {
                                with_addr++;
                        }
                }
                char n[256];
                if (app_dns_name_normalize(m->qname, n)) {
                        uint8_t q[512];
                        size_t ql;
                        struct app_dns_msg *again = malloc(sizeof(*again));
                        if (again && app_dns_build_query(m->id, n, m->qtype, q, sizeof(q), &ql) == 0 &&
                            (app_dns_parse(q, ql, again) < 0 || !streq(again->qname, n) || again->qtype != m->qtype)) {
                                fprintf(stderr, "question %s does not survive a round trip\n", n);
                                abort();
                        }
                        free(again);
                }
        }
        free(copy);
        free(m);
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "dns: %lu parsed (%lu truncated), %lu rejected; %lu CNAME and %lu address records\n", parsed,
                truncated, rejected, with_cname, with_addr);
        return parsed && rejected && with_cname && with_addr && truncated ? 0 : 1;
}
