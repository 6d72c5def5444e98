/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Node memory from /proc/meminfo: used = MemTotal - MemAvailable, limit = MemTotal. */
#include <limits.h>
#include <stdio.h>

#include "metrics/metrics-internal.h"

static unsigned read_meminfo(struct metrics *m, struct mtarget *t)
{
        char buf[8192];
        uint64_t total, avail;
        if (mnode_read(m, MN_MEMINFO, "meminfo", buf, sizeof(buf)) < 0 ||
            !mfind_u64(buf, "MemTotal:", &total))
                return 2;
        t->cur.g[MG_MEM_LIMIT] = total * 1024;
        t->cur.gvalid |= MG_BIT(MG_MEM_LIMIT);
        if (!mfind_u64(buf, "MemAvailable:", &avail) || avail > total)
                return 1;
        t->cur.g[MG_MEM_USED] = (total - avail) * 1024;
        t->cur.gvalid |= MG_BIT(MG_MEM_USED);
        return 0;
}

const struct metrics_source metrics_source_meminfo = {
        .name = "meminfo",
        .node = true,
        .read = read_meminfo,
};
