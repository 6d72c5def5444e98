/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Exposures of an app (app.exposure.*), kept as Exposure objects (reference 2.3) in
 * <apps_dir>/<id>/exposures.json, replaced atomically, and re-applied at open.
 *
 * A port exposure is one DNAT rule in the exposures chain (rebuilt whole in one
 * batch per change: an add or a remove is all or nothing). Its externalPort must lie
 * in [apps] ports and be free: no other exposure of any app holds it with the same
 * protocol, and no socket of the node is bound to it (a bind() test, SO_REUSEADDR
 * for TCP so that only a listener counts); else 409 PORT_IN_USE. protocol http is
 * forwarded as TCP and answered as given.
 *
 * A domain exposure is stored pending with verificationTarget <app hostname>.<apps
 * domain>; verification and routing go through struct app_routes (drivers/app-routes.h)
 * when the node has one, else verify answers "domain verification is not configured
 * on this node".
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app/net/app-net-internal.h"

#define EXPOSURES_MAX (4u << 20)
#define NO_VERIFIER "domain verification is not configured on this node"

bool app_net_exposure_is_port(json_t *e)
{
        const char *t = json_string_value(json_object_get(e, "type"));
        return t && strcmp(t, "port") == 0;
}

uint8_t app_net_exposure_l4proto(json_t *e)
{
        const char *p = json_string_value(json_object_get(e, "protocol"));
        return p && strcmp(p, "udp") == 0 ? IPPROTO_UDP : IPPROTO_TCP;
}

static void path_of(struct app_net *n, const char *id, char *buf, size_t len)
{
        snprintf(buf, len, "%s/%s/exposures.json", n->apps_dir, id);
}

int app_net_exposures_load(struct app_net *n, struct app_net_member *m, struct na_error *err)
{
        char path[4200];
        path_of(n, m->id, path, sizeof(path));
        json_t *doc = na_json_load(path, EXPOSURES_MAX);
        if (!doc)
                return access(path, F_OK) == 0
                               ? na_error_set(err, EBADMSG, NA_E_INTERNAL, "app %s: %s is damaged", m->id, path)
                               : 0;
        if (!json_is_array(doc)) {
                json_decref(doc);
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "app %s: %s is not an array", m->id, path);
        }
        json_decref(m->exposures);
        m->exposures = doc;
        return 0;
}

static int save(struct app_net *n, struct app_net_member *m, json_t *list, struct na_error *err)
{
        char path[4200];
        path_of(n, m->id, path, sizeof(path));
        _cleanup_free_ char *text = json_dumps(list, JSON_COMPACT);
        if (!text)
                return na_error_sys(err, ENOMEM, "app %s: exposures", m->id);
        return na_atomic_write(path, text, strlen(text), 0600, err);
}

static json_t *find(json_t *list, const char *exposure_id, size_t *ret_index)
{
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
                const char *id = json_string_value(json_object_get(e, "id"));
                if (id && strcmp(id, exposure_id) == 0) {
                        if (ret_index)
                                *ret_index = i;
                        return e;
                }
        }
        return NULL;
}

/* Apply the exposures chain with m's list replaced by list (NULL: as it is). */
static int apply_ports(struct app_net *n, struct app_net_member *m, json_t *list, struct na_error *err)
{
        json_t *saved = m->exposures;
        if (list)
                m->exposures = list;
        struct app_net_rules rs;
        int r = app_net_rules_fill(n, &rs, err);
        m->exposures = saved;
        if (r < 0)
                return r;
        struct nft_batch b;
        nft_batch_init(&b, n->table);
        r = app_net_nft_ports(&b, &rs, err);
        if (r >= 0)
                r = app_net_apply(n, &b, err);
        nft_batch_clear(&b);
        app_net_rules_clear(&rs);
        return r;
}

