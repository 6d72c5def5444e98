/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/daemon/prometheus-agent.h"

#include <string.h>
#include <sys/statvfs.h>

#include "agent/base/services.h"
#include "agent/link/link.h"
#include "common/json-cleanup.h"
#include "drivers/app.h"
#include "proto/app-params.h"
#include "proto/vps.h"

static const char *const event_types[PROMETHEUS_EVENT_TYPES] = {
        "vps.state",       "app.state",      "app.exited",        "app.updated",         "vps.bandwidth",
        "backup.finished", "console.closed", "exposure.verified", "exposure.unverified", "firewall.drift",
};

void prometheus_events_count(struct prometheus_events *e, const char *type, const json_t *data)
{
        size_t i = 0;
        while (i < PROMETHEUS_EVENT_TYPES && strcmp(event_types[i], type) != 0)
                i++;
        atomic_fetch_add(&e->by_type[i], 1);
        if (i < PROMETHEUS_EVENT_TYPES && strcmp(type, "app.exited") == 0 &&
            json_is_true(json_object_get(data, "crashLoop")))
                atomic_fetch_add(&e->crash_loops, 1);
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A state set: one series per state the thing can be in, 1 for the one it is in. */
static void state_set(FILE *out, const char *name, const char *id, const char *const *states, const char *now)
{
        for (size_t i = 0; states[i]; i++) {
                fputs(name, out);
                if (id)
                        fprintf(out, "{id=\"%s\",state=\"%s\"}", id, states[i]);
                else
                        fprintf(out, "{state=\"%s\"}", states[i]);
                fprintf(out, " %d\n", now && strcmp(states[i], now) == 0);
        }
}

static void agent_lines(FILE *out, const struct prometheus_agent_facts *f)
{
        family(out, "nodeagent_build_info", "gauge", "Always 1; version says which agent runs.");
        fprintf(out, "nodeagent_build_info{version=\"%s\"} 1\n", f->version);
        family(out, "nodeagent_start_time_seconds", "gauge", "When the agent started, in seconds since the Unix epoch.");
        fprintf(out, "nodeagent_start_time_seconds %.3f\n", f->start_time_sec);

        family(out, "nodeagent_jobs_running", "gauge", "Jobs running now.");
        fprintf(out, "nodeagent_jobs_running %u\n", f->jobs_running);
        family(out, "nodeagent_jobs_queued", "gauge", "Jobs taken from the central API and waiting for a slot now.");
        fprintf(out, "nodeagent_jobs_queued %u\n", f->jobs_queued);
        family(out, "nodeagent_jobs_max_parallel", "gauge", "Jobs the agent runs at once at most (max_parallel_jobs).");
        fprintf(out, "nodeagent_jobs_max_parallel %u\n", f->jobs_max_parallel);
        family(out, "nodeagent_jobs_finished_total", "counter", "Jobs finished since the agent started, by result.");
        fprintf(out,
                "nodeagent_jobs_finished_total{result=\"succeeded\"} %llu\n"
                "nodeagent_jobs_finished_total{result=\"failed\"} %llu\n"
                "nodeagent_jobs_finished_total{result=\"abandoned\"} %llu\n",
                (unsigned long long)f->jobs_succeeded, (unsigned long long)f->jobs_failed,
                (unsigned long long)f->jobs_abandoned);

        family(out, "nodeagent_link_up", "gauge", "1 when the controller link is connected, else 0.");
        fprintf(out, "nodeagent_link_up %d\n", strcmp(f->link_state, "connected") == 0);
        family(out, "nodeagent_link_state", "gauge", "The controller link's state: 1 for the state it is in, 0 for the others.");
        state_set(out, "nodeagent_link_state", NULL, link_state_names, f->link_state);
        family(out, "nodeagent_results_pending", "gauge", "Job results waiting for the central API to take them.");
        fprintf(out, "nodeagent_results_pending %u\n", f->results_pending);
        family(out, "nodeagent_journal_bytes", "gauge", "Size of the job journal file.");
        fprintf(out, "nodeagent_journal_bytes %llu\n", (unsigned long long)f->journal_bytes);
        family(out, "nodeagent_consoles_open", "gauge", "Live console sessions open now.");
        fprintf(out, "nodeagent_consoles_open %u\n", f->consoles_open);

        family(out, "nodeagent_events_total", "counter", "Events the agent emitted since it started, by type.");
        for (size_t i = 0; i <= PROMETHEUS_EVENT_TYPES; i++)
                fprintf(out, "nodeagent_events_total{type=\"%s\"} %llu\n",
                        i < PROMETHEUS_EVENT_TYPES ? event_types[i] : "other",
                        (unsigned long long)atomic_load(&f->events->by_type[i]));
        family(out, "nodeagent_app_crash_loops_total", "counter",
               "Apps left crashed by the crash rule (app.exited with crashLoop) since the agent started.");
        fprintf(out, "nodeagent_app_crash_loops_total %llu\n", (unsigned long long)atomic_load(&f->events->crash_loops));

        struct statvfs v;
        if (f->state_dir && statvfs(f->state_dir, &v) == 0) {
                family(out, "nodeagent_state_filesystem_size_bytes", "gauge",
                       "Size of the file system that holds the state directory.");
                fprintf(out, "nodeagent_state_filesystem_size_bytes %llu\n",
                        (unsigned long long)v.f_blocks * (unsigned long long)v.f_frsize);
                family(out, "nodeagent_state_filesystem_avail_bytes", "gauge",
                       "Room left to the agent on the file system of the state directory.");
                fprintf(out, "nodeagent_state_filesystem_avail_bytes %llu\n",
                        (unsigned long long)v.f_bavail * (unsigned long long)v.f_frsize);
        }
}

static void servers_lines(FILE *out, const json_t *vps)
{
        family(out, "nodeagent_server_state", "gauge", "Each server's state: 1 for the state it is in, 0 for the others.");
        size_t i;
        json_t *e;
        json_array_foreach(vps, i, e)
        {
                const char *id = json_string_value(json_object_get(e, "id"));
                if (id)
                        state_set(out, "nodeagent_server_state", id, proto_vps_states,
                                  json_string_value(json_object_get(e, "state")));
        }
}

struct app_fig {
        char id[64];
        struct proto_app_status st;
        bool has_status;
};

static void apps_lines(FILE *out, const json_t *apps, struct agent_services *s)
{
        size_t n = json_array_size(apps), i;
        _cleanup_free_ struct app_fig *figs = calloc(n ? n : 1, sizeof(*figs));
        if (!figs)
                return;
        json_t *e;
        json_array_foreach(apps, i, e)
        {
                snprintf(figs[i].id, sizeof(figs[i].id), "%s", json_string_value(json_object_get(e, "id")) ?: "");
                struct na_error err = NA_ERROR_INIT;
                figs[i].has_status = figs[i].id[0] && s->app->status(s->app_conn, figs[i].id, &figs[i].st, &err) == 0;
                na_error_clear(&err);
        }

        family(out, "nodeagent_app_state", "gauge", "Each app's state: 1 for the state it is in, 0 for the others.");
        for (i = 0; i < n; i++)
                if (figs[i].has_status)
                        state_set(out, "nodeagent_app_state", figs[i].id, proto_app_states,
                                  proto_app_state_name(figs[i].st.state));
        family(out, "nodeagent_app_restarts_total", "counter",
               "Restarts by the crash rule since the app was last started on request.");
        for (i = 0; i < n; i++)
                if (figs[i].has_status)
                        fprintf(out, "nodeagent_app_restarts_total{id=\"%s\"} %lld\n", figs[i].id,
                                (long long)figs[i].st.restarts);
        family(out, "nodeagent_app_volume_used_bytes", "gauge", "Bytes used in the app's volume.");
        for (i = 0; i < n; i++)
                if (figs[i].has_status && figs[i].st.volume_size_mb > 0)
                        fprintf(out, "nodeagent_app_volume_used_bytes{id=\"%s\"} %lld\n", figs[i].id,
                                (long long)figs[i].st.volume_used_mb * 1048576LL);
        family(out, "nodeagent_app_volume_size_bytes", "gauge", "Size of the app's volume: its quota.");
        for (i = 0; i < n; i++)
                if (figs[i].has_status && figs[i].st.volume_size_mb > 0)
                        fprintf(out, "nodeagent_app_volume_size_bytes{id=\"%s\"} %lld\n", figs[i].id,
                                (long long)figs[i].st.volume_size_mb * 1048576LL);
}

void prometheus_agent_render(FILE *out, const struct prometheus_agent_facts *f, struct agent_services *s)
{
        agent_lines(out, f);
        _cleanup_json_ json_t *inv = services_inventory(s);
        servers_lines(out, json_object_get(inv, "vps"));
        if (s->app)
                apps_lines(out, json_object_get(inv, "apps"), s);
}
