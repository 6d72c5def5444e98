/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "proto/firewall.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proto/decode.h"

const char *const proto_fw_directions[] = { "inbound", "outbound", NULL };
const char *const proto_fw_protocols[] = { "tcp", "udp", "icmp", "icmpv6", "all", NULL };
const char *const proto_fw_actions[] = { "allow", "deny", "reject", NULL };
const char *const proto_fw_policies[] = { "allow", "deny", NULL };

#define ADDR_TEXT_MAX 64  /* longest address text accepted: "ffff:...:255.255.255.255/128" */
#define PORT_TEXT_MAX (FW_PORTS_MAX * 6)

void proto_fw_init(struct fw_config *cfg)
{
        memset(cfg, 0, sizeof(*cfg));
        cfg->enabled = false;
        cfg->inbound_policy = FW_ACTION_ALLOW;
        cfg->outbound_policy = FW_ACTION_ALLOW;
}

void proto_fw_clear(struct fw_config *cfg)
{
        if (!cfg)
                return;
        free(cfg->rules);
        proto_fw_init(cfg);
}

int proto_fw_copy(struct fw_config *dst, const struct fw_config *src, struct na_error *err)
{
        proto_fw_init(dst);
        dst->enabled = src->enabled;
        dst->inbound_policy = src->inbound_policy;
        dst->outbound_policy = src->outbound_policy;
        if (src->n_rules == 0)
                return 0;
        dst->rules = malloc(src->n_rules * sizeof(*src->rules));
        if (!dst->rules)
                return na_error_sys(err, ENOMEM, "copy firewall configuration");
        memcpy(dst->rules, src->rules, src->n_rules * sizeof(*src->rules));
        dst->n_rules = src->n_rules;
        return 0;
}

/* ---- addresses ---- */

static unsigned addr_bits(uint8_t family)
{
        return family == AF_INET ? 32 : 128;
}

static bool host_bits_clear(const struct fw_addr *a)
{
        unsigned bits = addr_bits(a->family);
        for (unsigned i = a->prefix; i < bits; i++)
                if (a->bytes[i / 8] & (0x80u >> (i % 8)))
                        return false;
        return true;
}

static void clear_host_bits(struct fw_addr *a)
{
        unsigned bits = addr_bits(a->family);
        for (unsigned i = a->prefix; i < bits; i++)
                a->bytes[i / 8] &= (uint8_t)~(0x80u >> (i % 8));
}

/* Strict unsigned decimal: digits only, no sign, no leading zero (except "0"). */
static bool parse_decimal(const char *s, size_t len, unsigned max, unsigned *out)
{
        if (len == 0 || len > 6 || (len > 1 && s[0] == '0'))
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v > max)
                return false;
        *out = v;
        return true;
}

int proto_fw_addr_parse(const char *s, struct fw_addr *out, const char **reason)
{
        memset(out, 0, sizeof(*out));
        if (!s || !*s || streq(s, "any"))
                return 0;
        size_t len = strlen(s);
        if (len >= ADDR_TEXT_MAX) {
                *reason = "is not an IPv4 or IPv6 address or CIDR prefix";
                return -EINVAL;
        }
        char buf[ADDR_TEXT_MAX];
        memcpy(buf, s, len + 1);
        char *slash = strchr(buf, '/');
        if (slash)
                *slash = '\0';
        if (strchr(buf, ':')) {
                out->family = AF_INET6;
                if (inet_pton(AF_INET6, buf, out->bytes) != 1) {
                        *reason = "is not a valid IPv6 address";
                        return -EINVAL;
                }
        } else {
                out->family = AF_INET;
                if (inet_pton(AF_INET, buf, out->bytes) != 1) {
                        *reason = "is not a valid IPv4 address (or IPv6, or CIDR prefix, or \"any\")";
                        return -EINVAL;
                }
        }
        unsigned prefix = addr_bits(out->family);
        if (slash && !parse_decimal(slash + 1, strlen(slash + 1), addr_bits(out->family), &prefix)) {
                *reason = out->family == AF_INET ? "has an invalid prefix length (0..32)"
                                                 : "has an invalid prefix length (0..128)";
                return -EINVAL;
        }
        out->prefix = (uint8_t)prefix;
        if (!host_bits_clear(out)) {
                *reason = "has host bits set beyond the prefix length";
                return -EDOM;
        }
        return 0;
}

