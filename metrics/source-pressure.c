/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Node pressure stall information from /proc/pressure/{cpu,memory,io}, where the kernel has it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics-internal.h"

static const char *const pressure_files[MP__RES] = { "pressure/cpu", "pressure/memory", "pressure/io" };

static bool parse_avg(const char *line, const char *key, double *v)
{
        const char *p = strstr(line, key);
        if (!p)
                return false;
        char *end;
        *v = strtod(p + strlen(key), &end);
        return end != p + strlen(key);
}

static bool parse_line(const char *line, struct mpressure *pr, int which)
{
        const char *eol = strchrnul(line, '\n');
        char buf[256];
        snprintf(buf, sizeof(buf), "%.*s", (int)(eol - line), line);
        const char *tot = strstr(buf, "total=");
        uint64_t total;
        if (!parse_avg(buf, "avg10=", &pr->avg10[which]) || !parse_avg(buf, "avg60=", &pr->avg60[which]) ||
            !parse_avg(buf, "avg300=", &pr->avg300[which]) || !tot)
                return false;
        tot += 6;
        if (!mparse_u64(&tot, &total))
                return false;
        pr->total_us[which] = total;
        pr->valid[which] = true;
        return true;
}

static unsigned read_pressure(struct metrics *m, struct mtarget *t)
{
        unsigned skipped = 0;
        for (int r = 0; r < MP__RES; r++) {
                char buf[512];
                struct mpressure *pr = &m->pressure_read[r];
                memset(pr, 0, sizeof(*pr));
                ssize_t n = mnode_read(m, MN_PRESSURE0 + r, pressure_files[r], buf, sizeof(buf));
                if (n == -ENOENT || n == -EOPNOTSUPP)
                        continue; /* no PSI in this kernel (or psi=0): nothing to read */
                if (n < 0) {
                        skipped++;
                        continue;
                }
                for (const char *line = buf; line && *line;) {
                        if (strncmp(line, "some ", 5) == 0 && !parse_line(line, pr, 0))
                                skipped++;
                        else if (strncmp(line, "full ", 5) == 0 && !parse_line(line, pr, 1))
                                skipped++;
                        line = strchr(line, '\n');
                        if (line)
                                line++;
                }
        }
        return skipped;
}

const struct metrics_source metrics_source_pressure = {
        .name = "pressure",
        .node = true,
        .read = read_pressure,
};
