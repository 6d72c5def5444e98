/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cloud-init NoCloud seed: an ISO 9660 volume labelled "cidata" holding
 * meta-data, user-data and network-config (Rock Ridge and Joliet names), written
 * in-process by vm-seed-iso.c. The documents are JSON, which YAML reads as it is.
 * The password goes in as a SHA-512 crypt hash only.
 */
#include "common/fileio.h"
#include "drivers/vm/vm-util.h"
#include "drivers/vm/vm-seed-iso.h"

#include <crypt.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/json-cleanup.h"

int vm_password_hash(const char *password, char **ret, struct na_error *err)
{
        char salt[CRYPT_GENSALT_OUTPUT_SIZE];
        if (!crypt_gensalt_rn("$6$", 0, NULL, 0, salt, sizeof(salt)))
                return na_error_sys(err, errno ? errno : EINVAL, "password: make a salt");
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (!cd)
                return na_error_sys(err, ENOMEM, "password: hash");
        const char *h = crypt_rn(password, salt, cd, sizeof(*cd));
        int r = 0;
        if (!h || h[0] == '*')
                r = na_error_sys(err, errno ? errno : EINVAL, "password: hash");
        else if (!(*ret = strdup(h)))
                r = na_error_sys(err, ENOMEM, "password: hash");
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
        return r;
}

bool vm_password_matches(const char *password, const char *hash)
{
        if (!password || !hash)
                return !password && !hash;
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (!cd)
                return false;
        const char *h = crypt_rn(password, hash, cd, sizeof(*cd));
        bool same = h && h[0] != '*' && strcmp(h, hash) == 0;
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
        return same;
}

static char *dump(json_t *doc, const char *head)
{
        _cleanup_free_ char *body = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!body)
                return NULL;
        return na_strdupf("%s%s\n", head, body);
}

