/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Who nodeagent-sftpd lets in at accept (sftp-admit.h). */
#include "sftp/sftp-admit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool number(const char **p, unsigned max, unsigned *out)
{
        const char *s = *p;
        if (*s < '0' || *s > '9')
                return false;
        unsigned long v = 0;
        while (*s >= '0' && *s <= '9') {
                v = v * 10 + (unsigned long)(*s++ - '0');
                if (v > max)
                        return false;
        }
        *out = (unsigned)v;
        *p = s;
        return true;
}

int sftp_startups_parse(const char *text, struct sftp_startups *ret)
{
        struct sftp_startups s;
        const char *p = text;
        if (!p || !number(&p, SFTP_STARTUPS_MAX, &s.start) || s.start < 1)
                return -EINVAL;
        if (!*p) {
                *ret = (struct sftp_startups){ s.start, 100, s.start };
                return 0;
        }
        if (*p++ != ':' || !number(&p, 100, &s.rate) || s.rate < 1 || *p++ != ':' ||
            !number(&p, SFTP_STARTUPS_MAX, &s.full) || *p || s.full < s.start)
                return -EINVAL;
        *ret = s;
        return 0;
}

bool sftp_admit_drop(const struct sftp_startups *s, unsigned open, unsigned roll)
{
        if (open < s->start)
                return false;
        if (open >= s->full)
                return true;
        /* full > start here: from rate % at start to 100 % at full. */
        unsigned p = s->rate + (100 - s->rate) * (open - s->start) / (s->full - s->start);
        return roll < p;
}

int sftp_admit_source(const char *peer, char *buf, size_t len)
{
        unsigned char a[16];
        int n;
        if (inet_pton(AF_INET, peer, a) == 1) {
                n = snprintf(buf, len, "%s", peer);
        } else if (inet_pton(AF_INET6, peer, a) == 1) {
                static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
                char text[INET6_ADDRSTRLEN];
                if (memcmp(a, mapped, sizeof(mapped)) == 0) {
                        inet_ntop(AF_INET, a + 12, text, sizeof(text));
                        n = snprintf(buf, len, "%s", text);
                } else {
                        memset(a + 8, 0, 8);
                        inet_ntop(AF_INET6, a, text, sizeof(text));
                        n = snprintf(buf, len, "%s/64", text);
                }
        } else {
                n = snprintf(buf, len, "%s", peer);
                return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : -EINVAL;
        }
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
