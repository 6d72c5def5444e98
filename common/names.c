/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/names.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>

#include "common/uuid.h"

static int guest_ifname(const char *prefix, const char *id, char buf[NA_IFNAME_LEN])
{
        if (!na_uuid_valid(id))
                return -EINVAL;
        size_t n = (size_t)snprintf(buf, NA_IFNAME_LEN, "%s", prefix);
        for (const char *p = id; *p && n < NA_IFNAME_LEN - 1; p++)
                if (*p != '-')
                        buf[n++] = (char)tolower((unsigned char)*p);
        buf[n] = '\0';
        return 0;
}

int na_vps_ifname(const char *vps_id, char buf[NA_IFNAME_LEN])
{
        return guest_ifname("nav", vps_id, buf);
}

int na_app_ifname(const char *app_id, char buf[NA_IFNAME_LEN])
{
        return guest_ifname("nap", app_id, buf);
}

int na_vps_domain_name(const char *vps_id, char *buf, size_t len)
{
        if (!na_uuid_valid(vps_id) || len < 41)
                return -EINVAL;
        int n = snprintf(buf, len, "vps-%s", vps_id);
        for (int i = 4; i < n; i++)
                buf[i] = (char)tolower((unsigned char)buf[i]);
        return 0;
}
