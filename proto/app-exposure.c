/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Decoders of app.exposure.* and app.group.*, the domain name rules, the Exposure encoder. */
#include "proto/app-exposure.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "proto/decode.h"

const char *const proto_exposure_types[] = { "port", "domain", NULL };
const char *const proto_exposure_protocols[] = { "http", "tcp", "udp", NULL };

int proto_domain_normalize(const char *in, char out[PROTO_DOMAIN_MAX + 1], const char **why)
{
        size_t len = strlen(in);
        if (len > 0 && in[len - 1] == '.')
                len--; /* the root label: example.com. is example.com */
        if (len == 0)
                return *why = "must not be empty", -EINVAL;
        if (len > PROTO_DOMAIN_MAX)
                return *why = "must be at most 253 characters", -EINVAL;
        size_t labels = 0, label_len = 0, label_start = 0;
        bool all_digits = true;
        for (size_t i = 0; i <= len; i++) {
                char ch = i < len ? in[i] : '.';
                if (ch == '.') {
                        if (label_len == 0)
                                return *why = "must not have an empty label", -EINVAL;
                        if (out[label_start] == '-' || out[i - 1] == '-')
                                return *why = "labels must not start or end with '-'", -EINVAL;
                        labels++;
                        if (i < len)
                                out[i] = '.';
                        label_start = i + 1;
                        label_len = 0;
                        if (i < len)
                                all_digits = true;
                        continue;
                }
                if (ch == '*')
                        return *why = "must not be a wildcard", -EINVAL;
                if ((unsigned char)ch >= 0x80)
                        return *why = "must be ASCII: an international name must be given in punycode (xn--)",
                               -EINVAL;
                char lc = (char)tolower((unsigned char)ch);
                if (!((lc >= 'a' && lc <= 'z') || (lc >= '0' && lc <= '9') || lc == '-'))
                        return *why = "labels may hold only letters, digits and '-'", -EINVAL;
                if (!(lc >= '0' && lc <= '9'))
                        all_digits = false;
                if (++label_len > 63)
                        return *why = "labels must be at most 63 characters", -EINVAL;
                out[i] = lc;
        }
        out[len] = '\0';
        if (labels < 2)
                return *why = "must have at least two labels (a name in a domain)", -EINVAL;
        if (all_digits)
                return *why = "must be a name, not an address", -EINVAL;
        return 0;
}

bool proto_domain_under(const char *name, const char *apex)
{
        size_t n = strlen(name), a = strlen(apex);
        if (a == 0 || n < a)
                return false;
        return strcmp(name + n - a, apex) == 0 && (n == a || name[n - a - 1] == '.');
}

static void copy_id(char *dst, const char *src)
{
        snprintf(dst, PROTO_UUID_LEN + 1, "%s", src);
}

static bool given(json_t *params, const char *key)
{
        json_t *v = json_object_get(params, key);
        return v && !json_is_null(v);
}

