/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Kinds that act on the node itself (agent API 4.0). */
#include "agent/daemon/daemon.h"
#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"

static int node_status_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        *ret = agent_node_status(s->agent, err);
        return *ret ? 0 : -EIO;
}

static JOB_KIND(node_status, "node.status", .target = PROTO_TARGET_NODE, .changes = false, .run = node_status_run);

job_kind_list node_job_kinds = { &node_status, NULL };
