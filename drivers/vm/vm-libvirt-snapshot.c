/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Snapshots: libvirt (internal, qcow2) snapshots named "snap-<snapshotId>" with
 * the user's name as description, so a snapshot id always finds the same
 * snapshot and a repeated create returns it; maxSnapshots enforced on create.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"

#define SNAP_PREFIX "snap-"

static int snap_name(const char *id, const char *snapshot_id, char buf[80], struct na_error *err)
{
        if (!proto_vps_object_id_valid(snapshot_id))
                return na_error_field(err, "snapshotId", "must be 1..64 letters, digits, hyphens or underscores");
        snprintf(buf, 80, SNAP_PREFIX "%s", snapshot_id);
        return 0;
}

/* vm-state-size of each internal snapshot in the disk (real drivers only; 0 when unknown). */
static json_t *disk_snapshot_sizes(struct vm_conn *c, const char *id)
{
        if (c->is_test)
                return NULL;
        _cleanup_free_ char *disk = vm_lv_disk_path(c, id);
        if (!disk)
                return NULL;
        char *const argv[] = { c->qemu_img, (char *)"info", (char *)"-U", (char *)"--output=json", disk, NULL };
        _cleanup_free_ char *out = NULL;
        struct na_error e = NA_ERROR_INIT;
        int r = na_spawn(argv, NULL, &out, 1 << 20, &e);
        na_error_clear(&e);
        if (r < 0)
                return NULL;
        return json_loads(out, 0, NULL);
}

static int64_t snapshot_size(json_t *info, const char *name)
{
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(info, "snapshots"), i, s)
                if (streq_ptr(json_string_value(json_object_get(s, "name")), name))
                        return json_integer_value(json_object_get(s, "vm-state-size"));
        return 0;
}

static int describe(struct vm_conn *c, const char *id, virDomainSnapshotPtr snap, json_t *sizes,
                    struct proto_vps_snapshot *out, struct na_error *err)
{
        const char *name = virDomainSnapshotGetName(snap);
        memset(out, 0, sizeof(*out));
        snprintf(out->snapshot_id, sizeof(out->snapshot_id), "%s", name + strlen(SNAP_PREFIX));
        _cleanup_free_ char *xml = virDomainSnapshotGetXMLDesc(snap, 0);
        if (!xml)
                return vm_virt_error(err, id, "snapshot %s", out->snapshot_id);
        _cleanup_free_ char *desc = vm_xml_text(xml, "description", "<domain ");
        _cleanup_free_ char *created = vm_xml_text(xml, "creationTime", "<domain ");
        snprintf(out->name, sizeof(out->name), "%s", desc ? desc : out->snapshot_id);
        out->created_at_ms = created ? strtoll(created, NULL, 10) * 1000 : 0;
        out->size_bytes = sizes ? snapshot_size(sizes, name) : 0;
        int current = virDomainSnapshotIsCurrent(snap, 0);
        out->current = current == 1;
        virResetLastError();
        return 0;
}

static bool ours(virDomainSnapshotPtr snap)
{
        const char *name = virDomainSnapshotGetName(snap);
        return name && strncmp(name, SNAP_PREFIX, strlen(SNAP_PREFIX)) == 0 &&
               proto_vps_object_id_valid(name + strlen(SNAP_PREFIX));
}

static void snapshots_free(virDomainSnapshotPtr *snaps, int n)
{
        for (int i = 0; i < n; i++)
                virDomainSnapshotFree(snaps[i]);
        free(snaps);
}

static int cmp_snapshot(const void *a, const void *b)
{
        const struct proto_vps_snapshot *x = a, *y = b;
        if (x->created_at_ms != y->created_at_ms)
                return x->created_at_ms < y->created_at_ms ? -1 : 1;
        return strcmp(x->snapshot_id, y->snapshot_id);
}

