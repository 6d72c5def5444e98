/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics/metrics.c and the sources against fixture trees: exact rates from known
 * counters on cgroup v2 and v1, counter resets, missing files, a server restarting
 * under a new machine cgroup, latest samples, queries, Prometheus text, history
 * across a reopen, and readers running while the collector ticks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "fixture.h"
#include "metrics/metrics.h"

#define T0 1795262400000ULL /* ms, a multiple of 15 minutes */
#define VPS1 "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define VPS1_ESC "6f1c2a3b\\x2d4c5d\\x2d4e6f\\x2d8a9b\\x2d0c1d2e3f4a5b"
#define TAP1 "nav6f1c2a3b4c5d"
#define APP1 "11111111-2222-4333-8444-555555555555"
#define GIB (1024ULL * 1024 * 1024)
#define MIB (1024ULL * 1024)

struct fx {
        char *root;
        char cg[600], state[600];
        struct fx_node node;
        struct metrics *m;
};

static void fx_free(struct fx *f)
{
        metrics_close(f->m);
        fx_remove(f->root);
        free(f->root);
        free(f);
}

static struct fx *fx_new(const char *tag)
{
        struct fx *f = calloc(1, sizeof(*f));
        f->root = fx_mkdtemp(tag);
        snprintf(f->cg, sizeof(f->cg), "%s/cg", f->root);
        snprintf(f->state, sizeof(f->state), "%s/state", f->root);
        f->node = (struct fx_node){ .busy = 1000, .idle = 3000, .cpus = 4, .mem_total_kb = 8388608,
                                    .mem_avail_kb = 6291456, .sda_read_sectors = 1000, .sda_write_sectors = 2000,
                                    .eth_rx = 100000, .eth_tx = 200000 };
        fx_write_node(f->root, &f->node);
        return f;
}

static void fx_open(struct fx *f, bool no_fd_cache)
{
        char proc[700], sys[700];
        snprintf(proc, sizeof(proc), "%s/proc", f->root);
        snprintf(sys, sizeof(sys), "%s/sys", f->root);
        struct metrics_options o = { .state_dir = f->state, .proc_root = proc, .sys_root = sys, .cgroup_root = f->cg,
                                     .interval_sec = 10, .no_fd_cache = no_fd_cache, .no_preallocate = true };
        struct na_error err = NA_ERROR_INIT;
        if (metrics_open(&o, &f->m, &err) < 0)
                fail_msg("metrics_open: %s", err.message);
}

static void track(struct fx *f, enum metrics_kind kind, const char *id, const char *cgroup, unsigned vcpus,
                  uint64_t limit)
{
        struct na_error err = NA_ERROR_INIT;
        struct metrics_target_spec s = { .kind = kind, .id = id, .cgroup = cgroup, .vcpus = vcpus,
                                         .memory_limit_bytes = limit };
        if (metrics_track(f->m, &s, &err) < 0)
                fail_msg("track %s: %s", id, err.message);
}

static void tick(struct fx *f, uint64_t at_ms)
{
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(metrics_collect(f->m, at_ms, &err), 0);
}

static struct proto_metrics_sample latest(struct fx *f, enum metrics_kind kind, const char *id)
{
        struct proto_metrics_sample s;
        assert_int_equal(metrics_latest(f->m, kind, id, &s), 0);
        return s;
}

static void expect(const struct proto_metrics_sample *s, enum proto_metric fld, double want)
{
        if (!(s->valid & PROTO_M_BIT(fld)))
                fail_msg("%s: missing", proto_metric_names[fld]);
        if (fabs(s->v[fld] - want) > 1e-6 * (fabs(want) + 1))
                fail_msg("%s: %.9f, want %.9f", proto_metric_names[fld], s->v[fld], want);
}

static void absent(const struct proto_metrics_sample *s, enum proto_metric fld)
{
        if (s->valid & PROTO_M_BIT(fld))
                fail_msg("%s: present (%f), want absent", proto_metric_names[fld], s->v[fld]);
}

/* A v2 host: the server under machine.slice (libvirt domain id 4), the app at apps/app1. */
static void v2_tree(struct fx *f, uint64_t usec, uint64_t rb, uint64_t wb)
{
        fx_write(f->cg, "cgroup.controllers", "cpuset cpu io memory pids\n");
        fx_write(f->cg, "cpu.stat", "usage_usec 1\n");
        fx_cg2(f->cg, "machine.slice/machine-qemu\\x2d4\\x2dvps\\x2d" VPS1_ESC ".scope", usec, 600 * MIB, 88 * MIB,
               "max", rb, wb);
}

