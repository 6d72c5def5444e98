/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The agent's own lines of the Prometheus page (after metrics/' node and guest
 * figures): its jobs, the controller link as a state set, results and journal, the
 * events it sent, its servers and apps (state sets, restarts, volume quota) and the
 * state directory's file system. docs/operations.md lists every name; the dashboard
 * and alerting rules in packaging/ use them.
 */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

struct agent_services;

/* The event types the agent emits (AGENT-API 5, and the agent's own), counted by type. */
enum { PROMETHEUS_EVENT_TYPES = 10 };

struct prometheus_events {
        atomic_uint_fast64_t by_type[PROMETHEUS_EVENT_TYPES + 1]; /* the last: any other type */
        atomic_uint_fast64_t crash_loops;                        /* app.exited with crashLoop true */
};

/* From any thread (drivers emit events from their own). data is only read. */
void prometheus_events_count(struct prometheus_events *e, const char *type, const json_t *data);

struct prometheus_agent_facts {
        const char *version;
        double start_time_sec; /* Unix time the agent started */
        unsigned jobs_running, jobs_queued, jobs_max_parallel;
        uint64_t jobs_succeeded, jobs_failed, jobs_abandoned;
        const char *link_state; /* one of link_state_names */
        unsigned results_pending;
        uint64_t journal_bytes;
        unsigned consoles_open;
        const char *state_dir; /* its file system's size and room */
        const struct prometheus_events *events;
};

/*
 * Writes the agent's lines to out. Asks the drivers for their inventory and each
 * app's status (thread-safe, in-memory figures and one statfs per app volume).
 */
void prometheus_agent_render(FILE *out, const struct prometheus_agent_facts *f, struct agent_services *s);
