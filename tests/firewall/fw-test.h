/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the firewall tests: JSON literals, VALIDATION_ERROR detail checks,
 * a private network namespace, and running a command (nft) with its output captured.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "proto/firewall.h"

/* Parse a JSON literal of a test (fails the test on a typo). */
json_t *fwt_json(const char *text);
/* Decode a literal that must be valid. */
void fwt_config(const char *text, struct fw_config *out);

/* Whether the details node at a dotted path ("" = the payload) has an error containing fragment. */
bool fwt_field_has(const struct na_error *err, const char *path, const char *fragment);
/* Number of error messages anywhere in the details. */
size_t fwt_field_count(const struct na_error *err);

/*
 * Move this process into a private network namespace (never the host's ruleset).
 * Returns false when that is not possible (not root): the caller exits 77.
 */
bool fwt_private_netns(void);

/* Run argv (exec form), NUL-terminated output in *out (may be NULL); returns the exit status or -1. */
int fwt_run(char *const argv[], char **out);
/* Run "nft <args...>" from a single string split on spaces; returns the exit status. */
int fwt_nft(char **out, const char *args);

/* Read a file of the source tree ("tests/firewall/golden/x.txt"), or NULL. */
char *fwt_read_source(const char *rel);
/* Compare text with a golden file; with NA_UPDATE_GOLDEN=1 in the environment, rewrite it instead. */
void fwt_golden(const char *rel, const char *text);