static int append_addrs(json_t *list, const struct proto_vps_addr *a, size_t n, int host_prefix)
{
        for (size_t i = 0; i < n; i++) {
                char text[PROTO_VPS_ADDR_TEXT + 8];
                snprintf(text, sizeof(text), "%s/%d", a[i].text, host_prefix ? host_prefix : a[i].prefix);
                if (json_array_append_new(list, json_string(text)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/*
 * network-config version 2 for the interface with the server's MAC. Routed: every
 * address alone (/32, /128: the node routes each one to the tap, nothing else is
 * on the link) and the fixed link-local next hop as gateway4/gateway6. Bridged: the
 * addresses with their prefixes and the operator's gateways. The gateways are given as
 * gateway4/gateway6, not as routes with on-link: Debian 12's cloud-init renders to
 * ifupdown, whose `gateway` adds the default route with `onlink` (the routed next hop
 * is on no subnet of the guest), while a route of the seed becomes `route add` of
 * net-tools, which a minimal guest lacks and which knows no on-link (a guest came up
 * without a default route; test_vps_guest.py).
 * Without a network (a server made before): DHCP, as it was.
 */
static json_t *network_config(const struct vm_meta *m, const char *mac, const struct vm_netcfg *net)
{
        _cleanup_json_ json_t *eth = json_pack("{s:{s:s}, s:s}", "match", "macaddress", mac, "set-name", "eth0");
        if (!eth)
                return NULL;
        if (!m->has_network) {
                if (json_object_set_new(eth, "dhcp4", json_true()) < 0)
                        return NULL;
        } else {
                bool routed = !net || net->mode == VM_NET_ROUTED;
                _cleanup_json_ json_t *addrs = json_array(), *dns = json_array();
                if (!addrs || !dns || append_addrs(addrs, m->network.ipv4, m->network.n_ipv4, routed ? 32 : 0) < 0 ||
                    append_addrs(addrs, m->network.ipv6, m->network.n_ipv6, routed ? 128 : 0) < 0)
                        return NULL;
                const char *gw4 = routed ? VM_ROUTED_GW4 : net->gateway4, *gw6 = routed ? VM_ROUTED_GW6 : net->gateway6;
                if ((m->network.n_ipv4 && gw4 && json_object_set_new(eth, "gateway4", json_string(gw4)) < 0) ||
                    (m->network.n_ipv6 && gw6 && json_object_set_new(eth, "gateway6", json_string(gw6)) < 0))
                        return NULL;
                for (size_t i = 0; i < m->network.n_dns; i++)
                        if (json_array_append_new(dns, json_string(m->network.dns[i].text)) < 0)
                                return NULL;
                /* No router advertisements: the addresses are the assigned ones only. */
                if (json_object_set_new(eth, "dhcp4", json_false()) < 0 ||
                    json_object_set_new(eth, "dhcp6", json_false()) < 0 ||
                    json_object_set_new(eth, "accept-ra", json_false()) < 0 ||
                    json_object_set_new(eth, "addresses", TAKE_PTR(addrs)) < 0 ||
                    (json_array_size(dns) &&
                     json_object_set_new(eth, "nameservers", json_pack("{s:o}", "addresses", TAKE_PTR(dns))) < 0))
                        return NULL;
        }
        return json_pack("{s:i, s:{s:O}}", "version", 2, "ethernets", "primary", eth);
}

int vm_seed_documents(const struct vm_meta *m, const char *mac, const struct vm_netcfg *net, char **ret_meta_data,
                      char **ret_user_data, char **ret_network_config, struct na_error *err)
{
        char instance[80];
        snprintf(instance, sizeof(instance), "%s-%lld", m->id, (long long)m->generation);
        _cleanup_json_ json_t *meta = json_pack("{s:s, s:s}", "instance-id", instance, "local-hostname", m->hostname);

        json_t *root = json_pack("{s:s, s:b}", "name", "root", "lock_passwd", m->password_hash == NULL);
        if (root && m->ssh_keys && m->ssh_keys[0]) {
                /* Only when there is a key: cloud-init's schema refuses an empty list. */
                json_t *keys = json_array();
                for (char **k = m->ssh_keys; *k; k++)
                        json_array_append_new(keys, json_string(*k));
                json_object_set_new(root, "ssh_authorized_keys", keys);
        }
        if (root && m->password_hash)
                json_object_set_new(root, "hashed_passwd", json_string(m->password_hash));
        _cleanup_json_ json_t *user = json_pack("{s:s, s:b, s:b, s:b, s:b, s:[o]}", "hostname", m->hostname,
                                                "preserve_hostname", 0, "manage_etc_hosts", 1, "disable_root", 0,
                                                "ssh_pwauth", m->password_hash != NULL, "users", root);
        if (user && m->inputs && json_object_size(m->inputs) > 0) {
                _cleanup_free_ char *inputs = json_dumps(m->inputs, JSON_COMPACT | JSON_SORT_KEYS);
                json_object_set_new(user, "write_files",
                                    json_pack("[{s:s, s:s, s:s}]", "path", "/etc/nodeagent/inputs.json", "permissions",
                                              "0600", "content", inputs ? inputs : "{}"));
        }
        /*
         * vps.network.set rewrites the seed without a new instance-id (that would
         * make cloud-init redo users and host keys): the network is read again at
         * every boot instead (NoCloud supports the boot event).
         */
        if (user && m->has_network)
                json_object_set_new(user, "updates", json_pack("{s:{s:[s]}}", "network", "when", "boot"));
        _cleanup_json_ json_t *netcfg = network_config(m, mac, net);
        if (!meta || !user || !netcfg)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "vps %s: seed documents", m->id);
        _cleanup_free_ char *md = dump(meta, "");
        _cleanup_free_ char *ud = dump(user, "#cloud-config\n");
        _cleanup_free_ char *nc = dump(netcfg, "");
        if (!md || !ud || !nc)
                return na_error_sys(err, ENOMEM, "vps %s: seed documents", m->id);
        *ret_meta_data = TAKE_PTR(md);
        *ret_user_data = TAKE_PTR(ud);
        *ret_network_config = TAKE_PTR(nc);
        return 0;
}

int vm_seed_write(const struct vm_meta *m, const char *mac, const struct vm_netcfg *net, const char *path,
                  struct na_error *err)
{
        _cleanup_free_ char *md = NULL, *ud = NULL, *nc = NULL;
        int r = vm_seed_documents(m, mac, net, &md, &ud, &nc, err);
        if (r < 0)
                return r;
        NA_ANALYZER_FP("-Wanalyzer-null-argument") /* GCC 12 does not see that the callee sets its out-parameter whenever it returns 0 (vm_seed_documents sets md, ud and nc) */
        const struct vm_iso_file files[] = {
                { "meta-data", md, strlen(md) },
                { "user-data", ud, strlen(ud) },
                { "network-config", nc, strlen(nc) },
        };
        NA_ANALYZER_FP_END
        _cleanup_free_ char *partial = na_strdupf("%s.partial", path);
        if (!partial)
                return na_error_sys(err, ENOMEM, "vps %s: seed", m->id);
        unlink(partial); /* a leftover of an interrupted write, whatever it is */
        _cleanup_close_ int fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "vps %s: seed: create %s", m->id, partial);
        r = vm_iso_write(fd, "cidata", files, ARRAY_SIZE(files), time(NULL), err);
        if (r == 0 && fsync(fd) < 0)
                r = na_error_sys(err, errno, "fsync");
        if (r == 0 && close(TAKE_FD(fd)) < 0)
                r = na_error_sys(err, errno, "close");
        if (r == 0 && rename(partial, path) < 0)
                r = na_error_sys(err, errno, "rename to %s", path);
        /* The directory too: this also makes a disk renamed into it just before durable. */
        if (r == 0 && (r = na_fsync_parent(path, err)) < 0) {
                na_error_prefix(err, "vps %s: seed %s", m->id, path);
                return r;
        }
        if (r < 0) {
                unlink(partial);
                return na_error_prefix(err, "vps %s: make the cloud-init seed %s", m->id, partial);
        }
        return 0;
}
