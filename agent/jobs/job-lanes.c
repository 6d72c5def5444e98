/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The job engine's budget (agent/jobs/job-lanes.h): which lane a kind runs in, when a job may start, when the link polls. */
#include "agent/jobs/job-lanes.h"

#include <string.h>

#include "common/macro.h"

/* The node lane: short kinds that keep the node and every customer's service operable. */
static const char *const node_kinds[] = {
        "node.status",                       /* the node */
        "vps.power",      "vps.status",      /* servers */
        "vps.firewall.get", "vps.firewall.set", "vps.network.set",
        "app.power",      "app.status",      /* apps */
        "console.open",   "console.close",   "app.console.send", /* live consoles */
};

enum job_lane job_lane_of(const char *kind)
{
        for (size_t i = 0; kind && i < ARRAY_SIZE(node_kinds); i++)
                if (streq(kind, node_kinds[i]))
                        return JOB_LANE_NODE;
        return JOB_LANE_TENANT;
}

const char *job_lane_name(enum job_lane lane)
{
        return lane == JOB_LANE_NODE ? "node" : "tenant";
}

bool job_lane_may_start(const struct job_lane_limits *lim, const struct job_lane_counts *c, enum job_lane lane,
                        enum job_lane *ret_slot)
{
        if (lane == JOB_LANE_NODE && c->slots[JOB_LANE_NODE] < lim->node_max) {
                *ret_slot = JOB_LANE_NODE;
                return true;
        }
        if (c->slots[JOB_LANE_TENANT] < lim->tenant_max) {
                *ret_slot = JOB_LANE_TENANT;
                return true;
        }
        return false;
}

static unsigned free_of(unsigned max, unsigned used)
{
        return used < max ? max - used : 0;
}

unsigned job_lane_poll_room(const struct job_lane_limits *lim, const struct job_lane_counts *c)
{
        if (c->held[JOB_LANE_TENANT] >= lim->tenant_max + lim->queued_max)
                return 0;
        return free_of(lim->node_max, c->held[JOB_LANE_NODE]) + free_of(lim->tenant_max, c->held[JOB_LANE_TENANT]);
}