int proto_exposure_add_decode(json_t *params, struct proto_exposure_add **ret, struct na_error *err)
{
        struct proto_exposure_add p = { 0 };
        const char *id = NULL, *host = NULL;
        int type = -1, proto = -1;
        bool ok = proto_uuid(params, NULL, "exposureId", PROTO_REQUIRED, &id, err) > 0;
        ok &= proto_enum(params, NULL, "type", PROTO_REQUIRED, proto_exposure_types, &type, err) > 0;
        ok &= proto_int(params, NULL, "containerPort", PROTO_REQUIRED, 1, 65535, &p.container_port, err) > 0;
        int rp = proto_enum(params, NULL, "protocol", 0, proto_exposure_protocols, &proto, err);
        ok &= rp >= 0;
        if (!ok && type < 0)
                return -EINVAL;
        if (type == PROTO_EXPOSURE_PORT) {
                ok &= proto_int(params, NULL, "externalPort", 0, 1, 65535, &p.external_port, err) >= 0; /* absent: 0 */
                if (given(params, "hostname")) {
                        na_error_field(err, "hostname", "must not be given for a port exposure");
                        ok = false;
                }
        } else if (type == PROTO_EXPOSURE_DOMAIN) {
                int r = proto_string(params, NULL, "hostname", PROTO_REQUIRED, 1, 1024, &host, err);
                const char *why = NULL;
                if (r > 0 && proto_domain_normalize(host, p.hostname, &why) < 0) {
                        na_error_field(err, "hostname", "%s", why);
                        ok = false;
                }
                ok &= r > 0;
                if (given(params, "externalPort")) {
                        na_error_field(err, "externalPort", "must not be given for a domain exposure");
                        ok = false;
                }
                if (proto == PROTO_EXPOSURE_UDP) {
                        na_error_field(err, "protocol", "a domain is routed over HTTP or TLS: udp is not possible");
                        ok = false;
                }
        }
        if (!ok)
                return -EINVAL;
        copy_id(p.id, id);
        p.type = (enum proto_exposure_type)type;
        p.protocol = rp > 0 ? (enum proto_exposure_protocol)proto
                            : type == PROTO_EXPOSURE_PORT ? PROTO_EXPOSURE_TCP : PROTO_EXPOSURE_HTTP;
        struct proto_exposure_add *o = malloc(sizeof(*o));
        if (!o)
                return na_error_sys(err, ENOMEM, "app.exposure.add params");
        *o = p;
        *ret = o;
        return 0;
}

void proto_exposure_add_free(struct proto_exposure_add *p)
{
        free(p);
}

static int decode_one_uuid(json_t *params, const char *key, char out[PROTO_UUID_LEN + 1], struct na_error *err)
{
        const char *id = NULL;
        if (proto_uuid(params, NULL, key, PROTO_REQUIRED, &id, err) <= 0)
                return -EINVAL;
        copy_id(out, id);
        return 0;
}

int proto_exposure_ref_decode(json_t *params, struct proto_exposure_ref **ret, struct na_error *err)
{
        struct proto_exposure_ref p;
        if (decode_one_uuid(params, "exposureId", p.id, err) < 0)
                return -EINVAL;
        if (!(*ret = malloc(sizeof(p))))
                return na_error_sys(err, ENOMEM, "exposure params");
        **ret = p;
        return 0;
}

void proto_exposure_ref_free(struct proto_exposure_ref *p)
{
        free(p);
}

int proto_app_group_decode(json_t *params, struct proto_app_group **ret, struct na_error *err)
{
        struct proto_app_group p;
        if (decode_one_uuid(params, "groupId", p.id, err) < 0)
                return -EINVAL;
        if (!(*ret = malloc(sizeof(p))))
                return na_error_sys(err, ENOMEM, "group params");
        **ret = p;
        return 0;
}

void proto_app_group_free(struct proto_app_group *p)
{
        free(p);
}

static json_t *opt_str(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *opt_time(int64_t ms)
{
        char buf[40];
        if (ms <= 0 || !na_format_time_ms((uint64_t)ms, buf, sizeof(buf)))
                return json_null();
        return json_string(buf);
}

json_t *proto_exposure_encode(const struct proto_exposure *e)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:b, s:b, s:o, s:o, s:o, s:o, s:b, s:b, s:o, s:o}",
                         "id", e->id, "appId", e->app_id, "name", e->hostname ? e->hostname : e->id, "protocol",
                         e->protocol, "type", e->type, "containerPort", (json_int_t)e->container_port,
                         "externalPort", e->external_port > 0 ? json_integer(e->external_port) : json_null(),
                         "hostname", opt_str(e->hostname), "isDomainVerificationRequired", e->verification_required,
                         "isDomainVerified", e->verified, "verificationTarget", opt_str(e->verification_target),
                         "verifiedAt", opt_time(e->verified_at_ms), "verificationError",
                         opt_str(e->verification_error), "lastCheckedAt", opt_time(e->last_checked_at_ms),
                         "isManaged", e->managed, "isEnabled", e->enabled, "createdAt", opt_time(e->created_at_ms),
                         "updatedAt", opt_time(e->updated_at_ms));
}
