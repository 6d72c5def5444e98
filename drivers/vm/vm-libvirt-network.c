/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A server's network (AGENT-API 4.1): the claim on its addresses (no two servers
 * of the node hold one address: checked against every server's metadata and saved
 * under one lock, so two parallel creates cannot both take it), vps.network.set,
 * and the routed mode's host side at every start (vm-hostnet.c does the netlink).
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <stdio.h>
#include <string.h>

#include "common/names.h"

struct claim {
        const struct vm_meta *m;
        struct vm_conn *c;
        struct na_error *err;
};

/* INVALID_STATE when server id (not m's) holds one of m's addresses. */
static int check_one(const char *id, void *data)
{
        struct claim *cl = data;
        if (streq(id, cl->m->id))
                return 0;
        struct vm_meta other;
        struct na_error e = NA_ERROR_INIT;
        int lr = vm_meta_load(cl->c->meta_dir, id, &other, &e);
        na_error_clear(&e);
        if (lr < 0)
                return 0; /* not a server's record (or unreadable: it holds nothing we can know) */
        char field[64];
        const struct proto_vps_addr *a =
                other.has_network ? proto_vps_network_overlap(&cl->m->network, &other.network, field) : NULL;
        int r = 0;
        if (a) {
                r = na_error_set(cl->err, EADDRINUSE, NA_E_INVALID_STATE, "vps %s: %s %s is held by server %s of this node",
                                 cl->m->id, field, a->text, id);
                na_error_detail(cl->err, "field", json_string(field));
                na_error_detail(cl->err, "address", json_string(a->text));
                na_error_detail(cl->err, "owner", json_string(id));
        }
        vm_meta_clear(&other);
        return r;
}

/* INVALID_STATE when a server other than m->id holds one of m's addresses. Lock held. */
static int check_unclaimed_locked(struct vm_conn *c, const struct vm_meta *m, struct na_error *err)
{
        struct claim cl = { m, c, err };
        int r = vm_meta_foreach_id(c->meta_dir, check_one, &cl);
        if (r < 0 && !na_error_is_set(err))
                return na_error_sys(err, -r, "vps %s: read %s", m->id, c->meta_dir);
        return r;
}

int vm_lv_meta_save_claiming(struct vm_conn *c, struct vm_meta *m, struct na_error *err)
{
        pthread_mutex_lock(&c->net_lock);
        int r = m->has_network ? check_unclaimed_locked(c, m, err) : 0;
        if (r == 0)
                r = vm_meta_save(c->meta_dir, m, err);
        pthread_mutex_unlock(&c->net_lock);
        return r;
}

int vm_lv_host_network(struct vm_conn *c, const struct vm_meta *m, const struct proto_vps_network *old,
                       struct na_error *err)
{
        if (c->net.mode != VM_NET_ROUTED || !m->has_network)
                return 0;
        char ifname[NA_IFNAME_LEN];
        if (na_vps_ifname(m->id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vps %s: no interface name", m->id);
        int r = vm_hostnet_apply(ifname, c->net.uplink, &m->network, old, NULL, err);
        return r < 0 ? na_error_prefix(err, "vps %s: routed network", m->id) : 0;
}

int vm_lv_network_notify(struct vm_conn *c, const struct vm_meta *m, struct na_error *err)
{
        if (!c->on_network || !m->has_network)
                return 0;
        char mac[18];
        vm_mac_from_id(m->id, mac);
        return c->on_network(c->userdata, m->id, mac, &m->network, err);
}

int vm_lv_host_network_of(struct vm_conn *c, const char *id, struct na_error *err)
{
        if (!c->on_network && c->net.mode != VM_NET_ROUTED)
                return 0;
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        int r = vm_meta_load(c->meta_dir, id, &m, err);
        if (r == -ENOENT)
                return 0; /* not one of ours */
        /* The guard again, now that the tap exists (a kernel before 6.16 drops it with the tap). */
        if (r < 0 || (r = vm_lv_network_notify(c, &m, err)) < 0)
                return r;
        return vm_lv_host_network(c, &m, NULL, err);
}

void vm_lv_host_network_remove(struct vm_conn *c, const struct vm_meta *m)
{
        if (c->net.mode != VM_NET_ROUTED || !m->has_network)
                return;
        struct na_error e = NA_ERROR_INIT;
        vm_hostnet_forget(c->net.uplink, &m->network, &e);
        na_error_clear(&e);
}

int vm_lv_network_set(struct vm_conn *c, const char *id, const struct proto_vps_network *net,
                      struct proto_vps_server *ret, bool *ret_restart_required, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0 || (r = vm_refuse_installing(c, id, err)) < 0)
                return r;
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        if ((r = vm_meta_load_required(c, id, &m, err)) < 0)
                return r;
        bool had = m.has_network;
        struct proto_vps_network old = m.network;
        m.has_network = true;
        m.network = *net;
        if ((r = vm_lv_meta_save_claiming(c, &m, err)) < 0)
                return r;
        /* The guest reads it at its next boot; the node's side changes now. */
        char mac[18];
        vm_mac_from_id(id, mac);
        _cleanup_free_ char *seed = vm_lv_seed_path(c, id);
        if (!seed)
                return na_error_sys(err, ENOMEM, "vps %s: seed", id);
        if ((r = vm_lv_network_notify(c, &m, err)) < 0 || (r = vm_seed_write(&m, mac, &c->net, seed, err)) < 0 ||
            (r = vm_lv_host_network(c, &m, had ? &old : NULL, err)) < 0)
                return r;
        bool active = false;
        if ((r = vm_domain_state(c, id, dom, NULL, &active, err)) < 0)
                return r;
        *ret_restart_required = active; /* its seed changed: read at its next boot */
        return vm_lv_get_server(c, id, ret, err);
}
