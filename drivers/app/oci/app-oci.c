/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The crun app driver (drivers/app.h): open and close, the table of apps this node
 * has, inventory, and the table of functions. The parts are described in
 * app-oci-internal.h.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "common/fileio.h"
#include "common/uuid.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/net/app-net.h"

void app_cgroup_path(const char *id, char *buf, size_t len)
{
        snprintf(buf, len, "nodeagent/app-%s", id);
}

void app_container_id(const char *id, char *buf, size_t len)
{
        snprintf(buf, len, "na-%s", id);
}

struct app *app_new(struct app_conn *c, const char *id)
{
        struct app *a = calloc(1, sizeof(*a));
        if (!a)
                return NULL;
        snprintf(a->id, sizeof(a->id), "%s", id);
        a->dir = na_strdupf("%s/%s", c->apps_dir, id);
        a->lower = strdup("");
        if (!a->dir || !a->lower) {
                free(a->dir);
                free(a->lower);
                free(a);
                return NULL;
        }
        pthread_mutex_init(&a->op_lock, NULL);
        pthread_mutex_init(&a->st_lock, NULL);
        a->state = PROTO_APP_STOPPED;
        a->monitor_fd = -1;
        return a;
}

void app_free(struct app *a)
{
        if (!a)
                return;
        if (a->monitor_fd >= 0)
                close(a->monitor_fd);
        proto_app_deploy_free(a->deploy);
        json_decref(a->update);
        if (a->command) {
                for (char **p = a->command; *p; p++)
                        free(*p);
                free(a->command);
        }
        pthread_mutex_destroy(&a->op_lock);
        pthread_mutex_destroy(&a->st_lock);
        free(a->dir);
        free(a->lower);
        free(a);
}

struct app *app_find(struct app_conn *c, const char *id)
{
        pthread_mutex_lock(&c->lock);
        struct app *a = c->apps;
        while (a && (a->removed || strcasecmp(a->id, id) != 0))
                a = a->next;
        pthread_mutex_unlock(&c->lock);
        return a;
}

struct app *app_get(struct app_conn *c, const char *id, struct na_error *err)
{
        struct app *a = app_find(c, id);
        if (!a)
                na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: no such app on this node", id);
        return a;
}

void app_emit_state(struct app_conn *c, struct app *a, enum proto_app_state st)
{
        if (c->o.on_event)
                c->o.on_event(c->o.userdata, "app.state", a->id, proto_app_state_encode(st));
}

void app_set_state(struct app_conn *c, struct app *a, enum proto_app_state st)
{
        if (a->state == st)
                return;
        a->state = st;
        app_emit_state(c, a, st);
}

void app_report_cgroup(struct app_conn *c, struct app *a)
{
        if (!c->o.on_cgroup)
                return;
        char cg[128];
        app_cgroup_path(a->id, cg, sizeof(cg));
        c->o.on_cgroup(c->o.userdata, a->id, cg, (double)a->deploy->plan.cpu_millis / 1000.0, a->deploy->plan.memory_mb);
}

json_t *app_record_json(struct app *a)
{
        struct proto_app rec;
        proto_app_from_deploy(a->deploy, a->id, &rec);
        rec.command = a->command;
        pthread_mutex_lock(&a->st_lock);
        rec.state = a->state;
        pthread_mutex_unlock(&a->st_lock);
        rec.created_at_ms = a->created_ms;
        rec.updated_at_ms = a->updated_ms;
        rec.volume_seeded_at_ms = a->seeded_ms;
        rec.sftp_enabled = app_oci_sftp_enabled(a);
        return proto_app_encode(&rec);
}

/* ---- open, close ---- */

static int copy_opt(char *buf, size_t len, const char *v, const char *what, struct na_error *err)
{
        if ((size_t)snprintf(buf, len, "%s", v ? v : "") >= len)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "apps: %s is too long", what);
        return 0;
}