static void node_and_tap(struct fx *f, uint64_t tap_rx, uint64_t tap_tx)
{
        const char *names[] = { TAP1, "nav000000000000" };
        uint64_t rx[] = { tap_rx, 1 }, tx[] = { tap_tx, 1 };
        fx_write_node(f->root, &f->node);
        fx_write_netdev(f->root, &f->node, names, rx, tx, 2);
}

static void test_v2_rates(void **state)
{
        struct fx *f = fx_new("collect-v2");
        v2_tree(f, 1000000, 1048576, 2097152);
        fx_cg2(f->cg, "apps/app1", 0, 300 * MIB, 0, "1073741824", 0, 0);
        node_and_tap(f, 1000, 5000);
        fx_open(f, false);
        assert_string_equal(metrics_cgroup_mode(f->m), "v2");
        track(f, METRICS_VPS, VPS1, NULL, 2, 2 * GIB);
        track(f, METRICS_APP, APP1, "/apps/app1", 0, 0);

        tick(f, T0);
        assert_int_equal(metrics_node_cpus(f->m), 4);
        struct proto_metrics_sample s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_MEMORY_USED_MB, 512); /* 600 MiB - 88 MiB inactive file */
        expect(&s, PROTO_M_MEMORY_LIMIT_MB, 2048);
        absent(&s, PROTO_M_CPU_PERCENT); /* no rate from one reading */
        s = latest(f, METRICS_NODE, "node");
        expect(&s, PROTO_M_MEMORY_USED_MB, 2048);
        expect(&s, PROTO_M_MEMORY_LIMIT_MB, 8192);

        /* 10 s later */
        f->node.busy += 400;
        f->node.idle += 600;
        f->node.sda_read_sectors += 20480;  /* 10 MiB */
        f->node.sda_write_sectors += 40960; /* 20 MiB */
        f->node.eth_rx += 1250000;
        f->node.eth_tx += 250000;
        v2_tree(f, 1000000 + 10000000, 1048576 + 10485760, 2097152 + 5242880);
        fx_cg2(f->cg, "apps/app1", 20000000, 300 * MIB, 0, "1073741824", 0, 4096 * 10);
        node_and_tap(f, 1000 + 10000, 5000 + 20000);
        tick(f, T0 + 10000);

        s = latest(f, METRICS_NODE, "node");
        assert_int_equal(s.at_ms, T0 + 10000);
        expect(&s, PROTO_M_CPU_PERCENT, 40);
        expect(&s, PROTO_M_DISK_READ_BPS, 1048576);
        expect(&s, PROTO_M_DISK_WRITE_BPS, 2097152);
        expect(&s, PROTO_M_NET_RX_BPS, 125000); /* eth0 only: it has a device; lo and taps do not count */
        expect(&s, PROTO_M_NET_TX_BPS, 25000);

        s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 50); /* 10 s of CPU in 10 s on 2 vCPUs */
        expect(&s, PROTO_M_DISK_READ_BPS, 1048576);
        expect(&s, PROTO_M_DISK_WRITE_BPS, 524288);
        expect(&s, PROTO_M_NET_RX_BPS, 2000); /* the tap sent 20000 bytes to the guest */
        expect(&s, PROTO_M_NET_TX_BPS, 1000);
        expect(&s, PROTO_M_MEMORY_USED_MB, 512);

        s = latest(f, METRICS_APP, APP1);
        expect(&s, PROTO_M_CPU_PERCENT, 50); /* 20 s of CPU in 10 s of 4 CPUs */
        expect(&s, PROTO_M_MEMORY_USED_MB, 300);
        expect(&s, PROTO_M_MEMORY_LIMIT_MB, 1024); /* from memory.max */
        expect(&s, PROTO_M_DISK_WRITE_BPS, 4096);
        absent(&s, PROTO_M_NET_RX_BPS); /* no interface given */

        struct metrics_stats st;
        metrics_stats(f->m, &st);
        assert_int_equal(st.ticks, 2);
        assert_int_equal(st.targets, 3);
        assert_int_equal(st.unresolved, 0);
        assert_int_equal(st.lookups, 1); /* found at the first tick, kept since */
        fx_free(f);
}

