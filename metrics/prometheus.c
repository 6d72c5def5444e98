/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Prometheus text exposition (format 0.0.4) of the latest values. Labels: kind
 * ("node", "vps", "app") and id ("node" or the UUID). Values of the last tick only:
 * a guest that was not measured at the last tick has no lines. Names follow the
 * Prometheus naming guide: base units (seconds, bytes, ratios 0-1), counters end in
 * _total, rates are left to rate() over the counters (docs/operations.md lists them
 * all; packaging/grafana-dashboard.json and packaging/prometheus-alerts.yml use them).
 *
 *   nodeagent_cpu_usage_ratio                gauge    node: of all CPUs; guest: of its vCPUs (0-1)
 *   nodeagent_memory_used_bytes              gauge
 *   nodeagent_memory_limit_bytes             gauge
 *   nodeagent_cpu_seconds_total              counter  guests: cgroup CPU time; node: busy time of all CPUs
 *   nodeagent_disk_read_bytes_total          counter  (and written, network received/transmitted)
 *   nodeagent_node_cpus                      gauge
 *   nodeagent_node_pressure_ratio            gauge    {resource, type="some"|"full", window="10s"|"60s"|"300s"}
 *   nodeagent_node_pressure_stalled_seconds_total counter {resource, type}
 *   nodeagent_metrics_*                      the collector's own figures
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics-internal.h"

struct prom_target {
        enum metrics_kind kind;
        char id[NA_UUID_STRLEN + 1];
        bool fresh;
        struct proto_metrics_sample s;
        struct metrics_raw raw;
};

struct prom_family {
        const char *name, *type, *help;
        enum proto_metric field; /* for gauges from the sample */
        double scale, divisor;   /* the sample's unit to the base unit: * scale / divisor */
};

static const struct prom_family gauges[] = {
        { "nodeagent_cpu_usage_ratio", "gauge",
          "CPU use over the last interval, 0-1 (node: of all CPUs; server: of its vCPUs; app: of its plan's cores).",
          PROTO_M_CPU_PERCENT, 1, 100 },
        { "nodeagent_memory_used_bytes", "gauge", "Memory in use (guests: cgroup working set).",
          PROTO_M_MEMORY_USED_MB, 1048576, 1 },
        { "nodeagent_memory_limit_bytes", "gauge", "Memory limit.", PROTO_M_MEMORY_LIMIT_MB, 1048576, 1 },
};

struct prom_counter {
        const char *name, *help;
        enum mcounter c;
};

static const struct prom_counter counters[] = {
        { "nodeagent_disk_read_bytes_total", "Disk bytes read.", MC_DISK_READ },
        { "nodeagent_disk_written_bytes_total", "Disk bytes written.", MC_DISK_WRITE },
        { "nodeagent_network_receive_bytes_total", "Network bytes received (as the guest sees it).", MC_NET_RX },
        { "nodeagent_network_transmit_bytes_total", "Network bytes sent (as the guest sees it).", MC_NET_TX },
};

/* The shortest text that reads back as v ("0.015", not "0.014999999999999999"). */
static const char *num(char buf[32], double v)
{
        snprintf(buf, 32, "%.15g", v);
        if (strtod(buf, NULL) != v)
                snprintf(buf, 32, "%.17g", v);
        return buf;
}

static void labels(FILE *f, const struct prom_target *t)
{
        fprintf(f, "{kind=\"%s\",id=\"%s\"}", metrics_kind_names[t->kind], t->id);
}