int vm_lv_snapshot_list(struct vm_conn *c, const char *id, struct proto_vps_snapshot **ret, size_t *ret_n,
                        struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        virDomainSnapshotPtr *snaps = NULL;
        int n = virDomainListAllSnapshots(dom, &snaps, 0);
        if (n < 0)
                return vm_virt_error(err, id, "list snapshots");
        _cleanup_json_ json_t *sizes = n > 0 ? disk_snapshot_sizes(c, id) : NULL;
        struct proto_vps_snapshot *list = calloc((size_t)n + 1, sizeof(*list));
        if (!list) {
                snapshots_free(snaps, n);
                return na_error_sys(err, ENOMEM, "vps %s: snapshots", id);
        }
        size_t k = 0;
        for (int i = 0; i < n && r == 0; i++)
                if (ours(snaps[i]))
                        r = describe(c, id, snaps[i], sizes, &list[k++], err);
        snapshots_free(snaps, n);
        if (r < 0) {
                free(list);
                return r;
        }
        qsort(list, k, sizeof(*list), cmp_snapshot);
        *ret = list;
        *ret_n = k;
        return 0;
}

int vm_lv_snapshot_create(struct vm_conn *c, const char *id, const char *snapshot_id, const char *name,
                          int64_t max_snapshots, struct proto_vps_snapshot *ret, struct na_error *err)
{
        char sname[80];
        int r = snap_name(id, snapshot_id, sname, err);
        if (r < 0)
                return r;
        _cleanup_virdom_ virDomainPtr dom = NULL;
        if ((r = vm_domain_get(c, id, &dom, err)) < 0)
                return r;
        if ((r = vm_refuse_installing(c, id, err)) < 0)
                return r;
        _cleanup_virsnap_ virDomainSnapshotPtr snap = virDomainSnapshotLookupByName(dom, sname, 0);
        if (snap) {
                _cleanup_json_ json_t *sizes = disk_snapshot_sizes(c, id);
                return describe(c, id, snap, sizes, ret, err); /* created before: the same snapshot */
        }
        if (vm_virt_last_code() != VIR_ERR_NO_DOMAIN_SNAPSHOT)
                return vm_virt_error(err, id, "snapshot %s", snapshot_id);
        virResetLastError();

        virDomainSnapshotPtr *snaps = NULL;
        int n = virDomainListAllSnapshots(dom, &snaps, 0);
        if (n < 0)
                return vm_virt_error(err, id, "list snapshots");
        int64_t count = 0;
        for (int i = 0; i < n; i++)
                count += ours(snaps[i]);
        snapshots_free(snaps, n);
        /* The plan kept at create or upgrade bounds the job's own number (a job asking
         * for more than the customer's plan gets the plan's). */
        _cleanup_(vm_meta_clear) struct vm_meta m = { 0 };
        if ((r = vm_meta_load(c->meta_dir, id, &m, err)) < 0 && r != -ENOENT)
                return r;
        if (r == 0 && m.plan.max_snapshots < max_snapshots)
                max_snapshots = m.plan.max_snapshots;
        if (count >= max_snapshots) {
                na_error_set(err, ENOSPC, NA_E_SNAPSHOT_LIMIT, "vps %s: the plan allows %lld snapshots and %lld exist",
                             id, (long long)max_snapshots, (long long)count);
                na_error_detail(err, "maxSnapshots", json_integer(max_snapshots));
                return -ENOSPC;
        }

        _cleanup_free_ char *desc = vm_xml_escape(name && *name ? name : snapshot_id);
        _cleanup_free_ char *xml =
                desc ? na_strdupf("<domainsnapshot><name>%s</name><description>%s</description></domainsnapshot>",
                                  sname, desc)
                     : NULL;
        if (!xml)
                return na_error_sys(err, ENOMEM, "vps %s: snapshot", id);
        snap = virDomainSnapshotCreateXML(dom, xml, VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC);
        if (!snap)
                return vm_virt_error(err, id, "create snapshot %s", snapshot_id);
        _cleanup_json_ json_t *sizes = disk_snapshot_sizes(c, id);
        return describe(c, id, snap, sizes, ret, err);
}