const char *proto_fw_addr_format(const struct fw_addr *a, char *buf, size_t len)
{
        if (a->family == 0) {
                snprintf(buf, len, "any");
                return buf;
        }
        char text[INET6_ADDRSTRLEN];
        if (!inet_ntop(a->family, a->bytes, text, sizeof(text)))
                snprintf(text, sizeof(text), "?");
        if (a->prefix == addr_bits(a->family))
                snprintf(buf, len, "%s", text);
        else
                snprintf(buf, len, "%s/%u", text, a->prefix);
        return buf;
}

static bool addr_equal(const struct fw_addr *a, const struct fw_addr *b)
{
        return a->family == b->family && a->prefix == b->prefix &&
               (a->family == 0 || memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : 16) == 0);
}

void proto_fw_rule_canonicalize(struct fw_rule *r)
{
        bool src_family_only = r->source.family && r->source.prefix == 0;
        bool dst_family_only = r->destination.family && r->destination.prefix == 0;
        if (dst_family_only) {
                if (r->source.family == 0)
                        r->source = r->destination;
                memset(&r->destination, 0, sizeof(r->destination));
        }
        if (src_family_only && r->destination.family)
                memset(&r->source, 0, sizeof(r->source));
        if (r->port.kind == FW_PORT_RANGE && r->port.v[0] == r->port.v[1])
                r->port.kind = FW_PORT_SINGLE;
}

/* ---- ports ---- */

static int cmp_u16(const void *a, const void *b)
{
        return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

int proto_fw_ports_parse(const char *s, struct fw_ports *out, const char **reason)
{
        memset(out, 0, sizeof(*out));
        if (!s || !*s || streq(s, "any"))
                return 0;
        unsigned a, b;
        const char *comma = strchr(s, ','), *dash = strchr(s, '-');
        if (comma) {
                if (dash) {
                        *reason = "a port list holds single ports only (no ranges): use one rule per range";
                        return -EINVAL;
                }
                const char *p = s;
                for (;;) {
                        const char *end = strchr(p, ',');
                        size_t len = end ? (size_t)(end - p) : strlen(p);
                        if (out->n == FW_PORTS_MAX) {
                                *reason = "a port list holds at most 64 ports";
                                return -EINVAL;
                        }
                        if (!parse_decimal(p, len, 65535, &a) || a == 0) {
                                *reason = "must be a port 1..65535, a range \"1000-2000\" or a list \"22,80,443\"";
                                return -EINVAL;
                        }
                        out->v[out->n++] = (uint16_t)a;
                        if (!end)
                                break;
                        p = end + 1;
                }
                qsort(out->v, out->n, sizeof(out->v[0]), cmp_u16);
                for (size_t i = 1; i < out->n; i++)
                        if (out->v[i] == out->v[i - 1]) {
                                *reason = "lists a port twice";
                                return -EINVAL;
                        }
                out->kind = FW_PORT_LIST;
                return 0;
        }
        if (dash) {
                if (!parse_decimal(s, (size_t)(dash - s), 65535, &a) || a == 0 ||
                    !parse_decimal(dash + 1, strlen(dash + 1), 65535, &b) || b == 0) {
                        *reason = "must be a port 1..65535, a range \"1000-2000\" or a list \"22,80,443\"";
                        return -EINVAL;
                }
                if (a > b) {
                        *reason = "is a reversed range (the first port must not be above the second)";
                        return -EINVAL;
                }
                out->kind = a == b ? FW_PORT_SINGLE : FW_PORT_RANGE;
                out->v[0] = (uint16_t)a;
                out->v[1] = (uint16_t)b;
                return 0;
        }
        if (!parse_decimal(s, strlen(s), 65535, &a) || a == 0) {
                *reason = "must be a port 1..65535, a range \"1000-2000\" or a list \"22,80,443\"";
                return -EINVAL;
        }
        out->kind = FW_PORT_SINGLE;
        out->v[0] = (uint16_t)a;
        return 0;
}

const char *proto_fw_ports_format(const struct fw_ports *p, char *buf, size_t len)
{
        switch (p->kind) {
        case FW_PORT_SINGLE:
                snprintf(buf, len, "%u", p->v[0]);
                break;
        case FW_PORT_RANGE:
                snprintf(buf, len, "%u-%u", p->v[0], p->v[1]);
                break;
        case FW_PORT_LIST: {
                size_t used = 0;
                buf[0] = '\0';
                for (size_t i = 0; i < p->n && used < len; i++)
                        used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? "," : "", p->v[i]);
                break;
        }
        case FW_PORT_ANY:
        default:
                snprintf(buf, len, "any");
                break;
        }
        return buf;
}

