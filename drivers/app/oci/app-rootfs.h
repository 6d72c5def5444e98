/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app's root file system: an overlay of its own writable layer on the shared,
 * read-only unpacked image root.
 *
 * Under the app's directory:
 *      <app_dir>/lower    the image root as the app sees it: an idmapped, read-only bind
 *                         mount (mount_setattr MOUNT_ATTR_IDMAP) where host id n shows
 *                         as uid_base + n, so the image's root-owned files belong to
 *                         root in the container (Linux >= 5.19 for overlayfs on it)
 *      <app_dir>/upper    the app's changes (owned by uid_base:gid_base, the host ids of
 *                         root in the container, so root in the container can write
 *                         its own files and crun can make its mount points)
 *      <app_dir>/work     overlayfs' work directory (root only)
 *      <app_dir>/rootfs   the merged root, given to crun as root.path
 * mounted with nosuid,nodev (lowerdir=<app_dir>/lower). The image itself is never
 * written and stays shared between apps: its files keep the ids they were unpacked
 * with (0..65535), and each app sees them shifted into its own range. A copy-up keeps
 * the shifted owner, so the app's layer holds its own ids only.
 *
 *      r = app_rootfs_mount(image_root, app_dir, uid_base, uid_base, &err);
 *      path = app_rootfs_path(app_dir);            (caller frees)
 *      r = app_rootfs_umount(app_dir, &err);       0 when not mounted
 *      r = app_rootfs_remove(app_dir, &err);       unmounts, removes upper, work, rootfs, lower
 * Paths must be canonical absolute paths (no symbolic links), without ',' ':' or '\'
 * (overlayfs' option separators). crun makes the container's mounts from inside its
 * user namespace, where host root's directories are "other": app_dir, the volume's
 * mount point and every directory above them must be searchable by others (0711 is
 * enough; the test uses it), or crun fails with "Permission denied".
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

#define APP_ROOTFS_ID_COUNT 65536u /* ids of the image that are mapped (app-ids.h's range) */

/* <app_dir>/rootfs (NULL when out of memory). */
char *app_rootfs_path(const char *app_dir);

/*
 * Make lower, upper, work and rootfs (when missing), mount the idmapped image root at
 * lower (uid/gid: the app's uid_base) and the overlay at rootfs; -EBUSY when mounted.
 */
int app_rootfs_mount(const char *lower, const char *app_dir, uid_t uid, gid_t gid, struct na_error *err);
/*
 * The same with the app's layer (upper, work) in layer_dir instead of app_dir. The
 * layer is not bounded by the volume's quota: a writable root lets an app fill the
 * storage file system through /tmp or /var. To bound it, make layer_dir a small
 * app-volume of its own (app_volume_create + app_volume_mount; the test does) and
 * writes to the root past it fail with ENOSPC like the volume's.
 */
int app_rootfs_mount_at(const char *lower, const char *app_dir, const char *layer_dir, uid_t uid, gid_t gid,
                        struct na_error *err);
/* Whether an overlay is mounted at <app_dir>/rootfs. */
int app_rootfs_is_mounted(const char *app_dir, bool *ret, struct na_error *err);
/* Unmount rootfs and lower (0 when not mounted). */
int app_rootfs_umount(const char *app_dir, struct na_error *err);
/* Unmount and remove the app's layer (upper, work) and the rootfs and lower directories. */
int app_rootfs_remove(const char *app_dir, struct na_error *err);
/* The same for a layer in layer_dir (app_rootfs_mount_at); layer_dir itself stays. */
int app_rootfs_remove_at(const char *app_dir, const char *layer_dir, struct na_error *err);