static void render(FILE *f, const struct prom_target *ts, size_t n, unsigned cpus, long hz,
                   const struct mpressure *pr, const struct metrics_stats *st)
{
        char b[32];
        for (size_t g = 0; g < ARRAY_SIZE(gauges); g++) {
                fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", gauges[g].name, gauges[g].help, gauges[g].name,
                        gauges[g].type);
                for (size_t i = 0; i < n; i++) {
                        if (!ts[i].fresh || !(ts[i].s.valid & PROTO_M_BIT(gauges[g].field)))
                                continue;
                        fputs(gauges[g].name, f);
                        labels(f, &ts[i]);
                        fprintf(f, " %s\n", num(b, ts[i].s.v[gauges[g].field] * gauges[g].scale / gauges[g].divisor));
                }
        }

        fputs("# HELP nodeagent_cpu_seconds_total CPU time used (node: busy time of all CPUs).\n"
              "# TYPE nodeagent_cpu_seconds_total counter\n",
              f);
        for (size_t i = 0; i < n; i++) {
                const struct metrics_raw *r = &ts[i].raw;
                if (!ts[i].fresh)
                        continue;
                if (ts[i].kind == METRICS_NODE && (r->cvalid & MC_BIT(MC_CPU_BUSY))) {
                        fputs("nodeagent_cpu_seconds_total", f);
                        labels(f, &ts[i]);
                        fprintf(f, " %s\n", num(b, (double)r->c[MC_CPU_BUSY] / (double)hz));
                } else if (ts[i].kind != METRICS_NODE && (r->cvalid & MC_BIT(MC_CPU_NS))) {
                        fputs("nodeagent_cpu_seconds_total", f);
                        labels(f, &ts[i]);
                        fprintf(f, " %s\n", num(b, (double)r->c[MC_CPU_NS] / 1e9));
                }
        }
        for (size_t c = 0; c < ARRAY_SIZE(counters); c++) {
                fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name, counters[c].help, counters[c].name);
                for (size_t i = 0; i < n; i++) {
                        if (!ts[i].fresh || !(ts[i].raw.cvalid & MC_BIT(counters[c].c)))
                                continue;
                        fputs(counters[c].name, f);
                        labels(f, &ts[i]);
                        fprintf(f, " %llu\n", (unsigned long long)ts[i].raw.c[counters[c].c]);
                }
        }

        fprintf(f, "# HELP nodeagent_node_cpus CPUs of the node.\n# TYPE nodeagent_node_cpus gauge\n"
                   "nodeagent_node_cpus %u\n",
                cpus);

        static const char *const res[MP__RES] = { "cpu", "memory", "io" };
        static const char *const type[2] = { "some", "full" };
        fputs("# HELP nodeagent_node_pressure_ratio Share of time tasks stalled on the resource (PSI).\n"
              "# TYPE nodeagent_node_pressure_ratio gauge\n",
              f);
        for (int r = 0; r < MP__RES; r++)
                for (int k = 0; k < 2; k++) {
                        if (!pr[r].valid[k])
                                continue;
                        const double w[3] = { pr[r].avg10[k], pr[r].avg60[k], pr[r].avg300[k] };
                        static const char *const wn[3] = { "10s", "60s", "300s" };
                        for (int i = 0; i < 3; i++)
                                fprintf(f,
                                        "nodeagent_node_pressure_ratio{resource=\"%s\",type=\"%s\",window=\"%s\"} "
                                        "%s\n",
                                        res[r], type[k], wn[i], num(b, w[i] / 100.0));
                }
        fputs("# HELP nodeagent_node_pressure_stalled_seconds_total Time tasks stalled on the resource (PSI).\n"
              "# TYPE nodeagent_node_pressure_stalled_seconds_total counter\n",
              f);
        for (int r = 0; r < MP__RES; r++)
                for (int k = 0; k < 2; k++)
                        if (pr[r].valid[k])
                                fprintf(f,
                                        "nodeagent_node_pressure_stalled_seconds_total{resource=\"%s\",type=\"%s\"} "
                                        "%s\n",
                                        res[r], type[k], num(b, (double)pr[r].total_us[k] / 1e6));

        fprintf(f,
                "# HELP nodeagent_metrics_targets Targets measured, the node included.\n"
                "# TYPE nodeagent_metrics_targets gauge\nnodeagent_metrics_targets %u\n"
                "# HELP nodeagent_metrics_unresolved_targets Servers whose cgroup was not found at the last tick.\n"
                "# TYPE nodeagent_metrics_unresolved_targets gauge\nnodeagent_metrics_unresolved_targets %u\n"
                "# HELP nodeagent_metrics_ticks_total Collection ticks.\n"
                "# TYPE nodeagent_metrics_ticks_total counter\nnodeagent_metrics_ticks_total %llu\n"
                "# HELP nodeagent_metrics_skipped_values_total Values that could not be read.\n"
                "# TYPE nodeagent_metrics_skipped_values_total counter\nnodeagent_metrics_skipped_values_total %llu\n"
                "# HELP nodeagent_metrics_rates_skipped_total Rates not given because a source went back or jumped impossibly.\n"
                "# TYPE nodeagent_metrics_rates_skipped_total counter\nnodeagent_metrics_rates_skipped_total %llu\n"
                "# HELP nodeagent_metrics_last_tick_duration_seconds Duration of the last collection tick.\n"
                "# TYPE nodeagent_metrics_last_tick_duration_seconds gauge\n"
                "nodeagent_metrics_last_tick_duration_seconds %.6f\n",
                st->targets, st->unresolved, (unsigned long long)st->ticks, (unsigned long long)st->values_skipped,
                (unsigned long long)st->counter_resets, (double)st->last_tick_us / 1e6);
}

int metrics_prometheus_render(struct metrics *m, FILE *out, struct na_error *err)
{
        struct mpressure pr[MP__RES];
        struct metrics_stats st;
        unsigned cpus;

        pthread_mutex_lock(&m->data_lock);
        size_t n = m->n_targets;
        _cleanup_free_ struct prom_target *ts = calloc(n ? n : 1, sizeof(*ts));
        if (ts)
                for (size_t i = 0; i < n; i++) {
                        const struct mtarget *t = m->targets[i];
                        ts[i].kind = t->kind;
                        memcpy(ts[i].id, t->id, sizeof(ts[i].id));
                        ts[i].fresh = t->has_latest && t->latest.at_ms == m->last_tick_ms;
                        ts[i].s = t->latest;
                        ts[i].raw = t->last;
                }
        memcpy(pr, m->pressure, sizeof(pr));
        st = m->stats;
        st.targets = (unsigned)n;
        cpus = m->node_cpus;
        pthread_mutex_unlock(&m->data_lock);
        if (!ts)
                return na_error_sys(err, ENOMEM, "metrics: prometheus");

        long hz = sysconf(_SC_CLK_TCK);
        render(out, ts, n, cpus, hz > 0 ? hz : 100, pr, &st);
        if (ferror(out))
                return na_error_sys(err, EIO, "metrics: prometheus: write");
        return 0;
}
