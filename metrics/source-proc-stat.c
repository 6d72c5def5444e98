/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Node CPU from /proc/stat: busy and total jiffies of the "cpu" line, and the CPU count. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "metrics/metrics-internal.h"

static unsigned read_proc_stat(struct metrics *m, struct mtarget *t)
{
        char *data;
        if (mnode_read_big(m, MN_STAT, "stat", &data) < 0 || strncmp(data, "cpu ", 4) != 0)
                return 1;

        /* user nice system idle iowait irq softirq steal (guest time is inside user). */
        uint64_t v[8] = { 0 };
        const char *p = data + 4;
        int k = 0;
        while (k < 8 && mparse_u64(&p, &v[k]))
                k++;
        if (k < 4)
                return 1;
        uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        t->cur.c[MC_CPU_BUSY] = busy;
        t->cur.c[MC_CPU_TOTAL] = busy + v[3] + v[4];
        t->cur.cvalid |= MC_BIT(MC_CPU_BUSY) | MC_BIT(MC_CPU_TOTAL);

        unsigned cpus = 0;
        for (const char *line = strchr(p, '\n'); line; line = strchr(line, '\n')) {
                line++;
                if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
                        break;
                cpus++;
        }
        m->cpus_read = cpus;
        return 0;
}

const struct metrics_source metrics_source_proc_stat = {
        .name = "proc-stat",
        .node = true,
        .read = read_proc_stat,
};