static bool ports_equal(const struct fw_ports *a, const struct fw_ports *b)
{
        if (a->kind != b->kind)
                return false;
        switch (a->kind) {
        case FW_PORT_SINGLE:
                return a->v[0] == b->v[0];
        case FW_PORT_RANGE:
                return a->v[0] == b->v[0] && a->v[1] == b->v[1];
        case FW_PORT_LIST:
                return a->n == b->n && memcmp(a->v, b->v, a->n * sizeof(a->v[0])) == 0;
        case FW_PORT_ANY:
        default:
                return true;
        }
}

/* ---- decode ---- */

static const char *family_name(uint8_t family)
{
        return family == AF_INET ? "IPv4" : "IPv6";
}

static bool read_addr(json_t *item, const char *prefix, const char *key, struct fw_addr *out, struct na_error *err)
{
        const char *s = NULL, *reason = NULL;
        char path[64];
        int r = proto_string(item, prefix, key, 0, 0, ADDR_TEXT_MAX, &s, err);
        if (r < 0)
                return false;
        if (r != PROTO_PRESENT)
                return true;
        r = proto_fw_addr_parse(s, out, &reason);
        if (r == -EDOM) {
                struct fw_addr net = *out;
                char text[ADDR_TEXT_MAX];
                clear_host_bits(&net);
                na_error_field(err, proto_path(path, sizeof(path), prefix, key),
                               "%s: host bits are set beyond /%u (the network is %s)", s, out->prefix,
                               proto_fw_addr_format(&net, text, sizeof(text)));
                memset(out, 0, sizeof(*out));
                return false;
        }
        if (r < 0) {
                na_error_field(err, proto_path(path, sizeof(path), prefix, key), "%s", reason);
                memset(out, 0, sizeof(*out));
                return false;
        }
        return true;
}

static bool read_comment(json_t *item, const char *prefix, char out[FW_COMMENT_MAX + 1], struct na_error *err)
{
        const char *s = NULL;
        char path[64];
        /* Characters first (type and NUL checks), bytes second: the limit is in bytes. */
        int r = proto_string(item, prefix, "comment", 0, 0, 4 * FW_COMMENT_MAX, &s, err);
        if (r < 0)
                return false;
        if (r != PROTO_PRESENT)
                return true;
        size_t len = strlen(s);
        if (len > FW_COMMENT_MAX) {
                na_error_field(err, proto_path(path, sizeof(path), prefix, "comment"),
                               "must be at most %d bytes (got %zu)", FW_COMMENT_MAX, len);
                return false;
        }
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
                        na_error_field(err, proto_path(path, sizeof(path), prefix, "comment"),
                                       "must not contain control characters");
                        return false;
                }
        memcpy(out, s, len + 1);
        return true;
}

