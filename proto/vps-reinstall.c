/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vps.reinstall (reference 4.4): an omitted field keeps its current value, null
 * clears it; the server ends with a password, a key or both; a Windows template
 * requires a password and refuses keys.
 */
#include "proto/vps.h"

#include <string.h>

#include "proto/decode.h"
#include "proto/vps-internal.h"

void proto_vps_reinstall_free(struct proto_vps_reinstall *p)
{
        if (!p)
                return;
        if (p->root)
                json_decref(p->root);
        free(p);
}

/* A field that may be omitted but not cleared. */
static bool not_null(json_t *params, const char *key, const char *what, struct na_error *err)
{
        json_t *v = json_object_get(params, key);
        if (v && json_is_null(v)) {
                na_error_field(err, key, "cannot be cleared: %s", what);
                return false;
        }
        return true;
}

int proto_vps_reinstall_decode(json_t *params, struct proto_vps_reinstall **ret, struct na_error *err)
{
        struct proto_vps_reinstall *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "vps.reinstall params");
        p->root = json_incref(params);
        bool ok = true;
        int r;

        /* The template, its image and the hostname can change but never be cleared. */
        if (not_null(params, "templateId", "a server always has a template", err))
                ok &= proto_string(params, NULL, "templateId", 0, 1, PROTO_VPS_TEMPLATE_ID_MAX, &p->template_id, err) >=
                      0;
        else
                ok = false;
        if (not_null(params, "templateImageSlug", "a server always has an image", err))
                ok &= proto_string(params, NULL, "templateImageSlug", 0, 1, PROTO_VPS_TEMPLATE_ID_MAX, &p->image_slug,
                                   err) >= 0;
        else
                ok = false;
        if (not_null(params, "hostname", "a server always has a hostname", err))
                ok &= proto_vps_hostname_field(params, "hostname", 0, &p->hostname, err) >= 0;
        else
                ok = false;

        r = proto_vps_inputs_field(params, "inputs", PROTO_NULLABLE, &p->inputs, err);
        ok &= r >= 0;
        p->inputs_op = r == PROTO_PRESENT ? PROTO_VPS_SET : r == PROTO_NULL ? PROTO_VPS_CLEAR : PROTO_VPS_KEEP;

        r = proto_vps_password_field(params, "vmPassword", PROTO_NULLABLE, &p->password, err);
        ok &= r >= 0;
        p->password_op = r == PROTO_PRESENT ? PROTO_VPS_SET : r == PROTO_NULL ? PROTO_VPS_CLEAR : PROTO_VPS_KEEP;

        r = proto_uuid(params, NULL, "sshKeyId", PROTO_NULLABLE, &p->ssh_key_id, err);
        ok &= r >= 0;
        p->key_op = r == PROTO_PRESENT ? PROTO_VPS_SET : r == PROTO_NULL ? PROTO_VPS_CLEAR : PROTO_VPS_KEEP;
        int rk = proto_string(params, NULL, "sshPublicKey", PROTO_NULLABLE, 1, PROTO_VPS_SSH_KEY_MAX,
                              &p->ssh_public_key, err);
        ok &= rk >= 0;
        if (rk == PROTO_PRESENT && !proto_vps_ssh_key_valid(p->ssh_public_key)) {
                na_error_field(err, "sshPublicKey", "must be an OpenSSH public key line (\"ssh-ed25519 AAAA... comment\")");
                ok = false;
        }
        if (r == PROTO_PRESENT && rk != PROTO_PRESENT && rk >= 0) {
                na_error_field(err, "sshPublicKey", "is required with sshKeyId (the key that sshKeyId names)");
                ok = false;
        }
        if (rk == PROTO_PRESENT && r != PROTO_PRESENT && r >= 0) {
                na_error_field(err, "sshPublicKey", "comes only with an sshKeyId");
                ok = false;
        }

        if (!ok) {
                proto_vps_reinstall_free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

int proto_vps_reinstall_resolve(const struct proto_vps_reinstall *req, const struct proto_vps_install_state *cur,
                                enum proto_vps_os new_os, struct proto_vps_install *out, struct na_error *err)
{
        memset(out, 0, sizeof(*out));
        out->hostname = req->hostname ? req->hostname : cur->hostname;
        out->template_id = req->template_id ? req->template_id : cur->template_id;
        out->image_slug = req->image_slug ? req->image_slug : cur->image_slug;
        out->inputs_op = req->inputs_op;
        out->inputs = req->inputs_op == PROTO_VPS_SET ? req->inputs
                      : req->inputs_op == PROTO_VPS_KEEP ? cur->inputs
                                                         : NULL;
        out->password_op = req->password_op;
        out->password = req->password;
        out->key_op = req->key_op;
        out->ssh_key_id = req->key_op == PROTO_VPS_SET ? req->ssh_key_id : NULL;
        out->ssh_public_key = req->key_op == PROTO_VPS_SET ? req->ssh_public_key : NULL;

        bool ok = true;
        if (!out->hostname || !proto_vps_hostname_valid(out->hostname)) {
                na_error_field(err, "hostname", "is required: the server has no valid hostname to keep");
                ok = false;
        }
        if (!out->template_id || !*out->template_id) {
                na_error_field(err, "templateId", "is required: the server has no template to keep");
                ok = false;
        }
        if (!out->image_slug || !*out->image_slug) {
                na_error_field(err, "templateImageSlug", "is required: the server has no image to keep");
                ok = false;
        }

        bool password = req->password_op == PROTO_VPS_SET ||
                        (req->password_op == PROTO_VPS_KEEP && cur->has_password);
        bool keys = req->key_op == PROTO_VPS_SET || (req->key_op == PROTO_VPS_KEEP && cur->n_ssh_keys > 0);

        if (new_os == PROTO_VPS_OS_WINDOWS) {
                if (req->key_op == PROTO_VPS_SET) {
                        na_error_field(err, "sshKeyId", "a Windows template does not accept SSH keys");
                        ok = false;
                } else if (keys) {
                        na_error_field(err, "sshKeyId",
                                       "the server has an SSH key, which a Windows template refuses: pass null to remove it");
                        ok = false;
                }
                if (!password) {
                        if (req->password_op == PROTO_VPS_CLEAR)
                                na_error_field(err, "vmPassword", "a Windows template requires a password");
                        else
                                na_error_field(err, "vmPassword", "is required: a Windows template requires a password");
                        ok = false;
                }
        } else if (!password && !keys) {
                na_error_field(err, NULL, "the server must end with a vmPassword, an SSH key or both");
                ok = false;
        }
        return ok ? 0 : -EINVAL;
}
