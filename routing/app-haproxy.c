/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The HAProxy router's process side: open (adopt or start), the liveness check,
 * reload, stop, close. Routes are in app-haproxy-routes.c.
 */
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "common/fileio.h"
#include "common/spawn.h"
#include "routing/app-haproxy-internal.h"

#define HAPROXY_DEFAULT_TIMEOUT_MS 5000u

static long long mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/*
 * pid runs (not a zombie) and is a haproxy whose command line has "-f <cfg_path>".
 * HAProxy's master re-executes itself right after it forked its first worker (and at
 * every reload); during that execve its command line reads empty or cut short for a
 * moment. Such a command line of a live process is read again (up to 200 ms), never
 * taken for "not ours": that answer once made a start report "no master runs" while
 * it ran.
 */
bool app_haproxy_is_master(const char *cfg_path, pid_t pid)
{
        if (pid <= 1)
                return false;
        for (unsigned tries = 0;; tries++) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
                _cleanup_free_ char *stat = NULL;
                struct na_error e = NA_ERROR_INIT;
                if (na_read_file(path, 4096, &stat, NULL, &e) < 0) {
                        na_error_clear(&e);
                        return false;
                }
                const char *rp = strrchr(stat, ')');
                if (!rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X')
                        return false;
                snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
                _cleanup_free_ char *cmd = NULL;
                size_t len = 0;
                if (na_read_file(path, 65536, &cmd, &len, &e) < 0) {
                        na_error_clear(&e);
                        return false;
                }
                if (len == 0 || cmd[len - 1] != '\0') { /* mid-exec: empty, or cut short */
                        if (tries >= 100)
                                return false;
                        sleep_ms(2);
                        continue;
                }
                bool prev_f = false;
                for (size_t i = 0; i < len;) {
                        const char *arg = cmd + i;
                        if (prev_f && streq(arg, cfg_path))
                                return true;
                        prev_f = streq(arg, "-f");
                        i += strlen(arg) + 1;
                }
                return false;
        }
}

static bool is_our_master(const struct app_haproxy *h, pid_t pid)
{
        return app_haproxy_is_master(h->cfg_path, pid);
}

static pid_t read_pidfile(const struct app_haproxy *h)
{
        _cleanup_free_ char *text = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (na_read_file(h->pid_path, 64, &text, NULL, &e) < 0) {
                na_error_clear(&e);
                return 0;
        }
        char *end = NULL;
        long v = strtol(text, &end, 10);
        if (v <= 1 || v > 4194304 || (end && *end && *end != '\n'))
                return 0;
        return (pid_t)v;
}

/* The worker's pid from "show info" (0 when the socket does not answer). */
static pid_t worker_pid(const struct app_haproxy *h, unsigned timeout_ms)
{
        _cleanup_free_ char *out = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (app_haproxy_cli(h->sock_path, "show info", timeout_ms, &out, &e) < 0) {
                na_error_clear(&e);
                return 0;
        }
        const char *p = strstr(out, "\nPid: ");
        return p ? (pid_t)atoi(p + 6) : 0;
}

/* Wait until the runtime API answers with a worker other than old (bounded). */
static int wait_worker(const struct app_haproxy *h, pid_t old, struct na_error *err)
{
        long long deadline = mono_ms() + h->timeout_ms;
        while (mono_ms() < deadline) {
                pid_t w = worker_pid(h, 500);
                if (w > 0 && w != old)
                        return 0;
                sleep_ms(20);
        }
        return na_error_set(err, ETIMEDOUT, NA_E_DRIVER, "haproxy: no worker answered on %s within %u ms",
                            h->sock_path, h->timeout_ms);
}

int app_haproxy_settle_locked(struct app_haproxy *h, unsigned ms)
{
        long long deadline = mono_ms() + ms;
        for (;;) {
                if (!h->pid || !is_our_master(h, h->pid)) {
                        h->pid = 0;
                        return APP_HAPROXY_DEAD;
                }
                if (worker_pid(h, 200) > 0)
                        return APP_HAPROXY_HEALTHY;
                if (mono_ms() >= deadline)
                        return APP_HAPROXY_NO_API;
                sleep_ms(20);
        }
}

static int write_if_changed(const char *path, const char *text, bool *changed, struct na_error *err)
{
        _cleanup_free_ char *old = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (na_read_file(path, 1u << 24, &old, NULL, &e) == 0 && streq(old, text)) {
                *changed = false;
                return 0;
        }
        na_error_clear(&e);
        *changed = true;
        return na_atomic_write(path, text, strlen(text), 0600, err);
}

