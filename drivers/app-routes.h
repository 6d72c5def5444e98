/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The hook through which domain exposures are verified and routed (issue 12 items
 * 4 and 5). The app network code (drivers/app/net/app-net*.c) stores domain exposures
 * and calls these functions; the DNS verifier and the HAProxy router fill them in.
 * A node without them (the table pointer NULL, or a function NULL) keeps domain
 * exposures pending: app.exposure.verify answers the Exposure unchanged with
 * verificationError "domain verification is not configured on this node".
 *
 *   static const struct app_routes routes = { .verify = dns_verify, .route_add = hap_add,
 *                                             .route_remove = hap_remove, .userdata = ctx };
 *   struct app_options o = { ..., .routes = &routes };   (agent/daemon/services.c)
 *
 * Calls come from job threads (under the app's own lock, like every job of that
 * app). verify runs without the app network's lock, so a slow resolver holds up
 * nothing else; route_add and route_remove run with it held: keep them short (the
 * HAProxy runtime API), and never call back into the app driver from any of them.
 * Each returns 0 or a negative errno and fills err; app.exposure.verify still
 * succeeds when route_add or route_remove fails: the exposure stays routed as it is,
 * and verificationError carries the router's message.
 *
 * For the periodic re-checks: for every app of driver->inventory, driver->exposure_list
 * gives its exposures; driver->exposure_verify(conn, app, exposure) runs one check
 * and answers the Exposure after it (compare isDomainVerified before and after to
 * emit exposure.verified). driver->address gives an app's private address for its
 * managed hostname.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct app_routes {
        void *userdata;
        /*
         * Check now whether hostname points at target (the app's managed hostname,
         * <hostname>.<apps_domain>): a CNAME chain ending at it, or at a zone apex
         * A/AAAA records equal to the target's. *ret_ok true when it does; otherwise
         * reason (NUL-terminated, at most reason_len) says what was found, e.g.
         * "CNAME points at x.example.net, expected app1.apps.example.com", "NXDOMAIN",
         * "no answer from resolver". A negative return is for the verifier's own
         * failures only (the exposure stays as it was and the reason is its message).
         */
        int (*verify)(void *userdata, const char *hostname, const char *target, bool *ret_ok, char *reason,
                      size_t reason_len, struct na_error *err);
        /* Route hostname (HTTP by Host, TLS by SNI) to addr:port (addr dotted IPv4). Idempotent. */
        int (*route_add)(void *userdata, const char *app_id, const char *exposure_id, const char *hostname,
                         const char *addr, uint16_t port, struct na_error *err);
        /* Stop routing hostname. Idempotent (an unknown route: 0). */
        int (*route_remove)(void *userdata, const char *app_id, const char *exposure_id, const char *hostname,
                            struct na_error *err);
};
