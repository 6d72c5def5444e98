/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vps.create, vps.reinstall and vps.network.set: params decoded by proto/vps*.c, the reinstall rules
 * of reference 4.4 applied against what the server has now, the work done by the
 * VM driver with its stages reported into the job.
 */
#include "agent/kinds/kind-vps.h"

#include <string.h>

#include "agent/base/services.h"

static const char *const create_stages[] = { "preparing-disk", "writing-image", "configuring", "booting", NULL };
static const char *const reinstall_stages[] = { "stopping", "preparing-disk", "writing-image", "configuring",
                                                "booting", "done", NULL };

/* ---- vps.create ---- */

static int create_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_create_decode(params, (struct proto_vps_create **)ret, err);
}

static void create_free(void *p)
{
        proto_vps_create_free(p);
}

static int create_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_create *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct vm_create_spec spec = {
                .id = j.id,
                .name = p->name,
                .hostname = p->hostname,
                .plan = p->plan,
                .tmpl = p->tmpl,
                .password = p->password,
                .ssh_keys = p->ssh_keys,
                .inputs = p->inputs,
                .restore_backup_id = p->restore_backup_id[0] ? p->restore_backup_id : NULL,
                .network = p->network,
        };
        struct proto_vps_server srv;
        if ((r = j.vm->create(j.conn, &spec, &j.progress, &srv, err)) < 0)
                return r;
        if (j.services->vps_added)
                j.services->vps_added(j.services, j.id, (int)(p->plan.cpu_cores * p->plan.cpu_threads),
                                      p->plan.ram_mb);
        *ret = proto_vps_server_encode(&srv);
        return *ret ? 0 : na_error_sys(err, ENOMEM, "vps %s: create result", j.id);
}

JOB_KIND(vps_create_kind, "vps.create", .target = PROTO_TARGET_VPS, .changes = true, .stages = create_stages,
         .decode = create_decode, .free_params = create_free, .run = create_run);

/* ---- vps.reinstall ---- */

static int reinstall_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_reinstall_decode(params, (struct proto_vps_reinstall **)ret, err);
}

static void reinstall_free(void *p)
{
        proto_vps_reinstall_free(p);
}

static const struct vm_template_fields reinstall_fields = {
        .id = "templateId",
        .image_slug = "templateImageSlug",
        .os = NULL,
        .inputs = "inputs",
};

static int reinstall_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_reinstall *req = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        _cleanup_(vm_install_info_clear) struct vm_install_info cur = { 0 };
        if ((r = j.vm->get_install(j.conn, j.id, &cur, err)) < 0)
                return r;

        /* The template the server ends on decides the credential rules. */
        const char *template_id = req->template_id ? req->template_id : cur.template_id;
        const char *image_slug = req->image_slug ? req->image_slug : cur.image_slug;
        json_t *inputs = req->inputs_op == PROTO_VPS_SET ? req->inputs
                         : req->inputs_op == PROTO_VPS_KEEP ? cur.inputs
                                                             : NULL;
        enum proto_vps_os os;
        if ((r = j.vm->template_lookup(j.conn, template_id, image_slug, NULL, NULL, &reinstall_fields, &os, err)) < 0)
                return r;
        struct proto_vps_install_state state = {
                .hostname = cur.hostname,
                .template_id = cur.template_id,
                .image_slug = cur.image_slug,
                .inputs = cur.inputs,
                .has_password = cur.has_password,
                .n_ssh_keys = cur.n_ssh_keys,
                .ssh_key_id = cur.ssh_key_id[0] ? cur.ssh_key_id : NULL,
        };
        /* Every problem at once: the credential rules, then the inputs against the template. */
        struct proto_vps_install inst;
        int rules = proto_vps_reinstall_resolve(req, &state, os, &inst, err);
        int fits = j.vm->template_lookup(j.conn, template_id, image_slug, NULL, inputs, &reinstall_fields, NULL, err);
        if (rules < 0 || fits < 0)
                return rules < 0 ? rules : fits;
        if ((r = j.vm->reinstall(j.conn, j.id, &inst, &j.progress, err)) < 0)
                return r;
        job_progress(ctx, "done", 100, "reinstalled from %s %s", inst.template_id, inst.image_slug);
        *ret = json_object();
        return 0;
}

JOB_KIND(vps_reinstall_kind, "vps.reinstall", .target = PROTO_TARGET_VPS, .changes = true, .stages = reinstall_stages,
         .decode = reinstall_decode, .free_params = reinstall_free, .run = reinstall_run);

/* ---- vps.network.set ---- */

static int network_set_decode(json_t *params, void **ret, struct na_error *err)
{
        return proto_vps_network_set_decode(params, (struct proto_vps_network_set **)ret, err);
}

static void network_set_free(void *p)
{
        proto_vps_network_set_free(p);
}

static int network_set_run(struct job_ctx *ctx, void *params, json_t **ret, struct na_error *err)
{
        const struct proto_vps_network_set *p = params;
        struct vps_job j;
        int r = vps_job_begin(ctx, &j, err);
        if (r < 0)
                return r;
        struct proto_vps_server srv;
        bool restart = false;
        if ((r = j.vm->network_set(j.conn, j.id, &p->network, &srv, &restart, err)) < 0)
                return r;
        /* The node's side changed at once; the guest reads its new seed at its next boot. */
        return vps_server_answer(&j, &srv, restart, ret, err);
}

JOB_KIND(vps_network_set_kind, "vps.network.set", .target = PROTO_TARGET_VPS, .changes = true,
         .decode = network_set_decode, .free_params = network_set_free, .run = network_set_run);
