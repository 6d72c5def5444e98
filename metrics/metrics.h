/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metrics of the node, its servers and its apps: read from procfs and cgroupfs
 * every interval, turned into rates, kept as history on the node's disk, answered
 * as agent API Samples and Metrics (5.1) and rendered as Prometheus text.
 *
 * Threads: metrics_collect() runs on one collector thread; metrics_track/untrack
 * may run on any thread (they wait for a tick in progress); metrics_query,
 * metrics_latest*, metrics_prometheus_render and metrics_stats may run on any
 * thread at any time and only wait for the short commit phase of a tick (rates and
 * history, no file reads).
 *
 * Files: history in <state_dir>/metrics/<kind>-<id>.hist (node: node.hist), one
 * file of exactly 262,144 bytes (256 KiB) per target, read and written with
 * pread/pwrite (see history.h: closed buckets are written every 2 minutes; a
 * crash loses at most those, metrics_close or untracking nothing).
 * While a target is tracked the collector keeps its cgroup files open (4 or 5
 * descriptors per target: give the daemon RLIMIT_NOFILE >= 8 x targets; when
 * descriptors run out it falls back to opening the files at every tick).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "proto/metrics-params.h"

struct metrics;

enum metrics_kind { METRICS_NODE, METRICS_VPS, METRICS_APP };
extern const char *const metrics_kind_names[]; /* "node", "vps", "app" */

struct metrics_options {
        const char *state_dir;    /* required: history goes to <state_dir>/metrics/ */
        const char *proc_root;    /* NULL: "/proc" */
        const char *sys_root;     /* NULL: "/sys"; <sys_root>/class/net tells physical interfaces */
        const char *cgroup_root;  /* NULL: "/sys/fs/cgroup" */
        unsigned interval_sec;    /* 0: 10; a target with no sample for 3 intervals has no "now" values */
        bool no_fd_cache;         /* tests: reopen every file at every tick (fixture files replaced) */
        bool no_preallocate;      /* tests/bench on tmpfs: sparse history files instead of fallocate */
};

int metrics_open(const struct metrics_options *opts, struct metrics **ret, struct na_error *err);
void metrics_close(struct metrics *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct metrics *, metrics_close)

/* A new interval (Settings.metricsIntervalSec); only how long a sample counts as "now" depends on it. */
void metrics_set_interval(struct metrics *m, unsigned interval_sec);

/*
 * Delete history files of targets that are not tracked and were not written for
 * longer than the history keeps anything (31 days): servers and apps removed while
 * the agent could not untrack them. Call after tracking the inventory at start.
 * Returns how many files went, or a negative errno.
 */
int metrics_prune(struct metrics *m, uint64_t now_ms, struct na_error *err);

/* "v1", "v2" or "hybrid", as detected at open (for hello's host.cgroup); "none" without cgroups. */
const char *metrics_cgroup_mode(const struct metrics *m);
/* CPUs of the node as /proc/stat shows them (0 before the first tick). */
unsigned metrics_node_cpus(const struct metrics *m);

/*
 * What to measure for a server or an app. The cgroup is found either by libvirt
 * domain name (vps: NULL means "vps-<id>", see common/names.h) or given as a path
 * relative to the cgroup hierarchies ("machine.slice/x.scope", "/crun/<id>": a
 * leading "/" is allowed, ".." and empty components are not).
 */
struct metrics_target_spec {
        enum metrics_kind kind;      /* METRICS_VPS or METRICS_APP */
        const char *id;              /* a UUID */
        const char *domain;          /* libvirt domain name; ignored when cgroup is set */
        const char *cgroup;          /* explicit cgroup path; required for apps */
        const char *ifname;          /* host side of the guest's interface; NULL for a vps: na_vps_ifname(id) */
        unsigned vcpus;              /* cpuPercent is relative to this many CPUs; 0: all of the node's */
        uint64_t memory_limit_bytes; /* memoryLimitMB; 0: the cgroup's own limit (when it has one) */
};

/*
 * Start (or update) measuring a target. Its history file is opened or created; a
 * corrupt or short one is recreated empty. Tracking an id again replaces its spec.
 */
int metrics_track(struct metrics *m, const struct metrics_target_spec *spec, struct na_error *err);
/* Stop measuring; drop_history also deletes the history file. -ENOENT if unknown. */
int metrics_untrack(struct metrics *m, enum metrics_kind kind, const char *id, bool drop_history,
                    struct na_error *err);
bool metrics_tracked(struct metrics *m, enum metrics_kind kind, const char *id);

/*
 * One tick at wall-clock time now_ms: read every source, compute rates against the
 * previous tick, update the latest samples and the history. A value that cannot be
 * read is skipped for this tick (and counted in metrics_stats), never the whole
 * tick, so it returns 0 (err is kept for a future failure that stops a tick). A
 * server whose machine cgroup is not known yet (stopped, just created) is looked up
 * again at every tick, with one scan of the machine partitions per tick for all.
 */
int metrics_collect(struct metrics *m, uint64_t now_ms, struct na_error *err);

/* The latest Sample of every target measured at the last tick, node first (for a report). */
json_t *metrics_latest_json(struct metrics *m);
/* The latest sample of one target; -ENOENT when it is not tracked or has none yet. */
int metrics_latest(struct metrics *m, enum metrics_kind kind, const char *id, struct proto_metrics_sample *ret);

/*
 * Answer vps.metrics / app.metrics: {now, series}. A target that is not tracked
 * gives -ENOENT (VPS_NOT_FOUND / APP_NOT_FOUND) unless allow_untracked, where its
 * history file is read if one exists and now carries no values.
 */
int metrics_query(struct metrics *m, enum metrics_kind kind, const char *id, const struct proto_metrics_query *q,
                  bool allow_untracked, json_t **ret, struct na_error *err);
/* The series alone, for tests and tools: *ret_points (malloc'ed) and its length. */
int metrics_series(struct metrics *m, enum metrics_kind kind, const char *id, const struct proto_metrics_query *q,
                   struct proto_metrics_point **ret_points, size_t *ret_n, struct na_error *err);

/*
 * Prometheus text format (0.0.4) of the node's and the guests' latest values and
 * counters and of the collector itself. The daemon appends its own health lines
 * and serves the text; nothing here listens on a socket.
 */
int metrics_prometheus_render(struct metrics *m, FILE *out, struct na_error *err);

struct metrics_stats {
        uint64_t ticks;
        uint64_t values_skipped;   /* values that could not be read, over all ticks */
        uint64_t counter_resets;   /* rates skipped because a counter went back or jumped */
        uint64_t lookups;          /* scans of the machine cgroup directories */
        uint64_t last_tick_us;     /* wall time of the last tick */
        uint64_t last_flush_us;    /* of which writing history buckets (a twelfth of the targets a tick) */
        uint64_t history_writes;   /* pwrites of history buckets, over all ticks */
        unsigned targets;          /* including the node */
        unsigned unresolved;       /* guests whose cgroup was not found at the last tick */
};
void metrics_stats(struct metrics *m, struct metrics_stats *ret);
