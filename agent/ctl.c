/*
 * nodeagentctl: the operator's view of a running agent, through its control socket.
 *   nodeagentctl status | jobs | run KIND [--target ID] [--params JSON] [--timeout SEC]
 * Tables by default, --json for scripts; exit 1 when a job failed, 3 when the agent
 * cannot be reached, 2 for usage errors.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent/config.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"

static void usage(FILE *f)
{
        fprintf(f, "Usage: nodeagentctl [-c CONFIG | -s SOCKET] [--json] COMMAND\n"
                   "Commands:\n"
                   "  status                         version, uptime, controller link, jobs, results waiting\n"
                   "  jobs                           running, queued and recent jobs\n"
                   "  run KIND [--target ID] [--params JSON] [--timeout SEC]\n"
                   "                                 run a job through the agent's job layer, print its result\n");
}

static int connect_socket(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "nodeagentctl: socket path too long: %s\n", path);
                return -1;
        }
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                fprintf(stderr, "nodeagentctl: cannot reach the agent at %s: %s (is nodeagentd running?)\n", path,
                        strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

static json_t *request(const char *socket_path, json_t *req)
{
        _cleanup_close_ int fd = connect_socket(socket_path);
        if (fd < 0)
                return NULL;
        _cleanup_free_ char *line = json_dumps(req, JSON_COMPACT);
        size_t len = strlen(line);
        line[len] = '\n';
        if (write(fd, line, len + 1) != (ssize_t)(len + 1)) {
                fprintf(stderr, "nodeagentctl: write to %s: %s\n", socket_path, strerror(errno));
                return NULL;
        }
        size_t cap = 65536, got = 0;
        _cleanup_free_ char *buf = malloc(cap);
        for (;;) {
                if (!buf)
                        return NULL;
                if (got + 1 >= cap) {
                        char *n = realloc(buf, cap * 2);
                        if (!n)
                                return NULL;
                        buf = n;
                        cap *= 2;
                }
                ssize_t n = read(fd, buf + got, cap - got - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        fprintf(stderr, "nodeagentctl: the agent closed the connection without an answer\n");
                        return NULL;
                }
                got += (size_t)n;
                buf[got] = '\0';
                if (memchr(buf, '\n', got))
                        break;
        }
        json_error_t jerr;
        json_t *ans = json_loads(buf, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!ans)
                fprintf(stderr, "nodeagentctl: the agent's answer is not JSON: %s\n", jerr.text);
        return ans;
}

static const char *str(json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "";
}

static long long num(json_t *o, const char *key)
{
        return (long long)json_integer_value(json_object_get(o, key));
}

static void duration(long long secs, char *buf, size_t len)
{
        if (secs >= 86400)
                snprintf(buf, len, "%lldd%02lldh", secs / 86400, secs % 86400 / 3600);
        else if (secs >= 3600)
                snprintf(buf, len, "%lldh%02lldm", secs / 3600, secs % 3600 / 60);
        else if (secs >= 60)
                snprintf(buf, len, "%lldm%02llds", secs / 60, secs % 60);
        else
                snprintf(buf, len, "%llds", secs);
}

static void print_status(json_t *s)
{
        char up[32];
        duration(num(s, "uptimeSec"), up, sizeof(up));
        json_t *link = json_object_get(s, "link"), *jobs = json_object_get(s, "jobs"), *jr = json_object_get(s, "journal");
        printf("nodeagentd %s (pid %lld), node %s, up %s%s\n", str(s, "version"), num(s, "pid"), str(s, "nodeId"), up,
               json_is_true(json_object_get(s, "draining")) ? ", STOPPING" : "");
        printf("%-12s %s (%s) since %s\n", "controller", str(link, "state"), str(link, "controller"), str(link, "since"));
        if (*str(link, "reason"))
                printf("%-12s %s%s%s%s%s\n", "", str(link, "reason"), *str(link, "authCode") ? " [" : "",
                       str(link, "authCode"), *str(link, "authCode") ? "]" : "",
                       *str(link, "retryAt") ? "" : "");
        if (*str(link, "retryAt"))
                printf("%-12s next try at %s\n", "", str(link, "retryAt"));
        printf("%-12s %lld running, %lld queued (max %lld); %lld succeeded, %lld failed, %lld abandoned since start\n",
               "jobs", num(jobs, "running"), num(jobs, "queued"), num(jobs, "maxParallel"), num(jobs, "succeeded"),
               num(jobs, "failed"), num(jobs, "abandoned"));
        printf("%-12s %lld waiting to be sent; %lld report(s) waiting\n", "results", num(s, "resultsPending"),
               num(link, "reportsPending"));
        printf("%-12s %lld bytes, %lld records, %lld interrupted, %lld fsyncs\n", "journal", num(jr, "bytes"),
               num(jr, "records"), num(jr, "interrupted"), num(jr, "syncs"));
}

static void print_jobs_table(json_t *list, const char *heading)
{
        if (!json_array_size(list))
                return;
        printf("%s\n", heading);
        printf("  %-10s %-24s %-42s %9s  %-36s %s\n", "STATE", "KIND", "TARGET", "DURATION", "ID", "ERROR");
        size_t i;
        json_t *j;
        json_array_foreach(list, i, j) {
                char d[32];
                long long ms = num(j, "durationMs");
                if (ms < 10000)
                        snprintf(d, sizeof(d), "%lldms", ms);
                else
                        duration(ms / 1000, d, sizeof(d));
                printf("  %-10s %-24s %-42s %9s  %-36s %s%s%s\n", str(j, "state"), str(j, "kind"), str(j, "target"), d,
                       str(j, "id"), str(j, "errorCode"), *str(j, "error") ? ": " : "", str(j, "error"));
        }
}

static void print_jobs(json_t *jobs)
{
        json_t *running = json_object_get(jobs, "running"), *queued = json_object_get(jobs, "queued"),
               *recent = json_object_get(jobs, "recent");
        if (!json_array_size(running) && !json_array_size(queued) && !json_array_size(recent)) {
                printf("no jobs since the agent started\n");
                return;
        }
        print_jobs_table(running, "Running:");
        print_jobs_table(queued, "Queued:");
        print_jobs_table(recent, "Recent (newest first):");
}

static int print_run(json_t *ans)
{
        json_t *job = json_object_get(ans, "job"), *result = json_object_get(ans, "result");
        bool ok = streq(str(result, "status"), "succeeded");
        printf("%s %s %s in %lld ms (job %s)\n", str(job, "kind"), str(job, "target"), ok ? "succeeded" : "FAILED",
               num(result, "durationMs"), str(job, "id"));
        json_t *body = ok ? json_object_get(result, "data") : json_object_get(result, "error");
        if (!ok)
                printf("%s (HTTP %lld): %s\n", str(body, "code"), num(body, "httpStatus"), str(body, "error"));
        json_t *show = ok ? body : json_object_get(body, "details");
        if (show && !json_is_null(show) && !(json_is_object(show) && json_object_size(show) == 0)) {
                _cleanup_free_ char *text = json_dumps(show, JSON_INDENT(2));
                printf("%s\n", text);
        }
        return ok ? 0 : 1;
}

static const char *socket_from_config(const char *config_path)
{
        static char path[4096];
        snprintf(path, sizeof(path), "/run/nodeagent/control.sock");
        struct agent_config *cfg = NULL;
        struct na_error err = NA_ERROR_INIT;
        unsigned problems = 0;
        FILE *devnull = fopen("/dev/null", "we");
        if (devnull && config_load(config_path, devnull, &problems, &cfg, &err) == 0 && cfg->control_socket)
                snprintf(path, sizeof(path), "%s", cfg->control_socket);
        if (devnull)
                fclose(devnull);
        config_free(cfg);
        na_error_clear(&err);
        return path;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },          { "target", required_argument, NULL, 't' },
                { "params", required_argument, NULL, 'p' },  { "timeout", required_argument, NULL, 'T' },
                { "help", no_argument, NULL, 'h' },          { 0 },
        };
        const char *config = NA_DEFAULT_CONFIG, *socket_path = NULL, *target = NULL, *params = NULL;
        long timeout = 0;
        bool as_json = false;
        int c;
        /* GNU getopt permutes: options may stand anywhere, the rest is COMMAND [KIND]. */
        while ((c = getopt_long(argc, argv, "c:s:jt:p:T:h", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        config = optarg;
                        break;
                case 's':
                        socket_path = optarg;
                        break;
                case 'j':
                        as_json = true;
                        break;
                case 't':
                        target = optarg;
                        break;
                case 'p':
                        params = optarg;
                        break;
                case 'T':
                        timeout = strtol(optarg, NULL, 10);
                        if (timeout < 1) {
                                fprintf(stderr, "nodeagentctl: --timeout must be a positive number of seconds\n");
                                return 2;
                        }
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return 2;
        }
        const char *cmd = argv[optind++];
        const char *kind = NULL;
        if (streq(cmd, "run")) {
                if (optind >= argc) {
                        fprintf(stderr, "nodeagentctl: run needs a job kind, e.g. nodeagentctl run node.status\n");
                        return 2;
                }
                kind = argv[optind++];
        } else if (target || params || timeout) {
                fprintf(stderr, "nodeagentctl: --target, --params and --timeout go with run\n");
                return 2;
        }
        if (optind < argc) {
                fprintf(stderr, "nodeagentctl: unexpected argument \"%s\"\n", argv[optind]);
                return 2;
        }
        if (!socket_path)
                socket_path = socket_from_config(config);

        _cleanup_json_ json_t *req = NULL;
        if (streq(cmd, "status") || streq(cmd, "jobs"))
                req = json_pack("{s:s}", "cmd", cmd);
        else if (streq(cmd, "run")) {
                req = json_pack("{s:s, s:s}", "cmd", "run", "kind", kind);
                if (params) {
                        json_error_t jerr;
                        json_t *p = json_loads(params, 0, &jerr);
                        if (!p || !json_is_object(p)) {
                                fprintf(stderr, "nodeagentctl: --params must be a JSON object: %s\n", p ? "not an object" : jerr.text);
                                json_decref(p);
                                return 2;
                        }
                        json_object_set_new(req, "params", p);
                }
                const char *type = strncmp(kind, "vps.", 4) == 0 ? "vps" : strncmp(kind, "app.", 4) == 0 ? "app" : "node";
                json_t *t = json_pack("{s:s}", "type", type);
                if (target)
                        json_object_set_new(t, "id", json_string(target));
                json_object_set_new(req, "target", t);
                if (timeout)
                        json_object_set_new(req, "timeoutSec", json_integer(timeout));
        } else {
                fprintf(stderr, "nodeagentctl: unknown command \"%s\"\n", cmd);
                usage(stderr);
                return 2;
        }

        _cleanup_json_ json_t *ans = request(socket_path, req);
        if (!ans)
                return 3;
        if (!json_is_true(json_object_get(ans, "ok"))) {
                fprintf(stderr, "nodeagentctl: the agent refused the request: %s\n", str(ans, "error"));
                json_t *d = json_object_get(ans, "details");
                if (d) {
                        _cleanup_free_ char *t = json_dumps(d, JSON_INDENT(2));
                        fprintf(stderr, "%s\n", t);
                }
                return 2;
        }
        if (as_json) {
                json_t *show = streq(cmd, "status") ? json_object_get(ans, "status")
                               : streq(cmd, "jobs") ? json_object_get(ans, "jobs")
                                                    : ans;
                _cleanup_free_ char *text = json_dumps(show, JSON_INDENT(2));
                printf("%s\n", text);
                if (streq(cmd, "run"))
                        return streq(str(json_object_get(ans, "result"), "status"), "succeeded") ? 0 : 1;
                return 0;
        }
        if (streq(cmd, "status"))
                print_status(json_object_get(ans, "status"));
        else if (streq(cmd, "jobs"))
                print_jobs(json_object_get(ans, "jobs"));
        else
                return print_run(ans);
        return 0;
}
