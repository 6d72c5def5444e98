/* Child processes in exec form: never a shell. */
#pragma once

#include <stddef.h>

#include "common/error.h"
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