static int write_config(struct app_haproxy *h, bool *changed, struct na_error *err)
{
        _cleanup_free_ char *cfg = app_haproxy_render_config(h);
        if (!cfg)
                return na_error_sys(err, ENOMEM, "haproxy: configuration");
        return write_if_changed(h->cfg_path, cfg, changed, err);
}

int app_haproxy_write_map(struct app_haproxy *h, struct na_error *err)
{
        _cleanup_free_ char *map = app_haproxy_render_map(h->routes, h->n_routes);
        if (!map)
                return na_error_sys(err, ENOMEM, "haproxy: map");
        return na_atomic_write(h->map_path, map, strlen(map), 0600, err);
}

static int start_master(struct app_haproxy *h, struct na_error *err)
{
        struct na_error e = NA_ERROR_INIT;
        (void)na_unlink(h->pid_path, &e);
        na_error_clear(&e);
        char *const argv[] = { h->haproxy, (char *)"-W", (char *)"-D", (char *)"-S", h->master_sock_path, (char *)"-p",
                               h->pid_path, (char *)"-f", h->cfg_path, NULL };
        int r = na_spawn(argv, NULL, NULL, 0, err);
        if (r < 0)
                return na_error_prefix(err, "haproxy: start");
        /* The launcher has exited; the master it forked writes the pid file soon after. */
        long long deadline = mono_ms() + h->timeout_ms;
        pid_t pid = read_pidfile(h);
        bool ours = is_our_master(h, pid);
        while (!ours && mono_ms() < deadline) {
                sleep_ms(10);
                pid = read_pidfile(h);
                ours = is_our_master(h, pid);
        }
        if (!ours)
                return na_error_set(err, ESRCH, NA_E_DRIVER, "haproxy: started, but no master runs (pid file %s)",
                                    h->pid_path);
        h->pid = pid;
        r = wait_worker(h, 0, err);
        return r < 0 ? na_error_prefix(err, "haproxy: start") : 0;
}

int app_haproxy_start_locked(struct app_haproxy *h, struct na_error *err)
{
        return start_master(h, err);
}

int app_haproxy_ensure_running_locked(struct app_haproxy *h, struct na_error *err)
{
        if (h->pid && is_our_master(h, h->pid))
                return 0;
        pid_t pid = read_pidfile(h);
        if (is_our_master(h, pid)) {
                h->pid = pid;
                return 0;
        }
        h->pid = 0;
        return start_master(h, err);
}

int app_haproxy_ensure_running(struct app_haproxy *h, struct na_error *err)
{
        pthread_mutex_lock(&h->lock);
        int r = app_haproxy_ensure_running_locked(h, err);
        pthread_mutex_unlock(&h->lock);
        return r;
}

/*
 * "reload" on the master CLI rather than SIGUSR2: the master takes it from its event
 * loop, so a reload asked right after another is queued, not lost while the master
 * re-executes itself (a SIGUSR2 sent then was seen to vanish).
 */
int app_haproxy_master_reload(struct app_haproxy *h, struct na_error *err)
{
        /* While the master re-executes itself (an earlier reload) its socket refuses: try again. */
        long long deadline = mono_ms() + h->timeout_ms;
        for (;;) {
                _cleanup_free_ char *out = NULL;
                int r = app_haproxy_cli(h->master_sock_path, "reload", h->timeout_ms, &out, err);
                if (r == 0)
                        return 0;
                if ((r != -ECONNREFUSED && r != -ENOENT) || mono_ms() >= deadline)
                        return na_error_prefix(err, "haproxy: reload master %d", (int)h->pid);
                if (!is_our_master(h, h->pid)) {
                        /* It was exiting (its worker died), not re-executing: the caller starts a new one. */
                        na_error_clear(err);
                        return na_error_set(err, ESRCH, NA_E_DRIVER, "haproxy: master %d exited", (int)h->pid);
                }
                na_error_clear(err);
                sleep_ms(10);
        }
}

