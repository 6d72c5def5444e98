/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Interface counters from /proc/net/dev, once per tick into a table that the tap
 * source looks guests up in. The node's own traffic is the sum over its physical
 * interfaces (those with <sys_net_root>/<if>/device); on a host without any (a
 * container, a VM without PCI passthrough) it is every interface but "lo".
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics-internal.h"

static uint64_t hash_name(const char *s)
{
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        return h;
}

static struct netdev_entry *slot_for(struct netdev_entry *e, size_t cap, const char *name)
{
        size_t i = (size_t)hash_name(name) & (cap - 1);
        while (e[i].name[0] && !streq(e[i].name, name))
                i = (i + 1) & (cap - 1);
        return &e[i];
}

const struct netdev_entry *netdev_find(const struct netdev_table *tb, const char *name, size_t *hint)
{
        if (!tb->cap || !name[0])
                return NULL;
        if (hint && *hint < tb->cap && streq(tb->e[*hint].name, name))
                return &tb->e[*hint];
        const struct netdev_entry *e = slot_for(tb->e, tb->cap, name);
        if (!e->name[0])
                return NULL;
        if (hint)
                *hint = (size_t)(e - tb->e);
        return e;
}

void netdev_table_free(struct netdev_table *tb)
{
        free(tb->e);
        free(tb->line_slot);
        memset(tb, 0, sizeof(*tb));
}

/* Grow (or just clean) the table, keeping the interfaces seen at the last two ticks. */
static int rehash(struct netdev_table *tb, uint64_t tick, size_t want)
{
        size_t cap = 64;
        while (cap < want * 2)
                cap *= 2;
        struct netdev_entry *e = calloc(cap, sizeof(*e));
        if (!e)
                return -ENOMEM;
        size_t used = 0;
        for (size_t i = 0; i < tb->cap; i++)
                if (tb->e[i].name[0] && tb->e[i].seen + 1 >= tick) {
                        *slot_for(e, cap, tb->e[i].name) = tb->e[i];
                        used++;
                }
        free(tb->e);
        tb->e = e;
        tb->cap = cap;
        tb->used = used;
        return 0;
}

static int8_t is_physical(const struct metrics *m, const char *name)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s/device", m->sys_net_root, name) >= (int)sizeof(path))
                return 0;
        return access(path, F_OK) == 0 ? 1 : 0;
}

/* Skip an unsigned decimal (leading blanks first); false when there is none. */
static bool skip_u64(const char **p)
{
        const char *s = *p;
        while (*s == ' ' || *s == '\t')
                s++;
        if (*s < '0' || *s > '9')
                return false;
        while (*s >= '0' && *s <= '9')
                s++;
        *p = s;
        return true;
}

/* The entry of the interface name[0..nlen) on line i: where it was on that line last time, else by hash. */
static struct netdev_entry *entry_at_line(struct netdev_table *tb, size_t i, const char *n, size_t nlen, char *name)
{
        if (i < tb->lines_cap && tb->line_slot[i] < tb->cap) {
                struct netdev_entry *e = &tb->e[tb->line_slot[i]];
                if (memcmp(e->name, n, nlen) == 0 && e->name[nlen] == '\0')
                        return e;
        }
        memcpy(name, n, nlen);
        name[nlen] = '\0';
        struct netdev_entry *e = slot_for(tb->e, tb->cap, name);
        if (!e->name[0]) {
                memcpy(e->name, name, nlen + 1);
                e->physical = -1;
                tb->used++;
        }
        if (i < tb->lines_cap)
                tb->line_slot[i] = (uint32_t)(e - tb->e);
        return e;
}

static unsigned read_netdev(struct metrics *m, struct mtarget *t)
{
        struct netdev_table *tb = &m->netdev;
        char *data;
        if (mnode_read_big(m, MN_NETDEV, "net/dev", &data) < 0)
                return 2;

        /* Lines: "  name: rx_bytes packets errs drop fifo frame compressed multicast tx_bytes ..." */
        size_t lines = 0;
        for (const char *p = data; (p = strchr(p, '\n')); p++)
                lines++;
        /* Room for every line to be new at a load of at most 3/4. */
        if ((tb->used + lines + 1) * 4 > tb->cap * 3 && rehash(tb, m->tick_seq, tb->used + lines + 1) < 0)
                return 2;
        if (tb->lines_cap < lines) {
                uint32_t *ls = realloc(tb->line_slot, lines * 2 * sizeof(*ls));
                if (ls) {
                        for (size_t i = tb->lines_cap; i < lines * 2; i++)
                                ls[i] = UINT32_MAX;
                        tb->line_slot = ls;
                        tb->lines_cap = lines * 2;
                }
        }

        uint64_t rx_phys = 0, tx_phys = 0, rx_all = 0, tx_all = 0;
        bool any_phys = false;
        size_t i = 0;
        for (const char *line = data; line && *line; i++) {
                const char *colon = strchr(line, ':'), *eol = strchrnul(line, '\n');
                if (colon && colon < eol) {
                        const char *n = line;
                        while (*n == ' ')
                                n++;
                        size_t nlen = (size_t)(colon - n);
                        /* rx bytes, 7 more receive fields, tx bytes */
                        uint64_t rx, tx;
                        const char *p = colon + 1;
                        int k = mparse_u64(&p, &rx) ? 1 : 9;
                        while (k < 8 && skip_u64(&p))
                                k++;
                        if (k == 8 && mparse_u64(&p, &tx) && nlen > 0 && nlen < NA_IFNAME_LEN) {
                                char name[NA_IFNAME_LEN];
                                struct netdev_entry *e = entry_at_line(tb, i, n, nlen, name);
                                e->rx = rx;
                                e->tx = tx;
                                e->seen = m->tick_seq;
                                if (e->physical < 0)
                                        e->physical = is_physical(m, e->name);
                                if (e->physical) {
                                        any_phys = true;
                                        rx_phys += e->rx;
                                        tx_phys += e->tx;
                                }
                                if (!streq(e->name, "lo")) {
                                        rx_all += e->rx;
                                        tx_all += e->tx;
                                }
                        }
                }
                line = *eol ? eol + 1 : NULL;
        }
        t->cur.c[MC_NET_RX] = any_phys ? rx_phys : rx_all;
        t->cur.c[MC_NET_TX] = any_phys ? tx_phys : tx_all;
        t->cur.cvalid |= MC_BIT(MC_NET_RX) | MC_BIT(MC_NET_TX);
        return 0;
}

const struct metrics_source metrics_source_netdev = {
        .name = "netdev",
        .node = true,
        .read = read_netdev,
};
