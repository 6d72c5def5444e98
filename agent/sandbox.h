/*
 * The seccomp filter, loaded once the privileged set-up is done (after chrony's
 * sys_linux.c). It is a deny-list, not an allow-list: the agent drives libvirt,
 * netlink, cgroups and child processes (qemu-img, xorriso) whose system calls are
 * too many to enumerate safely, so it refuses the calls no part of the agent or its
 * children ever needs and that would turn a compromise into a node takeover.
 */
#pragma once

#include "common/error.h"

int sandbox_apply(struct na_error *err);

/* sandbox = strict: an allow-list fitted to the agent (agent/sandbox-strict.c); the
 * exec helper (common/spawnd.h) must already run, since children would inherit it. */
int sandbox_apply_strict(struct na_error *err);
