/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Route changes: validated, written to hosts.map, then applied through the runtime
 * API (add/set/del map); when the runtime call fails the file is written back, so the
 * file and the running map never disagree for long (both or neither).
 */
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "routing/app-haproxy-internal.h"

/*
 * The reply of add/set/del map is empty on success; anything else is HAProxy's reason.
 * hosts.map already holds the change: when the runtime API cannot be reached because
 * the master is dying (its worker died), a new master started now reads the change
 * from the file, which is success too.
 */
static int runtime_change(struct app_haproxy *h, const char *cmd, const char *hostname, struct na_error *err)
{
        _cleanup_free_ char *out = NULL;
        int r = app_haproxy_cli(h->sock_path, cmd, h->timeout_ms, &out, err);
        if (r < 0 && app_haproxy_settle_locked(h, 300) == APP_HAPROXY_DEAD) {
                na_error_clear(err);
                r = app_haproxy_start_locked(h, err);
                return r < 0 ? na_error_prefix(err, "haproxy: route %s", hostname) : 0;
        }
        if (r < 0)
                return na_error_prefix(err, "haproxy: route %s", hostname);
        size_t len = strlen(out);
        while (len && (out[len - 1] == '\n' || out[len - 1] == ' '))
                out[--len] = '\0';
        if (len)
                return na_error_set(err, EIO, NA_E_DRIVER, "haproxy: route %s: runtime API refused '%s': %.200s", hostname,
                                    cmd, out);
        return 0;
}

/* Put the file back as the routes say after a failed runtime call; both errors are told. */
static int restore_file(struct app_haproxy *h, int r, struct na_error *err)
{
        struct na_error e = NA_ERROR_INIT;
        if (app_haproxy_write_map(h, &e) < 0) {
                char msg[sizeof(err->message)];
                snprintf(msg, sizeof(msg), "%s", err->message);
                r = na_error_set(err, err->errnum, err->code, "%s; restoring %s failed too: %s", msg, h->map_path,
                                 e.message);
        }
        na_error_clear(&e);
        return r;
}

/* INVALID_STATE when the route of hostname is another owner's (owner NULL: anyone may). */
static int check_owner(const struct app_haproxy_route *rt, const char *owner, const char *hostname, int errnum,
                       struct na_error *err)
{
        if (!owner || !rt->owner[0] || streq(rt->owner, owner))
                return 0;
        int r = na_error_set(err, errnum, NA_E_INVALID_STATE, "haproxy: route %s is app %s's", hostname, rt->owner);
        na_error_detail(err, "owner", json_string(rt->owner));
        return r;
}

static int set_route_locked(struct app_haproxy *h, const char *owner, const char *hostname, const char *cip,
                            unsigned port, struct na_error *err)
{
        ssize_t i = app_haproxy_route_find(h->routes, h->n_routes, hostname);
        int r = i >= 0 ? check_owner(&h->routes[i], owner, hostname, EEXIST, err) : 0;
        if (r < 0 || (r = app_haproxy_ensure_running_locked(h, err)) < 0)
                return r;
        struct app_haproxy_route nr = { .port = port };
        snprintf(nr.hostname, sizeof(nr.hostname), "%s", hostname);
        snprintf(nr.ip, sizeof(nr.ip), "%s", cip);
        snprintf(nr.owner, sizeof(nr.owner), "%s", owner ? owner : "");
        char value[64];
        app_haproxy_route_value(&nr, value);
        _cleanup_free_ char *cmd = NULL;
        struct app_haproxy_route old = { .port = 0 };
        size_t at;
        if (i >= 0) {
                at = (size_t)i;
                if (!owner)
                        snprintf(nr.owner, sizeof(nr.owner), "%s", h->routes[at].owner); /* kept */
                if (streq(h->routes[at].ip, nr.ip) && h->routes[at].port == nr.port &&
                    streq(h->routes[at].owner, nr.owner))
                        return 0; /* already so */
                old = h->routes[at];
                h->routes[at] = nr;
                if (streq(old.ip, nr.ip) && old.port == nr.port) {
                        /* Only its owner is new: the file says it, HAProxy routes the same. */
                        if ((r = app_haproxy_write_map(h, err)) < 0) {
                                h->routes[at] = old;
                                na_error_prefix(err, "haproxy: route %s", hostname);
                        }
                        return r;
                }
                cmd = na_strdupf("set map %s %s %s", h->map_path, hostname, value);
        } else {
                at = (size_t)(-1 - i);
                if (h->n_routes == h->cap_routes) {
                        size_t cap = h->cap_routes ? h->cap_routes * 2 : 64;
                        struct app_haproxy_route *n = realloc(h->routes, cap * sizeof(*n));
                        if (!n) {
                                return na_error_sys(err, ENOMEM, "haproxy: route %s", hostname);
                        }
                        h->routes = n;
                        h->cap_routes = cap;
                }
                memmove(&h->routes[at + 1], &h->routes[at], (h->n_routes - at) * sizeof(*h->routes));
                h->routes[at] = nr;
                h->n_routes++;
                cmd = na_strdupf("add map %s %s %s", h->map_path, hostname, value);
        }
        if (!cmd) {
                r = na_error_sys(err, ENOMEM, "haproxy: route %s", hostname);
        } else if ((r = app_haproxy_write_map(h, err)) < 0) {
                na_error_prefix(err, "haproxy: route %s", hostname);
        } else {
                r = runtime_change(h, cmd, hostname, err);
        }
        if (r < 0) {
                /* Undo in memory, then put the file back. */
                if (i >= 0) {
                        h->routes[at] = old;
                } else {
                        memmove(&h->routes[at], &h->routes[at + 1], (h->n_routes - at - 1) * sizeof(*h->routes));
                        h->n_routes--;
                }
                if (cmd)
                        r = restore_file(h, r, err);
        }
        return r;
}

