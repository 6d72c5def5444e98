/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Disks: one qcow2 overlay per server whose backing file is the template image
 * (copy-on-write: creation does not grow with image size), written in-process
 * (vm-qcow2.c) in storage_dir, beside the server's seed ISO. Where the driver has storage pools
 * a dir pool over storage_dir ("nodeagent") lists them as volumes; the in-memory
 * test driver has no pools, and the files are real either way.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "drivers/vm/vm-qcow2.h"

char *vm_lv_disk_path(struct vm_conn *c, const char *id)
{
        return na_strdupf("%s/%s.qcow2", c->storage_dir, id);
}

char *vm_lv_seed_path(struct vm_conn *c, const char *id)
{
        return na_strdupf("%s/%s-seed.iso", c->storage_dir, id);
}

int vm_lv_pool_ensure(struct vm_conn *c, virConnectPtr conn, struct na_error *err)
{
        _cleanup_virpool_ virStoragePoolPtr pool = virStoragePoolLookupByName(conn, c->pool_name);
        if (!pool) {
                virResetLastError();
                _cleanup_free_ char *name = vm_xml_escape(c->pool_name);
                _cleanup_free_ char *path = vm_xml_escape(c->storage_dir);
                _cleanup_free_ char *xml =
                        name && path ? na_strdupf("<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>",
                                                  name, path)
                                     : NULL;
                if (!xml)
                        return na_error_sys(err, ENOMEM, "storage pool %s", c->pool_name);
                pool = virStoragePoolDefineXML(conn, xml, 0);
                if (!pool)
                        return vm_virt_error(err, NULL, "define storage pool %s", c->pool_name);
        }
        int active = virStoragePoolIsActive(pool);
        if (active == 0 && virStoragePoolCreate(pool, 0) < 0)
                return vm_virt_error(err, NULL, "start storage pool %s", c->pool_name);
        int autostart = 0;
        if (virStoragePoolGetAutostart(pool, &autostart) == 0 && !autostart)
                virStoragePoolSetAutostart(pool, 1);
        virResetLastError();
        return 0;
}

void vm_lv_pool_refresh(struct vm_conn *c)
{
        if (!c->pool_ready)
                return;
        _cleanup_virconn_ virConnectPtr conn = NULL;
        struct na_error e = NA_ERROR_INIT;
        if (vm_conn_get(c, &conn, &e) == 0) {
                _cleanup_virpool_ virStoragePoolPtr pool = virStoragePoolLookupByName(conn, c->pool_name);
                if (pool)
                        virStoragePoolRefresh(pool, 0);
                virResetLastError();
        }
        na_error_clear(&e);
}

int vm_lv_overlay_create(struct vm_conn *c, const char *id, const struct vm_template *t, const char *path,
                         int64_t size_mb, const char *size_field, struct na_error *err)
{
        uint64_t image_size = 0;
        int r = vm_image_virtual_size(t->path, t->format, &image_size, err);
        if (r < 0)
                return na_error_prefix(err, "vps %s: template %s image %s", id, t->id, t->image_slug);
        uint64_t want = (uint64_t)size_mb << 20;
        if (image_size > want)
                return na_error_field(err, size_field, "is smaller than the image of template %s (%llu MB)", t->id,
                                      (unsigned long long)((image_size + (1 << 20) - 1) >> 20));
        if ((r = na_unlink(path, err)) < 0)
                return r;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "vps %s: create disk %s", id, path);
        r = vm_qcow2_overlay_write(fd, want, t->path, t->format, err);
        if (r == 0 && fsync(fd) < 0)
                r = na_error_sys(err, errno, "fsync");
        if (r == 0 && close(TAKE_FD(fd)) < 0)
                r = na_error_sys(err, errno, "close");
        if (r < 0) {
                unlink(path);
                return na_error_prefix(err, "vps %s: create disk %s", id, path);
        }
        return 0;
}

int vm_lv_disk_grow(struct vm_conn *c, const char *id, virDomainPtr dom, int64_t size_mb, struct na_error *err)
{
        bool active = false;
        int r = vm_domain_state(c, id, dom, NULL, &active, err);
        if (r < 0)
                return r;
        if (active && !c->is_test) {
                /* qemu holds the image: grow it through the running domain. */
                if (virDomainBlockResize(dom, "vda", (unsigned long long)size_mb << 20, VIR_DOMAIN_BLOCK_RESIZE_BYTES) <
                    0)
                        return vm_virt_error(err, id, "grow disk to %lld MB", (long long)size_mb);
                return 0;
        }
        _cleanup_free_ char *path = vm_lv_disk_path(c, id);
        if (!path)
                return na_error_sys(err, ENOMEM, "vps %s: disk", id);
        char size[32];
        snprintf(size, sizeof(size), "%lldM", (long long)size_mb);
        char *const argv[] = { c->qemu_img, (char *)"resize", (char *)"-q", (char *)"-f", (char *)"qcow2", path, size,
                               NULL };
        r = na_spawn(argv, NULL, NULL, 0, err);
        if (r < 0)
                return na_error_prefix(err, "vps %s: grow disk to %lld MB", id, (long long)size_mb);
        vm_lv_pool_refresh(c);
        return 0;
}
