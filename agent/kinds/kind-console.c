/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * console.open and console.close (AGENT-API 4.3): thin handlers over agent/console/consoles.h.
 * console.open runs on a worker until the relay's WebSocket is up (the dial blocks
 * that worker, never the loop), then the session lives on in the loop.
 */
#include <errno.h>
#include <stdlib.h>

#include "agent/console/consoles.h"
#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "proto/console.h"

static int open_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_console_open_decode(params, (struct proto_console_open **)ret, err);
}

static void open_free(void *p)
{
        proto_console_open_free(p);
}

static int close_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_console_close_decode(params, (struct proto_console_close **)ret, err);
}

static void close_free(void *p)
{
        proto_console_close_free(p);
}

static int checkpoint(void *userdata, struct na_error *err)
{
        return job_checkpoint(userdata, err);
}

static struct consoles *consoles_of(struct job_ctx *ctx, struct na_error *err)
{
        const struct agent_services *s = job_services(ctx);
        if (!s || !s->consoles) {
                na_error_set(err, ENOTSUP, NA_E_DRIVER, "consoles are not available in this agent");
                na_error_detail(err, "reason", json_string("no console service"));
                return NULL;
        }
        return s->consoles;
}

static int open_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        struct consoles *c = consoles_of(ctx, err);
        if (!c)
                return -ENOTSUP;
        int r = job_checkpoint(ctx, err);
        if (r < 0)
                return r;
        return consoles_open(c, checkpoint, ctx, job_target_type(ctx), job_target_id(ctx), params, ret, err);
}

static int close_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_console_close *p = params;
        struct consoles *c = consoles_of(ctx, err);
        if (!c)
                return -ENOTSUP;
        int r = consoles_close(c, p->session_id, err);
        if (r >= 0 && !(*ret = json_object()))
                r = na_error_sys(err, ENOMEM, "console %s", p->session_id);
        return r;
}

#define CONSOLE_TARGETS ((1u << PROTO_TARGET_VPS) | (1u << PROTO_TARGET_APP))

static JOB_KIND(console_open, "console.open", .target = PROTO_TARGET_APP, .targets = CONSOLE_TARGETS, .changes = true,
                .decode = open_decode, .free_params = open_free, .run = open_run);

static JOB_KIND(console_close, "console.close", .target = PROTO_TARGET_APP, .targets = CONSOLE_TARGETS,
                .changes = false, .decode = close_decode, .free_params = close_free, .run = close_run);

job_kind_list console_job_kinds = { &console_open, &console_close, NULL };
