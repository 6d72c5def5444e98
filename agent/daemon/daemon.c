/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/daemon/daemon.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/control/control.h"
#include "agent/link/hostinfo.h"
#include "agent/jobs/jobs.h"
#include "agent/jobs/jobstore.h"
#include "agent/link/link.h"
#include "agent/base/log.h"
#include "agent/base/loop.h"
#include "agent/daemon/notify.h"
#include "agent/daemon/prometheus-agent.h"
#include "agent/daemon/prometheus-http.h"
#include "agent/link/reports.h"
#include "agent/daemon/sandbox.h"
#include "agent/console/consoles.h"
#include "agent/base/services.h"
#include "common/fileio.h"
#include "common/spawnd.h"
#include "common/json-cleanup.h"
#include "common/statedir-format.h"
#include "common/timeutil.h"
#include "proto/wire.h"

#define DRAIN_TICK_MS 50
/* The node's drain (`nodeagentctl drain`): this file in the state directory, {"since": date-time}. */
#define NODE_DRAIN_FILE "node-drain.json"
#define DRAIN_GRACE_MS 5000

struct agent {
        struct agent_config *cfg;
        struct loop *loop;
        struct jobs *jobs;
        struct jobstore *store;
        struct reports *reports;
        struct link *link;
        struct control *control;
        struct prometheus *prometheus;
        struct consoles *consoles;
        struct agent_services services;
        struct host_facts host;
        struct prometheus_events events;
        int lock_fd;
        int spawnd_pidfd;
        uint64_t started_us;

        bool draining, drain_forced;
        char node_drain_since[40]; /* "" unless the node drains (agent/jobs/job-drain.h) */
        uint64_t drain_started_us;
        struct loop_timer *drain_timer, *watchdog_timer, *status_timer;
        uint64_t watchdog_usec;
};

/* ---- what handlers and the control socket see ---- */

json_t *agent_node_status(void *agent, struct na_error *err)
{
        struct agent *a = agent;
        struct host_facts local;
        const struct host_facts *h = a ? &a->host : &local;
        if (!a && hostinfo_read(&local, err) < 0)
                return NULL;
        struct proto_host ph;
        hostinfo_to_proto(h, &ph);
        uint64_t up = a ? (na_now_mono_us() - a->started_us) / NA_USEC_PER_SEC : 0;
        return json_pack("{s:s, s:I, s:I, s:I, s:o}", "agentVersion", NA_VERSION, "uptimeSec", (json_int_t)up,
                         "jobsRunning", (json_int_t)(a ? jobs_running(a->jobs) : 0), "resultsPending",
                         (json_int_t)(a ? link_results_pending(a->link) : 0), "host", proto_host_encode(&ph));
}

static void emit_event(const struct agent_services *s, const char *type, const char *target_id, json_t *data)
{
        struct agent *a = s->agent;
        if (a)
                prometheus_events_count(&a->events, type, data);
        json_t *ev = proto_event_encode(type, target_id, na_now_real_ms(), data);
        log_info("event %s target=%s", type, target_id);
        if (a && a->link)
                link_emit_event(a->link, ev);
        else
                json_decref(ev);
}

static json_t *node_drain_json(struct agent *a);

static json_t *status_json(void *userdata)
{
        struct agent *a = userdata;
        struct jobs_counters c;
        jobs_counters(a->jobs, &c);
        struct jobstore_stats js;
        jobstore_get_stats(a->store, &js);
        return json_pack("{s:s, s:i, s:s, s:I, s:b, s:o, s:{s:i, s:i, s:i, s:I, s:I, s:I}, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:o}",
                         "version", NA_VERSION, "pid", (int)getpid(), "nodeId", a->cfg->node_id, "uptimeSec",
                         (json_int_t)((na_now_mono_us() - a->started_us) / NA_USEC_PER_SEC), "draining", a->draining,
                         "link", link_status_json(a->link), "jobs", "running", (int)jobs_running(a->jobs), "queued",
                         (int)jobs_queued(a->jobs), "maxParallel", (int)jobs_max_parallel(a->jobs), "succeeded",
                         (json_int_t)c.succeeded, "failed", (json_int_t)c.failed, "abandoned", (json_int_t)c.abandoned,
                         "resultsPending", (json_int_t)link_results_pending(a->link), "journal", "bytes",
                         (json_int_t)js.file_bytes, "records", (json_int_t)js.file_records, "pendingResults",
                         (json_int_t)js.pending_results, "interrupted", (json_int_t)js.interrupted, "syncs",
                         (json_int_t)js.syncs, "consoles", consoles_status_json(a->consoles), "nodeDrain",
                         node_drain_json(a));
}

