/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The app's volume for the files kinds (drivers/app.h files): the safe path layer (volume/volume.h) over the mounted volume. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/net/app-net.h"
#include "volume/volume.h"
#include "drivers/app/oci/app-oci-spec.h"
#include "ring/app-ring.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-volume.h"

int app_oci_files(struct app_conn *c, const char *id, struct app_fs **ret, struct na_error *err)
{
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        if (!a->deploy->tmpl.file_access)
                return na_error_set(err, EPERM, NA_E_FILE_ACCESS_DISABLED,
                                    "app %s: template %s does not allow file access", id, a->deploy->tmpl.id);
        pthread_mutex_lock(&a->op_lock);
        char img[4200], disk[4200], volume[4300];
        app_path_in(a, "disk.img", img, sizeof(img));
        app_path_in(a, "disk", disk, sizeof(disk));
        snprintf(volume, sizeof(volume), "%s/volume", disk);
        bool mounted = false;
        int r = app_volume_is_mounted(disk, &mounted, err);
        if (r >= 0 && !mounted)
                r = app_volume_mount(img, disk, err); /* after a node reboot, before a start */
        /* What the agent writes for the app is the app's user's (AGENT-API 4.2). */
        uid_t uid = a->uid_base + a->run_uid;
        gid_t gid = a->uid_base + a->run_gid;
        pthread_mutex_unlock(&a->op_lock);
        if (r >= 0)
                r = app_fs_open(volume, uid, gid, ret, err);
        return r < 0 ? na_error_prefix(err, "app %s: files", id) : 0;
}
