/*
 * A guest's memory from its cgroup: used is the working set, usage minus the
 * inactive file cache the kernel reclaims first (memory.current - inactive_file on
 * v2, memory.usage_in_bytes - total_inactive_file on v1; plain usage when the stat
 * file cannot be read). The limit is the configured one, else the cgroup's
 * (memory.max / memory.limit_in_bytes) when it has one.
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
                if (mcgroup_read(m, t, CG_MEMORY, MF_MEM_STAT, "memory.stat", buf, sizeof(buf)) >= 0 &&
                    mfind_u64(buf, v1 ? "total_inactive_file" : "inactive_file", &inactive))
                        usage -= inactive < usage ? inactive : usage;
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
