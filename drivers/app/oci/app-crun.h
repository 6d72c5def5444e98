/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crun from the outside: the host's cgroup layout and what crun needs because of it,
 * and the short crun commands (state, kill, delete) run through na_spawn in exec form.
 *
 * Layout. crun 1.8.1 refuses a cgroup v1/v2 hybrid host ("cgroups in hybrid mode not
 * supported, drop all controllers from cgroupv2") whatever its cgroup manager. It
 * decides the mode like app_cgroup_layout() does: <root> a cgroup2 mount is v2, else
 * a cgroup2 mount at <root>/unified is hybrid, else v1. On a hybrid host the process
 * that execs `crun run`/`crun create` must first call app_crun_private_ns() (a private
 * mount namespace without <root>/unified); crun then sees v1 and applies memory, pids
 * and cpu limits through the v1 controllers. Pure v2 and pure v1 hosts need nothing.
 *
 * state, kill and delete run from the normal mount namespace, even after a `run` in
 * a private one (verified on the hybrid test host with crun 1.8.1: they read
 * <crun root>/<id>/status and the cgroup paths recorded there).
 *
 *      struct app_crun c = { .crun = "/usr/bin/crun", .root = "/run/nodeagent/crun" };
 *      struct app_crun_state st;
 *      r = app_crun_state(&c, id, &st, &err);   -ENOENT: no such container (err not set)
 *      r = app_crun_kill(&c, id, SIGTERM, &err);
 *      r = app_crun_delete(&c, id, &err);       (--force: kills a running one)
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/progress.h"

enum app_cgroup_layout {
        APP_CGROUP_V1,
        APP_CGROUP_V2,
        APP_CGROUP_HYBRID,
};
const char *app_cgroup_layout_name(enum app_cgroup_layout l); /* "v1", "v2", "hybrid" */

/*
 * The layout of the cgroup hierarchy at root (normally /sys/fs/cgroup), from a
 * mountinfo file (normally /proc/self/mountinfo; both settable for tests): the last
 * mount at root being cgroup2 is v2; else the last mount at root/unified being cgroup2
 * is hybrid; else any cgroup (v1) mount below root is v1. -ENOENT when there is no
 * cgroup hierarchy at all.
 */
int app_cgroup_layout_at(const char *mountinfo, const char *root, enum app_cgroup_layout *ret,
                         struct na_error *err);
/* The same for this process: /proc/self/mountinfo and /sys/fs/cgroup. */
int app_cgroup_layout(enum app_cgroup_layout *ret, struct na_error *err);
/* Whether `crun run`/`create` must run in a private mount namespace here (hybrid host). */
bool app_crun_needs_private_ns(void);

/*
 * For the child that is about to exec crun (after fork, before exec; no allocation,
 * nothing logged): a private mount namespace (unshare CLONE_NEWNS, / made rprivate so
 * nothing propagates back) with <cgroup_root>/unified detached. Returns 0 or -errno.
 * Call it only when app_crun_needs_private_ns() said so; cgroup_root NULL means
 * /sys/fs/cgroup.
 */
int app_crun_private_ns(const char *cgroup_root);

struct app_crun {
        const char *crun; /* absolute path of the crun binary; NULL: /usr/bin/crun */
        const char *root; /* crun's --root (state directory), absolute */
};

enum app_crun_status {
        APP_CRUN_CREATED,
        APP_CRUN_RUNNING,
        APP_CRUN_STOPPED,
        APP_CRUN_PAUSED,
};
const char *app_crun_status_name(enum app_crun_status s);

struct app_crun_state {
        enum app_crun_status status;
        pid_t pid; /* 0 when stopped */
};

/* Parse the JSON `crun state` prints (status and pid only). */
int app_crun_state_parse(const char *json, struct app_crun_state *ret, struct na_error *err);

/* `crun --root R state ID`; -ENOENT (err not set) when there is no such container. */
int app_crun_state(const struct app_crun *c, const char *id, struct app_crun_state *ret, struct na_error *err);
/* `crun --root R kill ID SIG`; -ENOENT (err not set) when there is no such container. */
int app_crun_kill(const struct app_crun *c, const char *id, int sig, struct na_error *err);
/*
 * `crun --root R delete --force ID` (kills what still runs, removes the state and
 * the container's cgroup); -ENOENT (err not set) when there is no such container.
 */
int app_crun_delete(const struct app_crun *c, const char *id, struct na_error *err);
