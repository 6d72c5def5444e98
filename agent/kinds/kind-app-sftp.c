/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.sftp.set (AGENT-API 4.2): writes the app's SFTP credentials file that
 * nodeagent-sftpd reads at each login (sftp/sftp-creds.h; docs/app-sftp.md). The
 * params come from proto/app-sftp.h; each public key line is parsed with libssh
 * (VALIDATION_ERROR on publicKeys.<i>) and the hash tried with crypt(3) before
 * anything is written. A template without file access refuses with 403
 * FILE_ACCESS_DISABLED (the driver's sftp_target, as for app.files.*). Absent fields
 * keep what the file held. The app's open sessions are then ended (they logged in with
 * what the file held). Also: app.delete's hook that removes the file and ends them.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/base/config.h"
#include "agent/base/log.h"
#include "agent/base/services.h"
#include "agent/daemon/sftpd-service.h"
#include "agent/jobs/job-kind.h"
#include "drivers/app.h"
#include "proto/app-sftp.h"
#include "sftp/sftp-auth.h"
#include "sftp/sftp-creds.h"

static int decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_app_sftp_set_decode(params, (struct proto_app_sftp_set **)ret, err);
}

static void free_params(void *p)
{
        proto_app_sftp_set_free(p);
}

/* The deep checks that need libssh and libxcrypt: every problem under its field. */
static int check(const struct proto_app_sftp_set *p, struct na_error *err)
{
        if (p->password == PROTO_SFTP_SET) {
                const char *why = sftp_hash_problem(p->password_hash);
                if (why)
                        na_error_field(err, "passwordHash", "%s", why);
        }
        for (size_t i = 0; i < p->n_keys; i++) {
                const char *why = sftp_key_line_parse(p->public_keys[i], NULL);
                if (why) {
                        char field[32];
                        snprintf(field, sizeof(field), "publicKeys.%zu", i);
                        na_error_field(err, field, "%s", why);
                }
        }
        return na_error_is_set(err) ? -EINVAL : 0;
}

static int set_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_sftp_set *p = params;
        const struct agent_services *s = job_services(ctx);
        const char *id = job_target_id(ctx);
        int r = check(p, err);
        if (r < 0)
                return r;
        if (services_apps_on(s, id, err) < 0)
                return -ENOTSUP;
        if (!s->app->sftp_target)
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: the app driver has no SFTP", id);
        unsigned port = agent_sftp_port(s->config);
        if (p->enabled && port == 0)
                return na_error_set(err, EINVAL, NA_E_INVALID_STATE,
                                    "app %s: SFTP is off on this node ([apps] sftp_listen is empty)", id);
        if ((r = job_checkpoint(ctx, err)) < 0)
                return r;
        struct app_sftp_target t;
        if ((r = s->app->sftp_target(s->app_conn, id, &t, err)) < 0)
                return r;
        if (!sftp_username_valid(t.sftp_username))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app %s: sftpUsername %s cannot be an SFTP user name",
                                    id, t.sftp_username);
        char users[PATH_MAX];
        if (agent_sftp_users_dir(s->config, users, sizeof(users)) < 0)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "app %s: sftp: storage path too long", id);

        /* What the file held (absent fields keep it), or a new user. */
        struct sftp_user u = { 0 };
        struct na_error e = NA_ERROR_INIT;
        if (sftp_user_load(users, t.sftp_username, &u, &e) < 0 || !u.app_id || strcmp(u.app_id, id) != 0) {
                /* Another app's login stays its own (issue 20); one of an app that is gone is taken over. */
                if (u.app_id && strcmp(u.app_id, id) != 0 && s->app->exists(s->app_conn, u.app_id)) {
                        r = na_error_set(err, EEXIST, NA_E_INVALID_STATE,
                                         "app %s: sftpUsername %s is app %s's on this node", id, t.sftp_username,
                                         u.app_id);
                        na_error_detail(err, "state", json_string("in use"));
                        na_error_detail(err, "field", json_string("sftpUsername"));
                        na_error_detail(err, "owner", json_string(u.app_id));
                        sftp_user_clear(&u);
                        na_error_clear(&e);
                        return r;
                }
                sftp_user_clear(&u);
        }
        na_error_clear(&e);
        free(u.app_id);
        free(u.volume_dir);
        bool oom = !(u.app_id = strdup(id)) | !(u.volume_dir = strdup(t.volume_dir));
        u.uid = t.uid;
        u.gid = t.gid;
        u.enabled = p->enabled;
        u.file_access = true;
        if (p->read_only_change == PROTO_SFTP_SET)
                u.read_only = p->read_only;
        if (p->password != PROTO_SFTP_KEEP) {
                free(u.password_hash);
                u.password_hash = NULL;
                if (p->password == PROTO_SFTP_SET)
                        oom |= !(u.password_hash = strdup(p->password_hash));
        }
        if (p->keys != PROTO_SFTP_KEEP) {
                for (size_t i = 0; i < u.n_keys; i++)
                        free(u.public_keys[i]);
                free(u.public_keys);
                u.public_keys = NULL;
                u.n_keys = 0;
                if (p->n_keys && !(u.public_keys = calloc(p->n_keys, sizeof(char *))))
                        oom = true;
                for (size_t i = 0; u.public_keys && i < p->n_keys; i++) {
                        if (!(u.public_keys[u.n_keys] = strdup(p->public_keys[i])))
                                oom = true;
                        else
                                u.n_keys++;
                }
        }
        if (oom) {
                sftp_user_clear(&u);
                return na_error_sys(err, ENOMEM, "app %s: sftp", id);
        }
        r = sftp_user_store(users, t.sftp_username, &u, err);
        sftp_user_clear(&u);
        if (r < 0)
                return na_error_prefix(err, "app %s", id);
        /* Open sessions logged in with what the file held: ended, the client logs in again. */
        if ((r = agent_sftp_end_sessions(s->config, id, err)) < 0)
                return na_error_prefix(err, "app %s", id);
        if (r > 0)
                log_info("app %s: app.sftp.set ended %d open SFTP session%s", id, r, r == 1 ? "" : "s");
        char host[256];
        agent_sftp_host(s->config, host, sizeof(host));
        if (!(*ret = proto_app_sftp_set_encode(t.sftp_username, host, port, p->enabled)))
                return na_error_sys(err, ENOMEM, "app %s: sftp", id);
        return 0;
}

int agent_app_sftp_forget(const struct agent_services *s, const char *app_id, struct na_error *err)
{
        char users[PATH_MAX];
        if (!s || !s->config || agent_sftp_users_dir(s->config, users, sizeof(users)) < 0)
                return 0;
        int r = sftp_user_remove_app(users, app_id, err);
        if (r < 0)
                return r;
        /* Then the sessions: none can log in again, none keeps the volume busy. */
        if ((r = agent_sftp_end_sessions(s->config, app_id, err)) < 0)
                return na_error_prefix(err, "app %s", app_id);
        if (r > 0)
                log_info("app %s: app.delete ended %d open SFTP session%s", app_id, r, r == 1 ? "" : "s");
        return 0;
}

static JOB_KIND(sftp_set_kind, "app.sftp.set", .target = PROTO_TARGET_APP, .changes = true, .decode = decode,
                .free_params = free_params, .run = set_run);

job_kind_list app_sftp_job_kinds = { &sftp_set_kind, NULL };