static int load_apps(struct app_conn *c, struct na_error *err)
{
        DIR *d = opendir(c->apps_dir);
        if (!d)
                return na_error_sys(err, errno, "apps: open %s", c->apps_dir);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!na_uuid_valid(de->d_name))
                        continue;
                struct app *a = NULL;
                struct na_error e = NA_ERROR_INIT;
                int r = app_meta_load(c, de->d_name, &a, &e);
                if (r == -ENOENT) {
                        /* A deploy that did not reach its end: the next deploy of that id starts over. */
                        na_error_clear(&e);
                        continue;
                }
                if (r < 0) {
                        closedir(d);
                        na_error_move(err, &e);
                        return na_error_prefix(err, "apps: app %s", de->d_name);
                }
                a->next = c->apps;
                c->apps = a;
                app_backup_thaw_left(a->id, a->dir);
        }
        closedir(d);
        return 0;
}

static void app_oci_close(struct app_conn *c)
{
        if (!c)
                return;
        app_watch_stop(c);
        while (c->apps) {
                struct app *a = c->apps;
                c->apps = a->next;
                app_free(a);
        }
        app_net_close(c->net);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

/*
 * crun works inside the app's user namespace, where the host's root is nobody: every
 * directory down to the apps must let others through (x), or no app can start.
 * Said once at open, naming the directory, rather than at every start.
 */
static int check_traversable(const char *dir, struct na_error *err)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s", dir);
        for (;;) {
                struct stat st;
                if (stat(path, &st) < 0)
                        return na_error_sys(err, errno, "apps: %s", path);
                if (!(st.st_mode & S_IXOTH))
                        return na_error_set(err, EACCES, NA_E_INTERNAL,
                                            "apps: %s (mode %04o) must be searchable by others (chmod o+x): containers "
                                            "reach their root and volume below %s from inside their user namespace",
                                            path, (unsigned)(st.st_mode & 07777), dir);
                char *slash = strrchr(path, '/');
                if (!slash || slash == path)
                        return 0;
                *slash = '\0';
        }
}

static int app_oci_open(const struct app_options *o, struct app_conn **ret, struct na_error *err)
{
        if (!o->state_dir || !o->runtime || !o->monitor || !o->images_dir)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "apps: state_dir, runtime, monitor and images_dir are required");
        struct app_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return na_error_sys(err, ENOMEM, "apps");
        pthread_mutex_init(&c->lock, NULL);
        c->epfd = c->wakefd = -1;
        c->o = *o;
        int r = 0;
        if (o->storage_dir && *o->storage_dir)
                r = copy_opt(c->storage_dir, sizeof(c->storage_dir), o->storage_dir, "storage_dir", err);
        else if ((size_t)snprintf(c->storage_dir, sizeof(c->storage_dir), "%s/apps", o->state_dir) >= sizeof(c->storage_dir))
                r = na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "apps: state_dir is too long");
        if (r >= 0)
                r = copy_opt(c->runtime, sizeof(c->runtime), o->runtime, "runtime", err);
        if (r >= 0)
                r = copy_opt(c->monitor, sizeof(c->monitor), o->monitor, "monitor", err);
        if (r >= 0)
                r = copy_opt(c->images_dir, sizeof(c->images_dir), o->images_dir, "images_dir", err);
        if (r >= 0)
                r = copy_opt(c->state_dir, sizeof(c->state_dir), o->state_dir, "state_dir", err);
        if (r >= 0)
                r = copy_opt(c->registry, sizeof(c->registry), o->registry, "registry", err);
        if (r >= 0)
                r = copy_opt(c->registry_ca, sizeof(c->registry_ca), o->registry_ca_file, "registry_ca_file", err);
        if (r < 0) {
                app_oci_close(c);
                return r;
        }
        snprintf(c->apps_dir, sizeof(c->apps_dir), "%s/apps", c->storage_dir);
        if (o->backups_dir && *o->backups_dir)
                r = copy_opt(c->backups_dir, sizeof(c->backups_dir), o->backups_dir, "backups_dir", err);
        else
                snprintf(c->backups_dir, sizeof(c->backups_dir), "%s/backups", c->storage_dir);
        if (r < 0) {
                app_oci_close(c);
                return r;
        }
        snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/images", c->storage_dir);
        snprintf(c->crun_root, sizeof(c->crun_root), "%s/crun", c->storage_dir);
        c->crun = (struct app_crun){ .crun = c->runtime, .root = c->crun_root };
        c->reg = (struct app_registry_options){ .url = c->registry, .ca_file = c->registry_ca[0] ? c->registry_ca : NULL,
                                                .username = o->registry_username, .password = o->registry_password,
                                                .allow_insecure_http = o->allow_insecure_http,
                                                .max_bytes = o->image_pull_max_bytes };
        c->private_ns = app_crun_needs_private_ns();
        struct na_error lerr = NA_ERROR_INIT;
        c->have_layout = app_cgroup_layout(&c->layout, &lerr) >= 0;
        na_error_clear(&lerr);
        /* 0711 down to each app: crun, inside the app's user namespace, must traverse to
         * its root and volume. Nothing below is readable by others. The unpacked images
         * are root's alone (0700): an app reaches its image only through the idmapped
         * overlay the agent mounts as root, so no uid of the node walks into the cache,
         * whose files carry the images' own ids and directories such as a 1777 /tmp. */
        const char *dirs[] = { c->storage_dir, c->apps_dir, c->cache_dir, c->crun_root };
        const mode_t modes[] = { 0711, 0711, 0700, 0711 };
        for (size_t i = 0; i < ARRAY_SIZE(dirs) && r >= 0; i++) {
                r = na_mkdir_p(dirs[i], modes[i], err);
                if (r >= 0 && chmod(dirs[i], modes[i]) < 0)
                        r = na_error_sys(err, errno, "apps: chmod %s", dirs[i]);
        }
        if (r >= 0)
                r = check_traversable(c->apps_dir, err);
        if (r >= 0)
                r = load_apps(c, err);
        if (r >= 0)
                r = app_oci_net_open(c, err);
        if (r >= 0)
                r = app_watch_start(c, err);
        if (r < 0) {
                app_oci_close(c);
                return r;
        }
        *ret = c;
        return 0;
}