static int reload_locked(struct app_haproxy *h, struct na_error *err)
{
        bool changed;
        int r = write_config(h, &changed, err);
        if (r < 0)
                return r;
        r = app_haproxy_write_map(h, err);
        if (r < 0)
                return r;
        if (!h->pid || !is_our_master(h, h->pid))
                return app_haproxy_ensure_running_locked(h, err);
        pid_t old = worker_pid(h, h->timeout_ms);
        r = app_haproxy_master_reload(h, err);
        if (r == -ESRCH) {
                na_error_clear(err);
                h->pid = 0;
                return start_master(h, err);
        }
        if (r < 0)
                return r;
        r = wait_worker(h, old, err);
        return r < 0 ? na_error_prefix(err, "haproxy: reload") : 0;
}

int app_haproxy_reload(struct app_haproxy *h, struct na_error *err)
{
        pthread_mutex_lock(&h->lock);
        int r = reload_locked(h, err);
        pthread_mutex_unlock(&h->lock);
        return r;
}

/* Does the running map hold exactly our routes? ("show map" lines: "0x... key value"). */
static bool runtime_map_matches(struct app_haproxy *h)
{
        _cleanup_free_ char *cmd = na_strdupf("show map %s", h->map_path);
        _cleanup_free_ char *out = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (!cmd || app_haproxy_cli(h->sock_path, cmd, h->timeout_ms, &out, &e) < 0) {
                na_error_clear(&e);
                return false;
        }
        size_t seen = 0;
        for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char ptr[32], key[256], value[128];
                if (sscanf(line, "%31s %255s %127s", ptr, key, value) != 3)
                        return false;
                ssize_t i = app_haproxy_route_find(h->routes, h->n_routes, key);
                char want[64];
                if (i < 0)
                        return false;
                app_haproxy_route_value(&h->routes[i], want);
                if (!streq(want, value))
                        return false;
                seen++;
        }
        return seen == h->n_routes;
}

static int validate_options(const struct app_haproxy_options *o, struct na_error *err)
{
        char ip[46];
        unsigned port;
        if (!o->haproxy || o->haproxy[0] != '/' || access(o->haproxy, X_OK) < 0)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "haproxy: %s is not an executable absolute path",
                                    o->haproxy ? o->haproxy : "(none)");
        if (!app_haproxy_path_safe(o->state_dir))
                return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                    "haproxy: state directory %s: only [A-Za-z0-9/._+-], absolute, at most 200 bytes",
                                    o->state_dir ? o->state_dir : "(none)");
        if (strlen(o->state_dir) + strlen("/haproxy/master.sock") >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL,
                                    "haproxy: state directory %s: too long for the sockets under it (at most %zu bytes)",
                                    o->state_dir,
                                    sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1 - strlen("/haproxy/master.sock"));
        if (o->run_as && *o->run_as && (!app_haproxy_user_valid(o->run_as) || !getpwnam(o->run_as) || !getgrnam(o->run_as)))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "haproxy: run_as %s: no such user and group", o->run_as);
        bool http = o->http_listen && *o->http_listen, tls = o->tls_listen && *o->tls_listen;
        if (!http && !tls)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "haproxy: neither http_listen nor tls_listen set");
        if (http && app_haproxy_parse_listen(o->http_listen, ip, &port) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "haproxy: http_listen %s is not ADDR:PORT", o->http_listen);
        if (tls && app_haproxy_parse_listen(o->tls_listen, ip, &port) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "haproxy: tls_listen %s is not ADDR:PORT", o->tls_listen);
        return 0;
}

static void free_handle(struct app_haproxy *h)
{
        free(h->haproxy);
        free(h->dir);
        free(h->cfg_path);
        free(h->map_path);
        free(h->pid_path);
        free(h->sock_path);
        free(h->master_sock_path);
        free(h->http_listen);
        free(h->tls_listen);
        free(h->run_as);
        free(h->empty_dir);
        free(h->routes);
        pthread_mutex_destroy(&h->lock);
        free(h);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct app_haproxy *, free_handle);