static void v1_tree(struct fx *f, uint64_t ns, uint64_t rb, uint64_t wb, uint64_t limit)
{
        fx_cg1(f->cg, "", 1, 1, 0, 9223372036854771712ULL, 0, 0);
        fx_cg1(f->cg, "machine/qemu-4-vps-" VPS1 ".libvirt-qemu", ns, 700 * MIB, 188 * MIB, limit, rb, wb);
}

static void test_v1_rates(void **state)
{
        struct fx *f = fx_new("collect-v1");
        v1_tree(f, 5000000000ULL, 0, 0, 9223372036854771712ULL);
        fx_write(f->cg, "unified/cgroup.controllers", "hugetlb\n");
        node_and_tap(f, 0, 0);
        fx_open(f, false);
        assert_string_equal(metrics_cgroup_mode(f->m), "hybrid");
        track(f, METRICS_VPS, VPS1, NULL, 1, 0);
        tick(f, T0);
        struct proto_metrics_sample s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_MEMORY_USED_MB, 512);
        absent(&s, PROTO_M_MEMORY_LIMIT_MB); /* v1 "unlimited" */

        v1_tree(f, 5000000000ULL + 2500000000ULL, 3 * MIB, 4 * MIB, 1024 * MIB);
        node_and_tap(f, 50000, 0);
        tick(f, T0 + 5000);
        s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 50); /* 2.5 s in 5 s on 1 vCPU */
        expect(&s, PROTO_M_DISK_READ_BPS, 3.0 * MIB / 5);
        expect(&s, PROTO_M_DISK_WRITE_BPS, 4.0 * MIB / 5);
        expect(&s, PROTO_M_NET_TX_BPS, 10000);
        expect(&s, PROTO_M_NET_RX_BPS, 0);
        expect(&s, PROTO_M_MEMORY_LIMIT_MB, 1024);
        fx_free(f);
}

/* An app whose cgroup exists in the cpuacct hierarchy only: CPU still has rates, memory and disk skip. */
static void test_partial_hierarchies(void **state)
{
        struct fx *f = fx_new("collect-partial");
        fx_cg1(f->cg, "", 1, 1, 0, 1, 0, 0);
        fx_write(f->cg, "cpuacct/crun/app1/cpuacct.usage", "1000000000\n");
        node_and_tap(f, 0, 0);
        fx_open(f, false);
        assert_string_equal(metrics_cgroup_mode(f->m), "v1");
        track(f, METRICS_APP, APP1, "crun/app1", 1, 0);
        tick(f, T0);
        fx_write(f->cg, "cpuacct/crun/app1/cpuacct.usage", "3000000000\n");
        tick(f, T0 + 10000);
        struct proto_metrics_sample s = latest(f, METRICS_APP, APP1);
        expect(&s, PROTO_M_CPU_PERCENT, 20);
        absent(&s, PROTO_M_MEMORY_USED_MB);
        absent(&s, PROTO_M_DISK_READ_BPS);
        struct metrics_stats st;
        metrics_stats(f->m, &st);
        assert_int_equal(st.values_skipped, 2 * 3); /* memory usage, disk read and write at each tick */
        fx_free(f);
}

static void test_counter_reset(void **state)
{
        struct fx *f = fx_new("collect-reset");
        v2_tree(f, 50000000, 10 * MIB, 10 * MIB);
        node_and_tap(f, 1000000, 1000000);
        fx_open(f, false);
        track(f, METRICS_VPS, VPS1, NULL, 1, 0);
        tick(f, T0);
        v2_tree(f, 55000000, 20 * MIB, 10 * MIB);
        node_and_tap(f, 1100000, 1000000);
        tick(f, T0 + 10000);
        struct proto_metrics_sample s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 50);
        expect(&s, PROTO_M_NET_TX_BPS, 10000);

        /* the counters start over (the guest restarted in place, the tap was recreated) */
        v2_tree(f, 1000000, 1 * MIB, 0);
        node_and_tap(f, 500, 1000000);
        tick(f, T0 + 20000);
        s = latest(f, METRICS_VPS, VPS1);
        absent(&s, PROTO_M_CPU_PERCENT);
        absent(&s, PROTO_M_DISK_READ_BPS);
        absent(&s, PROTO_M_DISK_WRITE_BPS);
        absent(&s, PROTO_M_NET_TX_BPS);
        expect(&s, PROTO_M_NET_RX_BPS, 0); /* tx of the tap stayed 0 -> 0: not a reset */
        struct metrics_stats st;
        metrics_stats(f->m, &st);
        assert_int_equal(st.counter_resets, 4);

        /* rates from the new baseline */
        v2_tree(f, 3000000, 1 * MIB + 5 * MIB, 0);
        node_and_tap(f, 10500, 1000000);
        tick(f, T0 + 30000);
        s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 20);
        expect(&s, PROTO_M_DISK_READ_BPS, 0.5 * MIB);
        expect(&s, PROTO_M_NET_TX_BPS, 1000);

        /* an impossible jump (more CPU than the node has) is not a rate */
        v2_tree(f, 3000000 + 3600ULL * 1000000 * 64, 6 * MIB, 0);
        tick(f, T0 + 40000);
        s = latest(f, METRICS_VPS, VPS1);
        absent(&s, PROTO_M_CPU_PERCENT);
        v2_tree(f, 3000000 + 3600ULL * 1000000 * 64 + 1000000, 6 * MIB, 0);
        tick(f, T0 + 50000);
        s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 10);

        /* the clock going back gives no rate, and nothing negative */
        v2_tree(f, 3000000 + 3600ULL * 1000000 * 64 + 2000000, 6 * MIB, 0);
        tick(f, T0 + 45000);
        s = latest(f, METRICS_VPS, VPS1);
        absent(&s, PROTO_M_CPU_PERCENT);
        fx_free(f);
}

