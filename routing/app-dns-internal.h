/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the DNS verifier: the wire format (app-dns-wire.c: no I/O, fuzzed by
 * tests/routing/fuzz-dns.c) and the client (app-dns-client.c: UDP, TCP on
 * truncation, one deadline).
 */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "routing/app-dns.h"

#define APP_DNS_T_A 1
#define APP_DNS_T_CNAME 5
#define APP_DNS_T_AAAA 28
#define APP_DNS_C_IN 1

#define APP_DNS_RCODE_NOERROR 0
#define APP_DNS_RCODE_SERVFAIL 2
#define APP_DNS_RCODE_NXDOMAIN 3
#define APP_DNS_RCODE_REFUSED 5

/* A name in presentation form, lowercased, no trailing dot ("" for the root); bytes
 * other than [a-z0-9_-] escaped as \DDD, so at most 4 x 255 bytes. */
#define APP_DNS_NAME_MAX 1024
#define APP_DNS_MAX_RR 64 /* answer records kept (more are counted, not kept) */

struct app_dns_rr {
        char name[APP_DNS_NAME_MAX];
        uint16_t type;
        uint32_t ttl;
        char cname[APP_DNS_NAME_MAX]; /* CNAME: the target */
        uint8_t addr[16];             /* A: 4 bytes, AAAA: 16 */
};

struct app_dns_msg {
        uint16_t id;
        bool qr, tc;
        unsigned rcode;
        char qname[APP_DNS_NAME_MAX];
        uint16_t qtype, qclass;
        size_t n_answers;      /* records kept (class IN, A/AAAA/CNAME) */
        size_t n_answers_seen; /* records in the answer section */
        struct app_dns_rr answers[APP_DNS_MAX_RR];
};

/*
 * A query for name (presentation form, "a.example.com", a trailing dot allowed; labels
 * of [A-Za-z0-9_-] 1..63, at most 253) of type, recursion desired, into buf. -EINVAL
 * for a bad name, -ENOBUFS when cap is too small (512 is always enough).
 */
int app_dns_build_query(uint16_t id, const char *name, uint16_t type, uint8_t *buf, size_t cap, size_t *ret_len);

/* Parse a DNS message (header, one question, the answer section); -EBADMSG when malformed. */
int app_dns_parse(const uint8_t *msg, size_t len, struct app_dns_msg *ret);

/* A name to compare: lowercased, trailing dot dropped, checked as in build_query; false when bad. */
bool app_dns_name_normalize(const char *in, char out[256]);

struct app_dns_servers {
        struct sockaddr_storage addr[3];
        socklen_t len[3];
        char text[3][64];
        size_t n;
};

/* Servers from the resolver option, or from resolv_conf's nameserver lines (127.0.0.1 when none). */
int app_dns_servers_from(const struct app_dns_options *o, struct app_dns_servers *ret, struct na_error *err);

/*
 * Ask the servers (in turn, retrying each second) for name/type until an answer that
 * matches the question comes or deadline (CLOCK_MONOTONIC ms) passes: 0 and *ret, or
 * -ETIMEDOUT (no answer at all; ICMP refusals count as none), or another -errno.
 */
int app_dns_query(const struct app_dns_servers *s, const char *name, uint16_t type, long long deadline_ms,
                  struct app_dns_msg *ret);

