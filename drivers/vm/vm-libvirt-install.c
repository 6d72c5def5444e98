/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Installing a disk on a server: vps.create (preparing-disk, writing-image,
 * configuring, booting) and vps.reinstall (stopping first). Both converge when run
 * again: metadata marks an unfinished install, the disk is made under a temporary
 * name and renamed into place, and the domain always points at a bootable disk.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "common/names.h"
#include "common/timeutil.h"

static const struct vm_template_fields create_fields = {
        .id = "template.id", .image_slug = "template.imageSlug", .os = "template.os", .inputs = "inputs",
};
static const struct vm_template_fields reinstall_fields = {
        .id = "templateId", .image_slug = "templateImageSlug", .os = NULL, .inputs = "inputs",
};

static int lookup(struct vm_conn *c, const char *template_id, const char *image_slug, const enum proto_vps_os *os,
                  json_t *inputs, const struct vm_template_fields *fields, struct vm_template *ret,
                  struct na_error *err)
{
        int r = vm_templates_get(c->templates, template_id, image_slug, fields, ret, err);
        if (r < 0)
                return r;
        bool ok = true;
        if (os && fields->os && *os != ret->os) {
                na_error_field(err, fields->os, "template %s is a %s template", ret->id, proto_vps_os_names[ret->os]);
                ok = false;
        }
        if (vm_template_check_inputs(ret, inputs, fields->inputs, err) < 0)
                ok = false;
        if (!ok) {
                vm_template_clear(ret);
                return -EINVAL;
        }
        return 0;
}

int vm_lv_template_lookup(struct vm_conn *c, const char *template_id, const char *image_slug,
                          const enum proto_vps_os *os, json_t *inputs, const struct vm_template_fields *fields,
                          enum proto_vps_os *ret_os, struct na_error *err)
{
        struct vm_template t;
        int r = lookup(c, template_id, image_slug, os, inputs, fields ? fields : &create_fields, &t, err);
        if (r < 0)
                return r;
        if (ret_os)
                *ret_os = t.os;
        vm_template_clear(&t);
        return 0;
}