static json_t *link_inventory(void *userdata)
{
        struct agent *a = userdata;
        return services_inventory(&a->services);
}

static json_t *link_capabilities(void *userdata)
{
        struct agent *a = userdata;
        json_t *caps = services_capabilities(&a->services);
        if (caps)
                json_object_set_new(caps, "draining", json_boolean(jobs_node_drain(a->jobs)));
        return caps;
}

static json_t *link_metrics(void *userdata)
{
        struct agent *a = userdata;
        return services_metrics_samples(&a->services);
}

static void link_settings(void *userdata, const struct proto_settings *st)
{
        struct agent *a = userdata;
        if (st->metrics_interval_sec > 0)
                services_set_metrics_interval(&a->services, (unsigned)st->metrics_interval_sec);
}

/* The agent's own lines, after the node's and guests' metrics (prometheus-agent.c). */
static void prometheus_health(void *userdata, FILE *out)
{
        struct agent *a = userdata;
        struct jobs_counters c;
        jobs_counters(a->jobs, &c);
        struct jobstore_stats js;
        jobstore_get_stats(a->store, &js);
        uint64_t up_us = na_now_mono_us() - a->started_us;
        struct prometheus_agent_facts f = {
                .version = NA_VERSION,
                .start_time_sec = (double)na_now_real_ms() / 1000.0 - (double)up_us / 1e6,
                .jobs_running = jobs_running(a->jobs),
                .jobs_queued = jobs_queued(a->jobs),
                .jobs_max_parallel = jobs_max_parallel(a->jobs),
                .jobs_succeeded = c.succeeded,
                .jobs_failed = c.failed,
                .jobs_abandoned = c.abandoned,
                .link_state = link_state_name(a->link),
                .results_pending = link_results_pending(a->link),
                .journal_bytes = js.file_bytes,
                .consoles_open = consoles_count(a->consoles),
                .state_dir = a->cfg->state_dir,
                .events = &a->events,
        };
        prometheus_agent_render(out, &f, &a->services);
}

static const struct agent_services *control_services(void *userdata)
{
        struct agent *a = userdata;
        return &a->services;
}

/* ---- the node's drain ---- */

static json_t *node_drain_json(struct agent *a)
{
        json_t *o = json_pack("{s:b}", "on", jobs_node_drain(a->jobs));
        if (o && a->node_drain_since[0])
                json_object_set_new(o, "since", json_string(a->node_drain_since));
        return o;
}

static void node_drain_path(struct agent *a, char *buf, size_t len)
{
        snprintf(buf, len, "%s/" NODE_DRAIN_FILE, a->cfg->state_dir);
}

/* At start: a drain an operator started before a restart goes on (the file is what counts). */
static void node_drain_load(struct agent *a)
{
        char path[PATH_MAX];
        node_drain_path(a, path, sizeof(path));
        if (access(path, F_OK) < 0)
                return;
        _cleanup_json_ json_t *doc = na_json_load(path, 4096);
        const char *since = json_string_value(json_object_get(doc, "since"));
        snprintf(a->node_drain_since, sizeof(a->node_drain_since), "%s", since ? since : "?");
        jobs_set_node_drain(a->jobs, true);
        log_info("the node drains (since %s): vps.create and app.deploy are refused; `nodeagentctl drain --off` ends it",
                 a->node_drain_since);
}

static json_t *control_set_drain(void *userdata, bool on, struct na_error *err)
{
        struct agent *a = userdata;
        char path[PATH_MAX];
        node_drain_path(a, path, sizeof(path));
        if (on == jobs_node_drain(a->jobs))
                return node_drain_json(a);
        if (on) {
                char since[40];
                na_format_time_ms(na_now_real_ms(), since, sizeof(since));
                char text[80];
                int n = snprintf(text, sizeof(text), "{\"since\":\"%s\"}\n", since);
                if (na_atomic_write(path, text, (size_t)n, 0600, err) < 0) {
                        na_error_prefix(err, "node drain");
                        return NULL;
                }
                snprintf(a->node_drain_since, sizeof(a->node_drain_since), "%s", since);
                log_info("the node drains from now on (nodeagentctl drain): vps.create and app.deploy are refused, "
                         "every other job runs");
        } else {
                if (na_unlink(path, err) < 0 || na_fsync_parent(path, err) < 0) {
                        na_error_prefix(err, "node drain");
                        return NULL;
                }
                a->node_drain_since[0] = '\0';
                log_info("the node's drain ended (nodeagentctl drain --off): it takes every job again");
        }
        jobs_set_node_drain(a->jobs, on);
        link_capabilities_changed(a->link); /* hello again: the central API reads "draining" there */
        return node_drain_json(a);
}

