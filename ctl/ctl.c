/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagentctl: the operator's view of a running agent, through its control socket.
 *   nodeagentctl status | jobs | run KIND [--target ID] [--params JSON] [--timeout SEC]
 *   nodeagentctl apps | logs APP [-f] [--since SEQ] [-n N]
 *   nodeagentctl drain [--off]
 *   nodeagentctl help [COMMAND] | COMMAND --help
 * Tables by default, --json for scripts; exit 1 when a job failed or the agent
 * answered apps or logs with an error, 3 when the agent cannot be reached (or went
 * away while logs -f followed), 2 for usage errors.
 */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent/base/config.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "common/uuid.h"

#define LOGS_PAGE 1000         /* the agent's most lines per answer */
#define LOGS_DEFAULT_LINES 100 /* logs without --since: the last this many */
#define LOGS_MAX_LINES 1000000 /* -n: more than a page is read in pages */
#define FOLLOW_POLL_MS 500

/* The commands, each with its synopsis and its help (nodeagentctl COMMAND --help or
 * nodeagentctl help COMMAND); the general usage lists them. Kept true with
 * docs/man/nodeagentctl.8 and packaging/nodeagentctl.bash (tests/ctl/test-ctl-help.sh). */
static const struct ctl_command {
        const char *name;
        const char *synopsis; /* after the command's name */
        const char *summary;  /* one line, for the general usage */
        const char *help;     /* the rest of its --help */
} commands[] = {
        { "status", "", "version, uptime, controller link, jobs, results waiting, consoles",
          "The agent's version, pid, node id and uptime; the controller link (connected, connecting,\n"
          "backing off or refused, with the reason and the next attempt); jobs running, queued and\n"
          "finished since the start; results and reports waiting; live consoles.\n"
          "  --json            the agent's status object as JSON\n" },
        { "jobs", "", "running, queued and recent jobs",
          "Running, queued and recent jobs: kind, target, state, duration, id and error.\n"
          "  --json            the agent's list as JSON\n" },
        { "run", " KIND [--target ID] [--params JSON] [--timeout SEC]",
          "run a job through the agent's job layer, print its result",
          "Run a job of kind KIND (e.g. node.status) through the agent's own job layer, as if the\n"
          "central API had sent it, wait for it and print its result. Works while the controller\n"
          "is unreachable. The target type follows from the prefix (vps., app., else node).\n"
          "  -t, --target ID   the VPS or app the job is for\n"
          "  -p, --params JSON the job's parameters, a JSON object\n"
          "  -T, --timeout SEC the job's timeout in seconds\n"
          "  --json            the whole answer as JSON\n"
          "Exit status 1 when the job failed.\n" },
        { "apps", "", "the apps on this node: state, start, restarts, memory, volume",
          "The apps on this node, one line each: id, state, time since start, restarts, memory,\n"
          "volume space used and name; a stopped app shows its last exit code.\n"
          "  --json            the agent's answer as JSON\n" },
        { "logs", " APP [-f] [--since SEQ] [-n N]", "an app's output (the last 100 lines by default); -f follows it",
          "The output of app APP (its id, a UUID; nodeagentctl apps lists them): TIME STREAM TEXT,\n"
          "by default its last 100 lines.\n"
          "  -f, --follow      then keep printing new lines until SIGINT/SIGTERM\n"
          "  --since SEQ       from output sequence number SEQ on, every line\n"
          "  -n, --lines N     the last N lines (1 to 1000000)\n"
          "  --json            JSON (with -f, one object per line)\n" },
        { "drain", " [--off]", "take no new servers or apps (kept across restarts); --off ends it",
          "Drain the node before maintenance: vps.create and app.deploy fail at once with 409\n"
          "INVALID_STATE (details.state \"draining\") while every other job runs, so what is on the\n"
          "node can be stopped, backed up, moved away or deleted through the API. The agent says so\n"
          "in its hello (capability draining). Kept in the state directory across restarts; status\n"
          "shows it. Not the stop of systemctl stop nodeagent (SIGTERM), which takes no job at all.\n"
          "  --off             end the drain: the node takes every job again\n"
          "  --json            the answer as JSON: {\"on\": true, \"since\": \"<date-time>\"}\n" },
        { "help", " [COMMAND]", "this help, or a command's",
          "The general usage, or with COMMAND that command's help (as nodeagentctl COMMAND --help).\n" },
};

static const struct ctl_command *command_named(const char *name)
{
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (streq(commands[i].name, name))
                        return &commands[i];
        return NULL;
}

