/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The monitor's own cgroup (issue 20): nodeagent/monitor-<app id> beside the app's
 * nodeagent/app-<app id>, capped from the app's plan, so that what the app's output
 * costs (the monitor reading, cutting and storing its lines) is bounded by the app's
 * own CPU and no longer comes out of the agent's share. See app-monitor.h.
 */
#include "drivers/app/oci/app-monitor.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "drivers/app/oci/app-names.h"

#define DEFAULT_ROOT "/sys/fs/cgroup"
#define PARENT "nodeagent"

static const char *const v1_controllers[] = { "cpu", "memory", "pids" };

/* Write text to dir/file (an existing cgroup file: no O_CREAT). */
static int put(const char *dir, const char *file, const char *text, struct na_error *err)
{
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s/%s: path too long", dir, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        return na_write_all(fd, text, strlen(text), path, err);
}

static int make_dir(const char *path, struct na_error *err)
{
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "mkdir %s", path);
        return 0;
}

static int v1_caps(const char *ctrl, const char *dir, const struct app_monitor_caps *caps, struct na_error *err)
{
        char v[64];
        int r = 0;
        if (streq(ctrl, "cpu")) {
                snprintf(v, sizeof(v), "%" PRId64, caps->cpu_period_us);
                r = put(dir, "cpu.cfs_period_us", v, err);
                snprintf(v, sizeof(v), "%" PRId64, caps->cpu_quota_us);
                if (r >= 0)
                        r = put(dir, "cpu.cfs_quota_us", v, err);
        } else if (streq(ctrl, "memory")) {
                snprintf(v, sizeof(v), "%" PRId64, caps->memory_bytes);
                r = put(dir, "memory.limit_in_bytes", v, err);
        } else {
                snprintf(v, sizeof(v), "%" PRId64, caps->pids);
                r = put(dir, "pids.max", v, err);
        }
        return r;
}

int app_monitor_cgroup_make(const char *root, enum app_cgroup_layout layout, const char *app_id,
                            const struct app_monitor_caps *caps, struct app_monitor_cgroup *ret, struct na_error *err)
{
        *ret = (struct app_monitor_cgroup){ 0 };
        if (!app_name_valid(app_id))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "monitor cgroup: bad app id");
        if (caps->cpu_period_us < 1000 || caps->cpu_quota_us < 1000 || caps->memory_bytes < (1 << 20) ||
            caps->pids < 1)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app %s: monitor cgroup: caps out of range", app_id);
        root = root ? root : DEFAULT_ROOT;
        char parent[PATH_MAX];
        int r = 0;
        if (layout == APP_CGROUP_V2) {
                /* The controllers for nodeagent/'s children: enabled in the root and in nodeagent/
                 * (which holds no process of its own, so v2 lets it delegate them). */
                snprintf(parent, sizeof(parent), "%s/" PARENT, root);
                r = make_dir(parent, err);
                if (r >= 0)
                        r = put(root, "cgroup.subtree_control", "+cpu +memory +pids", err);
                if (r >= 0)
                        r = put(parent, "cgroup.subtree_control", "+cpu +memory +pids", err);
                char *d = ret->dirs[0];
                if (r >= 0 && (size_t)snprintf(d, sizeof(ret->dirs[0]), "%s/monitor-%s", parent, app_id) >=
                                      sizeof(ret->dirs[0]))
                        r = na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "monitor cgroup: path too long");
                if (r >= 0)
                        r = make_dir(d, err);
                char v[64];
                snprintf(v, sizeof(v), "%" PRId64 " %" PRId64, caps->cpu_quota_us, caps->cpu_period_us);
                if (r >= 0)
                        r = put(d, "cpu.max", v, err);
                snprintf(v, sizeof(v), "%" PRId64, caps->memory_bytes);
                if (r >= 0)
                        r = put(d, "memory.max", v, err);
                snprintf(v, sizeof(v), "%" PRId64, caps->pids);
                if (r >= 0)
                        r = put(d, "pids.max", v, err);
                if (r >= 0)
                        ret->n = 1;
        } else {
                /* v1 and hybrid: one directory per controller, as crun makes the app's. */
                for (size_t i = 0; i < ARRAY_SIZE(v1_controllers) && r >= 0; i++) {
                        char hier[PATH_MAX];
                        snprintf(hier, sizeof(hier), "%s/%s", root, v1_controllers[i]);
                        if (access(hier, F_OK) < 0 && errno == ENOENT)
                                continue; /* a controller this host does not mount: crun skips it too */
                        snprintf(parent, sizeof(parent), "%s/%s/" PARENT, root, v1_controllers[i]);
                        char *d = ret->dirs[ret->n];
                        r = make_dir(parent, err);
                        if (r >= 0 && (size_t)snprintf(d, sizeof(ret->dirs[0]), "%s/monitor-%s", parent, app_id) >=
                                              sizeof(ret->dirs[0]))
                                r = na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "monitor cgroup: path too long");
                        if (r >= 0)
                                r = make_dir(d, err);
                        if (r >= 0)
                                r = v1_caps(v1_controllers[i], d, caps, err);
                        if (r >= 0)
                                ret->n++;
                }
        }
        return r < 0 ? na_error_prefix(err, "app %s: monitor cgroup", app_id) : 0;
}

void app_monitor_cgroup_remove(const char *root, enum app_cgroup_layout layout, const char *app_id)
{
        if (!app_name_valid(app_id))
                return;
        root = root ? root : DEFAULT_ROOT;
        char path[PATH_MAX];
        if (layout == APP_CGROUP_V2) {
                snprintf(path, sizeof(path), "%s/" PARENT "/monitor-%s", root, app_id);
                (void)rmdir(path);
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(v1_controllers); i++) {
                snprintf(path, sizeof(path), "%s/%s/" PARENT "/monitor-%s", root, v1_controllers[i], app_id);
                (void)rmdir(path); /* a monitor still in it (EBUSY) leaves it for the next delete */
        }
}
