/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Files the package installs beside the daemon, found from where the running
 * executable is, never from a path fixed at build time (a package is built under one
 * prefix and installed under another; a build tree is anywhere):
 *
 *   char p[PATH_MAX];
 *   if (agent_beside_exe(NA_LIBEXEC_RELDIR, "nodeagent-monitor", p, sizeof(p), &err) < 0) ...
 *
 * reldir is relative to the directory of /proc/self/exe (e.g. "../libexec/nodeagent",
 * from CMake's install directories); the directory is resolved with realpath() when it
 * exists, so messages name the real place. Nothing checks that the file exists.
 */
#pragma once

#include <stddef.h>

#include "common/error.h"

int agent_beside_exe(const char *reldir, const char *name, char *buf, size_t len, struct na_error *err);
