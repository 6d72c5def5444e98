/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The HAProxy router of app domains (issue 12, item 5): the agent runs its own
 * `haproxy` in master-worker mode with a configuration it writes itself under
 * <state_dir>/haproxy/, and routes by name:
 *
 *   - HTTP on http_listen by the Host header (lowercased, port and final dot stripped);
 *   - TLS on tls_listen passed through untouched, by the SNI of the ClientHello;
 *
 * both to the `ip:port` the map file hosts.map gives the name (the connection's
 * destination is set from the map, `set-dst`/`set-dst-port`, and the backend's server
 * is 0.0.0.0:0, "the destination"). An unknown name gets HTTP 404 with a short body;
 * a TLS connection to an unknown name (or without SNI) is rejected.
 *
 * Route changes go through HAProxy's runtime API (`add map`/`set map`/`del map` on the
 * stats socket: no reload, no connection lost) and into hosts.map (temporary file,
 * fsync, rename), both or neither: when the runtime call fails the file is restored.
 *
 * Life cycle: app_haproxy_open() adopts a running master of this state directory
 * (found by its pid file, checked by /proc/<pid>/cmdline naming our configuration)
 * or starts one (`haproxy -W -D -S master.sock -p haproxy.pid -f haproxy.cfg`); the
 * master is a daemon, not our child, so it survives an agent restart (with systemd:
 * KillMode=process). Every call first checks the master and starts it again when it
 * died (its routes come back from hosts.map). app_haproxy_close() only frees the
 * handle; app_haproxy_stop() stops HAProxy (the operator's wish).
 *
 * Thread-safe: one lock per handle. Blocking, every wait bounded (timeout_ms).
 * See docs/app-routes.md.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

struct app_haproxy_options {
        const char *haproxy;     /* absolute path of the binary (config: apps_haproxy) */
        const char *state_dir;   /* the agent's state directory; we use <state_dir>/haproxy/ */
        const char *http_listen; /* "ADDR:PORT" or "[V6ADDR]:PORT"; NULL or "": no HTTP frontend */
        const char *tls_listen;  /* same, for TLS passthrough; NULL or "": none */
        unsigned timeout_ms;     /* bound of each runtime call, start and stop; 0: 5000 */
        /* The workers' user and group (Debian's package makes "haproxy"), chrooted to
         * <state_dir>/haproxy/empty; NULL or "": they stay root (tests without root). */
        const char *run_as;
};

struct app_haproxy_route {
        char hostname[254]; /* lowercase DNS name */
        char ip[46];        /* canonical text of the IPv4 or IPv6 address */
        unsigned port;      /* 1..65535 */
        char owner[64];     /* the app whose route it is ("" when none was said); hosts.map keeps it */
};

struct app_haproxy;

/*
 * Validate o, write the configuration, adopt the running master or start one (when
 * the running master's configuration differs from the one we write, it is reloaded:
 * new workers, no connection lost). The routes are those of hosts.map.
 */
int app_haproxy_open(const struct app_haproxy_options *o, struct app_haproxy **ret, struct na_error *err);

/*
 * Route hostname to ip:port (replacing its earlier route). hostname: a lowercase DNS
 * name (a-z, 0-9, '-', labels 1..63, at most 253, no trailing dot); ip: IPv4 or IPv6
 * text; port 1..65535. A bad argument: VALIDATION_ERROR on "hostname", "ip" or "port",
 * nothing changed.
 */
int app_haproxy_set_route(struct app_haproxy *h, const char *hostname, const char *ip, unsigned port,
                          struct na_error *err);

/* Stop routing hostname. Not routed: 0, nothing changes. */
int app_haproxy_remove_route(struct app_haproxy *h, const char *hostname, struct na_error *err);

/*
 * The same, for the route of one owner (an app id: letters, digits, '-', at most 63)
 * (issue 20: a second app took over another's domain, and deleting it left the domain
 * unrouted). A route is never replaced or removed by another owner: both refuse with
 * INVALID_STATE (errnum EEXIST for set, EPERM for remove) naming the owner in the
 * message and details.owner, and change nothing. A route without an owner (set by
 * app_haproxy_set_route, or in a hosts.map from before owners) is taken by the first
 * owner that sets it. Owners are kept in hosts.map as a comment line "# app <owner>"
 * before the route's line (HAProxy ignores it).
 */
int app_haproxy_set_owned_route(struct app_haproxy *h, const char *owner, const char *hostname, const char *ip,
                                unsigned port, struct na_error *err);
int app_haproxy_remove_owned_route(struct app_haproxy *h, const char *owner, const char *hostname,
                                   struct na_error *err);

/* A copy of the routes, sorted by hostname (free() the array; *ret NULL when none). */
int app_haproxy_list_routes(struct app_haproxy *h, struct app_haproxy_route **ret, size_t *ret_n,
                            struct na_error *err);

/* Start the master again if it died (every other call does this first too). */
int app_haproxy_ensure_running(struct app_haproxy *h, struct na_error *err);

/*
 * Rewrite the configuration and hosts.map and reload the master (master CLI): new
 * workers read them, old ones finish their connections. Routes never need this (the
 * runtime API changes them); open does it when the configuration changed or the
 * running map differs from hosts.map.
 */
int app_haproxy_reload(struct app_haproxy *h, struct na_error *err);

/* The master's pid (0 when none is known). */
pid_t app_haproxy_master_pid(struct app_haproxy *h);

/* Free the handle; HAProxy keeps running and routing. NULL-safe. */
void app_haproxy_close(struct app_haproxy *h);

/* Stop HAProxy (SIGTERM to the master, SIGKILL after timeout_ms). The handle stays usable: a later call starts it again. */
int app_haproxy_stop(struct app_haproxy *h, struct na_error *err);

/* The checks set_route applies, for callers validating earlier. */
bool app_haproxy_hostname_valid(const char *hostname);
/* pid is a live HAProxy master started with "-f cfg_path" (read across its re-exec). */
bool app_haproxy_is_master(const char *cfg_path, pid_t pid);
/* Parse "ADDR:PORT" / "[V6]:PORT" into its parts (ip canonical). */
int app_haproxy_parse_listen(const char *s, char ip[46], unsigned *port);

static inline void app_haproxy_closep(struct app_haproxy **h)
{
        app_haproxy_close(*h);
}
#define _cleanup_app_haproxy_ _cleanup_(app_haproxy_closep)