static const struct control_ops control_ops = {
        .status = status_json,
        .services = control_services,
        .set_drain = control_set_drain,
};

/* ---- signals, drain, reload ---- */

static void drain_tick(void *userdata)
{
        struct agent *a = userdata;
        uint64_t elapsed_ms = (na_now_mono_us() - a->drain_started_us) / 1000;
        uint64_t limit_ms = (uint64_t)a->cfg->drain_timeout_sec * 1000;
        unsigned running = jobs_running(a->jobs);

        if (running == 0 && link_idle(a->link) && consoles_count(a->consoles) == 0) {
                log_info("stopped: no job running, state flushed");
                loop_quit(a->loop, 0);
                return;
        }
        if (elapsed_ms >= limit_ms && !a->drain_forced) {
                a->drain_forced = true;
                log_warn("drain timeout (%llds): asking %u running job(s) to stop at their next safe point; they run "
                         "again from the start when the central API offers them again",
                         (long long)a->cfg->drain_timeout_sec, running);
                jobs_stop_all(a->jobs, JOB_STOP_SHUTDOWN, true);
        }
        if (elapsed_ms >= limit_ms + DRAIN_GRACE_MS) {
                log_warn("stopped with %u job(s) still inside a driver call; they are recorded as interrupted", running);
                loop_quit(a->loop, 0);
                return;
        }
        loop_timer_arm_ms(a->drain_timer, DRAIN_TICK_MS);
}

static void start_drain(struct agent *a)
{
        if (a->draining)
                return;
        a->draining = true;
        a->drain_started_us = na_now_mono_us();
        notify_send("STOPPING=1");
        log_info("stopping: taking no new jobs, letting %u running job(s) reach a safe point (up to %llds)",
                 jobs_running(a->jobs), (long long)a->cfg->drain_timeout_sec);
        link_drain(a->link);
        jobs_stop_all(a->jobs, JOB_STOP_SHUTDOWN, false);
        consoles_close_all(a->consoles, "agent-draining");
        drain_tick(a);
}

static void reload(struct agent *a)
{
        unsigned problems = 0;
        struct na_error err = NA_ERROR_INIT;
        _cleanup_(config_freep) struct agent_config *fresh = NULL;
        char *report = NULL;
        size_t report_len = 0;
        FILE *f = open_memstream(&report, &report_len);
        int r = f ? config_load(a->cfg->path, f, &problems, &fresh, &err) : -ENOMEM;
        if (f)
                fclose(f);
        if (r < 0 || problems) {
                log_error("reload: %s; keeping the running configuration", r < 0 ? err.message : "configuration has problems");
                for (char *line = report ? strtok(report, "\n") : NULL; line; line = strtok(NULL, "\n"))
                        log_error("reload: %s", line);
        } else {
                /* Said at the old level, so that lowering it does not hide the news. */
                log_info("reloaded: log_level=%s; token re-read; other settings take effect at the next start",
                         log_level_to_string((enum log_level)fresh->log_level));
                log_set_level((enum log_level)fresh->log_level);
                a->cfg->log_level = fresh->log_level;
        }
        free(report);
        na_error_clear(&err);
        link_reload_token(a->link);
}

static void on_signal(void *userdata, int signo)
{
        struct agent *a = userdata;
        if (signo == SIGHUP)
                reload(a);
        else
                start_drain(a);
}

static void watchdog_tick(void *userdata)
{
        struct agent *a = userdata;
        notify_send("WATCHDOG=1");
        loop_timer_arm_us(a->watchdog_timer, a->watchdog_usec / 2);
}

static void status_tick(void *userdata)
{
        struct agent *a = userdata;
        char status[256];
        snprintf(status, sizeof(status), "STATUS=controller %s, %u job(s) running, %u queued, %u result(s) waiting",
                 link_state_name(a->link), jobs_running(a->jobs), jobs_queued(a->jobs), link_results_pending(a->link));
        notify_send(status);
        loop_timer_arm_ms(a->status_timer, 5000);
}