int vm_lv_define(struct vm_conn *c, virConnectPtr conn, const struct vm_meta *m, struct na_error *err)
{
        char ifname[NA_IFNAME_LEN], mac[18];
        if (na_vps_ifname(m->id, ifname) < 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vps %s: no interface name", m->id);
        vm_mac_from_id(m->id, mac);
        _cleanup_free_ char *disk = vm_lv_disk_path(c, m->id);
        _cleanup_free_ char *seed = vm_lv_seed_path(c, m->id);
        _cleanup_free_ char *console = na_strdupf("%s/%s-console.log", c->storage_dir, m->id);
        if (!disk || !seed || !console)
                return na_error_sys(err, ENOMEM, "vps %s: define", m->id);
        struct vm_domain_spec spec = {
                .id = m->id,
                .name = m->name,
                .domain_type = c->is_test ? "test" : c->domain_type,
                .emulator = c->emulator,
                .meta = m,
                .disk_path = disk,
                .seed_path = seed,
                .console_log = console,
                .kernel = m->kernel,
                .initrd = m->initrd,
                .cmdline = m->cmdline,
                .ifname = ifname,
                .mac = mac,
                .bridge = c->net.mode == VM_NET_BRIDGED ? c->net.bridge : NULL,
        };
        _cleanup_free_ char *xml = vm_domain_xml(&spec);
        if (!xml)
                return na_error_sys(err, ENOMEM, "vps %s: domain XML", m->id);
        _cleanup_virdom_ virDomainPtr dom = virDomainDefineXML(conn, xml);
        if (!dom)
                return vm_virt_error(err, m->id, "define domain");
        return 0;
}

/* Record what is installed from a template; keeps everything else. */
static int meta_set_template(struct vm_meta *m, const struct vm_template *t, struct na_error *err)
{
        free(m->template_id);
        free(m->image_slug);
        free(m->kernel);
        free(m->initrd);
        free(m->cmdline);
        m->template_id = strdup(t->id);
        m->image_slug = strdup(t->image_slug);
        m->os = t->os;
        m->kernel = t->kernel ? strdup(t->kernel) : NULL;
        m->initrd = t->initrd ? strdup(t->initrd) : NULL;
        m->cmdline = t->cmdline ? strdup(t->cmdline) : NULL;
        if (!m->template_id || !m->image_slug || (t->kernel && !m->kernel) || (t->initrd && !m->initrd) ||
            (t->cmdline && !m->cmdline))
                return na_error_sys(err, ENOMEM, "vps %s: metadata", m->id);
        return 0;
}

static int meta_save(struct vm_conn *c, struct vm_meta *m, struct na_error *err)
{
        int r = vm_lv_meta_save_claiming(c, m, err);
        if (r == 0)
                vm_mem_installing(c, m->id, m->installing);
        return r;
}

/*
 * The disk from the template, made beside the final path and renamed over it. The
 * rename is made durable by the seed's directory fsync that follows (vm_seed_write:
 * the same directory), before the domain points at either.
 */
static int write_disk(struct vm_conn *c, const char *id, const struct vm_template *t, int64_t size_mb,
                      const char *size_field, struct na_error *err)
{
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        _cleanup_free_ char *fresh = na_strdupf("%s/%s.qcow2.new", c->storage_dir, id);
        if (!disk || !fresh)
                return na_error_sys(err, ENOMEM, "vps %s: disk", id);
        int r = vm_lv_overlay_create(c, id, t, fresh, size_mb, size_field, err);
        if (r < 0)
                return r;
        if (chmod(fresh, 0600) < 0 || rename(fresh, disk) < 0) {
                r = na_error_sys(err, errno, "vps %s: put disk %s in place", id, disk);
                unlink(fresh);
                return r;
        }
        return 0;
}

static bool field_problem(struct na_error *err, const char *field, const char *msg)
{
        na_error_field(err, field, "%s", msg);
        return false;
}

int vm_lv_create(struct vm_conn *c, const struct vm_create_spec *spec, const struct na_progress *progress,
                 struct proto_vps_server *ret, struct na_error *err)
{
        char id[PROTO_VPS_ID_LEN + 1];
        int r = vm_id_normalize(spec->id, id, err);
        if (r < 0)
                return r;

        /* Everything is checked before anything changes (the handler's decoder did most of it). */
        bool ok = true;
        const char *problem = spec->password ? proto_vps_password_problem(spec->password) : NULL;
        if (!spec->name || !*spec->name)
                ok = field_problem(err, "name", "must not be empty");
        if (!spec->hostname || !proto_vps_hostname_valid(spec->hostname))
                ok = field_problem(err, "hostname", "must be a valid hostname");
        if (problem)
                ok = field_problem(err, "vmPassword", problem);
        for (char *const *k = spec->ssh_keys; k && *k; k++)
                if (!proto_vps_ssh_key_valid(*k))
                        ok = field_problem(err, "sshPublicKeys", "must hold OpenSSH public key lines");
        if (spec->network.n_ipv4 + spec->network.n_ipv6 == 0)
                ok = field_problem(err, "network", "must hold at least one address");
        if (spec->plan.cpu_cores < 1 || spec->plan.cpu_threads < 1 || spec->plan.ram_mb < 1 || spec->plan.storage_mb < 1)
                ok = field_problem(err, "plan", "needs cpuCores, cpuThreads, ramMB and storageMB");
        _cleanup_(vm_template_clear) struct vm_template t = { 0 };
        if (lookup(c, spec->tmpl.id, spec->tmpl.image_slug, &spec->tmpl.os, spec->inputs, &create_fields, &t, err) < 0)
                ok = false;
        if (!ok)
                return -EINVAL;
        uint64_t image_size = 0;
        int64_t restored_generation = 0;
        if (spec->restore_backup_id) {
                /* Built from the backup (a move from another node): the template is named, not read. */
                if ((r = vm_lv_backup_generation(c, id, spec->restore_backup_id, &restored_generation, err)) < 0)
                        return r;
        } else if ((r = vm_image_virtual_size(t.path, t.format, &image_size, err)) < 0)
                return na_error_prefix(err, "vps %s", id);
        if (image_size > (uint64_t)spec->plan.storage_mb << 20)
                return na_error_field(err, "plan.storageMB", "is smaller than the image of template %s (%llu MB)", t.id,
                                      (unsigned long long)((image_size + (1 << 20) - 1) >> 20));

        _cleanup_virconn_ virConnectPtr conn = NULL;
        if ((r = vm_conn_get(c, &conn, err)) < 0)
                return r;
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        r = vm_meta_load(c->meta_dir, id, &m, err);
        if (r < 0 && r != -ENOENT)
                return r;
        bool had_meta = r == 0;
        if (had_meta && !m.installing && vm_lv_exists(c, id)) {
                if (vm_meta_matches_create(&m, spec))
                        return vm_lv_get_server(c, id, ret, err); /* created before: converged */
                /* Another server under this id: never installed over (as app.deploy). */
                r = na_error_set(err, EEXIST, NA_E_INVALID_STATE,
                                 "vps %s: created already with other params; delete it first", id);
                na_error_detail(err, "state", json_string("created"));
                return r;
        }

        na_progress_stage(progress, "preparing-disk", 0,
                          spec->restore_backup_id ? "restoring from a backup" : "verifying the template image");
        if ((r = na_progress_checkpoint(progress, err)) < 0)
                return r;
        if (!spec->restore_backup_id && (r = vm_templates_verify(c->templates, &t, progress, err)) < 0)
                return na_error_prefix(err, "vps %s", id);

        int64_t created = had_meta && m.created_at_ms > 0 ? m.created_at_ms : (int64_t)na_now_real_ms();
        /* A restored server keeps its cloud-init instance (its host keys, its first-boot
         * work done): the generation the backup kept. */
        int64_t generation = restored_generation > 0 ? restored_generation : had_meta ? m.generation + 1 : 1;
        vm_meta_clear(&m);
        snprintf(m.id, sizeof(m.id), "%s", id);
        snprintf(m.hostname, sizeof(m.hostname), "%s", spec->hostname);
        m.name = strdup(spec->name);
        m.plan = spec->plan;
        m.inputs = spec->inputs && json_object_size(spec->inputs) > 0 ? json_deep_copy(spec->inputs) : NULL;
        m.created_at_ms = created;
        m.generation = generation;
        m.want_running = !spec->no_start;
        m.installing = true;
        m.has_network = true;
        m.network = spec->network;
        if (!m.name)
                return na_error_sys(err, ENOMEM, "vps %s", id);
        if ((r = meta_set_template(&m, &t, err)) < 0 || (r = vm_meta_set_keys(&m, spec->ssh_keys, err)) < 0)
                return r;
        if (spec->password && (r = vm_password_hash(spec->password, &m.password_hash, err)) < 0)
                return na_error_prefix(err, "vps %s", id);
        if ((r = meta_save(c, &m, err)) < 0)
                return r;

        na_progress_stage(progress, "writing-image", 0, "creating the disk");
        if ((r = na_progress_checkpoint(progress, err)) < 0)
                return r;
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        _cleanup_free_ char *seed = vm_lv_seed_path(c, id);
        if (!disk || !seed)
                return na_error_sys(err, ENOMEM, "vps %s", id);
        if (access(disk, F_OK) < 0) {
                if (spec->restore_backup_id)
                        r = vm_lv_backup_unpack_disk(c, id, spec->restore_backup_id, spec->plan.storage_mb, progress,
                                                     err);
                else
                        r = write_disk(c, id, &t, spec->plan.storage_mb, "plan.storageMB", err);
                if (r < 0)
                        return r;
        }

        na_progress_stage(progress, "configuring", 0, "writing the cloud-init seed and the domain");
        char mac[18];
        vm_mac_from_id(id, mac);
        if ((r = vm_seed_write(&m, mac, &c->net, seed, err)) < 0)
                return r;
        /* Its guard before it ever runs: no frame of it goes out unchecked. */
        if ((r = vm_lv_network_notify(c, &m, err)) < 0)
                return r;
        if ((r = vm_lv_define(c, conn, &m, err)) < 0)
                return r;
        vm_lv_pool_refresh(c);

        na_progress_stage(progress, "booting", 0, spec->no_start ? "defined, not started" : "starting");
        if (!spec->no_start) {
                _cleanup_virdom_ virDomainPtr dom = NULL;
                if ((r = vm_domain_get(c, id, &dom, err)) < 0 || (r = vm_lv_start(c, id, dom, err)) < 0)
                        return r;
        }
        m.installing = false;
        if ((r = meta_save(c, &m, err)) < 0)
                return r;
        return vm_lv_get_server(c, id, ret, err);
}

int vm_lv_get_install(struct vm_conn *c, const char *id, struct vm_install_info *ret, struct na_error *err)
{
        if (!vm_lv_exists(c, id))
                return na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: no such server on this node", id);
        struct vm_meta m;
        int r = vm_meta_load_required(c, id, &m, err);
        if (r < 0)
                return r;
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->hostname, sizeof(ret->hostname), "%s", m.hostname);
        snprintf(ret->template_id, sizeof(ret->template_id), "%s", m.template_id);
        snprintf(ret->image_slug, sizeof(ret->image_slug), "%s", m.image_slug);
        ret->os = m.os;
        ret->inputs = m.inputs ? json_incref(m.inputs) : NULL;
        ret->has_password = m.password_hash != NULL;
        ret->n_ssh_keys = vm_meta_ssh_key_count(&m);
        snprintf(ret->ssh_key_id, sizeof(ret->ssh_key_id), "%s", m.ssh_key_id);
        vm_meta_clear(&m);
        return 0;
}