static void usage(FILE *f)
{
        fprintf(f, "Usage: nodeagentctl [-c CONFIG | -s SOCKET] [--json] COMMAND\n"
                   "       nodeagentctl COMMAND --help\n"
                   "Commands:\n");
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
                const struct ctl_command *c = &commands[i];
                int n = fprintf(f, "  %s%s", c->name, c->synopsis);
                if (n > 33)
                        fprintf(f, "\n%33s%s\n", "", c->summary);
                else
                        fprintf(f, "%*s%s\n", 33 - n, "", c->summary);
        }
        fprintf(f, "Options for every command:\n"
                   "  -c, --config CONFIG  read control_socket from CONFIG (default %s)\n"
                   "  -s, --socket SOCKET  connect to SOCKET; the configuration is not read\n"
                   "  -j, --json           the agent's answer as JSON, for scripts\n"
                   "  -h, --help           this help; after a command, that command's\n",
                NA_DEFAULT_CONFIG);
}

static void command_usage(FILE *f, const struct ctl_command *c)
{
        fprintf(f, "Usage: nodeagentctl [-c CONFIG | -s SOCKET]%s %s%s\n%s", streq(c->name, "help") ? "" : " [--json]",
                c->name, c->synopsis, c->help);
}

/* --help, or help [COMMAND]: the command's help when one is named (exit 0), else the
 * general usage; an unknown command is a usage error. */
