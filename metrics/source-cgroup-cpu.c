/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A guest's CPU time from its cgroup: cpuacct.usage (v1, ns) or cpu.stat usage_usec (v2). */
#include "metrics/metrics-internal.h"

static unsigned read_cgroup_cpu(struct metrics *m, struct mtarget *t)
{
        /* usage_usec is cpu.stat's first line: the head of the file is enough. */
        char buf[80];
        uint64_t v;
        if (!m->cg.res[CG_CPU].dir)
                return 0;
        if (m->cg.res[CG_CPU].ver == CG_V1) {
                const char *p = buf;
                if (mcgroup_read(m, t, CG_CPU, MF_CPU, "cpuacct.usage", buf, sizeof(buf)) < 0 || !mparse_u64(&p, &v))
                        return 1;
        } else {
                if (mcgroup_read(m, t, CG_CPU, MF_CPU, "cpu.stat", buf, sizeof(buf)) < 0 ||
                    !mfind_u64(buf, "usage_usec", &v) || v > UINT64_MAX / 1000)
                        return 1;
                v *= 1000;
        }
        t->cur.c[MC_CPU_NS] = v;
        t->cur.cvalid |= MC_BIT(MC_CPU_NS);
        return 0;
}

const struct metrics_source metrics_source_cgroup_cpu = {
        .name = "cgroup-cpu",
        .node = false,
        .read = read_cgroup_cpu,
};
