/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the metrics module: targets, raw counters, the sources' interface and the
 * small file readers they share. Not for other modules.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/names.h"
#include "common/uuid.h"
#include "metrics/cgroup.h"
#include "metrics/history.h"
#include "metrics/metrics.h"

/* Cumulative counters a source reads; rates come from their differences. */
enum mcounter {
        MC_CPU_NS,     /* guest: CPU time used, ns */
        MC_CPU_BUSY,   /* node: busy jiffies of all CPUs */
        MC_CPU_TOTAL,  /* node: all jiffies of all CPUs */
        MC_DISK_READ,  /* bytes */
        MC_DISK_WRITE, /* bytes */
        MC_NET_RX,     /* bytes, as the guest sees it */
        MC_NET_TX,
        MC__COUNT
};
/* Values read as they are. */
enum mgauge { MG_MEM_USED, MG_MEM_LIMIT, MG__COUNT }; /* bytes */

struct metrics_raw {
        uint32_t cvalid;     /* bit per mcounter read this tick */
        uint32_t gvalid;     /* bit per mgauge read this tick */
        uint32_t restarted;  /* bit per mcounter whose source vanished or changed: baseline restarts */
        uint64_t c[MC__COUNT];
        uint64_t g[MG__COUNT];
};
#define MC_BIT(c) (1u << (c))
#define MG_BIT(g) (1u << (g))
#define MC_CGROUP_BITS (MC_BIT(MC_CPU_NS) | MC_BIT(MC_DISK_READ) | MC_BIT(MC_DISK_WRITE))

/* memory.stat is the costliest cgroup file and what it adds (inactive file cache) moves slowly. */
#define MEMORY_STAT_EVERY 6

/* The cgroup files a guest's sources keep open. */
enum mfile { MF_CPU, MF_MEM_CURRENT, MF_MEM_STAT, MF_MEM_LIMIT, MF_IO, MF__COUNT };

struct mtarget {
        enum metrics_kind kind;
        char id[NA_UUID_STRLEN + 1];
        char *domain;          /* libvirt domain name (vps without explicit cgroup), else NULL */
        char *cgroup;          /* relative cgroup path; NULL while a domain's is not found */
        bool explicit_cgroup;  /* cgroup was given, not looked up */
        char ifname[NA_IFNAME_LEN];
        unsigned vcpus;
        uint64_t mem_limit;    /* bytes; 0: read the cgroup's */
        int fd[MF__COUNT];
        unsigned lost;         /* bit per cg_res whose cgroup directory vanished this tick */
        uint64_t inactive_file; /* bytes, from memory.stat, re-read every MEMORY_STAT_EVERY ticks */
        bool have_inactive;
        unsigned stat_phase;   /* which tick of MEMORY_STAT_EVERY reads this target's memory.stat */
        unsigned flush_phase;  /* which tick of HISTORY_FLUSH_BUCKETS writes this target's closed buckets */
        size_t netdev_hint;    /* where its interface was in the netdev table last time */

        /* Collector thread only. */
        struct metrics_raw cur;

        /* Under data_lock. */
        struct metrics_raw prev;        /* last value of each counter and when it was read */
        uint64_t prev_ms[MC__COUNT];
        struct metrics_raw last;        /* the last tick's raw values (Prometheus) */
        struct proto_metrics_sample latest;
        bool has_latest;
        struct history *hist;
};

/* Per-interface counters of /proc/net/dev, kept across ticks (open addressing). */
struct netdev_entry {
        char name[NA_IFNAME_LEN];
        int8_t physical; /* -1 not checked yet, 0 no, 1 has a device (sys/class/net/<if>/device) */
        uint64_t seen;   /* tick that last listed it */
        uint64_t rx, tx;
};
struct netdev_table {
        struct netdev_entry *e;
        size_t cap, used;
        uint32_t *line_slot;  /* the slot of the interface on each line of the last read: tried first */
        size_t lines_cap;
};

enum mpressure_res { MP_CPU, MP_MEMORY, MP_IO, MP__RES };
struct mpressure {
        bool valid[2];      /* some, full */
        double avg10[2], avg60[2], avg300[2];
        uint64_t total_us[2];
};

enum mnodefile { MN_STAT, MN_MEMINFO, MN_DISKSTATS, MN_NETDEV, MN_PRESSURE0, MN__COUNT = MN_PRESSURE0 + MP__RES };

