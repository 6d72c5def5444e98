/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The controller link (agent API sections 1, 2, 3 and 5) on the daemon's loop:
 * hello at start and after every reconnect that followed a failure; the long poll
 * asking for as many jobs as there are free slots; progress, at most one post a
 * second per job carrying the latest (also as the lease keepalive, every leaseSec/3);
 * results, never delayed by progress, recorded durably before they are sent and
 * re-sent oldest first until taken or refused with 404/409; reports. Failures back
 * off with full jitter (agent/link/backoff.h) and the link state is logged once per
 * change. The bearer token is re-read when its file changes and after any 401.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "agent/base/config.h"
#include "agent/link/hostinfo.h"
#include "agent/jobs/jobs.h"
#include "agent/jobs/jobstore.h"
#include "agent/base/loop.h"
#include "agent/link/reports.h"
#include "proto/wire.h"

struct link;

struct link_options {
        const struct agent_config *cfg;
        const struct host_facts *host;
        struct jobs *jobs;
        struct jobstore *store;
        struct reports *reports;
        /* Daemon callbacks (loop thread, but inventory); any may be NULL. */
        json_t *(*inventory)(void *userdata);       /* {vps: [...], apps: [...]}: on a thread of its own */
        json_t *(*capabilities)(void *userdata);    /* hello's capabilities from the driver tables, less jobKinds */
        json_t *(*metrics_samples)(void *userdata); /* the latest Samples for a report */
        void (*settings_applied)(void *userdata, const struct proto_settings *s);
        void *userdata;
};

int link_new(struct loop *loop, const struct link_options *opt, struct link **ret, struct na_error *err);
void link_free(struct link *l);
/* Say hello, then poll. Results left in the journal by an earlier run are queued first. */
void link_start(struct link *l);
/* What hello's capabilities say changed (the node's drain): hello again when connected. */
void link_capabilities_changed(struct link *l);
/* Stop taking jobs (SIGTERM); results and reports are still sent. */
void link_drain(struct link *l);
/* Nothing left to send, or nothing can be sent now (the link is down). */
bool link_idle(struct link *l);
/* Re-read the token file now (SIGHUP). */
void link_reload_token(struct link *l);
/* Any thread: queue an event (stolen) and send a report soon. */
void link_emit_event(struct link *l, json_t *event);
/* Results waiting to be taken by the central API; thread-safe. */
unsigned link_results_pending(struct link *l);
json_t *link_status_json(struct link *l);
/* "connected", "connecting", "backing-off", "auth-refused" */
const char *link_state_name(struct link *l);
/* Every state link_state_name() can answer, NULL-terminated (the Prometheus state set). */
extern const char *const link_state_names[];
