/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.update of the crun driver (drivers/app.h update; AGENT-API 4.2 "app.update", and
 * proto/README.md "app.update" for what the contract leaves open).
 *
 * A plan change alone is applied live: the volume grown (app_volume_grow: online when
 * mounted), then the running container's cgroup limits written in place
 * (app-cg-limits.h); a quota below the data in use is QUOTA_EXCEEDED and nothing
 * changes. Anything else (version, template, the command a template change drops)
 * goes through a restart:
 *
 *   pulling-image, unpacking   the new image is made ready while the app keeps running;
 *                              its user is checked (VALIDATION_ERROR on template.user)
 *   backing-up                 with safetyBackupId: a backup of the volume under that id
 *   restarting                 stop; the app's record switched to the new settings (a new
 *                              image gets a new writable layer, the old one kept aside);
 *                              the volume's root re-owned when the user changes; start
 *   verifying                  healthySec: the app must stay up and reach running
 *
 * and, when the watch fails, the rollback: stop, the previous settings and layer put
 * back, the safety backup restored, started again as it was, ROLLED_BACK.
 *
 * Crash safety: before its first change the update writes its intent into the app's
 * record (app.json "update": the previous settings, whether the app ran, the backup's
 * id and the phase, "backing-up" while the record still holds the previous settings,
 * "switched" once it holds the new ones). An agent that dies half-way finds the intent
 * when it comes up: the watcher (or the next app.update, whichever takes the app first)
 * puts the previous version back exactly as a rollback does, and the job, offered
 * again, runs the update again from the start. The success clears the intent in the
 * same write that keeps the new settings. So the app is on exactly one of the two
 * versions at any instant that counts, and running if it was.
 */
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
#include "drivers/app/oci/app-cg-limits.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/oci/app-oci-spec.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-user.h"
#include "drivers/app/oci/app-volume.h"
#include "proto/app-update.h"
#include "proto/decode.h"
#include "ring/app-ring.h"
#include "volume/volume.h"

#define STOP_GRACE_SEC 10
#define WATCH_STEP_MS 200
#define LAST_LINES 20
#define ROLLBACK_RESERVE_MS (120 * 1000) /* a stop, a restore and a start, at worst */
#define LAYER_PREV "layer.prev"

static void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

static void system_line(struct app *a, const char *msg)
{
        struct na_error e = NA_ERROR_INIT;
        (void)app_ring_append_once(a->dir, APP_RING_SYSTEM, msg, strlen(msg), NULL, &e);
        na_error_clear(&e);
}

static void emit_updated(struct app_conn *c, struct app *a, bool rolled_back, const char *reason)
{
        if (c->o.on_event)
                c->o.on_event(c->o.userdata, "app.updated", a->id,
                              proto_app_updated_encode(a->deploy->version, rolled_back, reason));
}

/*
 * The backup's and the restore's own stages (archiving, restoring, ...) reported as one
 * of app.update's, and no checkpoint: a rollback is never stopped half-way.
 */
struct staged {
        const struct na_progress *inner;
        const char *stage;
};

static void staged_stage(void *userdata, const char *stage, int percent, const char *message)
{
        (void)stage;
        const struct staged *s = userdata;
        na_progress_stage(s->inner, s->stage, percent, message);
}

