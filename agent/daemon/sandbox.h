/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The agent's seccomp filters, loaded once the privileged set-up is done (after chrony's
 * sys_linux.c), chosen by the sandbox key (config_sandbox()):
 *  - sandbox_apply_strict(): an allow-list fitted to the agent (agent/daemon/sandbox-strict.c),
 *    the default; the programs the agent starts are started by the exec helper
 *    (common/spawnd.h), forked before it, so they do not inherit it.
 *  - sandbox_apply(): the older deny-list (agent/daemon/sandbox.c), inherited by everything the
 *    agent starts, so it refuses only the calls no part of the agent or its children
 *    ever needs and that would turn a compromise into a node takeover.
 */
#pragma once

#include "common/error.h"

int sandbox_apply(struct na_error *err);

/* sandbox = strict: an allow-list fitted to the agent (agent/daemon/sandbox-strict.c); the
 * exec helper (common/spawnd.h) must already run, since children would inherit it. */
int sandbox_apply_strict(struct na_error *err);