struct metrics {
        char *proc_root, *sys_net_root, *hist_dir;
        unsigned interval_sec;
        bool cache_fds, preallocate;
        int fd_limit; /* keep descriptors below this open between ticks */
        struct metrics_cgroups cg;

        pthread_mutex_t collect_lock; /* one tick at a time; targets added/removed between ticks */
        pthread_mutex_t data_lock;    /* the targets array, samples, history: short holds only */

        struct mtarget **targets;     /* targets[0] is the node */
        size_t n_targets, cap_targets;

        /* Collector thread only. */
        int node_fd[MN__COUNT];
        char *big;
        size_t big_cap;
        struct netdev_table netdev;
        uint64_t tick_seq;
        unsigned cpus_read;           /* CPUs /proc/stat listed at this tick */
        struct mpressure pressure_read[MP__RES];

        /* Under data_lock. */
        unsigned node_cpus;
        struct mpressure pressure[MP__RES];
        uint64_t last_tick_ms;
        struct metrics_stats stats;
};

/* ---- sources (collectd style: each source file only provides its read callback) ---- */

struct metrics_source {
        const char *name;
        bool node; /* true: read once per tick into the node; false: once per guest */
        /* Read into t->cur; returns the number of values that could not be read. */
        unsigned (*read)(struct metrics *m, struct mtarget *t);
};
extern const struct metrics_source *const metrics_sources[]; /* NULL-terminated, in reading order */

extern const struct metrics_source metrics_source_proc_stat;
extern const struct metrics_source metrics_source_meminfo;
extern const struct metrics_source metrics_source_diskstats;
extern const struct metrics_source metrics_source_netdev;
extern const struct metrics_source metrics_source_pressure;
extern const struct metrics_source metrics_source_cgroup_cpu;
extern const struct metrics_source metrics_source_cgroup_memory;
extern const struct metrics_source metrics_source_cgroup_io;
extern const struct metrics_source metrics_source_tap;

/* ---- file reading (readfile.c) ---- */

/*
 * Read a small file (at most len - 1 bytes, NUL-terminated) through *fd: opened on
 * first use and kept open (cgroupfs and procfs regenerate content at offset 0) unless
 * caching is off or descriptors are scarce. On failure *fd is closed; returns the
 * length or -errno.
 */
ssize_t mfile_read(struct metrics *m, int *fd, const char *path, char *buf, size_t len);
/* The same for a file of any size, into m->big. */
ssize_t mfile_read_big(struct metrics *m, int *fd, const char *path, char **data);
/* Read <proc_root>/<name> through m->node_fd[f] (the path is formatted only to open it). */
ssize_t mnode_read(struct metrics *m, enum mnodefile f, const char *name, char *buf, size_t len);
ssize_t mnode_read_big(struct metrics *m, enum mnodefile f, const char *name, char **data);
/* Read a cgroup file of resource r for target t through t->fd[f]. */
ssize_t mcgroup_read(struct metrics *m, struct mtarget *t, enum cg_res r, enum mfile f, const char *name, char *buf,
                     size_t len);
void mtarget_close_files(struct mtarget *t);
/* Close the files of the resources in mask (bits of enum cg_res). */
void mtarget_close_res_files(struct mtarget *t, unsigned mask);

/* Parse an unsigned decimal at *p (leading blanks skipped); advances *p. */
bool mparse_u64(const char **p, uint64_t *v);
/* The value of the line "<key> <value>" (key at a line start) in buf. */
bool mfind_u64(const char *buf, const char *key, uint64_t *v);

/* ---- rates (rate.c) ---- */

/*
 * Turn t->cur into a Sample at now_ms against t->prev, then make cur the baseline.
 * A counter that went back or jumped beyond anything possible gives no rate this
 * tick and restarts its baseline; returns how many did.
 */
unsigned metrics_rates(struct mtarget *t, uint64_t now_ms, unsigned node_cpus, struct proto_metrics_sample *s);

/* ---- netdev table (source-netdev.c) ---- */
/* The entry of interface name, or NULL; *hint (may be NULL) is tried first and updated. */
const struct netdev_entry *netdev_find(const struct netdev_table *tb, const char *name, size_t *hint);
void netdev_table_free(struct netdev_table *tb);
