/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A running app's CPU, memory and pids limits changed in place (app.update's live plan
 * change), in the cgroup crun made for it (nodeagent/app-<id>) and the CPU cap of its
 * monitor's (nodeagent/monitor-<id>, app-monitor.h). crun's cgroupfs manager writes the
 * same files at a start, so the two never disagree about where a limit lives:
 *   v2: <root>/<rel>/cpu.max "quota period", memory.max, pids.max
 *   v1 and hybrid: <root>/cpu/<rel>/cpu.cfs_{period,quota}_us,
 *       <root>/memory/<rel>/memory.limit_in_bytes (and memory.memsw.limit_in_bytes where
 *       swap is accounted: crun gives an app no swap, so both are equal; the larger is
 *       raised first and the smaller lowered first, as v1 demands limit <= memsw),
 *       <root>/pids/<rel>/pids.max.
 * A memory limit below what the app uses is refused by v1 (EBUSY) after the kernel tried
 * to reclaim; the caller then puts the old limits back.
 *
 *   struct app_cg_limits l = { .cpu_quota_us = 50000, .cpu_period_us = 100000, .memory_bytes = 64 << 20, .pids = 512 };
 *   r = app_cg_limits_set(NULL, layout, "nodeagent/app-<id>", &l, &err);
 */
#pragma once

#include <stdint.h>

#include "common/error.h"
#include "drivers/app/oci/app-crun.h"

struct app_cg_limits {
        int64_t cpu_quota_us, cpu_period_us; /* 0: leave the CPU limit */
        int64_t memory_bytes;                /* 0: leave it */
        int64_t pids;                        /* 0: leave it */
};

/* root NULL: /sys/fs/cgroup. rel: the cgroup below each hierarchy, without a leading '/'.
 * -ENOENT (err set) when the cgroup is not there (the app does not run). */
int app_cg_limits_set(const char *root, enum app_cgroup_layout layout, const char *rel,
                      const struct app_cg_limits *l, struct na_error *err);
