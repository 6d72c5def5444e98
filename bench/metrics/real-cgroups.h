/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bench-metrics --real-cgroups N: the tick against its bare reads on this host's own
 * cgroupfs and procfs, whose files the kernel generates at every read (the fixture
 * node lives on tmpfs). N empty cgroups are made under each hierarchy the metrics
 * read (v1, v2 or hybrid, as detected), tracked as apps by a collector of their
 * own, and removed at close.
 *
 *   struct real_cgroups *rc = real_cgroups_open(1000, state_dir);   NULL: said why
 *   metrics_collect(real_cgroups_metrics(rc), ...);
 *   bare_reads_round(real_cgroups_bare(rc), k);
 *   real_cgroups_close(rc);
 */
#pragma once

#include "bare-reads.h"
#include "metrics/metrics.h"

struct real_cgroups;

/* History under state_dir (the caller removes it). Needs root and a cgroup file system; prints why and returns NULL when it cannot run. */
struct real_cgroups *real_cgroups_open(unsigned n, const char *state_dir);
struct metrics *real_cgroups_metrics(struct real_cgroups *rc);
/* The files the collector's tick reads: per cgroup CPU, memory usage, I/O (memory.stat one round in six); /proc's. */
struct bare_reads *real_cgroups_bare(struct real_cgroups *rc);
/* "v1", "v2" or "hybrid" */
const char *real_cgroups_mode(const struct real_cgroups *rc);
void real_cgroups_close(struct real_cgroups *rc);
