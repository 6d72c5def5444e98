/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The Firewall configuration of a server (hosting reference 2.8; agent API
 * vps.firewall.get and vps.firewall.set): JSON in, validated and canonical C structs
 * out, and back. No I/O, no logging: this is the part that is fuzzed.
 *
 *   { "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "allow",
 *     "rules": [ { "id": 1, "type": "inbound", "protocol": "tcp", "port": "22",
 *                  "source": "203.0.113.0/24", "destination": "any",
 *                  "action": "allow", "enabled": true, "comment": "ssh" } ] }
 *
 * Decisions where the reference is silent:
 * - Policies are "allow" or "deny". "reject" is refused as a policy: a reject
 *   default answers every probe of every closed port on the customer's behalf (scans,
 *   spoofed-source reflection), while deny is silent; reject stays available per rule.
 * - "port" is the destination port of the packet, in both directions (inbound 22 =
 *   connections to the server's port 22; outbound 443 = connections the server makes
 *   to port 443). Forms: "22", "1000-2000", "22,80,443" (at most FW_PORTS_MAX
 *   single ports; no ranges inside a list). "any", "" or an absent/null port mean
 *   every port; only tcp and udp rules take a port.
 * - "source"/"destination": an IPv4 or IPv6 address, or a CIDR prefix without host
 *   bits ("10.0.0.5/24" is refused, "10.0.0.0/24" is meant), or "any" (also "" or
 *   absent). Both given must be of one family; icmp takes IPv4 only, icmpv6 IPv6 only.
 * - "id" is optional on input: rules without one get the next free integer when the
 *   configuration is applied (the firewall library does it); ids are 1..2^31-1 and
 *   unique within a server.
 * - "enabled" (rule) defaults to true; "comment" defaults to "" and holds at most
 *   255 bytes of UTF-8 without control characters.
 *
 * Canonical form (what decode produces and encode prints, so what is stored and read
 * back): addresses as inet_ntop prints them, without "/32" or "/128"; a port range
 * of one port as that port; a port list sorted ascending. "0.0.0.0/0" or "::/0"
 * restricts a rule to one IP family: it is kept only when no other address of the
 * rule fixes the family, and then on the source side.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define FW_RULES_MAX 1000
#define FW_COMMENT_MAX 255       /* bytes */
#define FW_PORTS_MAX 64          /* ports in one list */
#define FW_RULE_ID_MAX 2147483647u

enum fw_direction { FW_INBOUND, FW_OUTBOUND };
enum fw_protocol { FW_PROTO_TCP, FW_PROTO_UDP, FW_PROTO_ICMP, FW_PROTO_ICMPV6, FW_PROTO_ALL };
/* Rule actions; policies use ALLOW and DENY (REJECT only appears in a live read of a hand edit). */
enum fw_action { FW_ACTION_ALLOW, FW_ACTION_DENY, FW_ACTION_REJECT };

/* NULL-terminated, indexed by the enums. */
extern const char *const proto_fw_directions[];
extern const char *const proto_fw_protocols[];
extern const char *const proto_fw_actions[];
extern const char *const proto_fw_policies[];

struct fw_addr {
        uint8_t family; /* 0 = any, AF_INET or AF_INET6 */
        uint8_t prefix; /* 0..32 or 0..128; 0 with a family = "that family, any address" */
        uint8_t bytes[16];
};

enum fw_port_kind { FW_PORT_ANY, FW_PORT_SINGLE, FW_PORT_RANGE, FW_PORT_LIST };
struct fw_ports {
        enum fw_port_kind kind;
        uint16_t n;                 /* LIST: entries in v */
        uint16_t v[FW_PORTS_MAX];   /* SINGLE: v[0]; RANGE: v[0]..v[1]; LIST: v[0..n), ascending */
};

struct fw_rule {
        uint32_t id; /* 0: none given yet */
        enum fw_direction type;
        enum fw_protocol protocol;
        enum fw_action action;
        bool enabled;
        struct fw_ports port;
        struct fw_addr source, destination;
        char comment[FW_COMMENT_MAX + 1];
};

struct fw_config {
        bool enabled;
        enum fw_action inbound_policy, outbound_policy;
        size_t n_rules;
        struct fw_rule *rules; /* owned */
};

/* The configuration of a server that never had one: off, allow both ways, no rules. */
void proto_fw_init(struct fw_config *cfg);
void proto_fw_clear(struct fw_config *cfg);
int proto_fw_copy(struct fw_config *dst, const struct fw_config *src, struct na_error *err);

/*
 * Decode and validate a Firewall configuration into its canonical form. Every field
 * is read before failing; problems are VALIDATION_ERROR details under "enabled",
 * "rules.3.port" and so on. Rules without an id get id 0. On failure out is empty.
 */
int proto_fw_decode(json_t *in, struct fw_config *out, struct na_error *err);
/* Every field of every rule; "id" only when it has one (not 0). NULL on allocation failure. */
json_t *proto_fw_encode(const struct fw_config *cfg);

/* Field parsers and printers (the decoder's, exposed for the firewall library and tests). */
int proto_fw_addr_parse(const char *s, struct fw_addr *out, const char **reason);
const char *proto_fw_addr_format(const struct fw_addr *a, char *buf, size_t len);
int proto_fw_ports_parse(const char *s, struct fw_ports *out, const char **reason);
const char *proto_fw_ports_format(const struct fw_ports *p, char *buf, size_t len);
/* Put a rule's addresses in canonical form (see the top of this file). */
void proto_fw_rule_canonicalize(struct fw_rule *r);

bool proto_fw_rule_equal(const struct fw_rule *a, const struct fw_rule *b);
bool proto_fw_equal(const struct fw_config *a, const struct fw_config *b);

/*
 * Differences between the kernel's configuration and the stored one, as short
 * sentences appended to reasons (a JSON array): "rule 3: port: kernel 22, stored
 * 2222", "rule 9: only in the kernel", "inbound rule order differs". How inbound and
 * outbound rules interleave in the list is not a difference. reasons may be NULL.
 * Returns their number.
 */
size_t proto_fw_diff(const struct fw_config *live, const struct fw_config *stored, json_t *reasons);
