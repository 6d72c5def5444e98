/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The DNS verifier of app domains (issue 12, item 4; AGENT-API 4.2, reference 3.3):
 * does `hostname` point at this node, as the customer was told (`target`, the app's
 * managed hostname `<hostname>.<apps_domain>`)?
 *
 * Accepted, in this order:
 *   1. a CNAME chain from hostname that reaches target (at most 8 links, loops
 *      detected); names compare case-insensitively, a trailing dot ignored;
 *   2. when hostname has no CNAME (a zone apex cannot have one) but A/AAAA records:
 *      their set equals the set of target's own A/AAAA records (target resolved too);
 *   3. or every one of those records is one of o->public_addresses (the node's own
 *      addresses: traffic to them reaches this node's HAProxy, so routing the name
 *      here is what its owner asked for). Target's addresses are normally exactly
 *      these, so 3 only matters when target does not resolve (yet); pass NULL to
 *      accept 1 and 2 only.
 *
 * ret->message says exactly what was found, e.g. "CNAME points at x.example.net,
 * expected app1.apps.example.com", "NXDOMAIN", "no answer from resolver (timeout after
 * 3 s)", "A records 192.0.2.1 differ from app1.apps.example.com's 203.0.113.5", "no
 * CNAME, A or AAAA record". ret->transient is set when no usable answer came (timeout,
 * SERVFAIL, REFUSED, a malformed answer): the caller should then keep a verified
 * domain routed and try later, rather than un-route it on a resolver's hiccup.
 *
 * Why a DNS client of our own (app-dns-wire.c, app-dns-client.c) rather than
 * libresolv's res_nquery: res_nquery turns an NXDOMAIN or an empty answer into -1 and
 * drops the message, so the CNAME chain that led to a missing name (the "points at
 * x.example.net" we must report) is lost; its h_errno says TRY_AGAIN both for a
 * timeout and for SERVFAIL; its timeouts are whole seconds per try, not one bound for
 * the whole check; an IPv6 resolver needs glibc-private fields of res_state. The
 * client is small: one question over UDP (TCP when the answer is truncated), the
 * answer's ID, flags and question checked, and the parser (no I/O) is fuzzed
 * (tests/routing/fuzz-dns.c).
 *
 * Blocking (call it from a worker thread); the whole call is bounded by
 * o->timeout_ms. Thread-safe: no shared state.
 */
#pragma once

#include <stdbool.h>

#include "common/error.h"

struct app_dns_options {
        /* "ADDR", "ADDR:PORT" or "[V6ADDR]:PORT" (port 53 when absent); NULL or "": the
         * nameservers of resolv_conf, tried in turn. */
        const char *resolver;
        const char *resolv_conf;                 /* NULL: /etc/resolv.conf */
        unsigned timeout_ms;                     /* the whole verification; 0: 3000 */
        const char *const *public_addresses;     /* NULL-terminated IPv4/IPv6 texts, or NULL */
};

struct app_dns_result {
        bool verified;
        bool transient;    /* no usable answer: neither proof nor disproof */
        char message[512]; /* what was found (printable ASCII; names escaped as \DDD) */
};

/*
 * Check hostname against target. Returns 0 with *ret filled whatever DNS said; < 0
 * only for bad arguments (VALIDATION_ERROR on "hostname" or "target": not a DNS name;
 * INTERNAL_ERROR: an unusable resolver option) or when out of memory.
 */
int app_dns_verify(const struct app_dns_options *o, const char *hostname, const char *target,
                   struct app_dns_result *ret, struct na_error *err);
