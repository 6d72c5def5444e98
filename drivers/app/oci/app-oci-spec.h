/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The OCI runtime config.json of one app container, built with jansson from the
 * app's plan and template; crun reads it from <bundle>/config.json.
 *
 * What every app gets:
 *  - process: the command in exec form (never a shell), env "K=V", cwd (default "/"),
 *    the app's uid/gid and supplementary groups inside (app-user.h; root by default), terminal false, noNewPrivileges, rlimit NOFILE 65536/65536
 *    (or the caller's own hard limit when lower: crun sets it inside the user
 *    namespace, where it cannot be raised), oomScoreAdj APP_OCI_OOM_SCORE_ADJ,
 *    Docker's default capabilities minus NET_RAW in the bounding, effective and
 *    permitted sets; inheritable and ambient empty (inheritable stays empty since
 *    Docker's and runc's fix for CVE-2022-24769, so a file's inheritable
 *    capabilities give nothing to a non-root program);
 *  - namespaces: pid, ipc, uts, mount, cgroup, user (container 0..id_count-1 onto
 *    host uid_base.., same for gids), network (netns_path when given, else a new,
 *    empty one: the network issue fills netns_path in later);
 *  - mounts: /proc; /dev as tmpfs (crun adds the standard devices: null, zero, full,
 *    random, urandom, tty, and /dev/ptmx); /dev/pts (newinstance); /dev/shm (tmpfs
 *    64 MiB, noexec); /dev/mqueue; /sys read-only sysfs; /sys/fs/cgroup read-only;
 *    the volume (volume_src bind-mounted at volume_dst, rbind, nosuid, nodev, rw).
 *    No tmpfs at /tmp: the overlay root is writable and /tmp lives there like in a
 *    VM, and a tmpfs would be memory charged to the app's limit without any bound
 *    of its own;
 *  - readonlyPaths and maskedPaths as `crun spec` and Docker write them (/proc/sys,
 *    /proc/sysrq-trigger, /proc/bus, /proc/fs, /proc/irq read-only; /proc/kcore,
 *    /proc/keys, /proc/timer_list, /sys/firmware ... masked);
 *  - linux.resources: memory limit = memory_mb MiB with swap equal (memory+swap, so
 *    no swap), pids limit (default 512), cpu quota = cpu_cores * 100000 per 100000
 *    period, devices deny-all (crun allows the standard ones), cgroupsPath;
 *  - linux.seccomp: app_seccomp_profile() (app-seccomp.h).
 *
 *      struct app_oci_input in = { .id = id, .hostname = h, .argv = argv, ... };
 *      json_t *cfg;
 *      r = app_oci_config(&in, &cfg, &err);             VALIDATION-free INTERNAL errors
 *      r = app_oci_write(bundle_dir, cfg, &err);        <bundle_dir>/config.json, 0600
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"

#define APP_OCI_DEFAULT_PIDS 512
#define APP_OCI_DEFAULT_VOLUME_PATH "/home/container"
#define APP_OCI_CPU_PERIOD 100000
#define APP_OCI_NOFILE 65536
/* process.oomScoreAdj of every app process: a node short of memory kills a customer's
 * container before the agent, its monitors and helpers (-900, nodeagent.service's
 * OOMScoreAdjust=) and before a server's qemu (0, libvirt's default). 1000: its
 * badness is at least the node's whole memory, above any process at 0. */
#define APP_OCI_OOM_SCORE_ADJ 1000

/* The CFS quota of `cores` CPUs per APP_OCI_CPU_PERIOD (at least the kernel's 1 ms). */
int64_t app_oci_cpu_quota(double cores);

struct app_oci_input {
        const char *id, *hostname;
        char *const *argv, *const *env;      /* exec form, NULL-terminated; env "K=V" (env may be NULL) */
        const char *cwd;                     /* default "/" */
        const char *rootfs;                  /* absolute path of the merged root */
        const char *volume_src, *volume_dst; /* host dir bind-mounted at volume_dst (default /home/container);
                                                volume_src NULL: no volume */
        uint32_t uid_base, id_count;         /* user namespace: container 0..id_count-1 -> host uid_base.. */
        uint32_t uid, gid;                   /* the process's user inside (below id_count); 0: root */
        const uint32_t *groups;              /* supplementary groups inside (below id_count) */
        size_t n_groups;
        double cpu_cores;                    /* CPU quota: cores * 100000 per 100000 period; > 0 */
        uint64_t memory_mb;                  /* memory limit, swap limit equal (no swap); > 0 */
        int64_t pids;                        /* <= 0: APP_OCI_DEFAULT_PIDS */
        const char *cgroup_path;             /* e.g. "/nodeagent/app-<id>" */
        const char *netns_path;              /* NULL: a new, empty network namespace */
        const char *net_dir;                 /* hosts and resolv.conf, bind-mounted read-only at /run/nodeagent
                                                (app-net.h); NULL: none */
        /* Disk I/O limits on the block device behind the volume (io_major:io_minor, the
         * loop device of its disk image); all 0 or no device: none. */
        uint32_t io_major, io_minor;
        uint64_t io_read_bps, io_write_bps, io_read_iops, io_write_iops;
};

/*
 * Check the input (absolute clean paths, exec-form argv, env entries with a name,
 * a user namespace that never maps the host's root, limits in range) and build the
 * config. The error names the field at fault.
 */
int app_oci_config(const struct app_oci_input *in, json_t **ret, struct na_error *err);

/* Write cfg to <bundle_dir>/config.json atomically, mode 0600. */
int app_oci_write(const char *bundle_dir, json_t *cfg, struct na_error *err);