static int port_free_on_host(struct app_net *n, uint16_t port, uint8_t l4)
{
        int fd = socket(AF_INET, (l4 == IPPROTO_UDP ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        if (l4 != IPPROTO_UDP)
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(n->public_addr ? n->public_addr : INADDR_ANY) };
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        if (r == -EADDRNOTAVAIL && n->public_addr) { /* the address is not local: any listener counts */
                sa.sin_addr.s_addr = htonl(INADDR_ANY);
                r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        }
        close(fd);
        return r;
}

static int check_port(struct app_net *n, const char *app_id, const struct proto_exposure_add *p, struct na_error *err)
{
        if (p->external_port < n->port_lo || p->external_port > n->port_hi)
                return na_error_field(err, "externalPort", "must be in this node's range %u-%u (got %lld)", n->port_lo,
                                      n->port_hi, (long long)p->external_port);
        uint8_t l4 = p->protocol == PROTO_EXPOSURE_UDP ? IPPROTO_UDP : IPPROTO_TCP;
        for (size_t i = 0; i < n->n; i++) {
                size_t j;
                json_t *e;
                json_array_foreach(n->m[i].exposures, j, e) {
                        if (app_net_exposure_is_port(e) && app_net_exposure_l4proto(e) == l4 &&
                            json_integer_value(json_object_get(e, "externalPort")) == p->external_port) {
                                na_error_set(err, EADDRINUSE, NA_E_PORT_IN_USE,
                                             "app %s: exposure %s: port %s/%lld is held by exposure %s of app %s",
                                             app_id, p->id, l4 == IPPROTO_UDP ? "udp" : "tcp",
                                             (long long)p->external_port,
                                             json_string_value(json_object_get(e, "id")), n->m[i].id);
                                return -EADDRINUSE;
                        }
                }
        }
        int r = port_free_on_host(n, (uint16_t)p->external_port, l4);
        if (r == -EADDRINUSE)
                return na_error_set(err, EADDRINUSE, NA_E_PORT_IN_USE,
                                    "app %s: exposure %s: port %s/%lld is in use by a program of the node", app_id,
                                    p->id, l4 == IPPROTO_UDP ? "udp" : "tcp", (long long)p->external_port);
        return 0;
}

/* The lowest port of the range no exposure holds (same protocol) and no program listens on. */
static int pick_port(struct app_net *n, const char *app_id, struct proto_exposure_add *p, struct na_error *err)
{
        uint8_t l4 = p->protocol == PROTO_EXPOSURE_UDP ? IPPROTO_UDP : IPPROTO_TCP;
        for (uint32_t port = n->port_lo; port <= n->port_hi; port++) {
                bool held = false;
                for (size_t i = 0; i < n->n && !held; i++) {
                        size_t j;
                        json_t *e;
                        json_array_foreach(n->m[i].exposures, j, e)
                                held |= app_net_exposure_is_port(e) && app_net_exposure_l4proto(e) == l4 &&
                                        json_integer_value(json_object_get(e, "externalPort")) == port;
                }
                if (!held && port_free_on_host(n, (uint16_t)port, l4) == 0) {
                        p->external_port = port;
                        return 0;
                }
        }
        return na_error_set(err, EADDRINUSE, NA_E_PORT_IN_USE, "app %s: exposure %s: every port of %u-%u is taken",
                            app_id, p->id, n->port_lo, n->port_hi);
}

static int check_domain(struct app_net *n, const char *app_id, const struct proto_exposure_add *p,
                        struct na_error *err)
{
        if (!n->apps_domain)
                return na_error_field(err, "type", "domain exposures need [apps] apps_domain on this node");
        if (proto_domain_under(p->hostname, n->apps_domain))
                return na_error_field(err, "hostname", "must not be under this service's own domain %s",
                                      n->apps_domain);
        for (size_t i = 0; i < n->n; i++) {
                size_t j;
                json_t *e;
                json_array_foreach(n->m[i].exposures, j, e) {
                        const char *h = json_string_value(json_object_get(e, "hostname"));
                        if (!app_net_exposure_is_port(e) && h && strcmp(h, p->hostname) == 0) {
                                int r = na_error_set(err, EEXIST, NA_E_INVALID_STATE,
                                                     "app %s: exposure %s: domain %s is exposure %s of app %s already",
                                                     app_id, p->id, p->hostname,
                                                     json_string_value(json_object_get(e, "id")), n->m[i].id);
                                na_error_detail(err, "field", json_string("hostname"));
                                na_error_detail(err, "owner", json_string(n->m[i].id));
                                return r;
                        }
                }
        }
        return 0;
}

static json_t *new_exposure(struct app_net *n, struct app_net_member *m, const struct proto_exposure_add *p)
{
        int64_t now = (int64_t)na_now_real_ms();
        char target[320];
        bool domain = p->type == PROTO_EXPOSURE_DOMAIN;
        if (domain)
                snprintf(target, sizeof(target), "%s.%s", m->hostname, n->apps_domain);
        struct proto_exposure e = {
                .id = p->id,
                .app_id = m->id,
                .type = proto_exposure_types[p->type],
                .protocol = proto_exposure_protocols[p->protocol],
                .hostname = domain ? p->hostname : NULL,
                .verification_target = domain ? target : NULL,
                .container_port = p->container_port,
                .external_port = domain ? 0 : p->external_port,
                .verification_required = domain,
                .enabled = true,
                .created_at_ms = now,
                .updated_at_ms = now,
        };
        return proto_exposure_encode(&e);
}

/* The same exposure asked again: the params it was made with. */
static bool same(json_t *old, json_t *fresh)
{
        static const char *const keys[] = { "type", "protocol", "hostname", "containerPort", "externalPort" };
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (!json_equal(json_object_get(old, keys[i]), json_object_get(fresh, keys[i])))
                        return false;
        return true;
}

int app_net_exposure_add(struct app_net *n, const char *app_id, const struct proto_exposure_add *p, json_t **ret,
                         struct na_error *err)
{
        if (!app_net_enabled(n))
                return na_error_set(err, ENOTSUP, NA_E_DRIVER, "app %s: exposure %s: [apps] network is off on this node",
                                    app_id, p->id);
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        int r = m ? 0 : na_error_set(err, ENOENT, NA_E_INTERNAL, "app %s: not on this node's network", app_id);
        json_t *old = r >= 0 ? find(m->exposures, p->id, NULL) : NULL;
        struct proto_exposure_add q = *p; /* externalPort absent: the node picks one */
        if (q.type == PROTO_EXPOSURE_PORT && q.external_port == 0 && old)
                q.external_port = json_integer_value(json_object_get(old, "externalPort"));
        else if (r >= 0 && q.type == PROTO_EXPOSURE_PORT && q.external_port == 0)
                r = pick_port(n, app_id, &q, err);
        p = &q;
        _cleanup_json_ json_t *fresh = NULL;
        if (r >= 0 && !(fresh = new_exposure(n, m, p)))
                r = na_error_sys(err, ENOMEM, "app %s: exposure %s", app_id, p->id);
        if (old) {
                r = same(old, fresh) ? 0
                                     : na_error_set(err, EEXIST, NA_E_INVALID_STATE,
                                                    "app %s: exposure %s exists already with other params", app_id,
                                                    p->id);
                if (r >= 0)
                        *ret = json_deep_copy(old);
                pthread_mutex_unlock(&n->lock);
                return r;
        }
        if (r >= 0)
                r = p->type == PROTO_EXPOSURE_PORT ? check_port(n, app_id, p, err) : check_domain(n, app_id, p, err);
        _cleanup_json_ json_t *list = r >= 0 ? json_deep_copy(m->exposures) : NULL;
        if (r >= 0 && (!list || json_array_append(list, fresh) < 0))
                r = na_error_sys(err, ENOMEM, "app %s: exposure %s", app_id, p->id);
        if (r >= 0 && p->type == PROTO_EXPOSURE_PORT)
                r = apply_ports(n, m, list, err);
        if (r >= 0 && (r = save(n, m, list, err)) < 0 && p->type == PROTO_EXPOSURE_PORT) {
                struct na_error e = NA_ERROR_INIT;
                (void)apply_ports(n, m, NULL, &e); /* back to what the file says */
                na_error_clear(&e);
        }
        if (r >= 0) {
                json_decref(m->exposures);
                m->exposures = TAKE_PTR(list);
                *ret = json_deep_copy(fresh);
        }
        pthread_mutex_unlock(&n->lock);
        if (r < 0 && !strstr(err->message, p->id)) /* every failure names the app and the exposure */
                na_error_prefix(err, "app %s: exposure %s", app_id, p->id);
        return r;
}

static int unroute(struct app_net *n, const char *app_id, json_t *e, struct na_error *err)
{
        if (app_net_exposure_is_port(e) || !json_is_true(json_object_get(e, "isDomainVerified")) || !n->routes ||
            !n->routes->route_remove)
                return 0;
        return n->routes->route_remove(n->routes->userdata, app_id, json_string_value(json_object_get(e, "id")),
                                       json_string_value(json_object_get(e, "hostname")), err);
}

int app_net_exposure_remove(struct app_net *n, const char *app_id, const char *exposure_id, struct na_error *err)
{
        if (!app_net_enabled(n))
                return 0;
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        size_t idx = 0;
        json_t *e = m ? find(m->exposures, exposure_id, &idx) : NULL;
        int r = 0;
        if (e) { /* unknown: removed already (converging) */
                _cleanup_json_ json_t *list = json_deep_copy(m->exposures);
                bool port = app_net_exposure_is_port(e);
                if (!list || json_array_remove(list, idx) < 0)
                        r = na_error_sys(err, ENOMEM, "exposure");
                if (r >= 0)
                        r = port ? apply_ports(n, m, list, err) : unroute(n, app_id, e, err);
                if (r >= 0)
                        r = save(n, m, list, err);
                if (r >= 0) {
                        json_decref(m->exposures);
                        m->exposures = TAKE_PTR(list);
                }
        }
        pthread_mutex_unlock(&n->lock);
        return r < 0 ? na_error_prefix(err, "app %s: exposure %s: remove", app_id, exposure_id) : 0;
}

int app_net_exposures_drop_all(struct app_net *n, struct app_net_member *m, struct na_error *err)
{
        size_t i;
        json_t *e;
        json_array_foreach(m->exposures, i, e) {
                int r = unroute(n, m->id, e, err);
                if (r < 0)
                        return r;
        }
        _cleanup_json_ json_t *none = json_array();
        int r = none ? apply_ports(n, m, none, err) : na_error_sys(err, ENOMEM, "exposures");
        if (r < 0)
                return r;
        json_array_clear(m->exposures);
        char path[4200];
        path_of(n, m->id, path, sizeof(path));
        (void)unlink(path);
        return 0;
}

int app_net_exposure_list(struct app_net *n, const char *app_id, json_t **ret, struct na_error *err)
{
        if (!app_net_enabled(n))
                return (*ret = json_array()) ? 0 : na_error_sys(err, ENOMEM, "app %s: exposures", app_id);
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_member_find(n, app_id);
        *ret = m ? json_deep_copy(m->exposures) : json_array();
        pthread_mutex_unlock(&n->lock);
        return *ret ? 0 : na_error_sys(err, ENOMEM, "app %s: exposures", app_id);
}

static void set_time(json_t *e, const char *key, int64_t ms)
{
        char buf[40];
        json_object_set_new(e, key, json_string(na_format_time_ms((uint64_t)ms, buf, sizeof(buf))));
}

/* The verifier's answer into e (and routes): the exposure's new fields. */
static void apply_verdict(struct app_net *n, struct app_net_member *m, json_t *e, bool ok, const char *reason)
{
        const char *host = json_string_value(json_object_get(e, "hostname"));
        const char *eid = json_string_value(json_object_get(e, "id"));
        bool was = json_is_true(json_object_get(e, "isDomainVerified"));
        int64_t now = (int64_t)na_now_real_ms();
        char addr[16];
        app_net_addr_str(m->addr, addr);
        /* verify always succeeds: a router that fails leaves the exposure as routed as
         * it is, with the router's reason. */
        char why[600];
        struct na_error re = NA_ERROR_INIT;
        if (ok && !was && n->routes->route_add &&
            n->routes->route_add(n->routes->userdata, m->id, eid, host, addr,
                                 (uint16_t)json_integer_value(json_object_get(e, "containerPort")), &re) < 0) {
                snprintf(why, sizeof(why), "the DNS points at us, but routing failed: %s", re.message);
                ok = false;
                reason = why;
        } else if (!ok && was && unroute(n, m->id, e, &re) < 0) {
                snprintf(why, sizeof(why), "%s; un-routing failed: %s", reason, re.message);
                ok = true; /* still routed */
                reason = why;
        }
        na_error_clear(&re);
        set_time(e, "lastCheckedAt", now);
        json_object_set_new(e, "isDomainVerified", json_boolean(ok));
        if (ok && !was)
                set_time(e, "verifiedAt", now);
        json_object_set_new(e, "verificationError", ok && !reason[0] ? json_null() : json_string(reason));
        set_time(e, "updatedAt", now);
}

static int not_found(const char *app_id, const char *exposure_id, struct na_error *err)
{
        return na_error_set(err, ENOENT, NA_E_EXPOSURE_NOT_FOUND, "app %s: exposure %s: not found", app_id,
                            exposure_id);
}

/*
 * The DNS check runs without the lock (it may wait seconds for a resolver); the
 * answer is applied under it to the exposure as it is then (gone meanwhile:
 * EXPOSURE_NOT_FOUND).
 */
int app_net_exposure_verify(struct app_net *n, const char *app_id, const char *exposure_id, json_t **ret,
                            struct na_error *err)
{
        pthread_mutex_lock(&n->lock);
        struct app_net_member *m = app_net_enabled(n) ? app_net_member_find(n, app_id) : NULL;
        json_t *e = m ? find(m->exposures, exposure_id, NULL) : NULL;
        _cleanup_json_ json_t *copy = e ? json_deep_copy(e) : NULL;
        bool domain = e && !app_net_exposure_is_port(e);
        bool check = domain && n->routes && n->routes->verify;
        pthread_mutex_unlock(&n->lock);
        if (!e)
                return not_found(app_id, exposure_id, err);
        if (!copy)
                return na_error_sys(err, ENOMEM, "app %s: exposure %s", app_id, exposure_id);
        if (!check) { /* a port, or no verifier here: unchanged */
                if (domain)
                        json_object_set_new(copy, "verificationError", json_string(NO_VERIFIER));
                *ret = TAKE_PTR(copy);
                return 0;
        }

        char reason[512] = "";
        bool ok = false;
        struct na_error e2 = NA_ERROR_INIT;
        int r = n->routes->verify(n->routes->userdata, json_string_value(json_object_get(copy, "hostname")),
                                  json_string_value(json_object_get(copy, "verificationTarget")), &ok, reason,
                                  sizeof(reason), &e2);
        bool verifier_failed = r < 0;
        if (verifier_failed) {
                snprintf(reason, sizeof(reason), "%s", e2.message);
                na_error_clear(&e2);
        }

        pthread_mutex_lock(&n->lock);
        size_t idx = 0;
        m = app_net_member_find(n, app_id);
        e = m ? find(m->exposures, exposure_id, &idx) : NULL;
        json_decref(copy);
        copy = e ? json_deep_copy(e) : NULL;
        _cleanup_json_ json_t *list = m ? json_deep_copy(m->exposures) : NULL;
        if (!e)
                r = not_found(app_id, exposure_id, err);
        else if (!copy || !list)
                r = na_error_sys(err, ENOMEM, "exposure");
        else {
                if (verifier_failed) /* the verifier failed, not the domain: the state stays */
                        ok = json_is_true(json_object_get(copy, "isDomainVerified"));
                apply_verdict(n, m, copy, ok, reason);
        }
        if (r >= 0 && json_array_set(list, idx, copy) < 0)
                r = na_error_sys(err, ENOMEM, "exposure");
        if (r >= 0)
                r = save(n, m, list, err);
        if (r >= 0) {
                NA_ANALYZER_FP("-Wanalyzer-null-dereference") /* m is not NULL when r >= 0: a missing member set r to not_found() */
                json_decref(m->exposures);
                m->exposures = TAKE_PTR(list);
                NA_ANALYZER_FP_END
        }
        pthread_mutex_unlock(&n->lock);
        if (r < 0)
                return strcmp(err->code ? err->code : "", NA_E_EXPOSURE_NOT_FOUND) == 0
                               ? r
                               : na_error_prefix(err, "app %s: exposure %s: verify", app_id, exposure_id);
        *ret = TAKE_PTR(copy);
        return 0;
}
