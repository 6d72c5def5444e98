/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The cgroup layout as crun sees it, and crun state/kill/delete in exec form. */
#include "drivers/app/oci/app-crun.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/spawn.h"
#include "drivers/app/oci/app-mountinfo.h"
#include "drivers/app/oci/app-names.h"

#define DEFAULT_CRUN "/usr/bin/crun"
#define DEFAULT_CGROUP_ROOT "/sys/fs/cgroup"
#define STATE_MAX (64u << 10)

const char *app_cgroup_layout_name(enum app_cgroup_layout l)
{
        switch (l) {
        case APP_CGROUP_V1:
                return "v1";
        case APP_CGROUP_V2:
                return "v2";
        case APP_CGROUP_HYBRID:
                return "hybrid";
        }
        return "unknown";
}

struct layout_ctx {
        const char *root;
        size_t rlen;
        int root_v2, unified_v2; /* last mount seen there: 1 cgroup2, 0 other, -1 none */
        bool v1;
};

static int layout_one(const struct app_mount *m, void *userdata)
{
        struct layout_ctx *c = userdata;
        bool is2 = streq(m->fstype, "cgroup2");
        if (strncmp(m->point, c->root, c->rlen) != 0)
                return 0;
        if (m->point[c->rlen] == '\0')
                c->root_v2 = is2;
        else if (m->point[c->rlen] == '/') {
                if (streq(m->point + c->rlen, "/unified"))
                        c->unified_v2 = is2;
                if (streq(m->fstype, "cgroup"))
                        c->v1 = true;
        }
        return 0;
}

int app_cgroup_layout_at(const char *mountinfo, const char *root, enum app_cgroup_layout *ret,
                         struct na_error *err)
{
        struct layout_ctx c = { .root = root, .rlen = strlen(root), .root_v2 = -1, .unified_v2 = -1 };
        while (c.rlen > 1 && root[c.rlen - 1] == '/')
                c.rlen--;
        int r = app_mountinfo_foreach(mountinfo, layout_one, &c, err);
        if (r < 0)
                return na_error_prefix(err, "cgroup layout");
        if (c.root_v2 == 1)
                *ret = APP_CGROUP_V2;
        else if (c.unified_v2 == 1)
                *ret = APP_CGROUP_HYBRID;
        else if (c.v1)
                *ret = APP_CGROUP_V1;
        else
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "cgroup layout: no cgroup hierarchy at %.*s",
                                    (int)c.rlen, root);
        return 0;
}

int app_cgroup_layout(enum app_cgroup_layout *ret, struct na_error *err)
{
        return app_cgroup_layout_at("/proc/self/mountinfo", DEFAULT_CGROUP_ROOT, ret, err);
}

bool app_crun_needs_private_ns(void)
{
        enum app_cgroup_layout l;
        struct na_error e = NA_ERROR_INIT;
        int r = app_cgroup_layout(&l, &e);
        na_error_clear(&e);
        return r == 0 && l == APP_CGROUP_HYBRID;
}

