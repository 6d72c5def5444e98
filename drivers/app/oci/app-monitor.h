/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The agent's side of nodeagent-monitor (monitor/), the process that owns one running
 * app's stdio, writes its output ring (app-ring.h) and records its exit.
 *
 * Start: app_monitor_spawn() double-forks the monitor (it is never the agent's child,
 * so it outlives an agent that dies or is killed), waits for "ok <container pid>" or
 * crun's error on a status pipe, and returns. The monitor then lives until the
 * container's init ends; SIGTERM does not stop it (stop containers with `crun kill`).
 *
 * Files in the app directory while and after it runs:
 *   monitor.pid    the monitor's pid, flock'ed by it while it lives
 *   monitor.sock   SOCK_SEQPACKET, mode 0600, while it lives
 *   container.pid  the container's init pid (crun --pid-file), while it runs
 *   started        "at_ms=T" once --started-pattern matched an output line
 *   exit           "code=N signal=S oom=0|1 at_ms=T", written atomically at the end
 *   output.*       the ring
 * A re-attaching agent: app_monitor_alive() → app_monitor_connect(); otherwise
 * app_monitor_read_exit() (and `crun delete --force` in case the monitor was killed).
 *
 * The connections to a running monitor and its wire format: ring/monitor-msg.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "drivers/app/oci/app-crun.h"

struct app_monitor_spec {
        const char *monitor_path;    /* absolute path of nodeagent-monitor */
        const char *dir;             /* the app's directory (absolute) */
        const char *id;              /* the container id, unique on the node */
        const char *runtime;         /* absolute path of crun */
        const char *runtime_root;    /* crun --root */
        const char *bundle;          /* the OCI bundle (config.json with process.terminal false) */
        bool private_cgroup_ns;      /* run crun with /sys/fs/cgroup/unified unmounted (hybrid hosts) */
        const char *started_pattern; /* POSIX ERE over output lines, or NULL */
        size_t ring_bytes;           /* ring segment size, 0 for the default */
        int timeout_ms;              /* how long to wait for the container to start; 0: 75 s */
        const char *const *cgroups;  /* directories the monitor joins once the container runs (at most 4) */
        size_t n_cgroups;
        unsigned lines_per_sec;      /* output bound; 0: the monitor's default (1000) */
        unsigned lines_burst;        /* 0: ten seconds' worth */
};

/*
 * Start the monitor (which starts the container) and wait until the container runs.
 * Either pid pointer may be NULL. A start that fails is DRIVER_ERROR naming the app,
 * with crun's message in details.reason; the monitor has then exited.
 */
int app_monitor_spawn(const struct app_monitor_spec *spec, pid_t *ret_monitor_pid, pid_t *ret_container_pid,
                      struct na_error *err);

struct app_exit {
        int code;    /* exit code, or 128 + signal */
        int signal;  /* 0 when it exited by itself */
        bool oom;    /* the kernel's OOM killer killed it */
        int64_t at_ms;
};

/* The exit record of the last run: 0 and *ret, -ENOENT (no error set) when there is none. */
int app_monitor_read_exit(const char *dir, struct app_exit *ret, struct na_error *err);

/* Has the started pattern matched in the current run? */
bool app_monitor_started(const char *dir);

/*
 * Does a monitor live for dir? Its monitor.pid is locked, names a live process, and
 * that process is nodeagent-monitor (so a recycled pid is not mistaken for it).
 */
bool app_monitor_alive(const char *dir, pid_t *ret_pid);

/*
 * The monitor's own cgroup (app-monitor-cg.c): nodeagent/monitor-<app id> beside the
 * app's nodeagent/app-<app id> (one directory per v1 controller cpu, memory and pids
 * on v1 and hybrid hosts, one group on v2), made or reused and capped, for
 * app_monitor_spec.cgroups. The monitor joins it once crun has started the container,
 * so the cost of the app's output counts against caps made from the app's plan.
 */
#define APP_MONITOR_MEMORY_MB_DEFAULT 32 /* the ring's page cache counts here too */
#define APP_MONITOR_PIDS 16             /* the monitor alone; crun runs before it moves */

struct app_monitor_caps {
        int64_t cpu_quota_us, cpu_period_us; /* at least 1000 each */
        int64_t memory_bytes;                /* at least 1 MiB */
        int64_t pids;                        /* at least 1 */
};

struct app_monitor_cgroup {
        char dirs[4][512];
        size_t n;
};

/* root NULL: /sys/fs/cgroup. */
int app_monitor_cgroup_make(const char *root, enum app_cgroup_layout layout, const char *app_id,
                            const struct app_monitor_caps *caps, struct app_monitor_cgroup *ret, struct na_error *err);
/* Remove it (best effort: a monitor still inside keeps it until the next call). */
void app_monitor_cgroup_remove(const char *root, enum app_cgroup_layout layout, const char *app_id);
