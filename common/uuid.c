/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/uuid.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

bool na_uuid_valid(const char *s)
{
        if (!s || strlen(s) != NA_UUID_STRLEN)
                return false;
        for (int i = 0; i < NA_UUID_STRLEN; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        if (s[i] != '-')
                                return false;
                } else if (!isxdigit((unsigned char)s[i]))
                        return false;
        }
        return true;
}

int na_uuid_random(char *buf, size_t len)
{
        unsigned char b[16];
        if (len < NA_UUID_STRLEN + 1)
                return -ENOBUFS;
        if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
                return -errno;
        b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
        b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
        snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        return 0;
}
