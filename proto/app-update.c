/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The app.update params decoder, the deploy an update leads to, and app.updated. */
#include "proto/app-update.h"

#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-internal.h"
#include "proto/decode.h"
#include "proto/backup.h"

void proto_app_update_free(struct proto_app_update *p)
{
        if (!p)
                return;
        proto_strv_free(p->tmpl.command);
        proto_strv_free(p->tmpl.env);
        if (p->root)
                json_decref(p->root);
        free(p);
}

int proto_app_update_decode(json_t *params, struct proto_app_update **ret, struct na_error *err)
{
        struct proto_app_update *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.update params");
        p->root = json_incref(params);
        p->healthy_sec = PROTO_APP_HEALTHY_DEFAULT;
        bool ok = true;
        json_t *v = json_object_get(params, "version");
        if (v && !json_is_null(v))
                ok &= proto_app_text_field(params, "version", PROTO_APP_VERSION_MAX, &p->version, err);
        else if (v)
                ok = na_error_field(err, "version", "must not be null") >= 0;
        v = json_object_get(params, "template");
        if (v) {
                p->has_template = true;
                ok &= proto_app_template_decode(params, &p->tmpl, err);
        }
        v = json_object_get(params, "plan");
        if (v) {
                p->has_plan = true;
                ok &= proto_app_plan_decode(params, &p->plan, err);
        }
        if (!p->has_template && !p->has_plan && !json_object_get(params, "version"))
                ok = na_error_field(err, NULL, "one of version, template or plan is required") >= 0;
        if (json_object_get(params, "safetyBackupId"))
                ok &= proto_backup_id_field(params, "safetyBackupId", p->safety_backup_id, err);
        ok &= proto_int(params, NULL, "healthySec", 0, PROTO_APP_HEALTHY_MIN, PROTO_APP_HEALTHY_MAX, &p->healthy_sec,
                        err) >= 0;
        if (!ok || (p->has_template && !p->tmpl.env)) {
                if (!na_error_is_set(err))
                        na_error_sys(err, ENOMEM, "app.update params");
                proto_app_update_free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

int proto_app_update_apply(const struct proto_app_deploy *cur, const struct proto_app_update *u,
                           struct proto_app_deploy **ret, struct na_error *err)
{
        _cleanup_json_ json_t *doc = proto_app_deploy_canonical(cur);
        if (!doc)
                return na_error_sys(err, ENOMEM, "app.update");
        bool fail = false;
        if (u->version)
                fail |= json_object_set_new(doc, "version", json_string(u->version)) < 0;
        if (u->has_template) {
                json_t *t = json_object_get(u->root, "template");
                fail |= json_object_set(doc, "template", t) < 0;
                if (!u->tmpl.custom_command)
                        fail |= json_object_set_new(doc, "command", json_null()) < 0;
        }
        if (u->has_plan)
                fail |= json_object_set(doc, "plan", json_object_get(u->root, "plan")) < 0;
        if (fail)
                return na_error_sys(err, ENOMEM, "app.update");
        /* Decoded again and kept in its canonical form, as a deploy's own params are. */
        struct proto_app_deploy *d = NULL;
        int r = proto_app_deploy_decode(doc, &d, err);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *canon = proto_app_deploy_canonical(d);
        proto_app_deploy_free(d);
        if (!canon)
                return na_error_sys(err, ENOMEM, "app.update");
        return proto_app_deploy_decode(canon, ret, err);
}

enum proto_app_update_change proto_app_update_change(const struct proto_app_deploy *from,
                                                     const struct proto_app_deploy *to)
{
        _cleanup_json_ json_t *a = proto_app_deploy_canonical(from);
        _cleanup_json_ json_t *b = proto_app_deploy_canonical(to);
        if (!a || !b)
                return PROTO_APP_UPDATE_RESTART; /* out of memory: the safe answer */
        if (json_equal(a, b))
                return PROTO_APP_UPDATE_NONE;
        json_object_del(a, "plan");
        json_object_del(b, "plan");
        return json_equal(a, b) ? PROTO_APP_UPDATE_PLAN : PROTO_APP_UPDATE_RESTART;
}

json_t *proto_app_updated_encode(const char *version, bool rolled_back, const char *reason)
{
        json_t *o = json_pack("{s:s, s:b}", "version", version ? version : "", "rolledBack", rolled_back);
        if (o && reason && json_object_set_new(o, "reason", json_string(reason)) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}