int app_crun_private_ns(const char *cgroup_root)
{
        char unified[PATH_MAX];
        int n = snprintf(unified, sizeof(unified), "%s/unified", cgroup_root ? cgroup_root : DEFAULT_CGROUP_ROOT);
        if (n < 0 || (size_t)n >= sizeof(unified))
                return -ENAMETOOLONG;
        if (unshare(CLONE_NEWNS) < 0)
                return -errno;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        if (umount2(unified, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
                return -errno;
        return 0;
}

const char *app_crun_status_name(enum app_crun_status s)
{
        switch (s) {
        case APP_CRUN_CREATED:
                return "created";
        case APP_CRUN_RUNNING:
                return "running";
        case APP_CRUN_STOPPED:
                return "stopped";
        case APP_CRUN_PAUSED:
                return "paused";
        }
        return "unknown";
}

int app_crun_state_parse(const char *json, struct app_crun_state *ret, struct na_error *err)
{
        json_error_t je;
        _cleanup_json_ json_t *doc = json_loads(json, 0, &je);
        if (!doc)
                return na_error_set(err, EBADMSG, NA_E_DRIVER, "crun state: not JSON: %s", je.text);
        const char *status = json_string_value(json_object_get(doc, "status"));
        json_t *pid = json_object_get(doc, "pid");
        if (!status || !json_is_integer(pid) || json_integer_value(pid) < 0 || json_integer_value(pid) > INT_MAX)
                return na_error_set(err, EBADMSG, NA_E_DRIVER, "crun state: no status or pid");
        static const enum app_crun_status all[] = { APP_CRUN_CREATED, APP_CRUN_RUNNING, APP_CRUN_STOPPED,
                                                    APP_CRUN_PAUSED };
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                if (streq(status, app_crun_status_name(all[i]))) {
                        ret->status = all[i];
                        ret->pid = all[i] == APP_CRUN_STOPPED ? 0 : (pid_t)json_integer_value(pid);
                        return 0;
                }
        return na_error_set(err, EBADMSG, NA_E_DRIVER, "crun state: unknown status \"%.32s\"", status);
}

/* Whether crun has state for the container: <root>/<id> is a directory. */
static int exists(const struct app_crun *c, const char *id, struct na_error *err)
{
        if (!c || !c->root || c->root[0] != '/')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "crun: the state root must be absolute");
        if (c->crun && c->crun[0] != '/')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "crun: the binary must be an absolute path");
        if (!app_name_valid(id))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "crun: bad container id");
        _cleanup_free_ char *dir = na_strdupf("%s/%s", c->root, id);
        if (!dir)
                return na_error_sys(err, ENOMEM, "crun %s", id);
        struct stat st;
        if (lstat(dir, &st) < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "crun %s: stat %s", id, dir);
        }
        return S_ISDIR(st.st_mode) ? 1 : 0;
}

/* Run crun; a failure after which the container's state is gone is -ENOENT, err clear. */
static int run(const struct app_crun *c, const char *id, char *const *argv, char **ret_out, struct na_error *err)
{
        struct na_error e = NA_ERROR_INIT;
        int r = na_spawn(argv, NULL, ret_out, STATE_MAX, &e);
        if (r >= 0)
                return 0;
        struct na_error e2 = NA_ERROR_INIT;
        int x = exists(c, id, &e2);
        na_error_clear(&e2);
        if (x == 0) {
                na_error_clear(&e);
                return -ENOENT;
        }
        na_error_move(err, &e);
        return na_error_prefix(err, "app %s", id);
}

int app_crun_state(const struct app_crun *c, const char *id, struct app_crun_state *ret, struct na_error *err)
{
        int r = exists(c, id, err);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        char *const argv[] = { (char *)(c->crun ? c->crun : DEFAULT_CRUN), (char *)"--root", (char *)c->root,
                               (char *)"state", (char *)id, NULL };
        _cleanup_free_ char *out = NULL;
        if ((r = run(c, id, argv, &out, err)) < 0)
                return r;
        r = app_crun_state_parse(out, ret, err);
        return r < 0 ? na_error_prefix(err, "app %s", id) : 0;
}

int app_crun_kill(const struct app_crun *c, const char *id, int sig, struct na_error *err)
{
        int r = exists(c, id, err);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        if (sig <= 0 || sig >= 65)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app %s: kill: bad signal %d", id, sig);
        char num[16];
        snprintf(num, sizeof(num), "%d", sig);
        char *const argv[] = { (char *)(c->crun ? c->crun : DEFAULT_CRUN), (char *)"--root", (char *)c->root,
                               (char *)"kill", (char *)id, num, NULL };
        return run(c, id, argv, NULL, err);
}

int app_crun_delete(const struct app_crun *c, const char *id, struct na_error *err)
{
        int r = exists(c, id, err);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        char *const argv[] = { (char *)(c->crun ? c->crun : DEFAULT_CRUN), (char *)"--root", (char *)c->root,
                               (char *)"delete", (char *)"--force", (char *)id, NULL };
        return run(c, id, argv, NULL, err);
}
