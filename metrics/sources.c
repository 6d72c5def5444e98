/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The registered sources, in reading order: the node's first (netdev fills the
 * interface table the tap source reads), then each guest's.
 */
#include "metrics/metrics-internal.h"

const struct metrics_source *const metrics_sources[] = {
        &metrics_source_proc_stat,
        &metrics_source_meminfo,
        &metrics_source_diskstats,
        &metrics_source_netdev,
        &metrics_source_pressure,
        &metrics_source_cgroup_cpu,
        &metrics_source_cgroup_memory,
        &metrics_source_cgroup_io,
        &metrics_source_tap,
        NULL,
};