/* ---- start-up and teardown ---- */

static int open_state_dir(struct agent *a, struct na_error *err)
{
        const char *dir = a->cfg->state_dir;
        /* 0711: qemu, running as its own user, must traverse to the disks below; every
         * file in here is 0600 or 0640 on its own. */
        int r = na_mkdir_p(dir, 0711, err);
        if (r < 0)
                return na_error_prefix(err, "state directory %s", dir);
        if (access(dir, W_OK) < 0)
                return na_error_sys(err, errno, "state directory %s is not writable", dir);
        r = na_statedir_lock(dir, &a->lock_fd, err);
        if (r < 0)
                return r;
        /* Under the lock: a directory of a format this version does not know is refused
         * before anything in it is read or written (-EPROTONOSUPPORT: main exits 2). */
        unsigned version = 0;
        r = na_statedir_format_check(dir, &version, err);
        if (r < 0)
                return r;
        log_debug("state directory %s: format %u", dir, version);
        return 0;
}

int agent_new(struct agent_config *cfg, struct agent **ret, struct na_error *err)
{
        struct link_options lo;
        struct consoles_options co;
        int r;
        struct agent *a = calloc(1, sizeof(*a));
        if (!a) {
                config_free(cfg);
                return na_error_sys(err, ENOMEM, "agent");
        }
        a->cfg = cfg;
        a->lock_fd = -1;
        a->started_us = na_now_mono_us();
        log_set_level((enum log_level)cfg->log_level);
        signal(SIGPIPE, SIG_IGN);

        r = open_state_dir(a, err);
        if (r < 0)
                goto fail;
        r = hostinfo_read(&a->host, err);
        if (r < 0)
                goto fail;
        r = loop_new(&a->loop, err);
        if (r < 0)
                goto fail;
        /* Before any thread starts, so that only the loop ever sees these signals. */
        r = loop_signals(a->loop, (const int[]){ SIGTERM, SIGINT, SIGHUP }, 3, on_signal, a, err);
        if (r < 0)
                goto fail;

        a->services.config = cfg;
        a->services.state_dir = cfg->state_dir;
        a->services.emit_event = emit_event;
        a->services.agent = a;
        r = services_open(&a->services, err);
        if (r < 0)
                goto fail;
        snprintf(a->host.cgroup, sizeof(a->host.cgroup), "%s", services_cgroup_mode(&a->services));

        r = jobs_new(a->loop, &a->services, (unsigned)cfg->max_parallel_jobs, &a->jobs, err);
        if (r >= 0)
                r = jobs_set_lanes(a->jobs, (unsigned)cfg->node_parallel_jobs, (unsigned)cfg->max_queued_jobs, err);
        if (r < 0)
                goto fail;
        node_drain_load(a);
        co = (struct consoles_options){
                .loop = a->loop,
                .jobs = a->jobs,
                .services = &a->services,
                .max_per_target = (unsigned)cfg->consoles_max_per_target,
                .max_sessions = (unsigned)cfg->consoles_max_sessions,
                .tls = { .ca_file = cfg->ca_file, .pinned_pubkey = cfg->pinned_pubkey, .client_cert = cfg->client_cert,
                         .client_key = cfg->client_key },
                .allow_insecure_http = cfg->allow_insecure_http,
                .controller_url = cfg->url,
                .relays = cfg->consoles_relays,
        };
        r = consoles_new(&co, &a->consoles, err);
        if (r < 0)
                goto fail;
        a->services.consoles = a->consoles;
        r = jobstore_open(cfg->state_dir, &a->store, err);
        if (r < 0)
                goto fail;
        r = reports_open(cfg->state_dir, &a->reports, err);
        if (r < 0)
                goto fail;
        lo = (struct link_options){
                .cfg = cfg,
                .host = &a->host,
                .jobs = a->jobs,
                .store = a->store,
                .reports = a->reports,
                .inventory = link_inventory,
                .capabilities = link_capabilities,
                .metrics_samples = link_metrics,
                .settings_applied = link_settings,
                .userdata = a,
        };
        r = link_new(a->loop, &lo, &a->link, err);
        if (r < 0)
                goto fail;
        r = control_open(a->loop, a->jobs, cfg->control_socket, &control_ops, a, &a->control, err);
        if (r < 0)
                goto fail;
        if (cfg->prometheus_listen) {
                r = prometheus_open(a->loop, cfg->prometheus_listen, a->services.metrics, prometheus_health, a,
                                    &a->prometheus, err);
                if (r < 0)
                        goto fail;
        }

        a->drain_timer = loop_timer_new(a->loop, drain_tick, a);
        a->status_timer = loop_timer_new(a->loop, status_tick, a);
        a->watchdog_usec = notify_watchdog_usec();
        if (a->watchdog_usec) {
                a->watchdog_timer = loop_timer_new(a->loop, watchdog_tick, a);
                loop_timer_arm_us(a->watchdog_timer, a->watchdog_usec / 2);
        }
        *ret = a;
        return 0;
fail:
        agent_free(a);
        return r;
}

