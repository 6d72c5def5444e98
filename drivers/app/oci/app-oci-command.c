/* SPDX-License-Identifier: GPL-2.0-or-later */
/* app.command.set of the crun driver (drivers/app.h command_set): the start command kept with the app, used at its next start. */
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

static int strv_copy(char *const *v, char ***ret)
{
        *ret = NULL;
        if (!v)
                return 0;
        size_t n = 0;
        while (v[n])
                n++;
        char **copy = calloc(n + 1, sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
        for (size_t i = 0; i < n; i++)
                if (!(copy[i] = strdup(v[i]))) {
                        for (size_t j = 0; j < i; j++)
                                free(copy[j]);
                        free(copy);
                        return -ENOMEM;
                }
        NA_ANALYZER_FP_END
        *ret = copy;
        return 0;
}

static void strv_free(char **v)
{
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

int app_oci_command_set(struct app_conn *c, const char *id, char *const *command, json_t **ret, struct na_error *err)
{
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        pthread_mutex_lock(&a->op_lock);
        char **copy = NULL;
        int r = 0;
        if (!a->deploy->tmpl.custom_command)
                r = na_error_set(err, EPERM, NA_E_COMMAND_MANAGED,
                                 "app %s: template %s decides how it starts; its command cannot be set", id,
                                 a->deploy->tmpl.id);
        else if (strv_copy(command, &copy) < 0)
                r = na_error_sys(err, ENOMEM, "app %s: command", id);
        if (r >= 0) {
                char **old = a->command;
                int64_t old_ms = a->updated_ms;
                a->command = copy;
                a->updated_ms = (int64_t)na_now_real_ms();
                r = app_meta_save(a, err);
                if (r < 0) { /* nothing changed */
                        a->command = old;
                        a->updated_ms = old_ms;
                        strv_free(copy);
                } else
                        strv_free(old);
        }
        if (r >= 0 && !(*ret = app_record_json(a)))
                r = na_error_sys(err, ENOMEM, "app %s", id);
        pthread_mutex_unlock(&a->op_lock);
        return r;
}
