/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Domain routing for apps: the DNS verifier and HAProxy behind the app driver's hook (see routes.h). */
#include "agent/daemon/routes.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/base/log.h"
#include "agent/base/services.h"
#include "common/json-cleanup.h"
#include "common/macro.h"
#include "drivers/app.h"
#include "routing/app-dns.h"
#include "routing/app-haproxy.h"

struct agent_routes {
        struct app_routes table;
        struct app_haproxy *hap;
        struct app_dns_options dns;
        const char *public_addresses[2];
        const struct agent_services *s;
        unsigned pending_sec, routed_sec;
        pthread_t thread;
        bool running, stop;
        pthread_mutex_t lock;
        pthread_cond_t cond;
};

static int verify(void *userdata, const char *hostname, const char *target, bool *ret_ok, char *reason,
                  size_t reason_len, struct na_error *err)
{
        struct agent_routes *r = userdata;
        struct app_dns_result res;
        int k = app_dns_verify(&r->dns, hostname, target, &res, err);
        if (k < 0)
                return k;
        if (res.transient) /* neither proof nor disproof: the exposure stays as it was */
                return na_error_set(err, EAGAIN, NA_E_DRIVER, "%s", res.message);
        *ret_ok = res.verified;
        snprintf(reason, reason_len, "%s", res.verified ? "" : res.message);
        return 0;
}

static int route_add(void *userdata, const char *app_id, const char *exposure_id, const char *hostname,
                     const char *addr, uint16_t port, struct na_error *err)
{
        struct agent_routes *r = userdata;
        int k = app_haproxy_set_owned_route(r->hap, app_id, hostname, addr, port, err);
        if (k >= 0)
                log_info("app %s: exposure %s: %s routed to %s:%u", app_id, exposure_id, hostname, addr, port);
        else if (k == -EEXIST)
                log_warn("app %s: exposure %s: %s not routed: %s", app_id, exposure_id, hostname, err->message);
        return k;
}

static int route_remove(void *userdata, const char *app_id, const char *exposure_id, const char *hostname,
                        struct na_error *err)
{
        struct agent_routes *r = userdata;
        int k = app_haproxy_remove_owned_route(r->hap, app_id, hostname, err);
        if (k >= 0)
                log_info("app %s: exposure %s: %s no longer routed", app_id, exposure_id, hostname);
        else if (k == -EPERM)
                log_warn("app %s: exposure %s: %s kept: %s", app_id, exposure_id, hostname, err->message);
        return k;
}

/*
 * Domain routing turned off ([apps] haproxy = "" or no apps_domain) is how the operator
 * asks for HAProxy to stop: a master an earlier agent started from this state
 * directory (its pid file, and its command line naming our configuration) is ended.
 */
static void stop_left_haproxy(const struct agent_config *cfg)
{
        char path[4200], cfg_path[4200];
        snprintf(path, sizeof(path), "%s/haproxy/haproxy.pid", cfg->state_dir);
        snprintf(cfg_path, sizeof(cfg_path), "%s/haproxy/haproxy.cfg", cfg->state_dir);
        FILE *f = fopen(path, "re");
        long pid = 0;
        if (!f)
                return;
        if (fscanf(f, "%ld", &pid) != 1)
                pid = 0;
        fclose(f);
        if (pid <= 1 || pid > 4194304 || !app_haproxy_is_master(cfg_path, (pid_t)pid))
                return;
        if (kill((pid_t)pid, SIGTERM) == 0)
                log_info("domain routing is off: stopped the HAProxy (pid %ld) an earlier agent started", pid);
}

int agent_routes_open(const struct agent_config *cfg, struct agent_routes **ret, struct na_error *err)
{
        *ret = NULL;
        if (!cfg->apps_apps_domain || !cfg->apps_haproxy || !*cfg->apps_haproxy) {
                stop_left_haproxy(cfg);
                return 0;
        }
        struct agent_routes *r = calloc(1, sizeof(*r));
        if (!r)
                return na_error_sys(err, ENOMEM, "domain routing");
        struct app_haproxy_options ho = { .haproxy = cfg->apps_haproxy, .state_dir = cfg->state_dir,
                                          .http_listen = cfg->apps_http_listen, .tls_listen = cfg->apps_tls_listen,
                                          .run_as = "haproxy" };
        int k = app_haproxy_open(&ho, &r->hap, err);
        if (k < 0) {
                free(r);
                return na_error_prefix(err, "domain routing: haproxy");
        }
        r->public_addresses[0] = cfg->apps_public_address;
        r->dns = (struct app_dns_options){ .resolver = cfg->apps_resolver,
                                           .public_addresses = cfg->apps_public_address ? r->public_addresses : NULL };
        r->pending_sec = (unsigned)cfg->apps_verify_pending_sec;
        r->routed_sec = (unsigned)cfg->apps_verify_routed_sec;
        r->table = (struct app_routes){ .userdata = r, .verify = verify, .route_add = route_add,
                                        .route_remove = route_remove };
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->cond, NULL);
        *ret = r;
        return 0;
}

