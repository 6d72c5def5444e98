/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A guest's network traffic from its host-side interface (a server's tap device,
 * an app's veth), looked up in the table source-netdev.c filled this tick. The host
 * side's receive is the guest's transmit, so the directions swap (as libvirt's
 * interface stats do for tap devices).
 */
#include "metrics/metrics-internal.h"

static unsigned read_tap(struct metrics *m, struct mtarget *t)
{
        if (!t->ifname[0])
                return 0;
        const struct netdev_entry *e = netdev_find(&m->netdev, t->ifname, &t->netdev_hint);
        if (!e || e->seen != m->tick_seq) {
                /* gone (guest stopped): a new device starts new counters */
                t->cur.restarted |= MC_BIT(MC_NET_RX) | MC_BIT(MC_NET_TX);
                return 2;
        }
        t->cur.c[MC_NET_RX] = e->tx;
        t->cur.c[MC_NET_TX] = e->rx;
        t->cur.cvalid |= MC_BIT(MC_NET_RX) | MC_BIT(MC_NET_TX);
        return 0;
}

const struct metrics_source metrics_source_tap = {
        .name = "tap",
        .node = false,
        .read = read_tap,
};
