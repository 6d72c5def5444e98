/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A guest's block I/O bytes from its cgroup, summed over devices: io.stat rbytes and
 * wbytes (v2) or the Read and Write lines of blkio.throttle.io_service_bytes (v1,
 * the _recursive file where the kernel has it).
 */
#include <string.h>

#include "metrics/metrics-internal.h"

/* Does p start with lit? Stops at p's terminating NUL (never reads past it), no library call. */
static inline bool starts_with(const char *p, const char *lit)
{
        for (; *lit; p++, lit++)
                if (*p != *lit)
                        return false;
        return true;
}

static void sum_v2(const char *buf, uint64_t *rd, uint64_t *wr)
{
        /*
         * "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=5 dios=6" per device (more keys may
         * follow): the keys of a line until both were seen, then on to the next line.
         */
        const char *p = buf;
        while (*p) {
                unsigned seen = 0;
                /* p at the start of a line: the device, then " key=value" until the line ends */
                while (*p && *p != '\n' && seen != 3) {
                        if (*p++ != ' ')
                                continue;
                        if ((p[0] == 'r' || p[0] == 'w') && starts_with(p + 1, "bytes=")) {
                                const char *q = p + 7;
                                uint64_t v;
                                if (mparse_u64(&q, &v)) {
                                        *(p[0] == 'r' ? rd : wr) += v;
                                        seen |= p[0] == 'r' ? 1u : 2u;
                                }
                                p = q;
                        }
                }
                p = strchrnul(p, '\n');
                if (*p)
                        p++;
        }
}

static void sum_v1(const char *buf, uint64_t *rd, uint64_t *wr)
{
        for (const char *line = buf; line && *line;) {
                const char *sp = strchr(line, ' '), *eol = strchrnul(line, '\n');
                if (sp && sp < eol) {
                        const char *p = sp + 1;
                        uint64_t v;
                        if (strncmp(p, "Read ", 5) == 0 && (p += 5, mparse_u64(&p, &v)))
                                *rd += v;
                        else if (strncmp(p, "Write ", 6) == 0 && (p += 6, mparse_u64(&p, &v)))
                                *wr += v;
                }
                line = *eol ? eol + 1 : NULL;
        }
}

static unsigned read_cgroup_io(struct metrics *m, struct mtarget *t)
{
        char buf[8192];
        uint64_t rd = 0, wr = 0;
        if (!m->cg.res[CG_IO].dir)
                return 0;
        if (mcgroup_read(m, t, CG_IO, MF_IO, m->cg.io_file, buf, sizeof(buf)) < 0)
                return 2;
        if (m->cg.res[CG_IO].ver == CG_V1)
                sum_v1(buf, &rd, &wr);
        else
                sum_v2(buf, &rd, &wr);
        t->cur.c[MC_DISK_READ] = rd;
        t->cur.c[MC_DISK_WRITE] = wr;
        t->cur.cvalid |= MC_BIT(MC_DISK_READ) | MC_BIT(MC_DISK_WRITE);
        return 0;
}

const struct metrics_source metrics_source_cgroup_io = {
        .name = "cgroup-io",
        .node = false,
        .read = read_cgroup_io,
};