static bool decode_rule(json_t *item, const char *prefix, struct fw_rule *r, struct na_error *err)
{
        memset(r, 0, sizeof(*r));
        r->enabled = true;
        if (!json_is_object(item)) {
                na_error_field(err, prefix, "must be an object");
                return false;
        }
        bool ok = true, type_ok, proto_ok, port_ok = true, src_ok, dst_ok;
        int64_t id = 0;
        int type = 0, protocol = 0, action = 0;
        const char *port = NULL, *reason = NULL;
        char path[64];

        if (proto_int(item, prefix, "id", 0, 1, FW_RULE_ID_MAX, &id, err) < 0)
                ok = false;
        r->id = (uint32_t)id;
        type_ok = proto_enum(item, prefix, "type", PROTO_REQUIRED, proto_fw_directions, &type, err) == PROTO_PRESENT;
        proto_ok = proto_enum(item, prefix, "protocol", PROTO_REQUIRED, proto_fw_protocols, &protocol, err) ==
                   PROTO_PRESENT;
        if (proto_enum(item, prefix, "action", PROTO_REQUIRED, proto_fw_actions, &action, err) != PROTO_PRESENT)
                ok = false;
        if (proto_bool(item, prefix, "enabled", 0, &r->enabled, err) < 0)
                ok = false;
        int pr = proto_string(item, prefix, "port", 0, 0, PORT_TEXT_MAX, &port, err);
        if (pr < 0)
                port_ok = false;
        else if (pr == PROTO_PRESENT && proto_fw_ports_parse(port, &r->port, &reason) < 0) {
                na_error_field(err, proto_path(path, sizeof(path), prefix, "port"), "%s", reason);
                port_ok = false;
        }
        src_ok = read_addr(item, prefix, "source", &r->source, err);
        dst_ok = read_addr(item, prefix, "destination", &r->destination, err);
        if (!read_comment(item, prefix, r->comment, err))
                ok = false;
        ok = ok && type_ok && proto_ok && port_ok && src_ok && dst_ok;

        r->type = (enum fw_direction)type;
        r->protocol = (enum fw_protocol)protocol;
        r->action = (enum fw_action)action;

        /* Checks across fields, once the fields themselves are known. */
        if (proto_ok && port_ok && r->port.kind != FW_PORT_ANY && r->protocol != FW_PROTO_TCP &&
            r->protocol != FW_PROTO_UDP) {
                na_error_field(err, proto_path(path, sizeof(path), prefix, "port"),
                               "only tcp and udp rules take a port (protocol is %s)", proto_fw_protocols[protocol]);
                ok = false;
        }
        if (src_ok && dst_ok && r->source.family && r->destination.family &&
            r->source.family != r->destination.family) {
                na_error_field(err, proto_path(path, sizeof(path), prefix, "destination"),
                               "is an %s address but the source is %s", family_name(r->destination.family),
                               family_name(r->source.family));
                ok = false;
        }
        if (proto_ok && (r->protocol == FW_PROTO_ICMP || r->protocol == FW_PROTO_ICMPV6)) {
                uint8_t want = r->protocol == FW_PROTO_ICMP ? AF_INET : AF_INET6;
                const char *hint = r->protocol == FW_PROTO_ICMP ? "icmp matches IPv4 only (use icmpv6)"
                                                                : "icmpv6 matches IPv6 only (use icmp)";
                if (src_ok && r->source.family && r->source.family != want) {
                        na_error_field(err, proto_path(path, sizeof(path), prefix, "source"), "%s", hint);
                        ok = false;
                }
                if (dst_ok && r->destination.family && r->destination.family != want) {
                        na_error_field(err, proto_path(path, sizeof(path), prefix, "destination"), "%s", hint);
                        ok = false;
                }
        }
        if (ok)
                proto_fw_rule_canonicalize(r);
        return ok;
}

static bool read_policy(json_t *in, const char *key, enum fw_action *out, struct na_error *err)
{
        json_t *v = json_object_get(in, key);
        if (json_is_string(v) && streq(json_string_value(v), "reject")) {
                na_error_field(err, key, "must be allow or deny: reject is not a policy (add reject rules instead)");
                return false;
        }
        int idx = 0;
        if (proto_enum(in, NULL, key, PROTO_REQUIRED, proto_fw_policies, &idx, err) != PROTO_PRESENT)
                return false;
        *out = (enum fw_action)idx;
        return true;
}