static int print_help(const char *name)
{
        if (!name) {
                usage(stdout);
                return 0;
        }
        const struct ctl_command *c = command_named(name);
        if (!c) {
                fprintf(stderr, "nodeagentctl: unknown command \"%s\"\n", name);
                usage(stderr);
                return 2;
        }
        command_usage(stdout, c);
        return 0;
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

/* One connection to the agent; answers are read line by line. */
struct agent_conn {
        int fd;
        char *buf;
        size_t len, cap;
};

/* Set by SIGINT or SIGTERM while logs -f follows. */
static volatile sig_atomic_t interrupted;

static void conn_close(struct agent_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        free(c->buf);
        c->buf = NULL;
        c->len = c->cap = 0;
}

/*
 * Send req and read its answer line. NULL when the agent went away or answered
 * garbage (said on stderr), or when interrupted (nothing said).
 */
static json_t *conn_call(struct agent_conn *c, const char *socket_path, json_t *req)
{
        _cleanup_free_ char *line = json_dumps(req, JSON_COMPACT);
        if (!line)
                return NULL;
        size_t len = strlen(line);
        line[len] = '\n'; /* over the terminating NUL: written with its length, never as a string */
        for (size_t off = 0; off < len + 1;) {
                ssize_t n = send(c->fd, line + off, len + 1 - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR && !interrupted)
                        continue;
                if (n < 0) {
                        if (!interrupted)
                                fprintf(stderr, "nodeagentctl: the agent at %s went away: %s\n", socket_path,
                                        strerror(errno));
                        return NULL;
                }
                off += (size_t)n;
        }
        char *nl;
        while (!(nl = c->len ? memchr(c->buf, '\n', c->len) : NULL)) {
                if (c->cap - c->len < 4096) {
                        size_t cap = c->cap ? c->cap * 2 : 65536;
                        char *n = realloc(c->buf, cap);
                        if (!n) {
                                fprintf(stderr, "nodeagentctl: out of memory\n");
                                return NULL;
                        }
                        c->buf = n;
                        c->cap = cap;
                }
                ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
                if (n < 0 && errno == EINTR && !interrupted)
                        continue;
                if (n < 0 && interrupted)
                        return NULL;
                if (n < 0) {
                        fprintf(stderr, "nodeagentctl: the agent at %s went away: %s\n", socket_path, strerror(errno));
                        return NULL;
                }
                if (n == 0) {
                        fprintf(stderr, "nodeagentctl: the agent closed the connection without an answer\n");
                        return NULL;
                }
                c->len += (size_t)n;
        }
        size_t used = (size_t)(nl - c->buf) + 1;
        json_error_t jerr;
        json_t *ans = json_loadb(c->buf, used - 1, 0, &jerr);
        memmove(c->buf, c->buf + used, c->len - used);
        c->len -= used;
        if (!ans || !json_is_object(ans)) {
                fprintf(stderr, "nodeagentctl: the agent's answer is not a JSON object: %s\n",
                        ans ? "wrong type" : jerr.text);
                json_decref(ans);
                return NULL;
        }
        return ans;
}

static json_t *request(const char *socket_path, json_t *req)
{
        struct agent_conn c = { .fd = connect_socket(socket_path) };
        if (c.fd < 0)
                return NULL;
        json_t *ans = conn_call(&c, socket_path, req);
        conn_close(&c);
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

static void print_drain(json_t *d)
{
        if (json_is_true(json_object_get(d, "on")))
                printf("the node drains since %s: vps.create and app.deploy are refused, every other job runs; "
                       "nodeagentctl drain --off ends it\n",
                       str(d, "since"));
        else
                printf("the node does not drain: it takes every job\n");
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
        json_t *drain = json_object_get(s, "nodeDrain");
        if (json_is_true(json_object_get(drain, "on")))
                printf("%-12s since %s: no new servers or apps (vps.create, app.deploy refused)\n", "drain",
                       str(drain, "since"));
        json_t *cons = json_object_get(s, "consoles"), *c;
        size_t i;
        printf("%-12s %zu open\n", "consoles", json_array_size(cons));
        json_array_foreach(cons, i, c) {
                json_t *t = json_object_get(c, "target");
                printf("  %-36s %-10s %-3s %-36s %-7s to %s since %s; %lld frame(s) out, %lld in, %lld dropped\n",
                       str(c, "sessionId"), str(c, "mode"), str(t, "type"), str(t, "id"), str(c, "state"), str(c, "peer"),
                       str(c, "openedAt"), num(c, "framesOut"), num(c, "framesIn"), num(c, "dropped"));
        }
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

/* Said on stderr when the agent refused apps or logs; exit status 1. */
static int refused(json_t *ans)
{
        fprintf(stderr, "nodeagentctl: %s%s%s\n", *str(ans, "code") ? str(ans, "code") : "",
                *str(ans, "code") ? ": " : "", *str(ans, "error") ? str(ans, "error") : "the agent refused the request");
        return 1;
}

static void print_apps(json_t *apps)
{
        if (!json_array_size(apps)) {
                printf("no apps on this node\n");
                return;
        }
        printf("%-36s  %-9s %-14s %8s %10s %10s  %s\n", "ID", "STATE", "STARTED", "RESTARTS", "MEMORY", "VOLUME",
               "NAME");
        int64_t now_ms = (int64_t)na_now_real_ms();
        size_t i;
        json_t *a;
        json_array_foreach(apps, i, a) {
                char started[40] = "-", restarts[24] = "-", mem[32] = "-", vol[32] = "-";
                int64_t at_ms;
                const char *at = json_string_value(json_object_get(a, "startedAt"));
                bool up = streq(str(a, "state"), "running") || streq(str(a, "state"), "starting") ||
                          streq(str(a, "state"), "stopping");
                if (up && at && na_parse_time_ms(at, &at_ms)) {
                        char d[28];
                        duration(now_ms > at_ms ? (now_ms - at_ms) / 1000 : 0, d, sizeof(d));
                        snprintf(started, sizeof(started), "%s ago", d);
                }
                if (json_is_integer(json_object_get(a, "restarts")))
                        snprintf(restarts, sizeof(restarts), "%lld", num(a, "restarts"));
                if (json_is_integer(json_object_get(a, "memoryMB")))
                        snprintf(mem, sizeof(mem), "%lld MiB", num(a, "memoryMB"));
                if (json_is_integer(json_object_get(a, "volumeUsedMB")))
                        snprintf(vol, sizeof(vol), "%lld MiB", num(a, "volumeUsedMB"));
                printf("%-36s  %-9s %-14s %8s %10s %10s", str(a, "id"), *str(a, "state") ? str(a, "state") : "?",
                       started, restarts, mem, vol);
                if (*str(a, "name"))
                        printf("  %s", str(a, "name"));
                if (json_is_integer(json_object_get(a, "exitCode")) && !streq(str(a, "state"), "running"))
                        printf("  (exit %lld)", num(a, "exitCode"));
                printf("\n");
                json_t *e = json_object_get(a, "error");
                if (e)
                        printf("%-36s  status failed: %s: %s\n", "", str(e, "code"), str(e, "message"));
        }
}

/* An app's text on a terminal: control characters (escape sequences) shown, not obeyed. */
static void put_text(const char *s)
{
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '\t' || (*p >= 0x20 && *p != 0x7f))
                        putchar(*p);
                else
                        printf("\\x%02x", *p);
        }
}

/* "<ts> <stream> <text>": stdout lines plain, stderr and system lines marked. */
static void print_lines(json_t *lines, bool as_json)
{
        size_t i;
        json_t *l;
        json_array_foreach(lines, i, l) {
                if (as_json) {
                        _cleanup_free_ char *t = json_dumps(l, JSON_COMPACT);
                        if (t)
                                printf("%s\n", t);
                        continue;
                }
                const char *stream = str(l, "stream");
                printf("%s %s ", str(l, "ts"), streq(stream, "stderr") ? "ERR" : streq(stream, "system") ? "SYS" : "out");
                put_text(str(l, "text"));
                putchar('\n');
        }
        fflush(stdout);
}

static void on_interrupt(int signo)
{
        (void)signo;
        interrupted = 1;
}

struct logs_args {
        const char *app;
        int64_t since; /* -1: the last `lines` */
        int64_t lines; /* 0: not given */
        bool follow, as_json;
};

/*
 * logs: one request for the last N lines, or pages from --since on (at most -n
 * lines); then, with -f, a request every 500 ms from the last nextSeq until SIGINT
 * or SIGTERM (exit 0) or the agent goes away (exit 3). One connection throughout.
 */
static int run_logs(const char *socket_path, const struct logs_args *a)
{
        if (a->follow) {
                struct sigaction sa = { .sa_handler = on_interrupt }; /* no SA_RESTART: reads and sleeps end */
                sigemptyset(&sa.sa_mask);
                sigaction(SIGINT, &sa, NULL);
                sigaction(SIGTERM, &sa, NULL);
        }
        struct agent_conn c = { .fd = connect_socket(socket_path) };
        if (c.fd < 0)
                return 3;
        int rc = 0;
        int64_t next = a->since, left = a->lines;
        bool tail = a->since < 0, page_full = false, first = true;
        if (tail && a->lines > LOGS_PAGE && !(a->as_json && !a->follow)) {
                /* More than one answer holds: learn where the output ends, then read forward. */
                _cleanup_json_ json_t *req = json_pack("{s:s, s:s, s:i}", "cmd", "logs", "app", a->app, "limit", 1);
                _cleanup_json_ json_t *ans = conn_call(&c, socket_path, req);
                if (!ans || !json_is_true(json_object_get(ans, "ok"))) {
                        conn_close(&c);
                        return !ans ? (interrupted ? 0 : 3) : refused(ans);
                }
                int64_t end = json_integer_value(json_object_get(ans, "nextSeq"));
                next = end > a->lines ? end - a->lines : 0;
                tail = false;
        }
        for (;;) {
                if (interrupted)
                        break;
                if (!first && !page_full) {
                        if (!a->follow)
                                break;
                        poll(NULL, 0, FOLLOW_POLL_MS); /* a signal ends it early */
                        if (interrupted)
                                break;
                }
                int64_t limit = LOGS_PAGE;
                if (first && tail)
                        limit = a->lines ? (a->lines < LOGS_PAGE ? a->lines : LOGS_PAGE) : LOGS_DEFAULT_LINES;
                else if (a->lines && left > 0)
                        limit = left < LOGS_PAGE ? left : LOGS_PAGE;
                _cleanup_json_ json_t *req = json_pack("{s:s, s:s, s:I}", "cmd", "logs", "app", a->app, "limit",
                                                       (json_int_t)limit);
                if (next >= 0)
                        json_object_set_new(req, "sinceSeq", json_integer(next));
                _cleanup_json_ json_t *ans = conn_call(&c, socket_path, req);
                if (!ans) {
                        rc = interrupted ? 0 : 3;
                        break;
                }
                if (!json_is_true(json_object_get(ans, "ok"))) {
                        rc = refused(ans);
                        break;
                }
                json_t *lines = json_object_get(ans, "lines");
                json_t *next_seq = json_object_get(ans, "nextSeq");
                if (!json_is_array(lines) || !json_is_integer(next_seq)) {
                        fprintf(stderr, "nodeagentctl: the agent's logs answer has no lines or nextSeq\n");
                        rc = 3;
                        break;
                }
                if (a->as_json && !a->follow) {
                        /* One answer, as the agent gave it (at most a page). */
                        _cleanup_free_ char *t = json_dumps(ans, JSON_INDENT(2));
                        printf("%s\n", t ? t : "");
                        break;
                }
                print_lines(lines, a->as_json);
                size_t n = json_array_size(lines);
                int64_t got_next = json_integer_value(next_seq);
                page_full = n > 0 && n == (size_t)limit && !(first && tail) && got_next > next;
                next = got_next;
                first = false;
                if (a->lines && !tail && left > 0) {
                        /* -n counts the lines before following: the rest are all shown. */
                        left -= (int64_t)n;
                        if (left <= 0) {
                                left = 0;
                                page_full = false;
                                if (!a->follow)
                                        break;
                        }
                }
        }
        conn_close(&c);
        return rc;
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
                { "follow", no_argument, NULL, 'f' },        { "since", required_argument, NULL, 'S' },
                { "lines", required_argument, NULL, 'n' },   { "help", no_argument, NULL, 'h' },
                { "off", no_argument, NULL, 'o' },           { 0 },
        };
        const char *config = NA_DEFAULT_CONFIG, *socket_path = NULL, *target = NULL, *params = NULL;
        long timeout = 0;
        bool as_json = false;
        struct logs_args logs = { .since = -1 };
        bool logs_opts = false, drain_off = false, want_help = false;
        int c;
        /* GNU getopt permutes: options may stand anywhere, the rest is COMMAND [KIND]. */
        while ((c = getopt_long(argc, argv, "c:s:jt:p:T:fn:h", opts, NULL)) != -1) {
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
                case 'f':
                        logs.follow = logs_opts = true;
                        break;
                case 'S':
                case 'n': {
                        char *end;
                        errno = 0;
                        long long v = strtoll(optarg, &end, 10);
                        bool bad = errno || end == optarg || *end || (c == 'S' ? v < 0 : v < 1 || v > LOGS_MAX_LINES);
                        if (bad) {
                                fprintf(stderr, c == 'S' ? "nodeagentctl: --since must be an output sequence number (0 or more)\n"
                                                         : "nodeagentctl: -n must be a number of lines from 1 to 1000000\n");
                                return 2;
                        }
                        if (c == 'S')
                                logs.since = v;
                        else
                                logs.lines = v;
                        logs_opts = true;
                        break;
                }
                case 'o':
                        drain_off = true;
                        break;
                case 'h':
                        want_help = true;
                        break;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (want_help)
                return print_help(optind < argc ? argv[optind] : NULL);
        if (optind >= argc) {
                usage(stderr);
                return 2;
        }
        const char *cmd = argv[optind++];
        if (streq(cmd, "help")) {
                if (optind + 1 < argc) {
                        fprintf(stderr, "nodeagentctl: unexpected argument \"%s\"\n", argv[optind + 1]);
                        return 2;
                }
                return print_help(optind < argc ? argv[optind] : NULL);
        }
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
        if (streq(cmd, "logs")) {
                if (optind >= argc) {
                        fprintf(stderr, "nodeagentctl: logs needs an app id, e.g. nodeagentctl logs 6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b\n");
                        return 2;
                }
                logs.app = argv[optind++];
                if (!na_uuid_valid(logs.app)) {
                        fprintf(stderr, "nodeagentctl: \"%.64s\" is not an app id (a UUID such as "
                                        "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b; nodeagentctl apps lists them)\n",
                                logs.app);
                        return 2;
                }
        } else if (logs_opts) {
                fprintf(stderr, "nodeagentctl: --follow, --since and --lines go with logs\n");
                return 2;
        }
        if (drain_off && !streq(cmd, "drain")) {
                fprintf(stderr, "nodeagentctl: --off goes with drain\n");
                return 2;
        }
        if (optind < argc) {
                fprintf(stderr, "nodeagentctl: unexpected argument \"%s\"\n", argv[optind]);
                return 2;
        }
        if (!socket_path)
                socket_path = socket_from_config(config);

        if (streq(cmd, "logs")) {
                logs.as_json = as_json;
                return run_logs(socket_path, &logs);
        }
        _cleanup_json_ json_t *req = NULL;
        if (streq(cmd, "status") || streq(cmd, "jobs") || streq(cmd, "apps"))
                req = json_pack("{s:s}", "cmd", cmd);
        else if (streq(cmd, "drain"))
                req = json_pack("{s:s, s:b}", "cmd", "drain", "on", !drain_off);
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
                NA_ANALYZER_FP("-Wanalyzer-null-argument") /* kind is set whenever cmd is "run", the only way here */
                const char *type = strncmp(kind, "vps.", 4) == 0 ? "vps" : strncmp(kind, "app.", 4) == 0 ? "app" : "node";
                NA_ANALYZER_FP_END
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
        if (streq(cmd, "apps") && !json_is_true(json_object_get(ans, "ok")))
                return refused(ans);
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
                json_t *show = streq(cmd, "status")  ? json_object_get(ans, "status")
                               : streq(cmd, "jobs")  ? json_object_get(ans, "jobs")
                               : streq(cmd, "drain") ? json_object_get(ans, "drain")
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
        else if (streq(cmd, "apps"))
                print_apps(json_object_get(ans, "apps"));
        else if (streq(cmd, "drain"))
                print_drain(json_object_get(ans, "drain"));
        else
                return print_run(ans);
        return 0;
}
