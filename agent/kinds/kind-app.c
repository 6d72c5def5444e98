/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app kinds (AGENT-API 4.2): app.deploy, app.update, power, status, command.set,
 * console.send, output, delete, and the node's image.pull, image.list and
 * image.delete. Each handler is a few lines over the app driver's table
 * (drivers/app.h); the params come from proto/app-params.h's decoders.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/jobs/job-kind.h"
#include "agent/daemon/sftpd-service.h"
#include "agent/base/services.h"
#include "drivers/app.h"
#include "proto/app-params.h"
#include "proto/app-update.h"

struct app_job {
        const struct app_driver *app;
        struct app_conn *conn;
        const char *id;
        struct na_progress progress;
};

static int begin(struct job_ctx *ctx, struct app_job *j, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        j->id = job_target_id(ctx);
        if (services_apps_on(s, j->id, err) < 0)
                return -ENOTSUP;
        j->app = s->app;
        j->conn = s->app_conn;
        j->progress = job_na_progress(ctx);
        return job_checkpoint(ctx, err);
}

#define DECODER(name, type)                                                              \
        static int name##_decode(json_t *params, void **ret, struct na_error *err)      \
        {                                                                                \
                return proto_app_##name##_decode(params, (struct type **)ret, err);      \
        }                                                                                \
        static void name##_free(void *p)                                                 \
        {                                                                                \
                proto_app_##name##_free(p);                                              \
        }

DECODER(deploy, proto_app_deploy)
DECODER(power, proto_app_power)
DECODER(command_set, proto_app_command_set)
DECODER(console_send, proto_app_console_send)
DECODER(output, proto_app_output_query)
DECODER(image, proto_app_image_params)
DECODER(update, proto_app_update)

static const char *const deploy_stages[] = { "pulling-image", "unpacking", "creating-volume", "configuring", NULL };
static const char *const pull_stages[] = { "pulling-image", "unpacking", NULL };
static const char *const update_stages[] = { "pulling-image", "unpacking", "backing-up", "restarting", "verifying",
                                             NULL };

static int deploy_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct app_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->deploy(j.conn, j.id, params, &j.progress, ret, err);
}

/*
 * app.update: its deadline is the job's own (timeoutSec): the driver gets what is left of
 * it and refuses, before the app is touched, an update whose health watch (healthySec)
 * and rollback would not fit after the pull; past that point no checkpoint stops it.
 */
static int update_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct app_job j;
        int r = begin(ctx, &j, err);
        if (r < 0)
                return r;
        if (!j.app->update)
                return na_error_set(err, ENOTSUP, NA_E_UNSUPPORTED_JOB, "app.update: the %s app driver cannot update",
                                    j.app->name);
        return j.app->update(j.conn, j.id, params, job_remaining_ms(ctx), &j.progress, ret, err);
}

static int power_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_power *p = params;
        struct app_job j;
        enum proto_app_state st;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.app->power(j.conn, j.id, p->action, (unsigned)p->grace_sec, &j.progress, &st, err);
        if (r >= 0 && !(*ret = proto_app_state_encode(st)))
                r = na_error_sys(err, ENOMEM, "app %s", j.id);
        return r;
}

static int status_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        (void)params;
        struct app_job j;
        struct proto_app_status st;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.app->status(j.conn, j.id, &st, err);
        if (r >= 0 && !(*ret = proto_app_status_encode(&st)))
                r = na_error_sys(err, ENOMEM, "app %s", j.id);
        return r;
}

static int command_set_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_command_set *p = params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->command_set(j.conn, j.id, p->command, ret, err);
}

static int console_send_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_console_send *p = params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.app->console_send(j.conn, j.id, p->line, err);
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "app %s", j.id);
        return r;
}

static int output_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_output_query *q = params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->output(j.conn, j.id, q->since_seq, q->limit, ret, err);
}

static int delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        (void)params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        if (r >= 0) /* SFTP logins end first (agent/daemon/sftpd-service.h) */
                r = agent_app_sftp_forget(job_services(ctx), j.id, err);
        if (r >= 0)
                r = j.app->remove(j.conn, j.id, err);
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "app %s", j.id);
        return r;
}

static int image_pull_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_image_params *p = params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->image_pull(j.conn, &p->ref, &j.progress, ret, err);
}

static int image_list_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        (void)params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        return r < 0 ? r : j.app->image_list(j.conn, ret, err);
}

static int image_delete_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_app_image_params *p = params;
        struct app_job j;
        int r = begin(ctx, &j, err);
        if (r >= 0)
                r = j.app->image_delete(j.conn, &p->ref, err);
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "image.delete");
        return r;
}

static JOB_KIND(app_deploy_kind, "app.deploy", .target = PROTO_TARGET_APP, .changes = true, .stages = deploy_stages,
                .decode = deploy_decode, .free_params = deploy_free, .run = deploy_run);
static JOB_KIND(app_update_kind, "app.update", .target = PROTO_TARGET_APP, .changes = true, .stages = update_stages,
                .decode = update_decode, .free_params = update_free, .run = update_run);
static JOB_KIND(app_power_kind, "app.power", .target = PROTO_TARGET_APP, .changes = true, .decode = power_decode,
                .free_params = power_free, .run = power_run);
static JOB_KIND(app_status_kind, "app.status", .target = PROTO_TARGET_APP, .changes = false, .run = status_run);
static JOB_KIND(app_command_kind, "app.command.set", .target = PROTO_TARGET_APP, .changes = true,
                .decode = command_set_decode, .free_params = command_set_free, .run = command_set_run);
static JOB_KIND(app_console_kind, "app.console.send", .target = PROTO_TARGET_APP, .changes = true,
                .decode = console_send_decode, .free_params = console_send_free, .run = console_send_run);
static JOB_KIND(app_output_kind, "app.output", .target = PROTO_TARGET_APP, .changes = false, .decode = output_decode,
                .free_params = output_free, .run = output_run);
static JOB_KIND(app_delete_kind, "app.delete", .target = PROTO_TARGET_APP, .changes = true, .run = delete_run);
static JOB_KIND(image_pull_kind, "image.pull", .target = PROTO_TARGET_NODE, .changes = true, .stages = pull_stages,
                .decode = image_decode, .free_params = image_free, .run = image_pull_run);
static JOB_KIND(image_list_kind, "image.list", .target = PROTO_TARGET_NODE, .changes = false, .run = image_list_run);
static JOB_KIND(image_delete_kind, "image.delete", .target = PROTO_TARGET_NODE, .changes = true,
                .decode = image_decode, .free_params = image_free, .run = image_delete_run);

job_kind_list app_job_kinds = { &app_deploy_kind,   &app_update_kind,  &app_power_kind,  &app_status_kind,
                                &app_command_kind,  &app_console_kind, &app_output_kind, &app_delete_kind,
                                &image_pull_kind,   &image_list_kind,  &image_delete_kind, NULL };