int app_haproxy_open(const struct app_haproxy_options *o, struct app_haproxy **ret, struct na_error *err)
{
        int r = validate_options(o, err);
        if (r < 0)
                return r;
        _cleanup_(free_handlep) struct app_haproxy *h = calloc(1, sizeof(*h));
        if (!h)
                return na_error_sys(err, ENOMEM, "haproxy");
        pthread_mutex_init(&h->lock, NULL);
        h->timeout_ms = o->timeout_ms ? o->timeout_ms : HAPROXY_DEFAULT_TIMEOUT_MS;
        h->haproxy = strdup(o->haproxy);
        h->dir = na_strdupf("%s/haproxy", o->state_dir);
        h->cfg_path = na_strdupf("%s/haproxy/haproxy.cfg", o->state_dir);
        h->map_path = na_strdupf("%s/haproxy/hosts.map", o->state_dir);
        h->pid_path = na_strdupf("%s/haproxy/haproxy.pid", o->state_dir);
        h->sock_path = na_strdupf("%s/haproxy/stats.sock", o->state_dir);
        h->master_sock_path = na_strdupf("%s/haproxy/master.sock", o->state_dir);
        h->http_listen = strdup(o->http_listen ? o->http_listen : "");
        h->tls_listen = strdup(o->tls_listen ? o->tls_listen : "");
        h->run_as = strdup(o->run_as ? o->run_as : "");
        h->empty_dir = na_strdupf("%s/haproxy/empty", o->state_dir);
        if (!h->run_as || !h->empty_dir || !h->haproxy || !h->dir || !h->cfg_path || !h->map_path || !h->pid_path || !h->sock_path ||
            !h->master_sock_path || !h->http_listen || !h->tls_listen)
                return na_error_sys(err, ENOMEM, "haproxy");
        r = na_mkdir_p(h->dir, 0700, err);
        if (r >= 0)
                r = na_mkdir_p(h->empty_dir, 0700, err); /* the workers' chroot: empty, root's */
        if (r < 0)
                return na_error_prefix(err, "haproxy");

        /* The routes: those of hosts.map (an absent file is no route). */
        _cleanup_free_ char *map = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (na_read_file(h->map_path, 1u << 24, &map, NULL, &e) == 0) {
                r = app_haproxy_parse_map(map, &h->routes, &h->n_routes, err);
                if (r < 0)
                        return na_error_prefix(err, "haproxy: %s", h->map_path);
                h->cap_routes = h->n_routes;
        } else if (e.errnum != ENOENT) {
                na_error_move(err, &e);
                return na_error_prefix(err, "haproxy");
        } else {
                na_error_clear(&e);
                r = app_haproxy_write_map(h, err);
                if (r < 0)
                        return na_error_prefix(err, "haproxy");
        }

        bool cfg_changed;
        r = write_config(h, &cfg_changed, err);
        if (r < 0)
                return na_error_prefix(err, "haproxy");
        pid_t pid = read_pidfile(h);
        h->pid = is_our_master(h, pid) ? pid : 0;
        /* A master whose worker just died is about to exit: wait for it rather than adopt it. */
        if (h->pid && app_haproxy_settle_locked(h, 1000) == APP_HAPROXY_DEAD)
                h->pid = 0;
        if (h->pid) {
                /* Adopt it; reload only when it runs another configuration or other routes. */
                if (cfg_changed || !runtime_map_matches(h)) {
                        r = reload_locked(h, err);
                        if (r < 0)
                                return r;
                }
        } else {
                r = start_master(h, err);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(h);
        return 0;
}

pid_t app_haproxy_master_pid(struct app_haproxy *h)
{
        pthread_mutex_lock(&h->lock);
        pid_t pid = h->pid;
        pthread_mutex_unlock(&h->lock);
        return pid;
}

void app_haproxy_close(struct app_haproxy *h)
{
        if (h)
                free_handle(h);
}

static int stop_locked(struct app_haproxy *h, struct na_error *err)
{
        pid_t pid = h->pid ? h->pid : read_pidfile(h);
        if (is_our_master(h, pid)) {
                if (kill(pid, SIGTERM) < 0 && errno != ESRCH)
                        return na_error_sys(err, errno, "haproxy: stop master %d", (int)pid);
                long long deadline = mono_ms() + h->timeout_ms;
                while (is_our_master(h, pid) && mono_ms() < deadline)
                        sleep_ms(10);
                if (is_our_master(h, pid)) {
                        (void)kill(pid, SIGKILL);
                        deadline = mono_ms() + 1000;
                        while (is_our_master(h, pid) && mono_ms() < deadline)
                                sleep_ms(10);
                }
        }
        h->pid = 0;
        struct na_error e = NA_ERROR_INIT;
        (void)na_unlink(h->pid_path, &e);
        na_error_clear(&e);
        return 0;
}

int app_haproxy_stop(struct app_haproxy *h, struct na_error *err)
{
        pthread_mutex_lock(&h->lock);
        int r = stop_locked(h, err);
        pthread_mutex_unlock(&h->lock);
        return r;
}