static int lookup_snapshot(virDomainPtr dom, const char *id, const char *snapshot_id, virDomainSnapshotPtr *ret,
                           struct na_error *err)
{
        char sname[80];
        int r = snap_name(id, snapshot_id, sname, err);
        if (r < 0)
                return r;
        *ret = virDomainSnapshotLookupByName(dom, sname, 0);
        if (!*ret) {
                if (vm_virt_last_code() == VIR_ERR_NO_DOMAIN_SNAPSHOT) {
                        virResetLastError();
                        return na_error_set(err, ENOENT, NA_E_SNAPSHOT_NOT_FOUND, "vps %s: no snapshot %s", id,
                                            snapshot_id);
                }
                return vm_virt_error(err, id, "snapshot %s", snapshot_id);
        }
        return 0;
}

int vm_lv_snapshot_revert(struct vm_conn *c, const char *id, const char *snapshot_id, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        _cleanup_virsnap_ virDomainSnapshotPtr snap = NULL;
        if ((r = lookup_snapshot(dom, id, snapshot_id, &snap, err)) < 0)
                return r;
        if (virDomainRevertToSnapshot(snap, 0) < 0) {
                if (vm_virt_last_code() != VIR_ERR_SNAPSHOT_REVERT_RISKY)
                        return vm_virt_error(err, id, "revert to snapshot %s", snapshot_id);
                virResetLastError();
                if (virDomainRevertToSnapshot(snap, VIR_DOMAIN_SNAPSHOT_REVERT_FORCE) < 0)
                        return vm_virt_error(err, id, "revert to snapshot %s", snapshot_id);
        }
        /* The server is now as it was in the snapshot, power state included. */
        bool active = false;
        if ((r = vm_domain_state(c, id, dom, NULL, &active, err)) < 0)
                return r;
        vm_mem_started(c, id, 0);
        return vm_lv_want_running(c, id, active, err);
}

int vm_lv_snapshot_delete(struct vm_conn *c, const char *id, const char *snapshot_id, struct na_error *err)
{
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get(c, id, &dom, err);
        if (r < 0)
                return r;
        _cleanup_virsnap_ virDomainSnapshotPtr snap = NULL;
        r = lookup_snapshot(dom, id, snapshot_id, &snap, err);
        if (r < 0 && streq(err->code, NA_E_SNAPSHOT_NOT_FOUND)) {
                na_error_clear(err);
                return 0; /* deleted before: converged */
        }
        if (r < 0)
                return r;
        if (virDomainSnapshotDelete(snap, 0) < 0)
                return vm_virt_error(err, id, "delete snapshot %s", snapshot_id);
        return 0;
}

int vm_lv_snapshots_forget(struct vm_conn *c, const char *id, virDomainPtr dom, struct na_error *err)
{
        virDomainSnapshotPtr *snaps = NULL;
        int n = virDomainListAllSnapshots(dom, &snaps, 0);
        if (n < 0)
                return vm_virt_error(err, id, "list snapshots");
        int r = 0;
        for (int i = 0; i < n; i++) {
                char name[128];
                snprintf(name, sizeof(name), "%s", virDomainSnapshotGetName(snaps[i]));
                int k = virDomainSnapshotDelete(snaps[i], VIR_DOMAIN_SNAPSHOT_DELETE_METADATA_ONLY);
                if (k < 0 && vm_virt_last_code() == VIR_ERR_INVALID_ARG) {
                        /* Drivers without metadata-only deletes (the test driver) delete it all:
                         * the disk it lived in goes anyway. */
                        virResetLastError();
                        k = virDomainSnapshotDelete(snaps[i], 0);
                }
                if (k < 0 && r == 0 && vm_virt_last_code() != VIR_ERR_NO_DOMAIN_SNAPSHOT)
                        r = vm_virt_error(err, id, "forget snapshot %s", name);
        }
        virResetLastError();
        snapshots_free(snaps, n);
        return r;
}