int proto_fw_decode(json_t *in, struct fw_config *out, struct na_error *err)
{
        proto_fw_init(out);
        if (!json_is_object(in))
                return na_error_field(err, NULL, "the firewall configuration must be a JSON object");

        bool ok = true;
        if (proto_bool(in, NULL, "enabled", PROTO_REQUIRED, &out->enabled, err) != PROTO_PRESENT)
                ok = false;
        if (!read_policy(in, "inboundPolicy", &out->inbound_policy, err))
                ok = false;
        if (!read_policy(in, "outboundPolicy", &out->outbound_policy, err))
                ok = false;

        json_t *rules = NULL;
        if (proto_array(in, NULL, "rules", PROTO_REQUIRED, 0, FW_RULES_MAX, &rules, err) != PROTO_PRESENT) {
                proto_fw_clear(out);
                return -EINVAL;
        }
        size_t n = json_array_size(rules);
        _cleanup_free_ struct fw_rule *v = n ? calloc(n, sizeof(*v)) : NULL;
        if (n && !v)
                return na_error_sys(err, ENOMEM, "decode firewall rules");
        for (size_t i = 0; i < n; i++) {
                char prefix[32];
                snprintf(prefix, sizeof(prefix), "rules.%zu", i);
                if (!decode_rule(json_array_get(rules, i), prefix, &v[i], err))
                        ok = false;
        }
        for (size_t i = 0; i < n; i++) {
                if (v[i].id == 0)
                        continue;
                for (size_t j = 0; j < i; j++)
                        if (v[j].id == v[i].id) {
                                char path[32];
                                snprintf(path, sizeof(path), "rules.%zu.id", i);
                                na_error_field(err, path, "duplicate rule id %u (also rules.%zu)", v[i].id, j);
                                ok = false;
                                break;
                        }
        }
        if (!ok) {
                proto_fw_clear(out);
                return -EINVAL;
        }
        out->rules = TAKE_PTR(v);
        out->n_rules = n;
        return 0;
}

/* ---- encode ---- */

static json_t *encode_rule(const struct fw_rule *r)
{
        char port[PORT_TEXT_MAX + 8], src[ADDR_TEXT_MAX], dst[ADDR_TEXT_MAX];
        /* id 0 is "none yet": only a configuration that was never applied has it */
        json_t *j = r->id ? json_pack("{s:I}", "id", (json_int_t)r->id) : json_object();
        json_t *rest = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:s}", "type", proto_fw_directions[r->type],
                                 "protocol", proto_fw_protocols[r->protocol], "port",
                                 proto_fw_ports_format(&r->port, port, sizeof(port)), "source",
                                 proto_fw_addr_format(&r->source, src, sizeof(src)), "destination",
                                 proto_fw_addr_format(&r->destination, dst, sizeof(dst)), "action",
                                 proto_fw_actions[r->action], "enabled", r->enabled, "comment", r->comment);
        if (!j || !rest || json_object_update(j, rest) < 0) {
                if (j)
                        json_decref(j);
                j = NULL;
        }
        if (rest)
                json_decref(rest);
        return j;
}

json_t *proto_fw_encode(const struct fw_config *cfg)
{
        json_t *rules = json_array();
        if (!rules)
                return NULL;
        for (size_t i = 0; i < cfg->n_rules; i++)
                if (json_array_append_new(rules, encode_rule(&cfg->rules[i])) < 0) {
                        json_decref(rules);
                        return NULL;
                }
        return json_pack("{s:b, s:s, s:s, s:o}", "enabled", cfg->enabled, "inboundPolicy",
                         proto_fw_actions[cfg->inbound_policy], "outboundPolicy", proto_fw_actions[cfg->outbound_policy],
                         "rules", rules);
}

/* ---- comparison ---- */

bool proto_fw_rule_equal(const struct fw_rule *a, const struct fw_rule *b)
{
        return a->id == b->id && a->type == b->type && a->protocol == b->protocol && a->action == b->action &&
               a->enabled == b->enabled && ports_equal(&a->port, &b->port) && addr_equal(&a->source, &b->source) &&
               addr_equal(&a->destination, &b->destination) && streq(a->comment, b->comment);
}

bool proto_fw_equal(const struct fw_config *a, const struct fw_config *b)
{
        if (a->enabled != b->enabled || a->inbound_policy != b->inbound_policy ||
            a->outbound_policy != b->outbound_policy || a->n_rules != b->n_rules)
                return false;
        for (size_t i = 0; i < a->n_rules; i++)
                if (!proto_fw_rule_equal(&a->rules[i], &b->rules[i]))
                        return false;
        return true;
}

static void reason(json_t *reasons, size_t *count, const char *fmt, ...) _printf_(3, 4);
static void reason(json_t *reasons, size_t *count, const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        (*count)++;
        if (reasons)
                json_array_append_new(reasons, json_string(buf));
}

static const struct fw_rule *find_rule(const struct fw_config *c, uint32_t id)
{
        for (size_t i = 0; i < c->n_rules; i++)
                if (c->rules[i].id == id)
                        return &c->rules[i];
        return NULL;
}

