/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Domain routing for apps (issue 12 items 4 and 5): fills the app driver's
 * struct app_routes (drivers/app-routes.h) with the DNS verifier
 * (routing/app-dns.h) and the agent's own HAProxy (routing/app-haproxy.h),
 * and re-checks domains on a thread of its own: pending ones every
 * [apps] verify_pending_sec, routed ones every verify_routed_sec; the same thread
 * starts HAProxy again within 10 s when it died. A pending domain
 * whose check succeeds is routed and reported (exposure.verified); a routed one that
 * no longer points at the node is un-routed and reported (exposure.unverified, an
 * extension: proto/README.md). A check that got no usable answer (timeout, SERVFAIL)
 * changes nothing.
 *
 *   r = agent_routes_open(cfg, &routes, &err);   // before the app driver opens: o.routes
 *   struct app_options o = { ..., .routes = agent_routes_table(routes) };
 *   agent_routes_start(routes, services);        // once apps are open: the re-check thread
 *   agent_routes_stop(routes);                   // the thread ends: before the app driver closes
 *   agent_routes_close(routes);                  // after it; HAProxy keeps running (routes survive)
 *
 * Off (open answers 0 with *ret NULL) unless [apps] apps_domain and haproxy are set;
 * HAProxy outlives agent restarts on purpose, and turning domain routing off in the
 * configuration is how an operator stops it: open then ends the one an earlier agent
 * started from this state directory.
 */
#pragma once

#include "agent/base/config.h"
#include "common/error.h"
#include "drivers/app-routes.h"

struct agent_routes;
struct agent_services;

int agent_routes_open(const struct agent_config *cfg, struct agent_routes **ret, struct na_error *err);
const struct app_routes *agent_routes_table(const struct agent_routes *r); /* NULL-safe */
void agent_routes_start(struct agent_routes *r, const struct agent_services *s);
void agent_routes_stop(struct agent_routes *r);  /* NULL-safe, idempotent */
void agent_routes_close(struct agent_routes *r); /* NULL-safe */
/* One round of re-checks now (tests, and the thread's tick). */
void agent_routes_recheck(struct agent_routes *r, bool routed_too);
