/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Address ranges, the app address allocator and the names derived from ids. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "drivers/app/net/app-net-internal.h"

int app_net_addr_parse(const char *s, uint32_t *ret)
{
        struct in_addr a;
        if (!s || inet_pton(AF_INET, s, &a) != 1)
                return -EINVAL;
        *ret = ntohl(a.s_addr);
        return 0;
}

void app_net_addr_str(uint32_t a, char buf[16])
{
        struct in_addr in = { .s_addr = htonl(a) };
        if (!inet_ntop(AF_INET, &in, buf, 16))
                snprintf(buf, 16, "?");
}

int app_net_range_parse(const char *cidr, struct app_net_range *ret, const char **why)
{
        char addr[32];
        const char *slash = cidr ? strchr(cidr, '/') : NULL;
        if (!slash || (size_t)(slash - cidr) >= sizeof(addr))
                return *why = "must be an IPv4 range such as 10.88.0.0/16", -EINVAL;
        memcpy(addr, cidr, (size_t)(slash - cidr));
        addr[slash - cidr] = '\0';
        char *end = NULL;
        errno = 0;
        long prefix = strtol(slash + 1, &end, 10);
        uint32_t base;
        if (app_net_addr_parse(addr, &base) < 0 || !isdigit((unsigned char)slash[1]) || *end || errno)
                return *why = "must be an IPv4 range such as 10.88.0.0/16", -EINVAL;
        if (prefix < 8 || prefix > 30)
                return *why = "prefix must be 8..30", -EINVAL;
        uint32_t size = 1u << (32 - prefix);
        if (base & (size - 1))
                return *why = "must not have host bits set", -EINVAL;
        *ret = (struct app_net_range){ .base = base, .prefix = (uint8_t)prefix, .size = size };
        return 0;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

int app_net_addr_pick(const struct app_net_range *r, const uint32_t *taken, size_t n, uint32_t *ret)
{
        uint32_t *v = malloc((n ? n : 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        if (n)
                memcpy(v, taken, n * sizeof(*v));
        qsort(v, n, sizeof(*v), cmp_u32);
        uint32_t cand = r->base + 2, last = r->base + r->size - 2; /* broadcast excluded */
        for (size_t i = 0; i < n && cand <= last; i++) {
                if (v[i] < cand)
                        continue;
                if (v[i] > cand)
                        break;
                cand++;
        }
        free(v);
        if (cand > last)
                return -ENOSPC;
        *ret = cand;
        return 0;
}

int app_net_ports_parse(const char *s, uint16_t *lo, uint16_t *hi)
{
        unsigned a, b;
        int used = 0;
        if (!s || sscanf(s, "%u-%u%n", &a, &b, &used) != 2 || s[used] || a < 1 || b > 65535 || a > b)
                return -EINVAL;
        *lo = (uint16_t)a;
        *hi = (uint16_t)b;
        return 0;
}

/* common/names.c names it, so that metrics find the same veth without asking the driver. */
void app_net_ifname(const char *app_id, char buf[NA_IFNAME_LEN])
{
        if (na_app_ifname(app_id, buf) < 0)
                snprintf(buf, NA_IFNAME_LEN, APP_NET_IF_PREFIX); /* ids are validated before: never here */
}

void app_net_group_set_name(const char *group_id, char buf[APP_NET_SET_NAME_LEN])
{
        size_t n = 0;
        buf[n++] = 'g';
        for (const char *p = group_id; *p && n < APP_NET_SET_NAME_LEN - 1; p++)
                if (isxdigit((unsigned char)*p))
                        buf[n++] = (char)tolower((unsigned char)*p);
        buf[n] = '\0';
}
