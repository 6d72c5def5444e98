/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A server's network (AGENT-API 4.1, "The server's network"): the decoder of
 * `network` in vps.create and vps.network.set, its encoder (the metadata keeps the
 * same object) and the comparisons the driver needs. Rules (proto/README.md):
 * addresses in canonical text (what inet_ntop writes: no leading zeros, lower-case
 * hex, the longest zero run as "::"), unicast and usable by a host (no unspecified,
 * loopback, link-local, multicast, reserved or v4-mapped address, no network or
 * broadcast address of its own prefix), each once; prefixes v4 8..32 and v6
 * 16..128; at most 16 + 16 addresses and 3 resolvers; at least one address.
 */
#include "proto/vps.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "proto/decode.h"

#define V4_PREFIX_MIN 8
#define V6_PREFIX_MIN 16

/* Whether the bits of a past the first prefix bits are all zero (or all one). */
static bool host_bits_all(const unsigned char *a, size_t len, int prefix, bool ones)
{
        for (size_t bit = (size_t)prefix; bit < len * 8; bit++) {
                bool set = a[bit / 8] & (0x80 >> (bit % 8));
                if (set != ones)
                        return false;
        }
        return true;
}

/* Why a v4 address cannot be a server's; NULL when it can. */
static const char *v4_problem(const unsigned char *a, int prefix)
{
        if (a[0] == 0)
                return "must not be in 0.0.0.0/8 (this network)";
        if (a[0] == 127)
                return "must not be a loopback address";
        if (a[0] == 169 && a[1] == 254)
                return "must not be a link-local address (169.254.0.0/16 is the node's)";
        if (a[0] >= 224 && a[0] < 240)
                return "must be a unicast address, not multicast";
        if (a[0] >= 240)
                return "must not be a reserved or broadcast address";
        if (prefix >= 0 && prefix <= 30) {
                if (host_bits_all(a, 4, prefix, false))
                        return "is the network address of its prefix";
                if (host_bits_all(a, 4, prefix, true))
                        return "is the broadcast address of its prefix";
        }
        return NULL;
}

static const char *v6_problem(const unsigned char *a, int prefix)
{
        static const unsigned char zero[16], mapped[12] = { [10] = 0xff, [11] = 0xff };
        if (memcmp(a, zero, 16) == 0)
                return "must not be the unspecified address";
        if (memcmp(a, zero, 15) == 0 && a[15] == 1)
                return "must not be the loopback address";
        if (a[0] == 0xff)
                return "must be a unicast address, not multicast";
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
                return "must not be a link-local address (fe80::/10 is the node's and the server's own)";
        if (memcmp(a, mapped, 12) == 0)
                return "must not be an IPv4-mapped address (put it in ipv4)";
        if (prefix >= 0 && prefix <= 126 && host_bits_all(a, 16, prefix, false))
                return "is the subnet-router anycast address of its prefix";
        return NULL;
}

/*
 * One address string at path: canonical text of family (AF_UNSPEC: either), then
 * the unicast rules with prefix (-1: no prefix to check against).
 */
static bool address_parse(json_t *v, const char *path, int family, int prefix, struct proto_vps_addr *out,
                          struct na_error *err)
{
        const char *s = json_string_value(v);
        if (!s) {
                na_error_field(err, path, "must be a string");
                return false;
        }
        unsigned char bytes[16] = { 0 };
        int fam = 0;
        if ((family == AF_UNSPEC || family == AF_INET) && strlen(s) < PROTO_VPS_ADDR_TEXT &&
            inet_pton(AF_INET, s, bytes) == 1)
                fam = AF_INET;
        else if ((family == AF_UNSPEC || family == AF_INET6) && strlen(s) < PROTO_VPS_ADDR_TEXT &&
                 inet_pton(AF_INET6, s, bytes) == 1)
                fam = AF_INET6;
        if (!fam) {
                na_error_field(err, path, "must be an %s address",
                               family == AF_INET ? "IPv4" : family == AF_INET6 ? "IPv6" : "IPv4 or IPv6");
                return false;
        }
        char canon[PROTO_VPS_ADDR_TEXT];
        if (!inet_ntop(fam, bytes, canon, sizeof(canon)) || strcmp(canon, s) != 0) {
                na_error_field(err, path, "must be in canonical form (\"%s\")", canon);
                return false;
        }
        const char *problem = fam == AF_INET ? v4_problem(bytes, prefix) : v6_problem(bytes, prefix);
        if (problem) {
                na_error_field(err, path, "%s", problem);
                return false;
        }
        memset(out, 0, sizeof(*out));
        out->family = fam;
        memcpy(out->bytes, bytes, sizeof(bytes));
        out->prefix = prefix < 0 ? 0 : prefix;
        snprintf(out->text, sizeof(out->text), "%s", canon);
        return true;
}