static int app_oci_inventory(struct app_conn *c, json_t **ret, struct na_error *err)
{
        json_t *a = json_array();
        if (!a)
                return na_error_sys(err, ENOMEM, "apps: inventory");
        pthread_mutex_lock(&c->lock);
        for (struct app *p = c->apps; p; p = p->next) {
                if (p->removed)
                        continue;
                pthread_mutex_lock(&p->st_lock);
                enum proto_app_state st = p->state;
                pthread_mutex_unlock(&p->st_lock);
                json_array_append_new(a, json_pack("{s:s, s:s}", "id", p->id, "state", proto_app_state_name(st)));
        }
        pthread_mutex_unlock(&c->lock);
        *ret = a;
        return 0;
}

static bool app_oci_exists(struct app_conn *c, const char *id)
{
        return app_find(c, id) != NULL;
}

static int app_oci_cgroup(struct app_conn *c, const char *id, char *buf, size_t len, struct na_error *err)
{
        if (!app_get(c, id, err))
                return -ENOENT;
        app_cgroup_path(id, buf, len);
        return 0;
}


const struct app_driver app_oci_driver = {
        .name = "crun",
        .open = app_oci_open,
        .close = app_oci_close,
        .inventory = app_oci_inventory,
        .exists = app_oci_exists,
        .resume = app_oci_resume,
        .deploy = app_oci_deploy,
        .power = app_oci_power,
        .status = app_oci_status,
        .command_set = app_oci_command_set,
        .console_send = app_oci_console_send,
        .output = app_oci_output,
        .remove = app_oci_remove,
        .files = app_oci_files,
        .cgroup = app_oci_cgroup,
        .image_pull = app_oci_image_pull,
        .image_list = app_oci_image_list,
        .image_delete = app_oci_image_delete,
        .backup_create = app_oci_backup_create,
        .backup_restore = app_oci_backup_restore,
        .backup_list = app_oci_backup_list,
        .backup_delete = app_oci_backup_delete,
        .backup_open = app_oci_backup_open,
        .backup_tmpfile = app_oci_backup_tmpfile,
        .backup_adopt = app_oci_backup_adopt,
        .sftp_target = app_oci_sftp_target,
        .group_set = app_oci_group_set,
        .exposure_add = app_oci_exposure_add,
        .exposure_remove = app_oci_exposure_remove,
        .exposure_list = app_oci_exposure_list,
        .exposure_verify = app_oci_exposure_verify,
        .address = app_oci_address,
        .console_attach = app_oci_console_attach,
        .update = app_oci_update,
};
