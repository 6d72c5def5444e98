/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the node keeps of an app: <storage>/apps/<id>/app.json, mode 0600, replaced
 * atomically. The deploy params are kept in their canonical form and decoded again
 * at load, so a stored app is checked by the same rules as a new one.
 */
#include <stdio.h>
#include <string.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/app/oci/app-oci-internal.h"

#define APP_META_MAX (2u << 20)

json_t *app_strv_json(char *const *v)
{
        if (!v)
                return json_null();
        json_t *a = json_array();
        for (char *const *p = v; a && *p; p++)
                json_array_append_new(a, json_string(*p));
        return a;
}

char **app_strv_from_json(json_t *a)
{
        if (!json_is_array(a))
                return NULL;
        size_t n = json_array_size(a);
        char **v = calloc(n + 1, sizeof(*v));
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
        for (size_t i = 0; v && i < n; i++) {
                v[i] = strdup(json_string_value(json_array_get(a, i)) ? json_string_value(json_array_get(a, i)) : "");
                if (!v[i]) {
                        for (size_t j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return NULL;
                }
        }
        NA_ANALYZER_FP_END
        return v;
}

int app_meta_save(struct app *a, struct na_error *err)
{
        _cleanup_json_ json_t *crash = json_array();
        pthread_mutex_lock(&a->st_lock);
        for (size_t i = 0; crash && i < a->crashes.n; i++)
                json_array_append_new(crash, json_integer(a->crashes.crash_ms[i]));
        int64_t restarts = a->restarts, started = a->started_ms;
        pthread_mutex_unlock(&a->st_lock);
        _cleanup_json_ json_t *doc = json_pack("{s:s, s:o, s:o, s:s, s:s, s:I, s:I, s:I, s:b, s:I, s:I, s:O}", "id", a->id,
                                               "deploy", proto_app_deploy_canonical(a->deploy), "command",
                                               app_strv_json(a->command), "imageDigest", a->image_digest, "lower", a->lower,
                                               "uidBase", (json_int_t)a->uid_base, "createdAt",
                                               (json_int_t)a->created_ms, "updatedAt", (json_int_t)a->updated_ms,
                                               "wantRunning", a->want_running, "restarts", (json_int_t)restarts,
                                               "startedAt", (json_int_t)started, "crashes", crash);
        if (doc && (json_object_set_new(doc, "runUid", json_integer(a->run_uid)) < 0 ||
                    json_object_set_new(doc, "runGid", json_integer(a->run_gid)) < 0 ||
                    json_object_set_new(doc, "imageStopSignal", json_integer(a->image_stop_signal)) < 0 ||
                    json_object_set_new(doc, "volumeSeededAt", json_integer(a->seeded_ms)) < 0 ||
                    (a->update && json_object_set(doc, "update", a->update) < 0)))
                return na_error_sys(err, ENOMEM, "app %s: record", a->id);
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        if (!text)
                return na_error_sys(err, ENOMEM, "app %s: record", a->id);
        char path[4200];
        snprintf(path, sizeof(path), "%s/app.json", a->dir);
        return na_atomic_write(path, text, strlen(text), 0600, err);
}

int app_meta_load(struct app_conn *c, const char *id, struct app **ret, struct na_error *err)
{
        struct app *a = app_new(c, id);
        if (!a)
                return na_error_sys(err, ENOMEM, "app %s", id);
        char path[4200];
        snprintf(path, sizeof(path), "%s/app.json", a->dir);
        _cleanup_json_ json_t *doc = na_json_load(path, APP_META_MAX);
        if (!doc) {
                app_free(a);
                return -ENOENT;
        }
        int r = proto_app_deploy_decode(json_object_get(doc, "deploy"), &a->deploy, err);
        if (r < 0) {
                app_free(a);
                return na_error_prefix(err, "%s: its deploy params", path);
        }
        if (proto_app_deploy_own(a->deploy) < 0) { /* the app keeps the struct, not the JSON tree */
                app_free(a);
                return na_error_sys(err, ENOMEM, "app %s", id);
        }
        json_t *cmd = json_object_get(doc, "command");
        if (json_is_array(cmd) && !(a->command = app_strv_from_json(cmd))) {
                app_free(a);
                return na_error_sys(err, ENOMEM, "app %s", id);
        }
        snprintf(a->image_digest, sizeof(a->image_digest), "%s",
                 json_string_value(json_object_get(doc, "imageDigest")) ?: "");
        free(a->lower);
        if (!(a->lower = strdup(json_string_value(json_object_get(doc, "lower")) ?: ""))) {
                app_free(a);
                return na_error_sys(err, ENOMEM, "app %s", id);
        }
        a->uid_base = (uint32_t)json_integer_value(json_object_get(doc, "uidBase"));
        a->run_uid = (uint32_t)json_integer_value(json_object_get(doc, "runUid"));
        a->run_gid = (uint32_t)json_integer_value(json_object_get(doc, "runGid"));
        a->image_stop_signal = (int)json_integer_value(json_object_get(doc, "imageStopSignal"));
        a->created_ms = json_integer_value(json_object_get(doc, "createdAt"));
        a->seeded_ms = json_integer_value(json_object_get(doc, "volumeSeededAt"));
        a->updated_ms = json_integer_value(json_object_get(doc, "updatedAt"));
        a->want_running = json_is_true(json_object_get(doc, "wantRunning"));
        a->update = json_incref(json_object_get(doc, "update")); /* an update cut short (app-oci-update.c) */
        a->restarts = json_integer_value(json_object_get(doc, "restarts"));
        a->started_ms = json_integer_value(json_object_get(doc, "startedAt"));
        json_t *crash = json_object_get(doc, "crashes");
        for (size_t i = 0; i < json_array_size(crash) && a->crashes.n < APP_RESTART_MAX; i++)
                a->crashes.crash_ms[a->crashes.n++] = json_integer_value(json_array_get(crash, i));
        struct app_exit ex;
        struct na_error e = NA_ERROR_INIT;
        if (app_monitor_read_exit(a->dir, &ex, &e) == 0) {
                a->has_exit = true;
                a->exit_code = ex.code;
                a->exit_signal = ex.signal;
        }
        na_error_clear(&e);
        *ret = a;
        return 0;
}