static bool same_addr(const struct proto_vps_addr *a, const struct proto_vps_addr *b)
{
        return a->family == b->family && memcmp(a->bytes, b->bytes, 16) == 0;
}

/* network.<key>: an array of {address, prefix}. */
static bool addr_list(json_t *net, const char *prefix, const char *key, int family, struct proto_vps_addr *out,
                      size_t max, size_t *ret_n, struct na_error *err)
{
        char list_path[96];
        proto_path(list_path, sizeof(list_path), prefix, key);
        json_t *arr = NULL;
        *ret_n = 0;
        int r = proto_array(net, prefix, key, 0, 0, max, &arr, err);
        if (r < 0)
                return false;
        if (r != PROTO_PRESENT)
                return true;
        bool ok = true;
        size_t i, n = 0;
        json_t *item;
        json_array_foreach(arr, i, item) {
                char ipath[128], path[160];
                snprintf(ipath, sizeof(ipath), "%s.%zu", list_path, i);
                if (!json_is_object(item)) {
                        na_error_field(err, ipath, "must be an object {address, prefix}");
                        ok = false;
                        continue;
                }
                int64_t pfx = -1;
                bool item_ok = proto_int(item, ipath, "prefix", PROTO_REQUIRED,
                                         family == AF_INET ? V4_PREFIX_MIN : V6_PREFIX_MIN,
                                         family == AF_INET ? 32 : 128, &pfx, err) > 0;
                snprintf(path, sizeof(path), "%s.address", ipath);
                json_t *a = json_object_get(item, "address");
                if (!a) {
                        na_error_field(err, path, "is required");
                        ok = false;
                        continue;
                }
                struct proto_vps_addr addr;
                if (!address_parse(a, path, family, item_ok ? (int)pfx : -1, &addr, err)) {
                        ok = false;
                        continue;
                }
                for (size_t j = 0; j < n; j++)
                        if (same_addr(&out[j], &addr)) {
                                na_error_field(err, path, "is listed twice");
                                item_ok = false;
                                break;
                        }
                if (!item_ok) {
                        ok = false;
                        continue;
                }
                out[n++] = addr;
        }
        *ret_n = n;
        return ok;
}

int proto_vps_network_decode(json_t *obj, const char *prefix, struct proto_vps_network *out, struct na_error *err)
{
        memset(out, 0, sizeof(*out));
        if (!json_is_object(obj))
                return na_error_field(err, prefix, "must be an object {ipv4, ipv6, dns}");
        bool ok = addr_list(obj, prefix, "ipv4", AF_INET, out->ipv4, PROTO_VPS_NET_V4_MAX, &out->n_ipv4, err);
        ok &= addr_list(obj, prefix, "ipv6", AF_INET6, out->ipv6, PROTO_VPS_NET_V6_MAX, &out->n_ipv6, err);

        json_t *dns = NULL;
        int r = proto_array(obj, prefix, "dns", 0, 0, PROTO_VPS_NET_DNS_MAX, &dns, err);
        if (r < 0)
                ok = false;
        size_t i;
        json_t *item;
        if (r == PROTO_PRESENT)
                json_array_foreach(dns, i, item) {
                        char path[96], list[80];
                        proto_path(list, sizeof(list), prefix, "dns");
                        snprintf(path, sizeof(path), "%s.%zu", list, i);
                        struct proto_vps_addr a;
                        if (!address_parse(item, path, AF_UNSPEC, -1, &a, err)) {
                                ok = false;
                                continue;
                        }
                        bool dup = false;
                        for (size_t j = 0; j < out->n_dns; j++)
                                dup |= same_addr(&out->dns[j], &a);
                        if (dup) {
                                na_error_field(err, path, "is listed twice");
                                ok = false;
                                continue;
                        }
                        out->dns[out->n_dns++] = a;
                }
        if (ok && out->n_ipv4 + out->n_ipv6 == 0) {
                na_error_field(err, prefix, "must hold at least one address in ipv4 or ipv6");
                ok = false;
        }
        if (!ok) {
                memset(out, 0, sizeof(*out));
                return -EINVAL;
        }
        return 0;
}