int app_haproxy_set_owned_route(struct app_haproxy *h, const char *owner, const char *hostname, const char *ip,
                                unsigned port, struct na_error *err)
{
        char cip[46];
        if (owner && !app_haproxy_owner_valid(owner))
                na_error_field(err, "owner", "must be 1..63 letters, digits or '-'");
        if (!app_haproxy_hostname_valid(hostname))
                na_error_field(err, "hostname", "must be a lowercase DNS name (a-z, 0-9, '-', labels of 1..63, at most 253)");
        if (!app_haproxy_ip_canonical(ip, cip))
                na_error_field(err, "ip", "must be an IPv4 or IPv6 address");
        if (port < 1 || port > 65535)
                na_error_field(err, "port", "must be 1..65535");
        if (na_error_is_set(err))
                return -EINVAL;

        pthread_mutex_lock(&h->lock);
        int r = set_route_locked(h, owner, hostname, cip, port, err);
        pthread_mutex_unlock(&h->lock);
        return r;
}

int app_haproxy_set_route(struct app_haproxy *h, const char *hostname, const char *ip, unsigned port,
                          struct na_error *err)
{
        return app_haproxy_set_owned_route(h, NULL, hostname, ip, port, err);
}

static int remove_route_locked(struct app_haproxy *h, const char *owner, const char *hostname, struct na_error *err)
{
        ssize_t i = app_haproxy_route_find(h->routes, h->n_routes, hostname);
        if (i < 0)
                return 0; /* not routed: nothing to do */
        int r = check_owner(&h->routes[i], owner, hostname, EPERM, err);
        if (r < 0 || (r = app_haproxy_ensure_running_locked(h, err)) < 0)
                return r;
        size_t at = (size_t)i;
        struct app_haproxy_route old = h->routes[at];
        memmove(&h->routes[at], &h->routes[at + 1], (h->n_routes - at - 1) * sizeof(*h->routes));
        h->n_routes--;
        _cleanup_free_ char *cmd = na_strdupf("del map %s %s", h->map_path, hostname);
        if (!cmd)
                r = na_error_sys(err, ENOMEM, "haproxy: route %s", hostname);
        else if ((r = app_haproxy_write_map(h, err)) < 0)
                na_error_prefix(err, "haproxy: route %s", hostname);
        else
                r = runtime_change(h, cmd, hostname, err);
        if (r < 0) {
                memmove(&h->routes[at + 1], &h->routes[at], (h->n_routes - at) * sizeof(*h->routes));
                h->routes[at] = old;
                h->n_routes++;
                if (cmd)
                        r = restore_file(h, r, err);
        }
        return r;
}

int app_haproxy_remove_owned_route(struct app_haproxy *h, const char *owner, const char *hostname,
                                   struct na_error *err)
{
        if (!app_haproxy_hostname_valid(hostname))
                return na_error_field(err, "hostname", "must be a lowercase DNS name (a-z, 0-9, '-', labels of 1..63, at most 253)");
        if (owner && !app_haproxy_owner_valid(owner))
                return na_error_field(err, "owner", "must be 1..63 letters, digits or '-'");
        pthread_mutex_lock(&h->lock);
        int r = remove_route_locked(h, owner, hostname, err);
        pthread_mutex_unlock(&h->lock);
        return r;
}

int app_haproxy_remove_route(struct app_haproxy *h, const char *hostname, struct na_error *err)
{
        return app_haproxy_remove_owned_route(h, NULL, hostname, err);
}

int app_haproxy_list_routes(struct app_haproxy *h, struct app_haproxy_route **ret, size_t *ret_n, struct na_error *err)
{
        pthread_mutex_lock(&h->lock);
        int r = 0;
        struct app_haproxy_route *copy = NULL;
        if (h->n_routes) {
                copy = malloc(h->n_routes * sizeof(*copy));
                if (!copy)
                        r = na_error_sys(err, ENOMEM, "haproxy: routes");
                else
                        memcpy(copy, h->routes, h->n_routes * sizeof(*copy));
        }
        if (r == 0) {
                *ret = copy;
                *ret_n = h->n_routes;
        }
        pthread_mutex_unlock(&h->lock);
        return r;
}
