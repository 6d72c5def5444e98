/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Params decoders of vps.create, power, exec, upgrade, snapshot.* and backup.*, and the field rules they share. */
#include "proto/vps.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/backup.h"
#include "proto/decode.h"
#include "proto/vps-internal.h"

const char *const proto_vps_os_names[] = { "linux", "windows", NULL };
const char *const proto_vps_power_actions[] = { "start", "stop", "reboot", "force-stop", NULL };

bool proto_vps_hostname_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 1 || n > PROTO_VPS_HOSTNAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && !(c == '-' && i > 0 && i < n - 1))
                        return false;
        }
        return true;
}

const char *proto_vps_password_problem(const char *s)
{
        if (!s)
                return "is required";
        size_t chars = proto_utf8_chars(s);
        if (chars < PROTO_VPS_PASSWORD_MIN || chars > PROTO_VPS_PASSWORD_MAX)
                return "must be 8..64 characters";
        bool lower = false, upper = false, digit = false, other = false;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        return "must not contain control characters";
                if (*p >= 'a' && *p <= 'z')
                        lower = true;
                else if (*p >= 'A' && *p <= 'Z')
                        upper = true;
                else if (*p >= '0' && *p <= '9')
                        digit = true;
                else if (*p < 0x80 || (*p & 0xc0) == 0xc0)
                        other = true; /* count each multi-byte character once, at its lead byte */
        }
        if (!lower)
                return "must contain a lowercase letter";
        if (!upper)
                return "must contain an uppercase letter";
        if (!digit)
                return "must contain a digit";
        if (!other)
                return "must contain a character that is not a letter or a digit";
        return NULL;
}

static int b64_value(unsigned char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Decode the first n bytes of a base64 text (no padding inside them). */
static bool b64_prefix(const char *b64, size_t b64_len, unsigned char *out, size_t n)
{
        size_t got = 0;
        uint32_t acc = 0;
        int bits = 0;
        for (size_t i = 0; i < b64_len && got < n; i++) {
                int v = b64_value((unsigned char)b64[i]);
                if (v < 0)
                        return false;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[got++] = (unsigned char)(acc >> bits);
                }
        }
        return got == n;
}

bool proto_vps_ssh_key_valid(const char *s)
{
        static const char *const types[] = {
                "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", "ssh-dss", NULL,
        };
        if (!s || strlen(s) > PROTO_VPS_SSH_KEY_MAX)
                return false;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return false; /* one line, no control characters */
        const char *sp = strchr(s, ' ');
        if (!sp)
                return false;
        size_t tlen = (size_t)(sp - s);
        const char *type = NULL;
        for (int i = 0; types[i]; i++)
                if (strlen(types[i]) == tlen && strncmp(types[i], s, tlen) == 0)
                        type = types[i];
        if (!type)
                return false;
        const char *b64 = sp + 1;
        size_t blen = strcspn(b64, " ");
        if (blen < 16 || blen % 4 != 0)
                return false;
        for (size_t i = 0; i < blen; i++)
                if (b64_value((unsigned char)b64[i]) < 0 && !(b64[i] == '=' && i >= blen - 2))
                        return false;
        /* The blob starts with the key type again: u32 length, then the name. */
        unsigned char head[4 + 64];
        if (!b64_prefix(b64, blen, head, 4 + tlen))
                return false;
        uint32_t n = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
        return n == tlen && memcmp(head + 4, type, tlen) == 0;
}

bool proto_vps_object_id_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 1 || n > PROTO_VPS_OBJECT_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
                        return false;
        return true;
}

int proto_vps_plan_decode(json_t *obj, const char *prefix, struct proto_vps_plan *out, struct na_error *err)
{
        bool ok = true;
        memset(out, 0, sizeof(*out));
        ok &= proto_int(obj, prefix, "cpuCores", PROTO_REQUIRED, 1, 256, &out->cpu_cores, err) > 0;
        ok &= proto_int(obj, prefix, "cpuThreads", PROTO_REQUIRED, 1, 8, &out->cpu_threads, err) > 0;
        ok &= proto_int(obj, prefix, "ramMB", PROTO_REQUIRED, 64, 4194304, &out->ram_mb, err) > 0;
        ok &= proto_int(obj, prefix, "storageMB", PROTO_REQUIRED, 1, 16777216, &out->storage_mb, err) > 0;
        ok &= proto_int(obj, prefix, "networkSpeedLimitMbps", PROTO_REQUIRED, 0, 400000, &out->network_speed_mbps,
                        err) > 0;
        ok &= proto_int(obj, prefix, "bandwidthLimitGb", PROTO_REQUIRED, 0, 1000000000, &out->bandwidth_limit_gb,
                        err) > 0;
        ok &= proto_int(obj, prefix, "maxSnapshots", PROTO_REQUIRED, 0, 1000, &out->max_snapshots, err) > 0;
        if (ok && out->cpu_cores * out->cpu_threads > 1024) {
                char path[64];
                na_error_field(err, proto_path(path, sizeof(path), prefix, "cpuThreads"),
                               "cpuCores x cpuThreads must be at most 1024");
                ok = false;
        }
        return ok ? 0 : -EINVAL;
}

