/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A journal's writer thread, with group commit: callers queue records and get a
 * ticket; the thread appends everything queued, makes it durable with one
 * fdatasync, and wakes whoever waits for those tickets. Rewrites (compaction) are
 * queued operations too, so they happen in order with the appends around them.
 * The thread calling append never blocks on the disk unless it asks to wait.
 */
#pragma once

#include <stdint.h>

#include "common/journal.h"

struct na_journal_writer;

struct na_journal_writer_stats {
        uint64_t appended;  /* records appended since start */
        uint64_t syncs;     /* fdatasync calls */
        uint64_t rewrites;
        uint64_t file_bytes;
        uint64_t failed;    /* records and rewrites that failed, the journal whole without them */
};

/* Takes ownership of the open journal j. */
int na_journal_writer_start(struct na_journal *j, struct na_journal_writer **ret, struct na_error *err);
/* Write what is queued, stop the thread, close the journal. */
void na_journal_writer_stop(struct na_journal_writer *w);

/* Queue one record (copied); returns its ticket (0 when out of memory). */
uint64_t na_journal_writer_append(struct na_journal_writer *w, const void *data, size_t len);
/*
 * Block until the ticket is durable. Fails when its record could not be made durable
 * (the journal is whole without it: a full disk, INVALID_STATE with details.state
 * "state-directory-full", recovers by itself once there is space), or with the
 * writer's sticky error when the journal could not be put back whole.
 */
int na_journal_writer_wait(struct na_journal_writer *w, uint64_t ticket, struct na_error *err);
/* Wait for everything queued so far. */
int na_journal_writer_flush(struct na_journal_writer *w, struct na_error *err);

/*
 * Queue a rewrite: when its turn comes the thread calls na_journal_rewrite() with
 * emit(userdata), then done(userdata) (both on the writer thread; done may be NULL).
 */
int na_journal_writer_rewrite(struct na_journal_writer *w, na_journal_emit_fn emit, void (*done)(void *userdata),
                              void *userdata);

void na_journal_writer_get_stats(struct na_journal_writer *w, struct na_journal_writer_stats *out);