const struct app_routes *agent_routes_table(const struct agent_routes *r)
{
        return r ? &r->table : NULL;
}

/* Check one app's domain exposures; report those whose routing changed. */
static void recheck_app(struct agent_routes *r, const char *app_id, bool routed_too)
{
        const struct app_driver *drv = r->s->app;
        struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *list = NULL;
        if (drv->exposure_list(r->s->app_conn, app_id, &list, &err) < 0) {
                na_error_clear(&err);
                return;
        }
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
                const char *type = json_string_value(json_object_get(e, "type"));
                const char *id = json_string_value(json_object_get(e, "id"));
                bool was = json_is_true(json_object_get(e, "isDomainVerified"));
                if (!type || !id || !streq(type, "domain") || (was && !routed_too))
                        continue;
                _cleanup_json_ json_t *after = NULL;
                if (drv->exposure_verify(r->s->app_conn, app_id, id, &after, &err) < 0) {
                        log_warn("app %s: exposure %s: check: %s", app_id, id, err.message);
                        na_error_clear(&err);
                        continue;
                }
                bool now = json_is_true(json_object_get(after, "isDomainVerified"));
                if (now != was && r->s->emit_event)
                        r->s->emit_event(r->s, now ? "exposure.verified" : "exposure.unverified", app_id,
                                         json_incref(after));
        }
}

void agent_routes_recheck(struct agent_routes *r, bool routed_too)
{
        if (!r || !r->s || !r->s->app || !r->s->app->exposure_list)
                return;
        struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *apps = NULL;
        if (r->s->app->inventory(r->s->app_conn, &apps, &err) < 0) {
                na_error_clear(&err);
                return;
        }
        size_t i;
        json_t *a;
        json_array_foreach(apps, i, a) {
                const char *id = json_string_value(json_object_get(a, "id"));
                if (id)
                        recheck_app(r, id, routed_too);
        }
}

/* HAProxy is looked at every HAPROXY_WATCH_SEC (started again if it died); domains on their own schedule. */
#define HAPROXY_WATCH_SEC 10

static void *recheck_thread(void *arg)
{
        struct agent_routes *r = arg;
        uint64_t t = 0, next_pending = r->pending_sec, next_routed = r->routed_sec;
        for (;;) {
                pthread_mutex_lock(&r->lock);
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += HAPROXY_WATCH_SEC;
                while (!r->stop && pthread_cond_timedwait(&r->cond, &r->lock, &until) == 0)
                        ;
                bool stop = r->stop;
                pthread_mutex_unlock(&r->lock);
                if (stop)
                        return NULL;
                t += HAPROXY_WATCH_SEC;
                struct na_error err = NA_ERROR_INIT;
                if (app_haproxy_ensure_running(r->hap, &err) < 0)
                        log_error("domain routing: haproxy: %s", err.message);
                na_error_clear(&err);
                if (t < next_pending)
                        continue;
                bool routed_too = t >= next_routed;
                agent_routes_recheck(r, routed_too);
                next_pending = t + r->pending_sec;
                if (routed_too)
                        next_routed = t + r->routed_sec;
        }
}

void agent_routes_start(struct agent_routes *r, const struct agent_services *s)
{
        if (!r || !s->app)
                return;
        r->s = s;
        if (pthread_create(&r->thread, NULL, recheck_thread, r) == 0)
                r->running = true;
        else
                log_warn("domain routing: cannot start the re-check thread: domains are checked only when asked");
}

void agent_routes_stop(struct agent_routes *r)
{
        if (!r || !r->running)
                return;
        pthread_mutex_lock(&r->lock);
        r->stop = true;
        pthread_cond_signal(&r->cond);
        pthread_mutex_unlock(&r->lock);
        pthread_join(r->thread, NULL);
        r->running = false;
}

void agent_routes_close(struct agent_routes *r)
{
        if (!r)
                return;
        agent_routes_stop(r);
        app_haproxy_close(r->hap);
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        free(r);
}
