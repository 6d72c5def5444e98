/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The state directory's format version: <state_dir>/format holds one line,
 * "nodeagent-state N\n". The daemon calls na_statedir_format_check() right after it
 * takes the directory's lock: a directory without the file (a fresh one, or one made
 * before the file existed, whose layout is format 1) gets this version's, written
 * atomically; a known version passes; any other version, or a file that does not
 * read as one line "nodeagent-state N", is refused with a message naming the file,
 * what was found and what this version knows, and the agent does not start (exit 2).
 *
 * Raise NA_STATEDIR_FORMAT when a change of the directory's layout makes it unreadable
 * to the previous release; keep NA_STATEDIR_FORMAT_MIN at the oldest format this
 * release still reads (and migrates, in the daemon, before it rewrites the file).
 */
#pragma once

#include <stddef.h>

#include "common/error.h"

#define NA_STATEDIR_FORMAT 1u
#define NA_STATEDIR_FORMAT_MIN 1u
#define NA_STATEDIR_FORMAT_FILE "format"
#define NA_STATEDIR_FORMAT_MAGIC "nodeagent-state"
/* The largest format file read; anything longer is garbled. */
#define NA_STATEDIR_FORMAT_MAX_BYTES 64

/*
 * Parse the file's text (len bytes, NUL bytes included): exactly "nodeagent-state N"
 * with N a decimal number from 1 to 999999999 without leading zeros, then at most
 * one "\n". Returns 0 and the version, or -EBADMSG with the reason in err.
 */
int na_statedir_format_parse(const char *text, size_t len, unsigned *ret_version, struct na_error *err);

/*
 * Check dir's format file, writing it when it is missing (see above). Returns 0 when
 * the directory's format is one this version knows; -EPROTONOSUPPORT for a version it
 * does not know or a garbled file (the message says which, names the file and the
 * formats known, and what the operator can do); another negative errno when the file
 * cannot be read or written. *ret_version (may be NULL) is the format found or written.
 */
int na_statedir_format_check(const char *dir, unsigned *ret_version, struct na_error *err);
