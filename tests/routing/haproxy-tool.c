/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A tiny front of the HAProxy router for tests/routing/test_haproxy.py: every run
 * opens the router (adopting the running master or starting one), does one thing and
 * closes the handle (HAProxy keeps running), as an agent restarting between calls.
 *
 *   haproxy-tool STATE_DIR HTTP_LISTEN TLS_LISTEN open|list|stop|reload
 *   haproxy-tool STATE_DIR HTTP_LISTEN TLS_LISTEN set HOST IP PORT
 *   haproxy-tool STATE_DIR HTTP_LISTEN TLS_LISTEN remove HOST
 *   haproxy-tool STATE_DIR HTTP_LISTEN TLS_LISTEN shell
 *
 * shell: one open handle, commands from stdin ("set HOST IP PORT", "remove HOST"), one
 * answer line each ("ok" or "error CODE: message"), for what must happen between two
 * calls on one handle.
 *
 * HAPROXY_RUN_AS in the environment: the workers' user (options.run_as).
 * Prints "pid N" (the master's) then what the command gives; on failure the error
 * (code and message, and details as JSON) on stderr and exit 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routing/app-haproxy.h"

static int fail(struct na_error *e)
{
        char *d = e->details ? json_dumps(e->details, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        fprintf(stderr, "%s: %s%s%s\n", e->code ? e->code : "?", e->message, d ? " " : "", d ? d : "");
        free(d);
        na_error_clear(e);
        return 1;
}

int main(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: haproxy-tool STATE_DIR HTTP_LISTEN TLS_LISTEN CMD [ARGS]\n");
                return 2;
        }
        struct app_haproxy_options o = {
                .haproxy = getenv("HAPROXY") ? getenv("HAPROXY") : "/usr/sbin/haproxy",
                .state_dir = argv[1],
                .http_listen = argv[2],
                .tls_listen = argv[3],
                .timeout_ms = 5000,
                .run_as = getenv("HAPROXY_RUN_AS"),
        };
        const char *cmd = argv[4];
        struct na_error err = NA_ERROR_INIT;
        _cleanup_app_haproxy_ struct app_haproxy *h = NULL;
        if (app_haproxy_open(&o, &h, &err) < 0)
                return fail(&err);
        int r = 0;
        if (streq(cmd, "shell")) {
                char line[1024];
                while (fgets(line, sizeof(line), stdin)) {
                        char a[300] = "", b[300] = "", c[300] = "";
                        int n = sscanf(line, "%*s %299s %299s %299s", a, b, c);
                        if (strncmp(line, "set ", 4) == 0 && n == 3)
                                r = app_haproxy_set_route(h, a, b, (unsigned)strtoul(c, NULL, 10), &err);
                        else if (strncmp(line, "remove ", 7) == 0 && n == 1)
                                r = app_haproxy_remove_route(h, a, &err);
                        else
                                r = na_error_set(&err, EINVAL, NA_E_INTERNAL, "bad command");
                        if (r < 0)
                                printf("error %s: %s\n", err.code, err.message);
                        else
                                printf("ok\n");
                        fflush(stdout);
                        na_error_clear(&err);
                }
                return 0;
        }
        if (streq(cmd, "set") && argc == 8)
                r = app_haproxy_set_route(h, argv[5], argv[6], (unsigned)strtoul(argv[7], NULL, 10), &err);
        else if (streq(cmd, "remove") && argc == 6)
                r = app_haproxy_remove_route(h, argv[5], &err);
        else if (streq(cmd, "stop"))
                r = app_haproxy_stop(h, &err);
        else if (streq(cmd, "reload"))
                r = app_haproxy_reload(h, &err);
        else if (!streq(cmd, "open") && !streq(cmd, "list")) {
                fprintf(stderr, "haproxy-tool: bad command\n");
                return 2;
        }
        if (r < 0)
                return fail(&err);
        printf("pid %d\n", (int)app_haproxy_master_pid(h));
        if (streq(cmd, "list")) {
                struct app_haproxy_route *routes = NULL;
                size_t n = 0;
                if (app_haproxy_list_routes(h, &routes, &n, &err) < 0)
                        return fail(&err);
                for (size_t i = 0; i < n; i++)
                        printf("%s %s %u\n", routes[i].hostname, routes[i].ip, routes[i].port);
                free(routes);
        }
        return 0;
}
