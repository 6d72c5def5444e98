/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Where the cgroup files are: the hierarchy layout detected at start (v1, v2 or
 * hybrid), the directory that serves each resource, and libvirt's machine cgroups.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

enum cg_res { CG_CPU, CG_MEMORY, CG_IO, CG__RES };
enum cg_version { CG_NONE, CG_V1, CG_V2 };

struct metrics_cgroups {
        char *root;     /* the cgroup root (/sys/fs/cgroup) */
        char *v2_dir;   /* the cgroup2 mount: root (pure v2) or root/unified (hybrid); NULL */
        const char *mode; /* "v1", "v2" or "hybrid" */
        struct {
                enum cg_version ver;
                char *dir; /* hierarchy that serves this resource; NULL when none does */
        } res[CG__RES];
        const char *io_file; /* io.stat, blkio.throttle.io_service_bytes(_recursive) */
};

/*
 * Detect the layout under root:
 *  - root/cgroup.controllers exists: pure v2, every resource from root (memory and
 *    io when "memory"/"io" are in cgroup.controllers; CPU always, cpu.stat is core);
 *  - otherwise v1 controllers root/cpuacct (or root/cpu,cpuacct), root/memory,
 *    root/blkio serve their resource; a cgroup2 mount at root/unified makes it
 *    "hybrid" and serves a resource no v1 controller does, when its
 *    cgroup.controllers lists it (CPU from cpu.stat always).
 * Fails only when no hierarchy at all is found.
 */
int metrics_cgroups_detect(const char *root, struct metrics_cgroups *cg, struct na_error *err);
void metrics_cgroups_clear(struct metrics_cgroups *cg);

/*
 * A cgroup path as a caller gives it ("/machine/x", "crun/abc"), checked and made
 * relative ("machine/x"): no ".." or "." components, none over NAME_MAX; repeated
 * slashes collapse; at most 1024 bytes. "" and "/" mean the hierarchy's root.
 */
int metrics_cgroup_path_normalize(const char *path, char **ret, struct na_error *err);

/* ---- libvirt machine cgroups (cgroup-libvirt.c) ---- */

/*
 * The machine name libvirt gives a domain of the privileged driver (qemu:///system)
 * started with domain id `id`: "<driver>-<id>-<name>", where the name keeps only
 * [A-Za-z0-9-.], collapses runs of '-'/'.' and drops leading ones, stops once the
 * whole name reaches 64 bytes and drops trailing '-'/'.' (libvirt's
 * virDomainDriverGenerateMachineName). Returns -ENAMETOOLONG when buf is short.
 */
int metrics_libvirt_machine_name(const char *driver, int id, const char *name, char *buf, size_t len);
/* systemd's unit-name escaping as libvirt applies it: '-' '\' and others as \xNN, '/' as '-'. */
int metrics_systemd_escape(const char *s, char *buf, size_t len);

/*
 * The machine cgroups under one hierarchy, indexed for many lookups from one scan:
 *   machine.slice/machine-<escaped "qemu-<id>-<name>">.scope   (systemd)
 *   machine.slice/machine-qemu\x2d<escaped name>.scope          (systemd, libvirt < 1.3.x)
 *   machine/qemu-<id>-<name>.libvirt-qemu                      (no systemd)
 *   machine/<name>.libvirt-qemu                                (no systemd, libvirt < 4.x)
 * with a leading '_' where libvirt's partition escaping adds one.
 */
struct machine_index;
int machine_index_build(const char *hierarchy_dir, struct machine_index **ret, struct na_error *err);
void machine_index_free(struct machine_index *ix);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct machine_index *, machine_index_free)
/* The relative cgroup path of a domain, or NULL. When a domain shows up more than once
 * (a stale scope next to the new one), the highest domain id wins. */
const char *machine_index_find(const struct machine_index *ix, const char *driver, const char *domain);
size_t machine_index_size(const struct machine_index *ix);

/* One-off lookup (a scan): the relative path of domain's machine cgroup in *ret; -ENOENT when absent. */
int metrics_libvirt_find_cgroup(const char *hierarchy_dir, const char *driver, const char *domain, char **ret,
                                struct na_error *err);
