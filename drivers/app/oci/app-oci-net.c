/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The driver table's network functions (app.group.*, app.exposure.*) over app-net.h,
 * each under the app's op_lock like every other change of an app; and the opening of
 * the app network from the driver's options.
 */
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app-routes.h"
#include "drivers/app/net/app-net.h"
#include "drivers/app/oci/app-oci-internal.h"

int app_oci_net_open(struct app_conn *c, struct na_error *err)
{
        struct app_net_options o = {
                .storage_dir = c->storage_dir,
                .apps_dir = c->apps_dir,
                .network = c->o.network,
                .public_address = c->o.public_address,
                .ports = c->o.ports,
                .resolver = c->o.resolver,
                .apps_domain = c->o.apps_domain,
                .table = c->o.net_table,
                .routes = c->o.routes,
        };
        int r = app_net_open(&o, &c->net, err);
        if (r < 0)
                return na_error_prefix(err, "apps");
        /* Each app's record says its group: the network follows (an app deployed before
         * networks gets its address; a group change a crash kept from app-net.json comes back). */
        for (struct app *a = c->apps; a; a = a->next) {
                struct na_error e = NA_ERROR_INIT;
                (void)app_net_register(c->net, a->id, a->deploy->hostname, a->deploy->group_id, &e);
                na_error_clear(&e); /* its next start says it again, with the app's id */
        }
        return 0;
}

int app_oci_group_set(struct app_conn *c, const char *id, const char *group_id, bool leave, json_t **ret,
                      struct na_error *err)
{
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        pthread_mutex_lock(&a->op_lock);
        const char *cur = a->deploy->group_id;
        bool change = leave ? cur && strcmp(cur, group_id) == 0 : !cur || strcmp(cur, group_id) != 0;
        if (leave)
                group_id = NULL;
        int r = change ? app_net_group_set(c->net, id, group_id, err) : 0;
        if (r >= 0 && change) {
                /* The group is part of the app's record: its deploy params say it. */
                struct proto_app_deploy *d = NULL;
                _cleanup_json_ json_t *canon = proto_app_deploy_canonical(a->deploy);
                if (!canon || json_object_set_new(canon, "groupId", group_id ? json_string(group_id) : json_null()) < 0)
                        r = na_error_sys(err, ENOMEM, "app %s", id);
                else if ((r = proto_app_deploy_decode(canon, &d, err)) >= 0 && proto_app_deploy_own(d) < 0) {
                        proto_app_deploy_free(d);
                        r = na_error_sys(err, ENOMEM, "app %s", id);
                }
                if (r >= 0) {
                        proto_app_deploy_free(a->deploy);
                        a->deploy = d;
                        a->updated_ms = (int64_t)na_now_real_ms();
                }
        }
        if (r >= 0 && change)
                r = app_meta_save(a, err);
        if (r >= 0 && !(*ret = app_record_json(a)))
                r = na_error_sys(err, ENOMEM, "app %s", id);
        pthread_mutex_unlock(&a->op_lock);
        return r;
}

#define LOCKED(call)                                    \
        ({                                              \
                struct app *_a = app_get(c, id, err);   \
                int _r = -ENOENT;                       \
                if (_a) {                               \
                        pthread_mutex_lock(&_a->op_lock); \
                        _r = (call);                    \
                        pthread_mutex_unlock(&_a->op_lock); \
                }                                       \
                _r;                                     \
        })

int app_oci_exposure_add(struct app_conn *c, const char *id, const struct proto_exposure_add *p, json_t **ret,
                         struct na_error *err)
{
        return LOCKED(app_net_exposure_add(c->net, id, p, ret, err));
}

int app_oci_exposure_remove(struct app_conn *c, const char *id, const char *exposure_id, struct na_error *err)
{
        return LOCKED(app_net_exposure_remove(c->net, id, exposure_id, err));
}

int app_oci_exposure_list(struct app_conn *c, const char *id, json_t **ret, struct na_error *err)
{
        return LOCKED(app_net_exposure_list(c->net, id, ret, err));
}

int app_oci_exposure_verify(struct app_conn *c, const char *id, const char *exposure_id, json_t **ret,
                            struct na_error *err)
{
        return LOCKED(app_net_exposure_verify(c->net, id, exposure_id, ret, err));
}

int app_oci_address(struct app_conn *c, const char *id, char buf[16], struct na_error *err)
{
        if (!app_get(c, id, err))
                return -ENOENT;
        return app_net_address(c->net, id, buf, err);
}

void app_oci_managed_route(struct app_conn *c, const struct app *a, bool add)
{
        const struct app_routes *rt = c->o.routes;
        if (!rt || !c->o.apps_domain || !*c->o.apps_domain || a->deploy->tmpl.n_ports == 0)
                return;
        char name[300], addr[16];
        int n = snprintf(name, sizeof(name), "%s.%s", a->deploy->hostname, c->o.apps_domain);
        if (n < 0 || (size_t)n >= sizeof(name))
                return;
        struct na_error e = NA_ERROR_INIT;
        if (!add) {
                if (rt->route_remove)
                        (void)rt->route_remove(rt->userdata, a->id, "managed", name, &e);
        } else if (rt->route_add && app_net_address(c->net, a->id, addr, &e) >= 0)
                (void)rt->route_add(rt->userdata, a->id, "managed", name, addr, a->deploy->tmpl.ports[0], &e);
        na_error_clear(&e); /* a router that fails leaves the hostname as it was; the app runs regardless */
}