static void test_missing_files(void **state)
{
        struct fx *f = fx_new("collect-missing");
        const char *scope = "machine.slice/machine-qemu\\x2d4\\x2dvps\\x2d" VPS1_ESC ".scope";
        char p[600];
        v2_tree(f, 1000000, 0, 0);
        node_and_tap(f, 0, 0);
        fx_open(f, true);
        track(f, METRICS_VPS, VPS1, NULL, 1, 0);
        tick(f, T0);

        /* io.stat and memory.stat unreadable this tick: those values skip, the rest is there */
        snprintf(p, sizeof(p), "%s/%s/io.stat", f->cg, scope);
        unlink(p);
        snprintf(p, sizeof(p), "%s/%s/memory.stat", f->cg, scope);
        unlink(p);
        snprintf(p, sizeof(p), "%s/cpu.stat", scope);
        fx_write(f->cg, p, "usage_usec 6000000\n");
        snprintf(p, sizeof(p), "%s/memory.current", scope);
        fx_write(f->cg, p, "%llu\n", 600 * MIB);
        tick(f, T0 + 10000);
        struct proto_metrics_sample s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 50);
        expect(&s, PROTO_M_MEMORY_USED_MB, 512); /* inactive file cache as last read (memory.stat: every 6 ticks) */
        absent(&s, PROTO_M_DISK_READ_BPS);
        absent(&s, PROTO_M_DISK_WRITE_BPS);
        struct metrics_stats st;
        metrics_stats(f->m, &st);
        assert_true(st.values_skipped >= 2);
        for (int i = 2; i < 6; i++)
                tick(f, T0 + (uint64_t)i * 10000);
        s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_MEMORY_USED_MB, 600); /* memory.stat due and gone: usage as it is */

        /* the node's files too: a missing /proc/diskstats costs the disk values only */
        snprintf(p, sizeof(p), "%s/proc/diskstats", f->root);
        unlink(p);
        f->node.busy += 100;
        f->node.idle += 100;
        fx_write(f->root, "proc/stat", "cpu  %llu 0 0 %llu 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0\n",
                 (unsigned long long)f->node.busy, (unsigned long long)f->node.idle);
        tick(f, T0 + 60000);
        s = latest(f, METRICS_NODE, "node");
        expect(&s, PROTO_M_CPU_PERCENT, 50);
        absent(&s, PROTO_M_DISK_READ_BPS);
        assert_int_equal(metrics_node_cpus(f->m), 1);
        fx_free(f);
}

