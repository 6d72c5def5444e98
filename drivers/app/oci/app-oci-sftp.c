/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.sftp.set's view of an app (drivers/app.h, sftp_target): the volume mounted and
 * checked exactly as for app.files.* (app_oci_files: FILE_ACCESS_DISABLED, the disk
 * mounted after a node reboot), then its path, the app's mapped root and its
 * sftpUsername for the credentials file nodeagent-sftpd reads; and the App object's
 * sftpEnabled, read from that file (sftp/sftp-creds.h's format).
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "volume/volume.h"
#include "drivers/app/oci/app-oci-internal.h"

int app_oci_sftp_target(struct app_conn *c, const char *id, struct app_sftp_target *ret, struct na_error *err)
{
        struct app_fs *fs = NULL;
        int r = app_oci_files(c, id, &fs, err);
        if (r < 0)
                return r;
        app_fs_close(fs);
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        struct app_sftp_target t = { 0 };
        pthread_mutex_lock(&a->op_lock);
        t.uid = a->uid_base + a->run_uid; /* SFTP works as the app's user */
        t.gid = a->uid_base + a->run_gid;
        int n = snprintf(t.volume_dir, sizeof(t.volume_dir), "%s/disk/volume", a->dir);
        int m = snprintf(t.sftp_username, sizeof(t.sftp_username), "%s",
                         a->deploy && a->deploy->sftp_username ? a->deploy->sftp_username : "");
        pthread_mutex_unlock(&a->op_lock);
        if (n < 0 || (size_t)n >= sizeof(t.volume_dir) || m <= 0 || (size_t)m >= sizeof(t.sftp_username))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "app %s: sftp: no usable volume path or user name",
                                    id);
        *ret = t;
        return 0;
}

bool app_oci_sftp_enabled(const struct app *a)
{
        /* a->dir is <storage>/apps/<id>; the credentials are <storage>/sftp/users/<user>.json. */
        const char *user = a->deploy ? a->deploy->sftp_username : NULL;
        const char *end = a->dir ? strrchr(a->dir, '/') : NULL;
        size_t n = end ? (size_t)(end - a->dir) : 0;
        if (!user || n < 5 || strncmp(end - 5, "/apps", 5) != 0 || strchr(user, '/'))
                return false;
        char path[4400];
        int k = snprintf(path, sizeof(path), "%.*s/sftp/users/%s.json", (int)(n - 5), a->dir, user);
        if (k < 0 || (size_t)k >= sizeof(path))
                return false;
        json_error_t je;
        json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        const char *owner = json_string_value(json_object_get(o, "appId"));
        bool on = owner && strcmp(owner, a->id) == 0 && json_is_true(json_object_get(o, "enabled"));
        json_decref(o);
        return on;
}
