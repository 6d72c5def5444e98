/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app's data volume, with a hard quota the kernel enforces without walking files.
 *
 * How: one ext4 image per app (<apps_dir>/<id>/disk.img), attached to a free
 * loop device (/dev/loop-control LOOP_CTL_GET_FREE, then LOOP_CONFIGURE with
 * LO_FLAGS_AUTOCLEAR; LOOP_SET_FD + LOOP_SET_STATUS64 on kernels without it; a device
 * another process takes between the two calls is retried) and mounted with nosuid,
 * nodev at the app's volume directory. Writing past the quota fails with ENOSPC. Every
 * block of the image is allocated when it is made or grown (posix_fallocate; issue 20):
 * a sparse image shared the host's free space with everything else, and when an image
 * bomb filled the host file system a running app's next write hit I/O errors, its
 * journal aborted and it went read-only. Now a full host cannot reach into a volume,
 * and a volume the host has not the space for is refused (DRIVER_ERROR, errnum ENOSPC,
 * details.reason "node-storage-full"). The loop device goes away by itself when
 * the last mount of the file system does (autoclear), also when the container's
 * mount namespace held it longer than ours.
 *
 * The file system: `mkfs.ext4 -m 0` (no root reserve: the app is the only user),
 * 4 KiB blocks, one inode per 16 KiB, root owned by the app's mapped root (uid_base),
 * WITH a journal (an app's data must survive a host crash; 4 MiB for volumes up to
 * 256 MiB, quota/64 above, at most 128 MiB). The image is made larger than the quota
 * by the journal and the inode tables, so `df` inside shows about quota_mb in total.
 *
 * Project quotas (ext4/XFS prjquota) would avoid the image, but they need a kernel
 * with quota support and a storage file system mounted with it: the development
 * host has neither, so that path is not implemented. app_volume_probe() says what
 * the storage file system offers; app_volume_require_project_quota() refuses with a
 * message saying the loop image is used.
 *
 *      r = app_volume_create(img, quota_mb, uid_base, uid_base, &err);
 *      r = app_volume_mount(img, dir, &err);
 *      r = app_volume_usage(dir, &u, &err);     u.used_mb is what df says
 *      r = app_volume_grow(img, dir, bigger_mb, &err);   (online when mounted, else offline)
 *      r = app_volume_umount(dir, &err);
 *      r = app_volume_remove(img, dir, &err);   unmounts, image gone
 * Paths must be absolute; dir must be canonical (no symbolic links), as
 * /proc/self/mountinfo names mount points.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define APP_VOLUME_MIN_MB 8
#define APP_VOLUME_MAX_MB (16ull << 20) /* 16 TiB */

struct app_volume_support {
        char fstype[32];    /* of the storage directory: "ext4", "xfs", ... */
        bool project_quota; /* mounted with prjquota/pquota and the kernel knows quotas */
        char why[256];      /* when not: why */
};
/* What the file system of storage_dir offers. */
int app_volume_probe(const char *storage_dir, struct app_volume_support *ret, struct na_error *err);
/* Always -EOPNOTSUPP: "project quota ... not implemented; volumes use a loop-mounted ext4 image". */
int app_volume_require_project_quota(const char *storage_dir, struct na_error *err);

/* Make the image (must not exist, fully allocated) for a quota of quota_mb, its root owned by uid:gid. */
int app_volume_create(const char *image, uint64_t quota_mb, uid_t uid, gid_t gid, struct na_error *err);
/* Attach the image to a loop device and mount it at dir (created when missing). -EBUSY when mounted.
 * A sparse image (made before images were allocated in full) is allocated first when the space is there. */
int app_volume_mount(const char *image, const char *dir, struct na_error *err);
/* The same, read-only, noexec (a backup's snapshot of the image: its journal, if any, is replayed into it). */
int app_volume_mount_ro(const char *image, const char *dir, struct na_error *err);
/* Whether an ext4 file system is mounted at dir (from /proc/self/mountinfo). */
int app_volume_is_mounted(const char *dir, bool *ret, struct na_error *err);

struct app_volume_usage {
        uint64_t used_mb;  /* (blocks - free) * block size, as df's Used, rounded up */
        uint64_t size_mb;  /* blocks * block size */
        uint64_t avail_mb; /* available blocks * block size */
};
/* statfs of the mounted volume; -ENOENT when nothing is mounted at dir. */
int app_volume_usage(const char *dir, struct app_volume_usage *ret, struct na_error *err);
/*
 * Grow to a larger quota. The image's new blocks are allocated first (ENOSPC as for
 * create: nothing changes). Mounted: the loop device's capacity (LOOP_SET_CAPACITY)
 * and an online resize2fs, which needs CAP_SYS_RESOURCE (the development sandbox lacks
 * it: there only the offline path is tested). Not mounted: e2fsck -f -y, resize2fs of
 * the image. Shrinking is refused.
 */
int app_volume_grow(const char *image, const char *dir, uint64_t quota_mb, struct na_error *err);
/* Unmount (0 when not mounted); -EBUSY when a host process still uses it. */
int app_volume_umount(const char *dir, struct na_error *err);
/* Unmount, delete the image and remove the (empty) mount directory; missing parts are fine. */
int app_volume_remove(const char *image, const char *dir, struct na_error *err);
