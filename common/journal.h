/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An append-only journal of checksummed records, the base of every durable log in
 * the state directory.
 *
 * File: 8-byte header "NAJRNL1\n", then records of
 *   u32 magic 0x4e414a52 | u32 payload length | u32 crc32c(length, payload) | payload
 * (little endian). On open every record is replayed in order. A torn last record
 * (short, zero-filled or failing its checksum with nothing valid after it) is cut
 * off; a record that fails its checksum with more data after it is a corrupt middle
 * and opening fails with an error naming the file and the offset: the agent does not
 * guess which of the remaining records to trust.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define NA_JOURNAL_MAX_RECORD (16u << 20)

struct na_journal;

/* Called once per valid record, in file order; a negative return aborts the open. */
typedef int (*na_journal_replay_fn)(void *userdata, const void *data, size_t len, struct na_error *err);

struct na_journal_stats {
        uint64_t records;     /* valid records replayed */
        uint64_t torn_bytes;  /* bytes cut off a torn tail (0 when clean) */
};

int na_journal_open(const char *path, na_journal_replay_fn replay, void *userdata, struct na_journal **ret,
                    struct na_journal_stats *stats, struct na_error *err);
void na_journal_close(struct na_journal *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct na_journal *, na_journal_close)

/* Append one record with a single write(2); not durable until na_journal_sync(). */
int na_journal_append(struct na_journal *j, const void *data, size_t len, struct na_error *err);
/* Make everything appended so far durable (one fdatasync for many records). */
int na_journal_sync(struct na_journal *j, struct na_error *err);
/* Whether the file ends where its last whole record does (false after an append that failed and could not be cut off). */
bool na_journal_whole(const struct na_journal *j);
/* Cut the journal back to size bytes (records appended after it are dropped). */
int na_journal_truncate(struct na_journal *j, uint64_t size, struct na_error *err);

uint64_t na_journal_size(const struct na_journal *j);
const char *na_journal_path(const struct na_journal *j);

/*
 * Compaction: write a new journal with the records emit() adds through
 * na_journal_emit(), make it durable and atomically put it in place of the old one.
 * On failure the old journal stays as it was.
 */
struct na_journal_out;
typedef int (*na_journal_emit_fn)(void *userdata, struct na_journal_out *out, struct na_error *err);
int na_journal_rewrite(struct na_journal *j, na_journal_emit_fn emit, void *userdata, struct na_error *err);
int na_journal_emit(struct na_journal_out *out, const void *data, size_t len, struct na_error *err);
