/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The copy-on-write snapshot of an app's disk for a backup (drivers/app/backup/app-backup-parts.h):
 * the disk's file system is frozen (FIFREEZE: everything flushed and the journal
 * checkpointed, writers wait in the kernel), its image reflinked (FICLONE: no data
 * copied) and thawed at once, then the clone is loop-mounted read-only and archived
 * while the app runs on. Only where the storage file system has reflinks (XFS with
 * reflink=1, btrfs); elsewhere FICLONE fails and the caller archives the live volume
 * with the app frozen for the whole archive instead.
 */
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "drivers/app/backup/app-backup-parts.h"
#include "drivers/app/oci/app-volume.h"

void app_backup_snapshot_drop(const char *clone, const char *mnt)
{
        struct na_error e = NA_ERROR_INIT;
        (void)app_volume_umount(mnt, &e);
        na_error_clear(&e);
        (void)rmdir(mnt);
        (void)unlink(clone);
}

int app_backup_snapshot(const char *image, const char *disk, const char *clone, const char *mnt, struct na_error *err)
{
        app_backup_snapshot_drop(clone, mnt); /* a snapshot an earlier backup left */
        _cleanup_close_ int src = open(image, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (src < 0)
                return na_error_sys(err, errno, "snapshot: open %s", image);
        _cleanup_close_ int dst = open(clone, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (dst < 0)
                return na_error_sys(err, errno, "snapshot: create %s", clone);
        _cleanup_close_ int dfd = open(disk, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                int e = errno;
                unlink(clone);
                return na_error_sys(err, e, "snapshot: open %s", disk);
        }
        int r = 0;
        if (ioctl(dfd, FIFREEZE, 0) < 0)
                r = na_error_sys(err, errno, "snapshot: freeze the file system of %s", disk);
        else {
                int k = ioctl(dst, FICLONE, src) < 0 ? errno : 0;
                int t = ioctl(dfd, FITHAW, 0) < 0 ? errno : 0;
                if (k == EOPNOTSUPP || k == EXDEV || k == EINVAL || k == ENOTTY || k == ENOSYS)
                        r = 0; /* no reflinks here */
                else if (k)
                        r = na_error_sys(err, k, "snapshot: clone %s", image);
                else if (t)
                        r = na_error_sys(err, t, "snapshot: thaw the file system of %s", disk);
                else
                        r = 1;
        }
        if (r <= 0) {
                unlink(clone);
                return r;
        }
        int m = app_volume_mount_ro(clone, mnt, err);
        if (m < 0) {
                app_backup_snapshot_drop(clone, mnt);
                return na_error_prefix(err, "snapshot");
        }
        return 1;
}

void app_backup_fs_thaw(const char *disk)
{
        int fd = open(disk, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
                (void)ioctl(fd, FITHAW, 0); /* EINVAL when it was not frozen */
                close(fd);
        }
}