/* The server stops (its scope goes), starts again under a new domain id with counters from zero. */
static void test_restart_new_scope(void **state)
{
        struct fx *f = fx_new("collect-restart");
        v2_tree(f, 900000000, 0, 0);
        node_and_tap(f, 0, 0);
        fx_open(f, true);
        track(f, METRICS_VPS, VPS1, NULL, 1, 0);
        tick(f, T0);
        tick(f, T0 + 10000);
        struct proto_metrics_sample s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 0);

        fx_rmdir_tree(f->cg, "machine.slice/machine-qemu\\x2d4\\x2dvps\\x2d" VPS1_ESC ".scope");
        fx_write_netdev(f->root, &f->node, NULL, NULL, NULL, 0); /* its tap goes with it */
        tick(f, T0 + 20000);
        struct metrics_stats st;
        metrics_stats(f->m, &st);
        json_t *arr = metrics_latest_json(f->m);
        assert_int_equal(json_array_size(arr), 1); /* only the node: the server was not measured */
        json_decref(arr);

        /* stopped: looked up at every tick, not found */
        tick(f, T0 + 30000);
        metrics_stats(f->m, &st);
        assert_int_equal(st.unresolved, 1);

        fx_cg2(f->cg, "machine.slice/machine-qemu\\x2d5\\x2dvps\\x2d" VPS1_ESC ".scope", 2000000, 100 * MIB, 0, "max",
               0, 0);
        tick(f, T0 + 40000);
        metrics_stats(f->m, &st);
        assert_int_equal(st.unresolved, 0);
        s = latest(f, METRICS_VPS, VPS1);
        absent(&s, PROTO_M_CPU_PERCENT); /* new baseline */
        expect(&s, PROTO_M_MEMORY_USED_MB, 100);
        fx_cg2(f->cg, "machine.slice/machine-qemu\\x2d5\\x2dvps\\x2d" VPS1_ESC ".scope", 7000000, 100 * MIB, 0, "max",
               0, 0);
        tick(f, T0 + 50000);
        s = latest(f, METRICS_VPS, VPS1);
        expect(&s, PROTO_M_CPU_PERCENT, 50);
        fx_free(f);
}

static char *render(struct metrics *m)
{
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(metrics_prometheus_render(m, out, &err), 0);
        fclose(out);
        return text;
}

static void test_reports_and_prometheus(void **state)
{
        struct fx *f = fx_new("collect-prom");
        v2_tree(f, 1000000, 0, 0);
        node_and_tap(f, 0, 0);
        fx_open(f, false);
        track(f, METRICS_VPS, VPS1, NULL, 2, 2 * GIB);
        tick(f, T0);
        v2_tree(f, 11000000, 0, 0);
        f->node.busy += 250;
        f->node.idle += 750;
        node_and_tap(f, 0, 0);
        tick(f, T0 + 10000);

        _cleanup_json_ json_t *arr = metrics_latest_json(f->m);
        assert_int_equal(json_array_size(arr), 2);
        json_t *node = json_array_get(arr, 0);
        assert_string_equal(json_string_value(json_object_get(node, "targetId")), "node");
        assert_true(json_real_value(json_object_get(node, "cpuPercent")) == 25.0);
        json_t *vps = json_array_get(arr, 1);
        assert_string_equal(json_string_value(json_object_get(vps, "targetId")), VPS1);
        assert_string_equal(json_string_value(json_object_get(vps, "at")), "2026-11-21T12:00:10.000Z");
        assert_true(json_real_value(json_object_get(vps, "cpuPercent")) == 50.0);
        assert_int_equal(json_integer_value(json_object_get(vps, "memoryLimitMB")), 2048);

        char *text = render(f->m);
        /* Base units (issue 24): CPU as a ratio 0-1, no rates beside the counters. */
        assert_non_null(strstr(text, "# TYPE nodeagent_cpu_usage_ratio gauge\n"));
        assert_non_null(strstr(text, "nodeagent_cpu_usage_ratio{kind=\"node\",id=\"node\"} 0.25\n"));
        assert_non_null(strstr(text, "nodeagent_cpu_usage_ratio{kind=\"vps\",id=\"" VPS1 "\"} 0.5\n"));
        assert_null(strstr(text, "percent"));
        assert_null(strstr(text, "per_second"));
        assert_non_null(strstr(text, "nodeagent_cpu_seconds_total{kind=\"vps\",id=\"" VPS1 "\"} 11\n"));
        assert_non_null(strstr(text, "nodeagent_memory_limit_bytes{kind=\"vps\",id=\"" VPS1 "\"} 2147483648\n"));
        assert_non_null(strstr(text, "nodeagent_node_cpus 4\n"));
        assert_non_null(
                strstr(text, "nodeagent_node_pressure_ratio{resource=\"cpu\",type=\"some\",window=\"10s\"} 0.015\n"));
        assert_non_null(strstr(text, "nodeagent_node_pressure_stalled_seconds_total{resource=\"cpu\",type=\"some\"} "
                                     "0.123456\n"));
        assert_null(strstr(text, "resource=\"io\"")); /* no /proc/pressure/io in the fixture */
        assert_non_null(strstr(text, "nodeagent_metrics_targets 2\n"));
        assert_non_null(strstr(text, "nodeagent_metrics_ticks_total 2\n"));
        assert_non_null(strstr(text, "# TYPE nodeagent_metrics_unresolved_targets gauge\n"));
        assert_non_null(strstr(text, "# TYPE nodeagent_metrics_last_tick_duration_seconds gauge\n"));
        /* every sample line is "name{labels} value" or "name value" */
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
                if (line[0] != '#')
                        assert_non_null(strchr(line, ' '));
        free(text);
        fx_free(f);
}

