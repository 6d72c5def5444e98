/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the HAProxy router (app-haproxy*.c): the handle, the pure parts (validation,
 * configuration and map file text, tested by tests/routing/test-haproxy-conf.c)
 * and the runtime API client.
 */
#pragma once

#include <pthread.h>

#include "routing/app-haproxy.h"

struct app_haproxy {
        pthread_mutex_t lock;
        char *haproxy;
        char *dir;       /* <state_dir>/haproxy */
        char *cfg_path;  /* dir/haproxy.cfg */
        char *map_path;  /* dir/hosts.map */
        char *pid_path;  /* dir/haproxy.pid */
        char *sock_path; /* dir/stats.sock: runtime API, level admin */
        char *master_sock_path;
        char *http_listen, *tls_listen;
        char *run_as;     /* "" or a user and group name */
        char *empty_dir;  /* dir/empty: the workers' chroot */
        unsigned timeout_ms;
        pid_t pid;
        struct app_haproxy_route *routes; /* sorted by hostname */
        size_t n_routes, cap_routes;
};

/* A user name we put into the configuration: [a-z_][a-z0-9_-]{0,31}. */
bool app_haproxy_user_valid(const char *u);
/* A path we put into the configuration and runtime commands: [A-Za-z0-9/._+-] only. */
bool app_haproxy_path_safe(const char *p);
/* Parse ip text into its canonical form; false when it is not an address. */
bool app_haproxy_ip_canonical(const char *ip, char out[46]);

/* The configuration's text (malloc'd) for h's paths and listen addresses. */
char *app_haproxy_render_config(const struct app_haproxy *h);
/* The map file's text: a comment line, then "hostname ip/port" per route, after "# app <owner>" when it has one. */
char *app_haproxy_render_map(const struct app_haproxy_route *r, size_t n);
/* An owner a route can have (app ids): 1..63 letters, digits or '-'. */
bool app_haproxy_owner_valid(const char *owner);
/* Parse a map file's text (comments and blank lines skipped, "# app <owner>" owning the next route); each line validated. */
int app_haproxy_parse_map(const char *text, struct app_haproxy_route **ret, size_t *ret_n, struct na_error *err);
/* The map's value of a route: "ip/port". */
void app_haproxy_route_value(const struct app_haproxy_route *r, char out[64]);
/* Index of hostname in the sorted routes, or -1 - (where it would go). */
ssize_t app_haproxy_route_find(const struct app_haproxy_route *r, size_t n, const char *hostname);

/* Write hosts.map from h's routes (atomic replace). */
int app_haproxy_write_map(struct app_haproxy *h, struct na_error *err);
/* app_haproxy_ensure_running with h->lock held. */
int app_haproxy_ensure_running_locked(struct app_haproxy *h, struct na_error *err);

/* Ask the master to reload (master CLI "reload"); returns once it took the command,
 * or -ESRCH when the master turned out to be exiting (its socket refused, then it was
 * gone): the caller starts a new one. */
int app_haproxy_master_reload(struct app_haproxy *h, struct na_error *err);

/* Start a new master (none of ours runs). */
int app_haproxy_start_locked(struct app_haproxy *h, struct na_error *err);

/*
 * After a runtime call failed or at adoption: is the master dying (its worker died,
 * it exits soon after), or alive? Waits up to ms for the API to answer or the master
 * to be gone.
 */
enum { APP_HAPROXY_HEALTHY, APP_HAPROXY_DEAD, APP_HAPROXY_NO_API };
int app_haproxy_settle_locked(struct app_haproxy *h, unsigned ms);

/*
 * One runtime API command on the stats socket (a line without newline; the reply up to
 * EOF, at most 16 MiB, malloc'd). Bounded by timeout_ms.
 */
int app_haproxy_cli(const char *sock_path, const char *cmd, unsigned timeout_ms, char **ret, struct na_error *err);
