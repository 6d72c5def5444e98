/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reading /proc/self/mountinfo (or a fixture with the same format): one callback per
 * mount, in the file's order (later lines are mounts made later, so the last match
 * for a mount point is the one on top), with the octal escapes of paths undone.
 *
 *      static int fn(const struct app_mount *m, void *ud) { ...; return 0; }  (> 0 stops, < 0 fails)
 *      r = app_mountinfo_foreach("/proc/self/mountinfo", fn, ud, &err);
 *      r = app_mountinfo_find("/proc/self/mountinfo", "/srv/x", &fstype, &source, &err);   -ENOENT: none
 */
#pragma once

#include <stdbool.h>

#include "common/error.h"

struct app_mount {
        const char *point;   /* mount point, unescaped */
        const char *fstype;  /* "ext4", "cgroup2", "overlay" ... */
        const char *source;  /* "/dev/loop3", "overlay" ..., unescaped */
        const char *options; /* per-superblock options */
};

int app_mountinfo_foreach(const char *mountinfo, int (*fn)(const struct app_mount *m, void *userdata),
                          void *userdata, struct na_error *err);

/*
 * The top mount at point (compared as given: pass a canonical path): its fstype and
 * source (each may be NULL; caller frees). -ENOENT (err not set) when nothing is
 * mounted there.
 */
int app_mountinfo_find(const char *mountinfo, const char *point, char **ret_fstype, char **ret_source,
                       struct na_error *err);

/*
 * Whether the top mount at point is a file system of type fstype (its statfs magic
 * fs_magic; fstype NULL: any mount): from statx's STATX_ATTR_MOUNT_ROOT and statfs when the kernel has them,
 * else from /proc/self/mountinfo. The file is read only then: on a node with 1,000 apps
 * it has some 4,000 lines, and an app's start asked twice.
 */
int app_mount_is(const char *point, const char *fstype, long fs_magic, bool *ret, struct na_error *err);

/*
 * umount2(point, flags | UMOUNT_NOFOLLOW), asked again for up to a second while the
 * mount is busy: it is for a moment when a child of another thread, between its fork
 * and its exec, holds a copy of a file under it. 0 (also when nothing is mounted
 * there: EINVAL) or -errno.
 */
int app_umount(const char *point, int flags);
