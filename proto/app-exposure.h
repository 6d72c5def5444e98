/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.exposure.* and app.group.* params (AGENT-API 4.2) and the Exposure object
 * (reference 2.3). No I/O: JSON in, checked structs out, 422 VALIDATION_ERROR with
 * the field at fault. What depends on the node's configuration (externalPort inside
 * [apps] ports, a hostname under [apps] apps_domain) is checked by the app network
 * code, with the same field names.
 *
 *   struct proto_exposure_add *p;
 *   r = proto_exposure_add_decode(params, &p, &err);     type port: containerPort, externalPort, protocol
 *   ...                                                  type domain: hostname (normalised), containerPort
 *   proto_exposure_add_free(p);
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_DOMAIN_MAX 253
#define PROTO_UUID_LEN 36

enum proto_exposure_type { PROTO_EXPOSURE_PORT, PROTO_EXPOSURE_DOMAIN };
enum proto_exposure_protocol { PROTO_EXPOSURE_HTTP, PROTO_EXPOSURE_TCP, PROTO_EXPOSURE_UDP };
extern const char *const proto_exposure_types[];     /* "port", "domain", NULL */
extern const char *const proto_exposure_protocols[]; /* "http", "tcp", "udp", NULL */

struct proto_exposure_add {
        char id[PROTO_UUID_LEN + 1];
        enum proto_exposure_type type;
        char hostname[PROTO_DOMAIN_MAX + 1];    /* domain: normalised (lower case, no trailing dot) */
        int64_t container_port;                 /* 1..65535 */
        int64_t external_port;                  /* port: 1..65535 (the range is the node's), 0: absent, the
                                                   node picks the lowest free one; domain: 0 */
        enum proto_exposure_protocol protocol;  /* default http (domain) or tcp (port) */
};
int proto_exposure_add_decode(json_t *params, struct proto_exposure_add **ret, struct na_error *err);
void proto_exposure_add_free(struct proto_exposure_add *p);

/* app.exposure.verify and app.exposure.remove: {exposureId}. */
struct proto_exposure_ref {
        char id[PROTO_UUID_LEN + 1];
};
int proto_exposure_ref_decode(json_t *params, struct proto_exposure_ref **ret, struct na_error *err);
void proto_exposure_ref_free(struct proto_exposure_ref *p);

/* app.group.join and app.group.leave: {groupId}, a UUID. */
struct proto_app_group {
        char id[PROTO_UUID_LEN + 1];
};
int proto_app_group_decode(json_t *params, struct proto_app_group **ret, struct na_error *err);
void proto_app_group_free(struct proto_app_group *p);

/*
 * A DNS name as a custom domain: a trailing dot is removed and ASCII upper case
 * folded to lower case; then it must be at most 253 characters, at least two labels,
 * each 1..63 of [a-z0-9-] not starting or ending with '-' (so no wildcard, no
 * underscore, no raw UTF-8: IDN must come as punycode, xn--), and the last label
 * not all digits (no IPv4 address). Returns 0 and out, or -EINVAL and *why.
 */
int proto_domain_normalize(const char *in, char out[PROTO_DOMAIN_MAX + 1], const char **why);
/* Whether name equals apex or ends with "." apex (both normalised). */
bool proto_domain_under(const char *name, const char *apex);

/* The Exposure object of the reference (2.3) as the node keeps and answers it. */
struct proto_exposure {
        const char *id, *app_id, *type, *protocol, *hostname, *verification_target, *verification_error;
        int64_t container_port, external_port;                       /* external 0: null */
        bool verification_required, verified, managed, enabled;
        int64_t verified_at_ms, last_checked_at_ms, created_at_ms, updated_at_ms; /* 0: null */
};
json_t *proto_exposure_encode(const struct proto_exposure *e); /* NULL on allocation failure */
