/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The peer of a metrics tick in bench-metrics: the files a tick reads, each opened
 * once and read with pread in a tight loop, nothing parsed, nothing stored. What a
 * tick cannot go below on the same files.
 *
 *   struct bare_reads *b = bare_reads_new();
 *   bare_reads_add(b, "/proc/net/dev", 1, 0, true);       every round, to the end
 *   bare_reads_add(b, ".../memory.stat", 6, phase, false);  one round in six
 *   bare_reads_round(b, k);                               round k
 *   bare_reads_free(b);
 *
 * A file read "to the end" is read as the tick reads procfs files (pread until it
 * returns 0); the others with one pread into a buffer larger than the file, as the
 * tick reads cgroup files. Failures to open or read end the program (a bench).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct bare_reads;

struct bare_reads *bare_reads_new(void);
/* Open path now (O_NOATIME where allowed, as the tick does); read it at rounds k with (k + phase) % every == 0. */
void bare_reads_add(struct bare_reads *b, const char *path, unsigned every, unsigned phase, bool to_eof);
/* The node files a tick reads under proc_root (stat, meminfo, diskstats, net/dev, the three pressure files: those that exist), every round. */
void bare_reads_add_node(struct bare_reads *b, const char *proc_root);
/* Read the files of round k; returns the bytes read. */
size_t bare_reads_round(struct bare_reads *b, unsigned k);
/* Files open, and how many a round reads on average. */
size_t bare_reads_files(const struct bare_reads *b);
double bare_reads_per_round(const struct bare_reads *b);
void bare_reads_free(struct bare_reads *b);
