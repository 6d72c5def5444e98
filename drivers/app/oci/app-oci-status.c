/* SPDX-License-Identifier: GPL-2.0-or-later */
/* app.status of the crun driver (drivers/app.h status): the state, the run's facts and the memory its cgroup holds. */
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

/* The cgroup's memory now: v1's memory controller, else v2's memory.current. */
static int64_t memory_mb(const char *id)
{
        char cg[128], path[256];
        app_cgroup_path(id, cg, sizeof(cg));
        for (int i = 0; i < 2; i++) {
                if (i == 0)
                        snprintf(path, sizeof(path), "/sys/fs/cgroup/memory/%s/memory.usage_in_bytes", cg);
                else
                        snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/memory.current", cg);
                _cleanup_free_ char *text = NULL;
                struct na_error e = NA_ERROR_INIT;
                int r = na_read_file(path, 64, &text, NULL, &e);
                na_error_clear(&e);
                if (r >= 0)
                        return (int64_t)((strtoull(text, NULL, 10) + (1u << 20) - 1) >> 20);
        }
        return 0;
}

int app_oci_status(struct app_conn *c, const char *id, struct proto_app_status *ret, struct na_error *err)
{
        (void)c;
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        memset(ret, 0, sizeof(*ret));
        pthread_mutex_lock(&a->st_lock);
        ret->state = a->state;
        ret->started_at_ms = a->started_ms;
        ret->has_exit_code = a->has_exit && a->state != PROTO_APP_RUNNING && a->state != PROTO_APP_STARTING;
        ret->exit_code = a->exit_code;
        ret->restarts = a->restarts;
        pthread_mutex_unlock(&a->st_lock);
        if (ret->state == PROTO_APP_RUNNING || ret->state == PROTO_APP_STARTING || ret->state == PROTO_APP_STOPPING)
                ret->memory_mb = memory_mb(a->id);
        char disk[4200];
        app_path_in(a, "disk", disk, sizeof(disk));
        struct app_volume_usage u;
        struct na_error e = NA_ERROR_INIT;
        if (app_volume_usage(disk, &u, &e) == 0) {
                ret->volume_used_mb = (int64_t)u.used_mb;
                ret->volume_size_mb = (int64_t)u.size_mb;
        }
        na_error_clear(&e);
        return 0;
}