int proto_vps_hostname_field(json_t *obj, const char *key, unsigned flags, const char **out, struct na_error *err)
{
        const char *s = NULL;
        *out = NULL;
        int r = proto_string(obj, NULL, key, flags, 1, PROTO_VPS_HOSTNAME_MAX, &s, err);
        if (r != PROTO_PRESENT)
                return r;
        if (!proto_vps_hostname_valid(s))
                return na_error_field(err, key,
                                      "must hold letters, digits and hyphens, and start and end with a letter or digit");
        *out = s;
        return r;
}

int proto_vps_password_field(json_t *obj, const char *key, unsigned flags, const char **out, struct na_error *err)
{
        const char *s = NULL;
        *out = NULL;
        int r = proto_string(obj, NULL, key, flags, 0, SIZE_MAX, &s, err);
        if (r != PROTO_PRESENT)
                return r;
        const char *problem = proto_vps_password_problem(s);
        if (problem)
                return na_error_field(err, key, "%s", problem);
        *out = s;
        return r;
}

int proto_vps_inputs_field(json_t *obj, const char *key, unsigned flags, json_t **out, struct na_error *err)
{
        json_t *in = NULL;
        *out = NULL;
        int r = proto_object(obj, NULL, key, flags, &in, err);
        if (r != PROTO_PRESENT)
                return r;
        if (json_object_size(in) > PROTO_VPS_INPUTS_MAX)
                return na_error_field(err, key, "must hold at most %d inputs", PROTO_VPS_INPUTS_MAX);
        const char *k;
        json_t *v;
        bool ok = true;
        json_object_foreach(in, k, v) {
                char path[300];
                snprintf(path, sizeof(path), "%s.%s", key, k);
                if (strlen(k) < 1 || strlen(k) > 64 || strchr(k, '.')) {
                        na_error_field(err, key, "input names are 1..64 characters without dots");
                        ok = false;
                } else if (json_is_string(v)) {
                        if (json_string_length(v) > 4096 || strlen(json_string_value(v)) != json_string_length(v)) {
                                na_error_field(err, path, "must be at most 4096 bytes without NUL characters");
                                ok = false;
                        }
                } else if (!json_is_integer(v) && !json_is_boolean(v)) {
                        na_error_field(err, path, "must be a string, an integer or a boolean");
                        ok = false;
                }
        }
        if (!ok)
                return -EINVAL;
        *out = in;
        return r;
}

static int template_ref_decode(json_t *obj, struct proto_vps_template_ref *out, struct na_error *err)
{
        json_t *t = NULL;
        int r = proto_object(obj, NULL, "template", PROTO_REQUIRED, &t, err);
        if (r != PROTO_PRESENT)
                return -EINVAL;
        bool ok = true;
        int os = 0;
        ok &= proto_string(t, "template", "id", PROTO_REQUIRED, 1, PROTO_VPS_TEMPLATE_ID_MAX, &out->id, err) > 0;
        ok &= proto_string(t, "template", "imageSlug", PROTO_REQUIRED, 1, PROTO_VPS_TEMPLATE_ID_MAX,
                           &out->image_slug, err) > 0;
        ok &= proto_enum(t, "template", "os", PROTO_REQUIRED, proto_vps_os_names, &os, err) > 0;
        out->os = (enum proto_vps_os)os;
        return ok ? 0 : -EINVAL;
}

void proto_vps_create_free(struct proto_vps_create *p)
{
        if (!p)
                return;
        proto_strv_free(p->ssh_keys);
        if (p->root)
                json_decref(p->root);
        free(p);
}