static void test_query_and_reopen(void **state)
{
        struct fx *f = fx_new("collect-query");
        struct na_error err = NA_ERROR_INIT;
        node_and_tap(f, 0, 0);
        v2_tree(f, 0, 0, 0);
        fx_open(f, false);
        track(f, METRICS_VPS, VPS1, NULL, 1, GIB);
        /* 3 minutes of ticks: the server uses 1 s of CPU every 10 s (10 %), then 5 s (50 %) from minute 2 */
        uint64_t usec = 0;
        for (int i = 0; i <= 18; i++) {
                v2_tree(f, usec, 0, 0);
                tick(f, T0 + (uint64_t)i * 10000);
                usec += i < 11 ? 1000000 : 5000000;
        }

        struct proto_metrics_query q;
        _cleanup_json_ json_t *params = json_pack("{s:s, s:s}", "from", "2026-11-21T12:00:00Z", "to",
                                                  "2026-11-21T12:03:00Z");
        assert_int_equal(proto_metrics_query_decode(params, (int64_t)T0 + 180000, &q, &err), 0);
        assert_int_equal(q.step_sec, 10);
        json_t *res = NULL;
        assert_int_equal(metrics_query(f->m, METRICS_VPS, VPS1, &q, false, &res, &err), 0);
        json_t *now = json_object_get(res, "now");
        assert_true(json_real_value(json_object_get(now, "cpuPercent")) == 50.0);
        json_t *pts = json_object_get(json_object_get(res, "series"), "points");
        assert_int_equal(json_array_size(pts), 19);
        assert_null(json_object_get(json_array_get(pts, 0), "cpuPercent")); /* first tick: no rate yet */
        assert_true(json_real_value(json_object_get(json_array_get(pts, 1), "cpuPercent")) == 10.0);
        json_decref(res);

        /* step 60 from the minute tier: averages and maxima per minute */
        json_object_set_new(params, "step", json_integer(60));
        json_object_set_new(params, "from", json_string("2026-11-21T10:00:00Z"));
        assert_int_equal(proto_metrics_query_decode(params, (int64_t)T0 + 180000, &q, &err), 0);
        assert_int_equal(q.tier, 1);
        assert_int_equal(metrics_query(f->m, METRICS_VPS, VPS1, &q, false, &res, &err), 0);
        pts = json_object_get(json_object_get(res, "series"), "points");
        assert_int_equal(json_array_size(pts), 4); /* minutes 0, 1, 2 and the single tick of minute 3 */
        json_t *m1 = json_array_get(pts, 1);
        assert_string_equal(json_string_value(json_object_get(m1, "at")), "2026-11-21T12:01:00.000Z");
        assert_true(json_real_value(json_object_get(m1, "cpuPercent")) == 10.0);
        json_t *m2 = json_array_get(pts, 2);
        assert_true(json_real_value(json_object_get(m2, "cpuPercent")) == 50.0);
        assert_true(json_real_value(json_object_get(m2, "cpuPercentMax")) == 50.0);
        assert_int_equal(json_integer_value(json_object_get(m2, "memoryLimitMB")), 1024);
        json_decref(res);

        /* unknown targets */
        assert_int_equal(metrics_query(f->m, METRICS_VPS, "00000000-0000-4000-8000-000000000000", &q, false, &res,
                                       &err),
                         -ENOENT);
        assert_string_equal(err.code, "VPS_NOT_FOUND");
        assert_int_equal(err.http_status, 404);
        na_error_clear(&err);
        assert_int_equal(metrics_query(f->m, METRICS_APP, APP1, &q, false, &res, &err), -ENOENT);
        assert_string_equal(err.code, "APP_NOT_FOUND");
        na_error_clear(&err);
        /* known elsewhere, never measured: an empty answer */
        assert_int_equal(metrics_query(f->m, METRICS_VPS, "00000000-0000-4000-8000-000000000000", &q, true, &res,
                                       &err),
                         0);
        assert_int_equal(json_array_size(json_object_get(json_object_get(res, "series"), "points")), 0);
        assert_null(json_object_get(json_object_get(res, "now"), "cpuPercent"));
        json_decref(res);

        /* the agent restarts: history is still there */
        metrics_close(f->m);
        f->m = NULL;
        fx_open(f, false);
        assert_false(metrics_tracked(f->m, METRICS_VPS, VPS1));
        assert_int_equal(metrics_query(f->m, METRICS_VPS, VPS1, &q, true, &res, &err), 0); /* from the file */
        assert_int_equal(json_array_size(json_object_get(json_object_get(res, "series"), "points")), 4);
        json_decref(res);
        track(f, METRICS_VPS, VPS1, NULL, 1, GIB);
        assert_true(metrics_tracked(f->m, METRICS_VPS, VPS1));
        q.now_ms = (int64_t)T0 + 180000;
        assert_int_equal(metrics_query(f->m, METRICS_VPS, VPS1, &q, false, &res, &err), 0);
        pts = json_object_get(json_object_get(res, "series"), "points");
        assert_int_equal(json_array_size(pts), 4);
        assert_true(json_real_value(json_object_get(json_array_get(pts, 2), "cpuPercent")) == 50.0);
        /* no sample since the restart: now has no values */
        assert_null(json_object_get(json_object_get(res, "now"), "cpuPercent"));
        json_decref(res);

        /* untrack and drop: the file goes */
        char path[800];
        snprintf(path, sizeof(path), "%s/metrics/vps-%s.hist", f->state, VPS1);
        assert_int_equal(access(path, F_OK), 0);
        assert_int_equal(metrics_untrack(f->m, METRICS_VPS, VPS1, true, &err), 0);
        assert_int_equal(access(path, F_OK), -1);
        assert_int_equal(metrics_untrack(f->m, METRICS_VPS, VPS1, true, &err), -ENOENT);
        na_error_clear(&err);
        fx_free(f);
}