/* The exec helper's death is fatal: nothing could be started any more. */
static void on_spawnd_exit(void *userdata, int fd, uint32_t revents)
{
        struct agent *a = userdata;
        (void)revents;
        log_error("exec helper (pid %d) died: the agent can no longer start programs; stopping",
                  (int)na_spawnd_pid());
        loop_unwatch(a->loop, fd);
        loop_quit(a->loop, 1);
}

static int watch_spawnd(struct agent *a, struct na_error *err)
{
        if (!na_spawnd_active())
                return na_error_set(err, ENOTCONN, NA_E_INTERNAL, "sandbox strict: no exec helper");
        int fd = (int)syscall(SYS_pidfd_open, na_spawnd_pid(), 0);
        if (fd < 0)
                return na_error_sys(err, errno, "exec helper (pid %d): pidfd_open", (int)na_spawnd_pid());
        a->spawnd_pidfd = fd;
        return loop_watch(a->loop, fd, EPOLLIN, on_spawnd_exit, a, err);
}

int agent_run(struct agent *a)
{
        struct na_error err = NA_ERROR_INIT;
        enum agent_sandbox mode = config_sandbox(a->cfg);
        if (mode == AGENT_SANDBOX_STRICT && watch_spawnd(a, &err) < 0) {
                log_error("%s", err.message);
                na_error_clear(&err);
                return 1;
        }
        if (mode != AGENT_SANDBOX_OFF) {
                int r = mode == AGENT_SANDBOX_STRICT ? sandbox_apply_strict(&err) : sandbox_apply(&err);
                if (r < 0) {
                        log_error("%s", err.message);
                        na_error_clear(&err);
                        return 1;
                }
                log_debug("seccomp filter loaded (%s)", mode == AGENT_SANDBOX_STRICT ? "strict allow-list" : "deny-list");
        }
        services_start(&a->services);
        link_start(a->link);
        log_info("nodeagentd %s started: node %s, state %s, control %s, up to %lld jobs in parallel", NA_VERSION,
                 a->cfg->node_id, a->cfg->state_dir, a->cfg->control_socket, (long long)a->cfg->max_parallel_jobs);
        notify_send("READY=1");
        status_tick(a);
        int code = loop_run(a->loop);
        return code < 0 ? 1 : code;
}

void agent_free(struct agent *a)
{
        if (!a)
                return;
        /* A worker still inside a driver call is orphaned by jobs_free(): it will touch
         * nothing but its own job (no sink, no journal, no loop), so the stores close
         * normally. The drivers it is inside stay open for the process exit, and with
         * them what they point at (the services, the configuration): the agent's
         * struct is kept, reachable, and driver threads find no event hook any more. */
        bool busy = a->jobs && jobs_running(a->jobs) > 0;
        a->services.emit_event = NULL; /* events after this point have no report to go in */
        prometheus_close(a->prometheus);
        control_close(a->control);
        jobs_free(a->jobs);
        a->services.consoles = NULL;
        if (!busy) /* a worker may still be dialling inside it */
                consoles_free(a->consoles);
        link_free(a->link);
        reports_close(a->reports);
        jobstore_close(a->store);
        loop_timer_free(a->drain_timer);
        loop_timer_free(a->status_timer);
        loop_timer_free(a->watchdog_timer);
        loop_free(a->loop);
        if (a->lock_fd >= 0)
                close(a->lock_fd);
        if (a->spawnd_pidfd > 0)
                close(a->spawnd_pidfd);
        if (busy) {
                static struct agent *left_open;
                left_open = a;
                (void)left_open;
                return;
        }
        services_close(&a->services); /* no worker is inside a driver any more */
        config_free(a->cfg);
        free(a);
}