int proto_vps_create_decode(json_t *params, struct proto_vps_create **ret, struct na_error *err)
{
        struct proto_vps_create *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "vps.create params");
        p->root = json_incref(params);
        bool ok = true;

        ok &= proto_string(params, NULL, "name", PROTO_REQUIRED, 1, PROTO_VPS_NAME_MAX, &p->name, err) > 0;
        ok &= proto_vps_hostname_field(params, "hostname", PROTO_REQUIRED, &p->hostname, err) > 0;
        json_t *plan = NULL;
        if (proto_object(params, NULL, "plan", PROTO_REQUIRED, &plan, err) == PROTO_PRESENT)
                ok &= proto_vps_plan_decode(plan, "plan", &p->plan, err) == 0;
        else
                ok = false;
        ok &= template_ref_decode(params, &p->tmpl, err) == 0;
        ok &= proto_vps_password_field(params, "vmPassword", 0, &p->password, err) >= 0;
        int r = proto_strv(params, NULL, "sshPublicKeys", 0, 0, PROTO_VPS_SSH_KEYS_MAX, 1, PROTO_VPS_SSH_KEY_MAX,
                           &p->ssh_keys, err);
        if (r < 0)
                ok = false;
        for (size_t i = 0; p->ssh_keys && p->ssh_keys[i]; i++)
                if (!proto_vps_ssh_key_valid(p->ssh_keys[i])) {
                        char path[64];
                        snprintf(path, sizeof(path), "sshPublicKeys.%zu", i);
                        na_error_field(err, path, "must be an OpenSSH public key line (\"ssh-ed25519 AAAA... comment\")");
                        ok = false;
                }
        if (p->ssh_keys && !p->ssh_keys[0]) {
                proto_strv_free(p->ssh_keys);
                p->ssh_keys = NULL;
        }
        ok &= proto_vps_inputs_field(params, "inputs", 0, &p->inputs, err) >= 0;
        json_t *net = NULL;
        if (proto_object(params, NULL, "network", PROTO_REQUIRED, &net, err) == PROTO_PRESENT)
                ok &= proto_vps_network_decode(net, "network", &p->network, err) == 0;
        else
                ok = false;
        if (params && json_object_get(params, "restoreBackupId") &&
            !json_is_null(json_object_get(params, "restoreBackupId")))
                ok &= proto_backup_id_field(params, "restoreBackupId", p->restore_backup_id, err);

        /* Credentials: a password, a key or both; Windows requires a password and refuses keys. */
        if (ok && p->tmpl.os == PROTO_VPS_OS_WINDOWS) {
                if (!p->password) {
                        na_error_field(err, "vmPassword", "is required for a Windows template");
                        ok = false;
                }
                if (p->ssh_keys) {
                        na_error_field(err, "sshPublicKeys", "a Windows template does not accept SSH keys");
                        ok = false;
                }
        } else if (ok && !p->password && !p->ssh_keys) {
                na_error_field(err, NULL, "a server needs a vmPassword, an SSH key or both");
                ok = false;
        }
        if (!ok) {
                proto_vps_create_free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

void proto_vps_power_free(struct proto_vps_power *p)
{
        free(p);
}

int proto_vps_power_decode(json_t *params, struct proto_vps_power **ret, struct na_error *err)
{
        struct proto_vps_power p = { .grace_sec = PROTO_VPS_GRACE_DEFAULT };
        int action = 0;
        bool ok = proto_enum(params, NULL, "action", PROTO_REQUIRED, proto_vps_power_actions, &action, err) > 0;
        ok &= proto_int(params, NULL, "graceSec", 0, 0, PROTO_VPS_GRACE_MAX, &p.grace_sec, err) >= 0;
        if (!ok)
                return -EINVAL;
        p.action = (enum proto_vps_power_action)action;
        struct proto_vps_power *out = malloc(sizeof(*out));
        if (!out)
                return na_error_sys(err, ENOMEM, "vps.power params");
        *out = p;
        *ret = out;
        return 0;
}

void proto_vps_exec_free(struct proto_vps_exec *p)
{
        if (!p)
                return;
        proto_strv_free(p->argv);
        free(p);
}

int proto_vps_exec_decode(json_t *params, struct proto_vps_exec **ret, struct na_error *err)
{
        char **argv = NULL;
        int64_t timeout = PROTO_VPS_EXEC_TIMEOUT_DEFAULT;
        bool ok = proto_strv(params, NULL, "command", PROTO_REQUIRED, 1, PROTO_VPS_EXEC_ARGS_MAX, 1,
                             PROTO_VPS_EXEC_ARG_MAX, &argv, err) > 0;
        ok &= proto_int(params, NULL, "timeoutSec", 0, 1, PROTO_VPS_EXEC_TIMEOUT_MAX, &timeout, err) >= 0;
        if (!ok) {
                proto_strv_free(argv);
                return -EINVAL;
        }
        struct proto_vps_exec *p = malloc(sizeof(*p));
        if (!p) {
                proto_strv_free(argv);
                return na_error_sys(err, ENOMEM, "vps.exec params");
        }
        p->argv = argv;
        p->timeout_sec = timeout;
        *ret = p;
        return 0;
}

void proto_vps_upgrade_free(struct proto_vps_upgrade *p)
{
        free(p);
}

int proto_vps_upgrade_decode(json_t *params, struct proto_vps_upgrade **ret, struct na_error *err)
{
        struct proto_vps_upgrade p;
        json_t *plan = NULL;
        if (proto_object(params, NULL, "plan", PROTO_REQUIRED, &plan, err) != PROTO_PRESENT)
                return -EINVAL;
        if (proto_vps_plan_decode(plan, "plan", &p.plan, err) < 0)
                return -EINVAL;
        struct proto_vps_upgrade *out = malloc(sizeof(*out));
        if (!out)
                return na_error_sys(err, ENOMEM, "vps.upgrade params");
        *out = p;
        *ret = out;
        return 0;
}

/* A snapshotId / backupId field into buf. */
static bool object_id_field(json_t *obj, const char *key, char buf[PROTO_VPS_OBJECT_ID_MAX + 1], struct na_error *err)
{
        return proto_backup_id_field(obj, key, buf, err);
}

#define DUP_OUT(type, value, what)                                     \
        ({                                                             \
                type *_o = malloc(sizeof(type));                       \
                if (!_o)                                               \
                        return na_error_sys(err, ENOMEM, "%s", what);  \
                *_o = (value);                                         \
                *ret = _o;                                             \
                0;                                                     \
        })

int proto_vps_snapshot_create_decode(json_t *params, struct proto_vps_snapshot_create **ret, struct na_error *err)
{
        struct proto_vps_snapshot_create p = { 0 };
        const char *name = NULL;
        bool ok = object_id_field(params, "snapshotId", p.snapshot_id, err);
        ok &= proto_string(params, NULL, "name", PROTO_REQUIRED, 1, PROTO_VPS_SNAPSHOT_NAME_MAX, &name, err) > 0;
        ok &= proto_int(params, NULL, "maxSnapshots", PROTO_REQUIRED, 0, 1000, &p.max_snapshots, err) > 0;
        if (name)
                for (const unsigned char *c = (const unsigned char *)name; *c; c++)
                        if (*c < 0x20 || *c == 0x7f) {
                                na_error_field(err, "name", "must not contain control characters");
                                ok = false;
                                break;
                        }
        if (!ok)
                return -EINVAL;
        snprintf(p.name, sizeof(p.name), "%s", name);
        return DUP_OUT(struct proto_vps_snapshot_create, p, "vps.snapshot.create params");
}

int proto_vps_snapshot_ref_decode(json_t *params, struct proto_vps_snapshot_ref **ret, struct na_error *err)
{
        struct proto_vps_snapshot_ref p = { 0 };
        if (!object_id_field(params, "snapshotId", p.snapshot_id, err))
                return -EINVAL;
        return DUP_OUT(struct proto_vps_snapshot_ref, p, "vps.snapshot params");
}

int proto_vps_backup_create_decode(json_t *params, struct proto_vps_backup_create **ret, struct na_error *err)
{
        struct proto_vps_backup_create p = { .limits = { -1, -1, -1 } };
        bool ok = object_id_field(params, "backupId", p.backup_id, err);
        ok &= proto_backup_limits_decode(params, &p.limits, err) >= 0;
        if (!ok)
                return -EINVAL;
        return DUP_OUT(struct proto_vps_backup_create, p, "vps.backup.create params");
}

int proto_vps_backup_ref_decode(json_t *params, struct proto_vps_backup_ref **ret, struct na_error *err)
{
        struct proto_vps_backup_ref p = { 0 };
        if (!object_id_field(params, "backupId", p.backup_id, err))
                return -EINVAL;
        return DUP_OUT(struct proto_vps_backup_ref, p, "vps.backup params");
}