#define STAGED(name, progress, stage_name)                                                                  \
        struct staged name##_s = { .inner = (progress), .stage = (stage_name) };                           \
        const struct na_progress name = { .stage = staged_stage, .userdata = &name##_s }

/* ---- one version's settings: what the app's record holds of it ---- */

struct version {
        struct proto_app_deploy *deploy;
        char **command;
        char image_digest[80];
        char *lower;
        uint32_t run_uid, run_gid;
        int image_stop_signal;
};

static void version_clear(struct version *v)
{
        proto_app_deploy_free(v->deploy);
        proto_strv_free(v->command);
        free(v->lower);
        *v = (struct version){ 0 };
}

/* The app's current settings as JSON (op_lock held). */
static json_t *current_json(const struct app *a)
{
        return json_pack("{s:o, s:o, s:s, s:s, s:I, s:I, s:i}", "deploy", proto_app_deploy_canonical(a->deploy),
                         "command", app_strv_json(a->command), "imageDigest", a->image_digest, "lower", a->lower, "runUid",
                         (json_int_t)a->run_uid, "runGid", (json_int_t)a->run_gid, "imageStopSignal",
                         a->image_stop_signal);
}

static int version_from_json(json_t *j, struct version *v, struct na_error *err)
{
        *v = (struct version){ 0 };
        int r = proto_app_deploy_decode(json_object_get(j, "deploy"), &v->deploy, err);
        if (r < 0)
                return r;
        json_t *cmd = json_object_get(j, "command");
        if (json_is_array(cmd) && !(v->command = app_strv_from_json(cmd))) {
                version_clear(v);
                return na_error_sys(err, ENOMEM, "app update");
        }
        snprintf(v->image_digest, sizeof(v->image_digest), "%s",
                 json_string_value(json_object_get(j, "imageDigest")) ?: "");
        if (!(v->lower = strdup(json_string_value(json_object_get(j, "lower")) ?: ""))) {
                version_clear(v);
                return na_error_sys(err, ENOMEM, "app update");
        }
        v->run_uid = (uint32_t)json_integer_value(json_object_get(j, "runUid"));
        v->run_gid = (uint32_t)json_integer_value(json_object_get(j, "runGid"));
        v->image_stop_signal = (int)json_integer_value(json_object_get(j, "imageStopSignal"));
        return 0;
}

/* The app takes v's settings (v is emptied; what the app had is freed). op_lock held. */
static void version_put(struct app *a, struct version *v)
{
        proto_app_deploy_free(a->deploy);
        a->deploy = TAKE_PTR(v->deploy);
        proto_strv_free(a->command);
        a->command = TAKE_PTR(v->command);
        snprintf(a->image_digest, sizeof(a->image_digest), "%s", v->image_digest);
        free(a->lower);
        a->lower = TAKE_PTR(v->lower);
        a->run_uid = v->run_uid;
        a->run_gid = v->run_gid;
        a->image_stop_signal = v->image_stop_signal;
        version_clear(v);
}

/* ---- the parts ---- */

static bool is_alive(struct app *a)
{
        return app_monitor_alive(a->dir, NULL);
}

/* The volume's root belongs to the app's user (AGENT-API 4.2; issue 21 item 1: again when an update changes it). */
static int own_volume_root(struct app *a, struct na_error *err)
{
        char volume[4300];
        app_path_in(a, "disk/volume", volume, sizeof(volume));
        if (chown(volume, a->uid_base + a->run_uid, a->uid_base + a->run_gid) < 0)
                return na_error_sys(err, errno, "app %s: chown %s", a->id, volume);
        return 0;
}

/* The root file system unmounted (the app does not run): the next start mounts it on the app's image. */
static int drop_rootfs(struct app *a, struct na_error *err)
{
        bool mounted = false;
        int r = app_rootfs_is_mounted(a->dir, &mounted, err);
        if (r >= 0 && mounted)
                r = app_rootfs_umount(a->dir, err);
        return r < 0 ? na_error_prefix(err, "app %s: root file system", a->id) : 0;
}

/* A new image gets a new writable layer; the old one waits in disk/layer.prev for a rollback. */
static int layer_aside(struct app *a, struct na_error *err)
{
        char disk[4200];
        app_path_in(a, "disk", disk, sizeof(disk));
        _cleanup_close_ int dfd = open(disk, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return na_error_sys(err, errno, "app %s: open %s", a->id, disk);
        int r = app_fs_rm_rf(dfd, LAYER_PREV, err); /* an earlier update's, kept by a success cut short */
        if (r < 0)
                return r;
        if (renameat(dfd, "layer", dfd, LAYER_PREV) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "app %s: keep the old layer", a->id);
        if (mkdirat(dfd, "layer", 0711) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "app %s: mkdir %s/layer", a->id, disk);
        return 0;
}

/* disk/layer.prev, if any, back as disk/layer. */
static int layer_back(struct app *a, struct na_error *err)
{
        char disk[4200];
        app_path_in(a, "disk", disk, sizeof(disk));
        _cleanup_close_ int dfd = open(disk, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return na_error_sys(err, errno, "app %s: open %s", a->id, disk);
        struct stat st;
        if (fstatat(dfd, LAYER_PREV, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        int r = app_fs_rm_rf(dfd, "layer", err);
        if (r < 0)
                return r;
        if (renameat(dfd, LAYER_PREV, dfd, "layer") < 0)
                return na_error_sys(err, errno, "app %s: put the old layer back", a->id);
        return 0;
}

static void layer_forget(struct app *a)
{
        char disk[4200];
        app_path_in(a, "disk", disk, sizeof(disk));
        _cleanup_close_ int dfd = open(disk, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct na_error e = NA_ERROR_INIT;
        if (dfd >= 0)
                (void)app_fs_rm_rf(dfd, LAYER_PREV, &e);
        na_error_clear(&e);
}

static int save_intent(struct app *a, json_t *intent, const char *phase, struct na_error *err)
{
        if (json_object_set_new(intent, "phase", json_string(phase)) < 0)
                return na_error_sys(err, ENOMEM, "app %s: update", a->id);
        if (a->update != intent) {
                json_decref(a->update);
                a->update = json_incref(intent);
        }
        return app_meta_save(a, err);
}

/*
 * The previous version back, from the intent: what a failed watch and an agent that died
 * half-way both do. Idempotent: run again after a crash inside it, it ends the same. A
 * safety backup that cannot be restored (it no longer fits, say) does not keep the app
 * down: the app starts on the previous settings with the volume as the new version left
 * it, and restore_problem (when not NULL) says why.
 */
static int put_back_locked(struct app_conn *c, struct app *a, const struct na_progress *progress,
                           char restore_problem[512], struct na_error *err)
{
        json_t *intent = a->update;
        const char *phase = json_string_value(json_object_get(intent, "phase")) ?: "";
        bool switched = streq(phase, "switched");
        bool was_running = json_is_true(json_object_get(intent, "wasRunning"));
        const char *bid = json_string_value(json_object_get(intent, "safetyBackupId"));
        struct version from;
        int r = version_from_json(json_object_get(intent, "from"), &from, err);
        if (r < 0)
                return na_error_prefix(err, "app %s: the update's record", a->id);
        char prev[4300];
        app_path_in(a, "disk/" LAYER_PREV, prev, sizeof(prev));
        bool layer_moved = access(prev, F_OK) == 0;
        /* Whatever runs on the new settings goes; the old version, still running before the switch, stays. */
        if ((switched || layer_moved) && (r = app_stop_locked(c, a, false, STOP_GRACE_SEC, err)) < 0) {
                version_clear(&from);
                return r;
        }
        bool running = is_alive(a);
        version_put(a, &from);
        if (!running) {
                r = drop_rootfs(a, err);
                if (r >= 0)
                        r = layer_back(a, err);
                if (r >= 0)
                        r = own_volume_root(a, err);
        }
        if (r >= 0)
                r = app_meta_save(a, err); /* the previous settings, the intent still there */
        if (r >= 0 && switched && bid && *bid) {
                STAGED(restoring, progress, "verifying");
                struct na_error e = NA_ERROR_INIT;
                /* BACKUP_NOT_FOUND: cut short before the backup was made, so nothing ran on the new version. */
                if (app_backup_restore_locked(c, a, bid, &restoring, &e) < 0 &&
                    !(e.code && streq(e.code, NA_E_BACKUP_NOT_FOUND))) {
                        char msg[600];
                        snprintf(msg, sizeof(msg), "update: the safety backup %s was not restored: %s", bid, e.message);
                        system_line(a, msg);
                        if (restore_problem)
                                snprintf(restore_problem, 512, "%s", e.message);
                }
                na_error_clear(&e);
        }
        if (r >= 0 && was_running && !is_alive(a)) {
                na_progress_stage(progress, "verifying", -1, "rolling back: starting the previous version again");
                r = app_start_locked(c, a, false, err);
        }
        if (r < 0)
                return r;
        json_decref(a->update);
        a->update = NULL;
        a->updated_ms = (int64_t)na_now_real_ms();
        return app_meta_save(a, err);
}

/* At the agent's start (the watcher) or before the next update: an update cut short goes back. */
int app_update_recover_locked(struct app_conn *c, struct app *a, struct na_error *err)
{
        if (!a->update)
                return 0;
        system_line(a, "update: the agent stopped during an update; putting the previous version back");
        struct na_progress none = { 0 };
        int r = put_back_locked(c, a, &none, NULL, err);
        if (r >= 0) {
                emit_updated(c, a, true, "the agent restarted during the update");
                system_line(a, "update: the previous version is back");
        }
        return r;
}

/* The App with rolledBack false. */
static int answer(struct app *a, json_t **ret, struct na_error *err)
{
        json_t *rec = app_record_json(a);
        if (!rec || json_object_set_new(rec, "rolledBack", json_false()) < 0) {
                json_decref(rec);
                return na_error_sys(err, ENOMEM, "app %s", a->id);
        }
        *ret = rec;
        return 0;
}

/* ---- a plan change alone: live ---- */

static struct app_cg_limits limits_of(const struct proto_app_plan *p)
{
        return (struct app_cg_limits){ .cpu_quota_us = app_oci_cpu_quota((double)p->cpu_millis / 1000.0),
                                       .cpu_period_us = APP_OCI_CPU_PERIOD,
                                       .memory_bytes = p->memory_mb << 20,
                                       .pids = p->pids };
}

static int set_limits(struct app_conn *c, struct app *a, const struct proto_app_plan *p, struct na_error *err)
{
        if (!c->have_layout)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: no cgroup hierarchy to change", a->id);
        char rel[128];
        app_cgroup_path(a->id, rel, sizeof(rel));
        struct app_cg_limits l = limits_of(p);
        int r = app_cg_limits_set(NULL, c->layout, rel, &l, err);
        if (r < 0)
                return r;
        /* The monitor's CPU follows the app's (app-monitor.h); its memory and pids are its own. */
        snprintf(rel, sizeof(rel), "nodeagent/monitor-%s", a->id);
        struct app_cg_limits m = { .cpu_quota_us = l.cpu_quota_us, .cpu_period_us = l.cpu_period_us };
        struct na_error e = NA_ERROR_INIT;
        (void)app_cg_limits_set(NULL, c->layout, rel, &m, &e); /* best effort: an older monitor may have none */
        na_error_clear(&e);
        return 0;
}

/*
 * The quota against the data: QUOTA_EXCEEDED below what is in use; a smaller quota above
 * it is refused too (an ext4 volume does not shrink online: proto/README.md); a larger
 * one grows the volume (online when it is mounted). Nothing changes on a refusal.
 */
static int resize_volume(struct app *a, int64_t old_mb, int64_t new_mb, struct na_error *err)
{
        if (new_mb == old_mb)
                return 0;
        char img[4200], disk[4200];
        app_path_in(a, "disk.img", img, sizeof(img));
        app_path_in(a, "disk", disk, sizeof(disk));
        bool mounted = false;
        int r = app_volume_is_mounted(disk, &mounted, err);
        if (r >= 0 && !mounted)
                r = app_volume_mount(img, disk, err);
        struct app_volume_usage u = { 0 };
        if (r >= 0)
                r = app_volume_usage(disk, &u, err);
        if (r < 0)
                return na_error_prefix(err, "app %s: volume", a->id);
        if ((uint64_t)new_mb < u.used_mb) {
                r = na_error_set(err, ENOSPC, NA_E_QUOTA_EXCEEDED,
                                 "app %s: plan.volumeQuotaMB %lld is below the %llu MB in use; nothing changed", a->id,
                                 (long long)new_mb, (unsigned long long)u.used_mb);
                na_error_detail(err, "usedMB", json_integer((json_int_t)u.used_mb));
                na_error_detail(err, "volumeQuotaMB", json_integer(new_mb));
                return r;
        }
        if (new_mb < old_mb) {
                r = na_error_set(err, EINVAL, NA_E_INVALID_STATE,
                                 "app %s: a volume only grows: plan.volumeQuotaMB %lld is below the present %lld; "
                                 "nothing changed",
                                 a->id, (long long)new_mb, (long long)old_mb);
                na_error_detail(err, "state", json_string("volume-shrink"));
                na_error_detail(err, "usedMB", json_integer((json_int_t)u.used_mb));
                return r;
        }
        /* A stopped app's volume is grown offline (e2fsck, resize2fs of the image): it needs
         * no privilege an online resize needs. Mounted again after, for the files kinds and SFTP. */
        bool offline = !is_alive(a) && drop_rootfs(a, err) >= 0 && app_volume_umount(disk, err) >= 0;
        na_error_clear(err); /* still mounted (busy): the online path, as for a running app */
        r = app_volume_grow(img, disk, (uint64_t)new_mb, err);
        if (offline) {
                struct na_error e = NA_ERROR_INIT;
                if (app_volume_mount(img, disk, &e) < 0 && r >= 0) {
                        na_error_move(err, &e);
                        r = -EIO;
                }
                na_error_clear(&e);
        }
        if (r < 0) {
                if (!err->code || streq(err->code, NA_E_INTERNAL))
                        err->code = NA_E_DRIVER, err->http_status = na_error_code_status(NA_E_DRIVER);
                na_error_detail(err, "reason", json_string(err->message));
                return na_error_prefix(err, "app %s: grow the volume to %lld MB", a->id, (long long)new_mb);
        }
        return 0;
}

static int plan_live_locked(struct app_conn *c, struct app *a, struct proto_app_deploy *next, struct na_error *err)
{
        const struct proto_app_plan *old = &a->deploy->plan, *new = &next->plan;
        int r = resize_volume(a, old->volume_quota_mb, new->volume_quota_mb, err);
        if (r < 0)
                return r;
        if (is_alive(a) && (r = set_limits(c, a, new, err)) < 0) {
                struct na_error e = NA_ERROR_INIT;
                (void)set_limits(c, a, old, &e); /* back as they were */
                na_error_clear(&e);
                if (!err->code || streq(err->code, NA_E_INTERNAL))
                        err->code = NA_E_DRIVER, err->http_status = na_error_code_status(NA_E_DRIVER);
                return na_error_prefix(err, "app %s: change the limits in place", a->id);
        }
        proto_app_deploy_free(a->deploy);
        a->deploy = next;
        a->updated_ms = (int64_t)na_now_real_ms();
        r = app_meta_save(a, err);
        app_report_cgroup(c, a); /* metrics follow the new limits */
        return r;
}

/* ---- the watch ---- */

struct watch_result {
        bool healthy;
        char reason[160];
        bool has_exit;
        int exit_code;
};

static void watch(struct app *a, int64_t healthy_sec, const struct na_progress *progress, struct watch_result *w)
{
        *w = (struct watch_result){ 0 };
        int64_t start = (int64_t)na_now_mono_ms(), end = start + healthy_sec * 1000;
        const char *pattern = a->deploy->tmpl.started_pattern;
        int last_pct = -1;
        for (;;) {
                int64_t now = (int64_t)na_now_mono_ms();
                if (!is_alive(a)) {
                        struct app_exit ex;
                        struct na_error e = NA_ERROR_INIT;
                        if (app_monitor_read_exit(a->dir, &ex, &e) == 0) {
                                w->has_exit = true;
                                w->exit_code = ex.code;
                                if (ex.signal)
                                        snprintf(w->reason, sizeof(w->reason), "crashed: killed by %s%s after %.1f s",
                                                 proto_app_signal_name(ex.signal) ?: "a signal",
                                                 ex.oom ? " (out of memory)" : "", (now - start) / 1000.0);
                                else
                                        snprintf(w->reason, sizeof(w->reason), "crashed: exit code %d after %.1f s",
                                                 ex.code, (now - start) / 1000.0);
                        } else
                                snprintf(w->reason, sizeof(w->reason), "crashed: its container ended after %.1f s",
                                         (now - start) / 1000.0);
                        na_error_clear(&e);
                        return;
                }
                if (now >= end) {
                        if (pattern && !app_monitor_started(a->dir))
                                snprintf(w->reason, sizeof(w->reason),
                                         "not running after %lld s: its startedPattern did not match",
                                         (long long)healthy_sec);
                        else
                                w->healthy = true;
                        return;
                }
                int pct = (int)((now - start) * 100 / (healthy_sec * 1000));
                if (pct / 10 != last_pct / 10) {
                        na_progress_stage(progress, "verifying", pct, NULL);
                        last_pct = pct;
                }
                sleep_ms(WATCH_STEP_MS);
        }
}

static int collect_line(const struct app_ring_line *l, void *userdata)
{
        json_t *arr = userdata;
        json_t *text = json_stringn(l->text, l->len); /* NULL: not UTF-8 (or a NUL inside) */
        return json_array_append_new(arr, text ? text : json_string("(not UTF-8)")) == 0 ? 0 : -ENOMEM;
}

static json_t *last_lines(struct app *a)
{
        json_t *arr = json_array();
        uint64_t next = 0;
        struct na_error e = NA_ERROR_INIT;
        if (arr)
                (void)app_ring_read(a->dir, 0, LAST_LINES, APP_RING_TAIL, collect_line, arr, &next, &e);
        na_error_clear(&e);
        return arr;
}

/* ---- the update ---- */

/* The new version made ready beside the running one: image, its root, its user. Nothing of the app changes. */
static int prepare(struct app_conn *c, struct app *a, struct proto_app_deploy *next, const struct na_progress *progress,
                   struct version *ret, struct na_error *err)
{
        *ret = (struct version){ 0 };
        struct app_image img = { 0 };
        _cleanup_free_ char *lower = NULL;
        na_progress_stage(progress, "pulling-image", 0, NULL);
        int r = app_oci_image_ready(c, &next->tmpl.image, progress, &img, &lower, err);
        if (r < 0)
                return na_error_prefix(err, "app %s: update", a->id);
        struct app_user user;
        r = app_image_user(&next->tmpl, &img, lower, &user, err);
        if (r < 0) {
                app_image_clear(&img);
                return na_error_prefix(err, "app %s: update", a->id);
        }
        ret->run_uid = user.uid;
        ret->run_gid = user.gid;
        ret->image_stop_signal = proto_app_signal_parse(img.stop_signal);
        snprintf(ret->image_digest, sizeof(ret->image_digest), "%s", img.manifest_digest);
        app_image_clear(&img);
        ret->lower = TAKE_PTR(lower);
        ret->deploy = next;
        return 0;
}

/* The update done: the intent goes in the same write that keeps the new settings. */
static int finish(struct app_conn *c, struct app *a, json_t **ret, struct na_error *err)
{
        json_decref(a->update);
        a->update = NULL;
        a->updated_ms = (int64_t)na_now_real_ms();
        int r = app_meta_save(a, err);
        if (r < 0)
                return r;
        layer_forget(a);
        emit_updated(c, a, false, NULL);
        return answer(a, ret, err);
}

/* Failed before the new version ran: the previous one back as it was, the error r as it is. */
static int undo(struct app_conn *c, struct app *a, const struct na_progress *progress, int r, struct na_error *err)
{
        struct na_error e = NA_ERROR_INIT;
        if (a->update && put_back_locked(c, a, progress, NULL, &e) < 0)
                na_error_detail(err, "rollback", json_string(e.message));
        na_error_clear(&e);
        return r;
}

/* The new version did not become healthy (reason): the rollback, then ROLLED_BACK. */
static int roll_back(struct app_conn *c, struct app *a, const char *reason, const struct watch_result *w,
                     const struct na_progress *progress, struct na_error *err)
{
        _cleanup_json_ json_t *lines = last_lines(a);
        char msg[512];
        snprintf(msg, sizeof(msg), "update to version %s: %s; rolling back", a->deploy->version, reason);
        system_line(a, msg);
        na_progress_stage(progress, "verifying", 100, "rolling back");
        struct na_error e = NA_ERROR_INIT;
        char restore_problem[512] = "";
        int r = put_back_locked(c, a, progress, restore_problem, &e);
        if (r < 0) {
                na_error_move(err, &e);
                return na_error_prefix(err, "app %s: update failed (%s) and so did its rollback", a->id, reason);
        }
        emit_updated(c, a, true, reason);
        system_line(a, "update rolled back: the previous version is back");
        r = na_error_set(err, ECANCELED, NA_E_ROLLED_BACK, "app %s: update rolled back: %s", a->id, reason);
        na_error_detail(err, "reason", json_string(reason));
        if (w && w->has_exit)
                na_error_detail(err, "exitCode", json_integer(w->exit_code));
        na_error_detail(err, "lastLines", lines ? json_incref(lines) : json_array());
        na_error_detail(err, "version", json_string(a->deploy->version));
        if (*restore_problem)
                na_error_detail(err, "backupNotRestored", json_string(restore_problem));
        return r;
}

/* Stop, and the record on the new settings (a new image: a new layer; a new user: the volume's root). */
static int switch_to(struct app_conn *c, struct app *a, json_t *intent, struct version *to, bool was_running,
                     struct na_error *err)
{
        int r = 0;
        if (was_running && (r = app_stop_locked(c, a, false, (unsigned)PROTO_APP_GRACE_DEFAULT, err)) < 0)
                return r;
        bool new_image = !streq(a->image_digest, to->image_digest);
        bool new_user = a->run_uid != to->run_uid || a->run_gid != to->run_gid;
        if (new_image && ((r = drop_rootfs(a, err)) < 0 || (r = layer_aside(a, err)) < 0))
                return r;
        version_put(a, to);
        if (new_user && (r = own_volume_root(a, err)) < 0)
                return r;
        return save_intent(a, intent, "switched", err);
}

static int restart_update_locked(struct app_conn *c, struct app *a, const struct proto_app_update *u,
                                 struct version *to, uint64_t budget_ms, int64_t t0, const struct na_progress *progress,
                                 json_t **ret, struct na_error *err)
{
        bool was_running = is_alive(a);
        /* The watch and a rollback must fit in the job's time, or nothing starts. */
        uint64_t spent = (uint64_t)((int64_t)na_now_mono_ms() - t0);
        uint64_t need = (was_running ? (uint64_t)u->healthy_sec * 1000 : 0) + ROLLBACK_RESERVE_MS;
        if (budget_ms && spent + need > budget_ms)
                return na_error_set(err, ETIMEDOUT, NA_E_JOB_TIMEOUT,
                                    "app %s: update: the job's timeout leaves %llu s after the pull; the watch of %lld s "
                                    "and a rollback need %llu s; nothing changed",
                                    a->id, (unsigned long long)(spent < budget_ms ? (budget_ms - spent) / 1000 : 0),
                                    (long long)u->healthy_sec, (unsigned long long)(need / 1000));
        int r = resize_volume(a, a->deploy->plan.volume_quota_mb, to->deploy->plan.volume_quota_mb, err);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *intent = json_pack("{s:o, s:b, s:o}", "from", current_json(a), "wasRunning",
                                                  was_running, "safetyBackupId",
                                                  u->safety_backup_id[0] ? json_string(u->safety_backup_id) : json_null());
        if (!intent)
                return na_error_sys(err, ENOMEM, "app %s: update", a->id);
        if ((r = save_intent(a, intent, "backing-up", err)) < 0)
                return undo(c, a, progress, r, err);
        if (u->safety_backup_id[0]) {
                na_progress_stage(progress, "backing-up", 0, NULL);
                struct proto_app_backup_create bc = { .limits = { .max_storage_gb = -1, .max_backups = -1,
                                                                  .retention_days = -1 } };
                snprintf(bc.backup_id, sizeof(bc.backup_id), "%s", u->safety_backup_id);
                struct proto_app_backup b;
                STAGED(backing_up, progress, "backing-up");
                if ((r = app_backup_create_locked(c, a, &bc, &backing_up, &b, err)) < 0) {
                        na_error_prefix(err, "update: the safety backup");
                        return undo(c, a, progress, r, err);
                }
        }
        na_progress_stage(progress, "restarting", 0, NULL);
        if ((r = switch_to(c, a, intent, to, was_running, err)) < 0)
                return undo(c, a, progress, r, err);
        if (!was_running)
                return finish(c, a, ret, err); /* a stopped app is updated without a start */
        if ((r = app_start_locked(c, a, false, err)) < 0) {
                char reason[300];
                snprintf(reason, sizeof(reason), "did not start: %s", err->message);
                na_error_clear(err);
                return roll_back(c, a, reason, NULL, progress, err);
        }
        na_progress_stage(progress, "verifying", 0, NULL);
        struct watch_result w;
        watch(a, u->healthy_sec, progress, &w);
        if (w.healthy)
                return finish(c, a, ret, err);
        return roll_back(c, a, w.reason, &w, progress, err);
}

int app_oci_update(struct app_conn *c, const char *id, const struct proto_app_update *u, uint64_t budget_ms,
                   const struct na_progress *progress, json_t **ret, struct na_error *err)
{
        int64_t t0 = (int64_t)na_now_mono_ms();
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        /* Where it leads, computed from the app as it is (jobs of one app run one at a time). */
        pthread_mutex_lock(&a->op_lock);
        int r = app_update_recover_locked(c, a, err);
        struct proto_app_deploy *next = NULL;
        if (r >= 0)
                r = proto_app_update_apply(a->deploy, u, &next, err);
        enum proto_app_update_change change = r >= 0 ? proto_app_update_change(a->deploy, next) : PROTO_APP_UPDATE_NONE;
        pthread_mutex_unlock(&a->op_lock);
        if (r < 0)
                return na_error_prefix(err, "app %s: update", id);

        if (change == PROTO_APP_UPDATE_NONE) {
                proto_app_deploy_free(next);
                pthread_mutex_lock(&a->op_lock);
                r = answer(a, ret, err); /* converging: nothing to do, nothing restarted */
                pthread_mutex_unlock(&a->op_lock);
                return r;
        }
        if (change == PROTO_APP_UPDATE_PLAN) {
                pthread_mutex_lock(&a->op_lock);
                r = plan_live_locked(c, a, next, err);
                if (r < 0)
                        proto_app_deploy_free(next);
                if (r >= 0) {
                        emit_updated(c, a, false, NULL);
                        r = answer(a, ret, err);
                }
                pthread_mutex_unlock(&a->op_lock);
                return r;
        }

        /* The app keeps running while the new image is pulled and unpacked. */
        struct version to;
        if ((r = prepare(c, a, next, progress, &to, err)) < 0) {
                proto_app_deploy_free(next);
                return r;
        }
        if ((r = na_progress_checkpoint(progress, err)) < 0) {
                version_clear(&to);
                return r;
        }
        /* From here on no checkpoint stops the job half-way: it ends on one version or the other. */
        pthread_mutex_lock(&a->op_lock);
        bool files_before = a->deploy->tmpl.file_access;
        r = restart_update_locked(c, a, u, &to, budget_ms, t0, progress, ret, err);
        bool files_after = a->deploy->tmpl.file_access;
        pthread_mutex_unlock(&a->op_lock);
        version_clear(&to);
        /* A template that turns file access off ends the app's live file editing
         * sessions (outside the app's locks: the consoles take their own). */
        if (files_before && !files_after && c->o.on_files_off)
                c->o.on_files_off(c->o.userdata, id, "file-access-disabled");
        return r;
}