static json_t *addr_array(const struct proto_vps_addr *a, size_t n, bool with_prefix)
{
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
                json_t *v = with_prefix ? json_pack("{s:s, s:i}", "address", a[i].text, "prefix", a[i].prefix)
                                        : json_string(a[i].text);
                if (!v || json_array_append_new(arr, v) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr;
}

json_t *proto_vps_network_encode(const struct proto_vps_network *n)
{
        json_t *v4 = addr_array(n->ipv4, n->n_ipv4, true), *v6 = addr_array(n->ipv6, n->n_ipv6, true),
               *dns = addr_array(n->dns, n->n_dns, false);
        if (!v4 || !v6 || !dns) {
                json_decref(v4);
                json_decref(v6);
                json_decref(dns);
                return NULL;
        }
        return json_pack("{s:o, s:o, s:o}", "ipv4", v4, "ipv6", v6, "dns", dns);
}

static bool same_list(const struct proto_vps_addr *a, size_t na, const struct proto_vps_addr *b, size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!same_addr(&a[i], &b[i]) || a[i].prefix != b[i].prefix)
                        return false;
        return true;
}

bool proto_vps_network_equal(const struct proto_vps_network *a, const struct proto_vps_network *b)
{
        return same_list(a->ipv4, a->n_ipv4, b->ipv4, b->n_ipv4) && same_list(a->ipv6, a->n_ipv6, b->ipv6, b->n_ipv6) &&
               same_list(a->dns, a->n_dns, b->dns, b->n_dns);
}

static const struct proto_vps_addr *find_in(const struct proto_vps_addr *a, size_t na,
                                            const struct proto_vps_addr *b, size_t nb, const char *list,
                                            char ret_field[64])
{
        for (size_t i = 0; i < na; i++)
                for (size_t j = 0; j < nb; j++)
                        if (same_addr(&a[i], &b[j])) {
                                snprintf(ret_field, 64, "network.%s.%zu.address", list, i);
                                return &a[i];
                        }
        return NULL;
}

const struct proto_vps_addr *proto_vps_network_overlap(const struct proto_vps_network *n,
                                                       const struct proto_vps_network *b, char ret_field[64])
{
        const struct proto_vps_addr *a = find_in(n->ipv4, n->n_ipv4, b->ipv4, b->n_ipv4, "ipv4", ret_field);
        return a ? a : find_in(n->ipv6, n->n_ipv6, b->ipv6, b->n_ipv6, "ipv6", ret_field);
}

void proto_vps_network_set_free(struct proto_vps_network_set *p)
{
        free(p);
}

int proto_vps_network_set_decode(json_t *params, struct proto_vps_network_set **ret, struct na_error *err)
{
        json_t *net = NULL;
        int r = proto_object(params, NULL, "network", PROTO_REQUIRED, &net, err);
        if (r != PROTO_PRESENT)
                return -EINVAL;
        struct proto_vps_network_set *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "vps.network.set params");
        if (proto_vps_network_decode(net, "network", &p->network, err) < 0) {
                free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}