static void test_track_checks(void **state)
{
        struct fx *f = fx_new("collect-track");
        struct na_error err = NA_ERROR_INIT;
        v2_tree(f, 0, 0, 0);
        node_and_tap(f, 0, 0);
        fx_open(f, false);
        struct metrics_target_spec s = { .kind = METRICS_VPS, .id = "not-a-uuid" };
        assert_true(metrics_track(f->m, &s, &err) < 0);
        na_error_clear(&err);
        s = (struct metrics_target_spec){ .kind = METRICS_APP, .id = APP1 }; /* an app needs a cgroup */
        assert_true(metrics_track(f->m, &s, &err) < 0);
        na_error_clear(&err);
        s = (struct metrics_target_spec){ .kind = METRICS_APP, .id = APP1, .cgroup = "a/../../etc" };
        assert_true(metrics_track(f->m, &s, &err) < 0);
        na_error_clear(&err);
        s = (struct metrics_target_spec){ .kind = METRICS_VPS, .id = VPS1, .ifname = "../x" };
        assert_true(metrics_track(f->m, &s, &err) < 0);
        na_error_clear(&err);
        s = (struct metrics_target_spec){ .kind = METRICS_NODE, .id = "node" };
        assert_true(metrics_track(f->m, &s, &err) < 0);
        na_error_clear(&err);
        assert_true(metrics_untrack(f->m, METRICS_NODE, "node", false, &err) < 0);
        na_error_clear(&err);

        /* upper case ids are the same target; tracking again updates */
        track(f, METRICS_VPS, "6F1C2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B", NULL, 1, 0);
        track(f, METRICS_VPS, VPS1, NULL, 2, GIB);
        struct metrics_stats st;
        metrics_stats(f->m, &st);
        assert_int_equal(st.targets, 2);
        assert_true(metrics_tracked(f->m, METRICS_VPS, "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"));
        tick(f, T0);
        struct proto_metrics_sample smp = latest(f, METRICS_VPS, VPS1);
        expect(&smp, PROTO_M_MEMORY_LIMIT_MB, 1024);
        fx_free(f);
}

