/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon: start-up in dependency order (config, state directory and its lock,
 * host facts, loop, drivers, job layer, controller link, control socket, signals,
 * sandbox), the loop, the drain on SIGTERM, and teardown in reverse.
 */
#pragma once

#include <jansson.h>

#include "agent/base/config.h"
#include "common/error.h"

struct agent;

/* Takes ownership of cfg. -EPROTONOSUPPORT only when the state directory's format is
 * one this version does not know, or its format file is garbled (common/statedir-format.h). */
int agent_new(struct agent_config *cfg, struct agent **ret, struct na_error *err);
/* Run the loop until SIGTERM/SIGINT and the drain; returns the exit status. */
int agent_run(struct agent *a);
void agent_free(struct agent *a);

/* node.status data; thread-safe (worker threads call it). agent may be NULL in tests. */
json_t *agent_node_status(void *agent, struct na_error *err);