/* Put the server back as it was when a reinstall stops before its disk was replaced. */
static void reinstall_undo(struct vm_conn *c, struct vm_meta *m, bool was_running)
{
        struct na_error e = NA_ERROR_INIT;
        m->installing = false;
        meta_save(c, m, &e);
        if (was_running) {
                _cleanup_virdom_ virDomainPtr dom = NULL;
                if (vm_domain_get(c, m->id, &dom, &e) == 0)
                        vm_lv_start(c, m->id, dom, &e);
        }
        na_error_clear(&e);
}

int vm_lv_reinstall(struct vm_conn *c, const char *id, const struct proto_vps_install *inst,
                    const struct na_progress *progress, struct na_error *err)
{
        _cleanup_virconn_ virConnectPtr conn = NULL;
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get2(c, id, &conn, &dom, err);
        if (r < 0)
                return r;
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        if ((r = vm_meta_load_required(c, id, &m, err)) < 0)
                return r;

        /* Check everything before anything changes. */
        json_t *inputs = inst->inputs_op == PROTO_VPS_SET ? inst->inputs
                         : inst->inputs_op == PROTO_VPS_KEEP ? m.inputs
                                                              : NULL;
        _cleanup_(vm_template_clear) struct vm_template t = { 0 };
        if ((r = lookup(c, inst->template_id, inst->image_slug, NULL, inputs, &reinstall_fields, &t, err)) < 0)
                return r;
        if (!inst->hostname || !proto_vps_hostname_valid(inst->hostname))
                return na_error_field(err, "hostname", "must be a valid hostname");
        bool password = inst->password_op == PROTO_VPS_SET || (inst->password_op == PROTO_VPS_KEEP && m.password_hash);
        bool keys = inst->key_op == PROTO_VPS_SET || (inst->key_op == PROTO_VPS_KEEP && m.ssh_keys);
        if (inst->password_op == PROTO_VPS_SET && proto_vps_password_problem(inst->password))
                return na_error_field(err, "vmPassword", "%s", proto_vps_password_problem(inst->password));
        if (inst->key_op == PROTO_VPS_SET && !proto_vps_ssh_key_valid(inst->ssh_public_key))
                return na_error_field(err, "sshPublicKey", "must be an OpenSSH public key line");
        if (t.os == PROTO_VPS_OS_WINDOWS && (keys || !password))
                return na_error_field(err, keys ? "sshKeyId" : "vmPassword",
                                      "a Windows template requires a password and refuses SSH keys");
        if (!password && !keys)
                return na_error_field(err, NULL, "the server must end with a vmPassword, an SSH key or both");
        uint64_t image_size = 0;
        if ((r = vm_image_virtual_size(t.path, t.format, &image_size, err)) < 0)
                return na_error_prefix(err, "vps %s", id);
        if (image_size > (uint64_t)m.plan.storage_mb << 20)
                return na_error_field(err, "templateId", "the image of template %s (%llu MB) is larger than the disk",
                                      t.id, (unsigned long long)((image_size + (1 << 20) - 1) >> 20));
        _cleanup_free_ char *hash = NULL;
        if (inst->password_op == PROTO_VPS_SET && (r = vm_password_hash(inst->password, &hash, err)) < 0)
                return na_error_prefix(err, "vps %s", id);
        if ((r = na_progress_checkpoint(progress, err)) < 0)
                return r;

        na_progress_stage(progress, "stopping", 0, "stopping the server");
        bool was_running = false;
        if ((r = vm_domain_state(c, id, dom, NULL, &was_running, err)) < 0)
                return r;
        m.installing = true;
        if ((r = meta_save(c, &m, err)) < 0)
                return r;
        if ((r = vm_lv_force_off(c, id, dom, err)) < 0) {
                reinstall_undo(c, &m, was_running);
                return r;
        }

        na_progress_stage(progress, "preparing-disk", 0, "verifying the template image");
        if ((r = vm_templates_verify(c->templates, &t, progress, err)) < 0) {
                reinstall_undo(c, &m, was_running);
                return na_error_prefix(err, "vps %s", id);
        }
        if ((r = na_progress_checkpoint(progress, err)) < 0) {
                reinstall_undo(c, &m, was_running);
                return r;
        }

        /* From here on the server is reinstalled to the end: no more stopping points. */
        na_progress_stage(progress, "writing-image", 0, "replacing the disk");
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        _cleanup_free_ char *fresh = na_strdupf("%s/%s.qcow2.new", c->storage_dir, id);
        _cleanup_free_ char *seed = vm_lv_seed_path(c, id);
        if (!disk || !fresh || !seed)
                return na_error_sys(err, ENOMEM, "vps %s", id);
        if ((r = vm_lv_overlay_create(c, id, &t, fresh, m.plan.storage_mb, "templateId", err)) < 0) {
                reinstall_undo(c, &m, was_running);
                return r;
        }
        /* The old disk's snapshots go with it. */
        if ((r = vm_lv_snapshots_forget(c, id, dom, err)) < 0) {
                unlink(fresh);
                reinstall_undo(c, &m, was_running);
                return r;
        }
        if (chmod(fresh, 0600) < 0 || rename(fresh, disk) < 0) {
                r = na_error_sys(err, errno, "vps %s: put the new disk in place", id);
                unlink(fresh);
                reinstall_undo(c, &m, was_running);
                return r;
        }
        vm_lv_pool_refresh(c); /* the rename is made durable with the seed's, below */

        na_progress_stage(progress, "configuring", 0, "writing the cloud-init seed and the domain");
        snprintf(m.hostname, sizeof(m.hostname), "%s", inst->hostname);
        if ((r = meta_set_template(&m, &t, err)) < 0)
                return r;
        if (inst->inputs_op != PROTO_VPS_KEEP) {
                if (m.inputs)
                        json_decref(m.inputs);
                m.inputs = inputs && json_object_size(inputs) > 0 ? json_deep_copy(inputs) : NULL;
        }
        if (inst->password_op != PROTO_VPS_KEEP) {
                if (m.password_hash) {
                        explicit_bzero(m.password_hash, strlen(m.password_hash));
                        free(m.password_hash);
                }
                m.password_hash = TAKE_PTR(hash);
        }
        if (inst->key_op == PROTO_VPS_SET) {
                char *const one[] = { (char *)inst->ssh_public_key, NULL };
                if ((r = vm_meta_set_keys(&m, one, err)) < 0)
                        return r;
                snprintf(m.ssh_key_id, sizeof(m.ssh_key_id), "%s", inst->ssh_key_id ? inst->ssh_key_id : "");
        } else if (inst->key_op == PROTO_VPS_CLEAR) {
                if ((r = vm_meta_set_keys(&m, NULL, err)) < 0)
                        return r;
                m.ssh_key_id[0] = '\0';
        }
        m.generation++;
        m.want_running = true;
        char mac[18];
        vm_mac_from_id(id, mac);
        if ((r = meta_save(c, &m, err)) < 0 || (r = vm_seed_write(&m, mac, &c->net, seed, err)) < 0 ||
            (r = vm_lv_define(c, conn, &m, err)) < 0)
                return r;

        na_progress_stage(progress, "booting", 0, "starting");
        if ((r = vm_lv_start(c, id, dom, err)) < 0)
                return r;
        m.installing = false;
        return meta_save(c, &m, err);
}