static void touch_old(const char *path, int64_t days)
{
        fx_write("/", path + 1, "x");
        struct timespec ts[2] = { { .tv_sec = time(NULL) - days * 86400 }, { .tv_sec = time(NULL) - days * 86400 } };
        assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_prune_and_interval(void **state)
{
        struct fx *f = fx_new("collect-prune");
        struct na_error err = NA_ERROR_INIT;
        v2_tree(f, 0, 0, 0);
        node_and_tap(f, 0, 0);
        fx_open(f, false);
        track(f, METRICS_VPS, VPS1, NULL, 1, 0);
        char old_vps[800], recent_app[800], other[800], tracked[800];
        snprintf(old_vps, sizeof(old_vps), "%s/metrics/vps-22222222-2222-4222-8222-222222222222.hist", f->state);
        snprintf(recent_app, sizeof(recent_app), "%s/metrics/app-" APP1 ".hist", f->state);
        snprintf(other, sizeof(other), "%s/metrics/notes.txt", f->state);
        snprintf(tracked, sizeof(tracked), "%s/metrics/vps-" VPS1 ".hist", f->state);
        touch_old(old_vps, 40);
        touch_old(recent_app, 3);
        touch_old(other, 400);
        struct timespec ts[2] = { { .tv_sec = time(NULL) - 100 * 86400 }, { .tv_sec = time(NULL) - 100 * 86400 } };
        assert_int_equal(utimensat(AT_FDCWD, tracked, ts, 0), 0);
        assert_int_equal(metrics_prune(f->m, (uint64_t)time(NULL) * 1000, &err), 1);
        assert_int_equal(access(old_vps, F_OK), -1);
        assert_int_equal(access(recent_app, F_OK), 0);
        assert_int_equal(access(other, F_OK), 0);
        assert_int_equal(access(tracked, F_OK), 0);

        /* "now" holds values for 3 intervals */
        tick(f, T0);
        struct proto_metrics_query q = { .now_ms = (int64_t)T0 + 25000, .from_ms = (int64_t)T0, .to_ms = (int64_t)T0,
                                         .step_sec = 10, .tier = 0 };
        json_t *res = NULL;
        assert_int_equal(metrics_query(f->m, METRICS_VPS, VPS1, &q, false, &res, &err), 0);
        assert_non_null(json_object_get(json_object_get(res, "now"), "memoryUsedMB"));
        json_decref(res);
        metrics_set_interval(f->m, 5);
        assert_int_equal(metrics_query(f->m, METRICS_VPS, VPS1, &q, false, &res, &err), 0);
        assert_null(json_object_get(json_object_get(res, "now"), "memoryUsedMB"));
        json_decref(res);
        fx_free(f);
}

/* Readers on other threads while the collector ticks and targets come and go (run it under ASan). */
struct race {
        struct metrics *m;
        volatile bool stop;
        unsigned loops;
};

static void *reader(void *arg)
{
        struct race *r = arg;
        struct proto_metrics_query q = { .now_ms = (int64_t)T0 + 600000, .from_ms = (int64_t)T0,
                                         .to_ms = (int64_t)T0 + 600000, .step_sec = 10, .tier = 0 };
        while (!r->stop) {
                struct na_error err = NA_ERROR_INIT;
                json_t *j = metrics_latest_json(r->m);
                json_decref(j);
                json_t *res = NULL;
                if (metrics_query(r->m, METRICS_VPS, VPS1, &q, true, &res, &err) == 0)
                        json_decref(res);
                na_error_clear(&err);
                char *text = render(r->m);
                free(text);
                r->loops++;
        }
        return NULL;
}

static void test_threads(void **state)
{
        struct fx *f = fx_new("collect-threads");
        v2_tree(f, 0, 0, 0);
        node_and_tap(f, 0, 0);
        fx_open(f, false);
        struct race r = { .m = f->m };
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
                assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
        for (int i = 0; i < 60; i++) {
                if (i % 3 == 0)
                        track(f, METRICS_VPS, VPS1, NULL, 1, 0);
                tick(f, T0 + (uint64_t)i * 10000);
                if (i % 3 == 2) {
                        struct na_error err = NA_ERROR_INIT;
                        assert_int_equal(metrics_untrack(f->m, METRICS_VPS, VPS1, i % 2, &err), 0);
                }
        }
        r.stop = true;
        for (int i = 0; i < 2; i++)
                pthread_join(th[i], NULL);
        assert_true(r.loops > 0);
        fx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_v2_rates),           cmocka_unit_test(test_v1_rates),
                cmocka_unit_test(test_partial_hierarchies), cmocka_unit_test(test_counter_reset),
                cmocka_unit_test(test_missing_files),
                cmocka_unit_test(test_restart_new_scope),  cmocka_unit_test(test_reports_and_prometheus),
                cmocka_unit_test(test_query_and_reopen),   cmocka_unit_test(test_track_checks),
                cmocka_unit_test(test_prune_and_interval), cmocka_unit_test(test_threads),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
