/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Fixture trees for the metrics tests: procfs, sysfs and cgroupfs look-alikes in a temporary directory. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/macro.h"

/* A fresh directory under $TMPDIR (or /tmp); free with fx_remove. */
char *fx_mkdtemp(const char *tag);
/* rm -rf dir (fixture trees only). */
void fx_remove(const char *dir);
/* Write (in place: truncate and rewrite, so cached descriptors see it) dir/rel, creating parents. */
void fx_write(const char *dir, const char *rel, const char *fmt, ...) _printf_(3, 4);
void fx_mkdir(const char *dir, const char *rel);
void fx_rmdir_tree(const char *dir, const char *rel);

/* A node: /proc/stat, meminfo, diskstats, net/dev (lo, eth0 and the given taps), pressure. */
struct fx_node {
        uint64_t busy, idle;         /* jiffies of the "cpu" line (busy all in user) */
        unsigned cpus;
        uint64_t mem_total_kb, mem_avail_kb;
        uint64_t sda_read_sectors, sda_write_sectors;
        uint64_t eth_rx, eth_tx;
};
void fx_write_node(const char *root, const struct fx_node *n);
/* /proc/net/dev with lo, eth0 and n taps (names[i] rx[i] tx[i]). */
void fx_write_netdev(const char *root, const struct fx_node *n, const char *const *names, const uint64_t *rx,
                     const uint64_t *tx, unsigned count);

/* cgroup v2 files of one cgroup (rel under root/cgroup): usage_usec, memory, io. */
void fx_cg2(const char *cgroot, const char *rel, uint64_t usage_usec, uint64_t mem_current, uint64_t inactive_file,
            const char *mem_max, uint64_t rbytes, uint64_t wbytes);
/* cgroup v1 files of one cgroup in cpuacct/, memory/, blkio/. */
void fx_cg1(const char *cgroot, const char *rel, uint64_t usage_ns, uint64_t mem_usage, uint64_t inactive_file,
            uint64_t limit, uint64_t rbytes, uint64_t wbytes);
