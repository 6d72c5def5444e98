/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Node disk bytes from /proc/diskstats: sectors read and written (512 bytes each) of
 * whole physical disks only (sd*, vd*, hd*, xvd*, nvme<N>n<M>, mmcblk<N>), never
 * partitions or stacked devices (dm-*, md*, loop*), so no byte counts twice.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "metrics/metrics-internal.h"

static bool all_of(const char *s, size_t n, bool (*pred)(char))
{
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!pred(s[i]))
                        return false;
        return true;
}
static bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool whole_disk(const char *name, size_t len)
{
        static const char *const letter_disks[] = { "sd", "vd", "hd", "xvd", NULL };
        for (size_t i = 0; letter_disks[i]; i++) {
                size_t pl = strlen(letter_disks[i]);
                if (len > pl && strncmp(name, letter_disks[i], pl) == 0)
                        return all_of(name + pl, len - pl, is_lower);
        }
        if (len > 4 && strncmp(name, "nvme", 4) == 0) {
                const char *n = memchr(name + 4, 'n', len - 4);
                return n && all_of(name + 4, (size_t)(n - name) - 4, is_digit) &&
                       all_of(n + 1, len - (size_t)(n + 1 - name), is_digit);
        }
        if (len > 6 && strncmp(name, "mmcblk", 6) == 0)
                return all_of(name + 6, len - 6, is_digit);
        return false;
}

static unsigned read_diskstats(struct metrics *m, struct mtarget *t)
{
        char *data;
        if (mnode_read_big(m, MN_DISKSTATS, "diskstats", &data) < 0)
                return 2;

        uint64_t rd = 0, wr = 0;
        for (const char *line = data; line && *line;) {
                const char *p = line;
                uint64_t major, minor, f[7];
                if (mparse_u64(&p, &major) && mparse_u64(&p, &minor)) {
                        while (*p == ' ' || *p == '\t')
                                p++;
                        const char *name = p;
                        while (*p && *p != ' ' && *p != '\t' && *p != '\n')
                                p++;
                        size_t nlen = (size_t)(p - name);
                        int k = 0;
                        /* the name first: most lines are partitions, loop and stacked devices */
                        if (whole_disk(name, nlen))
                                while (k < 7 && mparse_u64(&p, &f[k]))
                                        k++;
                        /* f: reads, reads merged, sectors read, ms, writes, writes merged, sectors written */
                        if (k == 7) {
                                rd += f[2] * 512;
                                wr += f[6] * 512;
                        }
                }
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        t->cur.c[MC_DISK_READ] = rd;
        t->cur.c[MC_DISK_WRITE] = wr;
        t->cur.cvalid |= MC_BIT(MC_DISK_READ) | MC_BIT(MC_DISK_WRITE);
        return 0;
}

const struct metrics_source metrics_source_diskstats = {
        .name = "diskstats",
        .node = true,
        .read = read_diskstats,
};
