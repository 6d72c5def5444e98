/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Rates from counters. A rate needs two readings of the same counter; a counter
 * that went back (guest restart, reset, wrap) or moved more than the hardware can
 * (a different object behind the same name) gives no rate for that tick and its
 * baseline restarts from the new reading. Nothing here is ever negative.
 */
#include <math.h>

#include "metrics/metrics-internal.h"

#define BYTES_PER_SEC_MAX 1e12 /* 1 TB/s: no disk or NIC of a node moves more */
#define MIB 1048576.0

static bool counter_delta(struct mtarget *t, enum mcounter c, uint64_t now_ms, uint64_t *delta, uint64_t *dt_ms,
                          unsigned *resets)
{
        struct metrics_raw *cur = &t->cur, *prev = &t->prev;
        bool ok = false;
        if (cur->restarted & MC_BIT(c))
                prev->cvalid &= ~MC_BIT(c);
        if (!(cur->cvalid & MC_BIT(c)))
                return false;
        if ((prev->cvalid & MC_BIT(c)) && now_ms > t->prev_ms[c]) {
                if (cur->c[c] >= prev->c[c]) {
                        *delta = cur->c[c] - prev->c[c];
                        *dt_ms = now_ms - t->prev_ms[c];
                        ok = true;
                } else {
                        (*resets)++;
                }
        }
        prev->c[c] = cur->c[c];
        prev->cvalid |= MC_BIT(c);
        t->prev_ms[c] = now_ms;
        return ok;
}

static void put(struct proto_metrics_sample *s, enum proto_metric f, double v)
{
        s->v[f] = v;
        s->valid |= PROTO_M_BIT(f);
}

static void bytes_rate(struct mtarget *t, enum mcounter c, enum proto_metric f, uint64_t now_ms,
                       struct proto_metrics_sample *s, unsigned *resets)
{
        uint64_t d, dt;
        if (!counter_delta(t, c, now_ms, &d, &dt, resets))
                return;
        double rate = (double)d * 1000.0 / (double)dt;
        if (rate > BYTES_PER_SEC_MAX) {
                (*resets)++;
                return;
        }
        put(s, f, rate);
}

unsigned metrics_rates(struct mtarget *t, uint64_t now_ms, unsigned node_cpus, struct proto_metrics_sample *s)
{
        unsigned resets = 0;
        uint64_t d, dt;

        *s = (struct proto_metrics_sample){ .at_ms = now_ms };

        if (t->kind == METRICS_NODE) {
                uint64_t dbusy, dtotal, dt2;
                bool b = counter_delta(t, MC_CPU_BUSY, now_ms, &dbusy, &dt, &resets);
                bool a = counter_delta(t, MC_CPU_TOTAL, now_ms, &dtotal, &dt2, &resets);
                if (a && b && dtotal > 0 && dbusy <= dtotal)
                        put(s, PROTO_M_CPU_PERCENT, 100.0 * (double)dbusy / (double)dtotal);
                else if (a && b && dbusy > dtotal)
                        resets++;
        } else if (counter_delta(t, MC_CPU_NS, now_ms, &d, &dt, &resets)) {
                unsigned host = node_cpus ? node_cpus : 1;
                unsigned cpus = t->vcpus ? t->vcpus : host;
                double dt_ns = (double)dt * 1e6;
                /* More CPU time than every CPU of the node could give: not the same cgroup. */
                if ((double)d > dt_ns * (double)(host > cpus ? host : cpus) * 1.5 + 1e8)
                        resets++;
                else
                        put(s, PROTO_M_CPU_PERCENT, fmin(100.0, 100.0 * (double)d / (dt_ns * (double)cpus)));
        }

        bytes_rate(t, MC_DISK_READ, PROTO_M_DISK_READ_BPS, now_ms, s, &resets);
        bytes_rate(t, MC_DISK_WRITE, PROTO_M_DISK_WRITE_BPS, now_ms, s, &resets);
        bytes_rate(t, MC_NET_RX, PROTO_M_NET_RX_BPS, now_ms, s, &resets);
        bytes_rate(t, MC_NET_TX, PROTO_M_NET_TX_BPS, now_ms, s, &resets);

        if (t->cur.gvalid & MG_BIT(MG_MEM_USED))
                put(s, PROTO_M_MEMORY_USED_MB, (double)t->cur.g[MG_MEM_USED] / MIB);
        if (t->cur.gvalid & MG_BIT(MG_MEM_LIMIT))
                put(s, PROTO_M_MEMORY_LIMIT_MB, (double)t->cur.g[MG_MEM_LIMIT] / MIB);
        return resets;
}
