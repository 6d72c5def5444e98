/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Draining a node (`nodeagentctl drain`, issue 23 item 5), as a rule apart from its
 * mechanism: while the node drains, the kinds that bring a new server or app onto it
 * are refused with 409 INVALID_STATE, details.state "draining"; every other kind runs
 * as always, so what is on the node can still be stopped, backed up, moved away or
 * deleted. The job engine asks this (agent/jobs/jobs.c); the daemon keeps the mode in
 * the state directory and says it in hello's capabilities ("draining").
 */
#pragma once

#include <stdbool.h>

#define JOB_DRAIN_STATE "draining" /* details.state of the refusal */

/* Whether a job of this kind is refused while the node drains. */
bool job_drain_refuses(const char *kind);
