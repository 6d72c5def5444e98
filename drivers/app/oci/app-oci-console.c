/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live consoles (drivers/app.h console_attach): a connection of its own to the app's
 * monitor, for the agent's loop to watch (output notifications) and write console
 * lines on. The ring itself is read through app_oci_output(). And app.console.send
 * (console_send): one line to a running app's stdin.
 */
#include <errno.h>

#include "drivers/app/oci/app-oci-internal.h"

int app_oci_console_attach(struct app_conn *c, const char *id, int *ret_fd, struct na_error *err)
{
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        if (!app_monitor_alive(a->dir, NULL)) {
                na_error_set(err, EINVAL, NA_E_INVALID_STATE, "app %s: not running; no console to attach to", id);
                na_error_detail(err, "state", json_string("stopped"));
                return -EINVAL;
        }
        int r = app_monitor_connect(a->dir, ret_fd, err);
        return r < 0 ? na_error_prefix(err, "app %s: console", id) : 0;
}

int app_oci_console_send(struct app_conn *c, const char *id, const char *line, struct na_error *err)
{
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        if (!app_monitor_alive(a->dir, NULL)) {
                pthread_mutex_lock(&a->st_lock);
                const char *st = proto_app_state_name(a->state);
                pthread_mutex_unlock(&a->st_lock);
                na_error_set(err, EINVAL, NA_E_INVALID_STATE, "app %s: not running; a console line needs a running app",
                             id);
                na_error_detail(err, "state", json_string(st));
                return -EINVAL;
        }
        int r = app_monitor_send_line(a->dir, line, err);
        return r < 0 ? na_error_prefix(err, "app %s: console", id) : 0;
}

