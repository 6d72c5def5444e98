/* Domain routing for apps: the DNS verifier and HAProxy behind the app driver's hook (see routes.h). */
#include "agent/routes.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/log.h"
#include "agent/services.h"
#include "common/json-cleanup.h"
#include "common/macro.h"
#include "drivers/app.h"
#include "drivers/app/app-dns.h"
#include "drivers/app/app-haproxy.h"

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
        int k = app_haproxy_set_route(r->hap, hostname, addr, port, err);
        if (k >= 0)
                log_info("app %s: exposure %s: %s routed to %s:%u", app_id, exposure_id, hostname, addr, port);
        return k;
}

static int route_remove(void *userdata, const char *app_id, const char *exposure_id, const char *hostname,
                        struct na_error *err)
{
        struct agent_routes *r = userdata;
        int k = app_haproxy_remove_route(r->hap, hostname, err);
        if (k >= 0)
                log_info("app %s: exposure %s: %s no longer routed", app_id, exposure_id, hostname);
        return k;
}

int agent_routes_open(const struct agent_config *cfg, struct agent_routes **ret, struct na_error *err)
{
        *ret = NULL;
        if (!cfg->apps_apps_domain || !cfg->apps_haproxy || !*cfg->apps_haproxy)
                return 0;
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
        (void)app_haproxy_ensure_running(r->hap, &err); /* restarted here if it died */
        na_error_clear(&err);
}

static void *recheck_thread(void *arg)
{
        struct agent_routes *r = arg;
        unsigned every = r->routed_sec / (r->pending_sec ? r->pending_sec : 1);
        for (unsigned tick = 1;; tick++) {
                pthread_mutex_lock(&r->lock);
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += r->pending_sec;
                while (!r->stop && pthread_cond_timedwait(&r->cond, &r->lock, &until) == 0)
                        ;
                bool stop = r->stop;
                pthread_mutex_unlock(&r->lock);
                if (stop)
                        return NULL;
                agent_routes_recheck(r, every == 0 || tick % every == 0);
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