static void diff_rule(const struct fw_rule *k, const struct fw_rule *s, json_t *reasons, size_t *count)
{
        char a[PORT_TEXT_MAX + 8], b[PORT_TEXT_MAX + 8];
        uint32_t id = k->id;
        if (k->type != s->type)
                reason(reasons, count, "rule %u: type: kernel %s, stored %s", id, proto_fw_directions[k->type],
                       proto_fw_directions[s->type]);
        if (k->protocol != s->protocol)
                reason(reasons, count, "rule %u: protocol: kernel %s, stored %s", id, proto_fw_protocols[k->protocol],
                       proto_fw_protocols[s->protocol]);
        if (!ports_equal(&k->port, &s->port))
                reason(reasons, count, "rule %u: port: kernel %s, stored %s", id,
                       proto_fw_ports_format(&k->port, a, sizeof(a)), proto_fw_ports_format(&s->port, b, sizeof(b)));
        if (!addr_equal(&k->source, &s->source))
                reason(reasons, count, "rule %u: source: kernel %s, stored %s", id,
                       proto_fw_addr_format(&k->source, a, sizeof(a)), proto_fw_addr_format(&s->source, b, sizeof(b)));
        if (!addr_equal(&k->destination, &s->destination))
                reason(reasons, count, "rule %u: destination: kernel %s, stored %s", id,
                       proto_fw_addr_format(&k->destination, a, sizeof(a)),
                       proto_fw_addr_format(&s->destination, b, sizeof(b)));
        if (k->action != s->action)
                reason(reasons, count, "rule %u: action: kernel %s, stored %s", id, proto_fw_actions[k->action],
                       proto_fw_actions[s->action]);
        if (k->enabled != s->enabled)
                reason(reasons, count, "rule %u: enabled: kernel %s, stored %s", id, k->enabled ? "true" : "false",
                       s->enabled ? "true" : "false");
        if (!streq(k->comment, s->comment))
                reason(reasons, count, "rule %u: comment differs", id);
}

/* r has direction dir and the other configuration has a rule of that id and direction too. */
static bool in_both(const struct fw_rule *r, const struct fw_config *other, int dir)
{
        const struct fw_rule *o = find_rule(other, r->id);
        return (int)r->type == dir && o && o->type == r->type;
}

size_t proto_fw_diff(const struct fw_config *live, const struct fw_config *stored, json_t *reasons)
{
        size_t count = 0;
        if (live->enabled != stored->enabled)
                reason(reasons, &count, "enabled: kernel %s, stored %s", live->enabled ? "true" : "false",
                       stored->enabled ? "true" : "false");
        if (live->inbound_policy != stored->inbound_policy)
                reason(reasons, &count, "inboundPolicy: kernel %s, stored %s", proto_fw_actions[live->inbound_policy],
                       proto_fw_actions[stored->inbound_policy]);
        if (live->outbound_policy != stored->outbound_policy)
                reason(reasons, &count, "outboundPolicy: kernel %s, stored %s",
                       proto_fw_actions[live->outbound_policy], proto_fw_actions[stored->outbound_policy]);

        for (size_t i = 0; i < stored->n_rules; i++) {
                const struct fw_rule *s = &stored->rules[i], *k = find_rule(live, s->id);
                if (!k)
                        reason(reasons, &count, "rule %u: only in the stored configuration", s->id);
                else
                        diff_rule(k, s, reasons, &count);
        }
        for (size_t i = 0; i < live->n_rules; i++)
                if (!find_rule(stored, live->rules[i].id))
                        reason(reasons, &count, "rule %u: only in the kernel", live->rules[i].id);

        /*
         * Same ids, other order. Rules are evaluated in order within a direction; how
         * inbound and outbound rules interleave in the list changes nothing.
         */
        for (int dir = FW_INBOUND; dir <= FW_OUTBOUND; dir++) {
                size_t j = 0;
                for (size_t i = 0; i < live->n_rules; i++) {
                        if (!in_both(&live->rules[i], stored, dir))
                                continue;
                        while (j < stored->n_rules && !in_both(&stored->rules[j], live, dir))
                                j++;
                        if (j >= stored->n_rules || stored->rules[j].id != live->rules[i].id) {
                                reason(reasons, &count, "%s rule order differs", proto_fw_directions[dir]);
                                break;
                        }
                        j++;
                }
        }
        return count;
}
