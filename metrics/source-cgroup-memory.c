/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A guest's memory from its cgroup: used is the working set, usage minus the
 * inactive file cache the kernel reclaims first (memory.current - inactive_file on
 * v2, memory.usage_in_bytes - total_inactive_file on v1; plain usage until the stat
 * file could be read). Usage is read at every tick; memory.stat, the costliest file
 * of all and slow to move, every MEMORY_STAT_EVERY ticks (a sixth of the targets at
 * each tick). The limit is the configured one, else the cgroup's (memory.max /
 * memory.limit_in_bytes) when it has one.
 */
#include "metrics/metrics-internal.h"

#define V1_UNLIMITED (1ULL << 60) /* v1 reports "no limit" as a page-rounded LONG_MAX */

static unsigned read_cgroup_memory(struct metrics *m, struct mtarget *t)
{
        char buf[8192];
        uint64_t usage, inactive;
        bool v1 = m->cg.res[CG_MEMORY].ver == CG_V1;
        unsigned skipped = 0;
        if (!m->cg.res[CG_MEMORY].dir)
                return 0;

        const char *p = buf;
        if (mcgroup_read(m, t, CG_MEMORY, MF_MEM_CURRENT, v1 ? "memory.usage_in_bytes" : "memory.current", buf,
                         sizeof(buf)) < 0 ||
            !mparse_u64(&p, &usage)) {
                skipped++;
        } else {
                if (!t->have_inactive || (m->tick_seq + t->stat_phase) % MEMORY_STAT_EVERY == 0) {
                        t->have_inactive = mcgroup_read(m, t, CG_MEMORY, MF_MEM_STAT, "memory.stat", buf,
                                                        sizeof(buf)) >= 0 &&
                                           mfind_u64(buf, v1 ? "total_inactive_file" : "inactive_file", &inactive);
                        t->inactive_file = t->have_inactive ? inactive : 0;
                }
                usage -= t->inactive_file < usage ? t->inactive_file : usage;
                t->cur.g[MG_MEM_USED] = usage;
                t->cur.gvalid |= MG_BIT(MG_MEM_USED);
        }

        if (t->mem_limit) {
                t->cur.g[MG_MEM_LIMIT] = t->mem_limit;
                t->cur.gvalid |= MG_BIT(MG_MEM_LIMIT);
        } else if (!(t->lost & (1u << CG_MEMORY))) {
                uint64_t limit;
                p = buf;
                ssize_t n = mcgroup_read(m, t, CG_MEMORY, MF_MEM_LIMIT, v1 ? "memory.limit_in_bytes" : "memory.max",
                                         buf, sizeof(buf));
                if (n < 0)
                        skipped++;
                else if (mparse_u64(&p, &limit) && limit < V1_UNLIMITED) {
                        t->cur.g[MG_MEM_LIMIT] = limit;
                        t->cur.gvalid |= MG_BIT(MG_MEM_LIMIT);
                }
        }
        return skipped;
}

const struct metrics_source metrics_source_cgroup_memory = {
        .name = "cgroup-memory",
        .node = false,
        .read = read_cgroup_memory,
};
