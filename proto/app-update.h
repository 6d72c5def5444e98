/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of app.update (AGENT-API 4.2): its params, the deploy an update leads to,
 * what kind of change that is, and the app.updated event. No I/O, no logging.
 *
 *   struct proto_app_update *u;
 *   if (proto_app_update_decode(params, &u, &err) < 0) return ...;   // 422, per field
 *   struct proto_app_deploy *next;
 *   proto_app_update_apply(current, u, &next, &err);
 *   switch (proto_app_update_change(current, next)) { NONE: converge; PLAN: live; RESTART: ... }
 *
 * Rules where the contract is silent (proto/README.md, "app.update"): at least one of
 * version, template and plan; template and plan are whole objects, as in app.deploy
 * (each replaces the app's; a field left out of them takes its deploy default); a
 * template that manages its own start (customCommand false) drops the app's own command.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/app-params.h"
#include "proto/vps.h"

#define PROTO_APP_HEALTHY_MIN 10
#define PROTO_APP_HEALTHY_MAX 3600
#define PROTO_APP_HEALTHY_DEFAULT 60

struct proto_app_update {
        json_t *root;                 /* the params document (a reference) */
        const char *version;          /* NULL: the app's */
        bool has_template;
        struct proto_app_template tmpl; /* has_template: the new template */
        bool has_plan;
        struct proto_app_plan plan;   /* has_plan: the new plan */
        char safety_backup_id[PROTO_VPS_OBJECT_ID_MAX + 1]; /* "": no safety backup */
        int64_t healthy_sec;          /* 10..3600, default 60 */
};
int proto_app_update_decode(json_t *params, struct proto_app_update **ret, struct na_error *err);
void proto_app_update_free(struct proto_app_update *p); /* NULL-safe */

/* The deploy the update leads to from cur (a new one: free it with proto_app_deploy_free). */
int proto_app_update_apply(const struct proto_app_deploy *cur, const struct proto_app_update *u,
                           struct proto_app_deploy **ret, struct na_error *err);

enum proto_app_update_change {
        PROTO_APP_UPDATE_NONE,    /* the same deploy: the update converges */
        PROTO_APP_UPDATE_PLAN,    /* the plan alone: applied live */
        PROTO_APP_UPDATE_RESTART, /* the version, template or command: a restart on the new settings */
};
enum proto_app_update_change proto_app_update_change(const struct proto_app_deploy *from,
                                                     const struct proto_app_deploy *to);

/* app.updated data: {version, rolledBack, reason?} (reason NULL: absent). */
json_t *proto_app_updated_encode(const char *version, bool rolled_back, const char *reason);
