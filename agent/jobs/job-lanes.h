/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The job engine's budget, as a rule apart from its mechanism (agent/jobs/jobs.c counts,
 * this decides; proto/README.md and docs/operations.md say it in words).
 *
 * Two lanes. The node lane holds the kinds that keep the node and every customer's
 * service operable and are short by nature: power and status of servers and apps,
 * node.status, live consoles, a server's firewall and network. The tenant lane holds
 * everything else: backups and restores, deploys and image pulls, file transfers,
 * installs, snapshots: work whose length a customer controls.
 *
 *   - A tenant job starts while fewer than tenant_max tenant slots are taken
 *     (max_parallel_jobs, or the central API's maxJobs).
 *   - A node job starts in a node slot while fewer than node_max are taken
 *     (node_parallel_jobs); with every node slot taken it may borrow a free tenant
 *     slot. A tenant job never takes a node slot: however many and however long the
 *     customers' jobs are, node_max slots stay free for the node's own kinds.
 *   - The link takes new jobs (asking for "max" of them) while a lane has a free slot:
 *     room = free node slots + free tenant slots, counting queued jobs too. Tenant jobs
 *     that arrive beyond their lane's slots wait queued; once queued_max of them wait,
 *     the link takes nothing more until one ends (memory stays bounded).
 * Jobs for one target still run one at a time, in createdAt order, whatever their lane.
 */
#pragma once

#include <stdbool.h>

enum job_lane { JOB_LANE_TENANT = 0, JOB_LANE_NODE = 1, JOB_LANES };

struct job_lane_limits {
        unsigned tenant_max; /* >= 1 */
        unsigned node_max;   /* >= 1 */
        unsigned queued_max; /* tenant jobs waiting beyond their slots before the link stops taking jobs */
};

/* Per lane: jobs running in a slot of that lane, and jobs held (running or queued) of that lane's kinds. */
struct job_lane_counts {
        unsigned slots[JOB_LANES];
        unsigned held[JOB_LANES];
};

/* The lane of a kind, by its name. */
enum job_lane job_lane_of(const char *kind);
const char *job_lane_name(enum job_lane lane);

/* Whether a job of lane may start now; *ret_slot: the lane whose slot it takes. */
bool job_lane_may_start(const struct job_lane_limits *lim, const struct job_lane_counts *c, enum job_lane lane,
                        enum job_lane *ret_slot);

/* How many jobs the link may ask for now (0: do not poll). */
unsigned job_lane_poll_room(const struct job_lane_limits *lim, const struct job_lane_counts *c);
