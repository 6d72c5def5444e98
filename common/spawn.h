/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Child processes in exec form: never a shell. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "common/spawnd.h"
#include "common/progress.h"

/*
 * Run argv (argv[0] an absolute path; exec form, never a shell) with stdin from
 * /dev/null and a minimal environment. stdout is kept up to out_max bytes when
 * ret_out is not NULL (else discarded); the end of stderr goes into the error
 * message when the program fails (DRIVER_ERROR, details.reason). progress'
 * checkpoint is polled while it runs: when it fails the child is killed and its
 * error returned. The child is always reaped before this returns.
 */
int na_spawn(char *const argv[], const struct na_progress *progress, char **ret_out, size_t out_max,
             struct na_error *err);

/*
 * As na_spawn, with stdout handed to on_out (may be NULL: discarded) as it comes, in
 * pieces of any size: e.g. a program's progress output. on_out < 0 kills the program
 * and na_spawn_stream fails with that errno.
 */
typedef int (*na_spawn_out_fn)(void *userdata, const char *data, size_t n);
int na_spawn_stream(char *const argv[], const struct na_progress *progress, na_spawn_out_fn on_out, void *userdata,
                    struct na_error *err);

/*
 * Start c (c->fds[i] becomes the program's descriptor i, signals reset, a new process
 * group with NA_SPAWND_SETPGROUP): through the exec helper when it runs, so the
 * program is outside the agent's seccomp filter, else with posix_spawn. *ret_pid is
 * the program's pid; *ret_handle, when >= 0, is the helper's handle to read its exit
 * status from (na_spawnd_wait; close it), else the program is this process's child.
 * NA_SPAWND_DETACH needs the helper.
 */
int na_spawn_start(const struct na_spawnd_cmd *c, pid_t *ret_pid, int *ret_handle, struct na_error *err);
