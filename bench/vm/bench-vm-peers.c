/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Each part of vps.create alone, and the programs two of them replaced (see
 * bench-vm-peers.h). Everything runs in dir, on the same file system as the creates.
 */
#include "bench-vm-peers.h"

#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/names.h"
#include "common/timeutil.h"
#include "drivers/vm/vm-qcow2.h"
#include "drivers/vm/vm-util.h"

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
        qsort(v, n, sizeof(double), cmp_double);
        return v[(n - 1) / 2];
}

static void fail(const char *what, const struct na_error *e)
{
        fprintf(stderr, "bench-vm: %s%s%s\n", what, e ? ": " : "", e ? e->message : "");
        exit(1);
}

static void line(const char *what, double ms)
{
        printf("    %-68s median %6.2f ms\n", what, ms);
}

static void fill_meta(struct vm_meta *m, unsigned i)
{
        memset(m, 0, sizeof(*m));
        snprintf(m->id, sizeof(m->id), "22222222-0000-4000-8000-%012u", i);
        snprintf(m->hostname, sizeof(m->hostname), "bench");
        m->name = (char *)"bench";
        m->template_id = (char *)"small";
        m->image_slug = (char *)"1";
        m->plan = (struct proto_vps_plan){ .cpu_cores = 1, .cpu_threads = 1, .ram_mb = 512, .storage_mb = 2048,
                                           .network_speed_mbps = 100, .max_snapshots = 1 };
        m->generation = 1;
}

/* The old seed: the three documents as files, then `xorriso -as mkisofs` as vm-seed.c ran it. */
static double xorriso_seed(const struct vm_meta *m, const char *dir, const char *iso)
{
        struct na_error e = NA_ERROR_INIT;
        _cleanup_free_ char *md = NULL, *ud = NULL, *nc = NULL;
        if (vm_seed_documents(m, "52:54:00:00:00:01", NULL, &md, &ud, &nc, &e) < 0)
                fail("seed documents", &e);
        uint64_t t0 = na_now_mono_us();
        char p[3][512];
        const char *names[3] = { "user-data", "meta-data", "network-config" }, *texts[3] = { ud, md, nc };
        for (int i = 0; i < 3; i++) {
                snprintf(p[i], sizeof(p[i]), "%s/%s", dir, names[i]);
                _cleanup_close_ int fd = open(p[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 || na_write_all(fd, texts[i], strlen(texts[i]), p[i], &e) < 0)
                        fail("seed document file", &e);
        }
        unlink(iso);
        char *const argv[] = { (char *)"/usr/bin/xorriso", (char *)"-as", (char *)"mkisofs", (char *)"-quiet",
                               (char *)"-output", (char *)iso, (char *)"-volid", (char *)"cidata", (char *)"-joliet",
                               (char *)"-rock", p[0], p[1], p[2], NULL };
        if (na_spawn(argv, NULL, NULL, 0, &e) < 0)
                fail("xorriso", &e);
        if (na_fsync_path(iso, &e) < 0)
                fail("fsync", &e);
        return (double)(na_now_mono_us() - t0) / 1000.0;
}

void bench_create_peers(const char *uri, const char *dir, const char *template_raw, unsigned reps)
{
        double *v = calloc(reps, sizeof(double));
        if (!v)
                fail("calloc", NULL);
        struct na_error e = NA_ERROR_INIT;
        char iso[512], disk[512], meta_dir[512];
        snprintf(iso, sizeof(iso), "%s/seed.iso", dir);
        snprintf(disk, sizeof(disk), "%s/disk.qcow2", dir);
        snprintf(meta_dir, sizeof(meta_dir), "%s/meta", dir);
        if (na_mkdir_p(meta_dir, 0700, &e) < 0)
                fail("mkdir", &e);
        struct vm_meta m;
        fill_meta(&m, 0);
        printf("  the same parts alone (medians over %u, same file system, same test driver):\n", reps);

        for (unsigned i = 0; i < reps; i++) {
                uint64_t t0 = na_now_mono_us();
                if (vm_seed_write(&m, "52:54:00:00:00:01", NULL, iso, &e) < 0)
                        fail("seed", &e);
                v[i] = (double)(na_now_mono_us() - t0) / 1000.0;
        }
        line("cloud-init seed, in-process ISO writer (+fsync, rename, fsync dir)", median(v, reps));
        if (access("/usr/bin/xorriso", X_OK) == 0) {
                for (unsigned i = 0; i < reps; i++)
                        v[i] = xorriso_seed(&m, dir, iso);
                line("  peer: the same seed by `xorriso -as mkisofs` (before; +fsync)", median(v, reps));
        } else
                printf("    (no /usr/bin/xorriso: the old seed is not timed)\n");

        uint64_t size = 2048ull << 20;
        for (unsigned i = 0; i < reps; i++) {
                uint64_t t0 = na_now_mono_us();
                _cleanup_close_ int fd = open(disk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 || vm_qcow2_overlay_write(fd, size, template_raw, "raw", &e) < 0 || fsync(fd) < 0)
                        fail("overlay", &e);
                v[i] = (double)(na_now_mono_us() - t0) / 1000.0;
        }
        line("disk overlay, in-process qcow2 header (+fsync)", median(v, reps));
        for (unsigned i = 0; i < reps; i++) {
                uint64_t t0 = na_now_mono_us();
                unlink(disk);
                char *const argv[] = { (char *)"/usr/bin/qemu-img", (char *)"create", (char *)"-q", (char *)"-f",
                                       (char *)"qcow2", (char *)"-F", (char *)"raw", (char *)"-b",
                                       (char *)template_raw, disk, (char *)"2048M", NULL };
                if (na_spawn(argv, NULL, NULL, 0, &e) < 0 || na_fsync_path(disk, &e) < 0)
                        fail("qemu-img create", &e);
                v[i] = (double)(na_now_mono_us() - t0) / 1000.0;
        }
        line("  peer: the same overlay by `qemu-img create` (before; +fsync)", median(v, reps));

        for (unsigned i = 0; i < reps; i++) {
                _cleanup_free_ char *hash = NULL;
                uint64_t t0 = na_now_mono_us();
                if (vm_password_hash("Secret#123", &hash, &e) < 0)
                        fail("hash", &e);
                v[i] = (double)(na_now_mono_us() - t0) / 1000.0;
        }
        line("password hash (SHA-512 crypt, 5000 rounds)", median(v, reps));
        for (unsigned i = 0; i < reps; i++) {
                uint64_t t0 = na_now_mono_us();
                if (vm_meta_save(meta_dir, &m, &e) < 0)
                        fail("metadata", &e);
                v[i] = (double)(na_now_mono_us() - t0) / 1000.0;
        }
        line("metadata save (atomic write: fsync file, rename, fsync dir)", median(v, reps));
        char small[512];
        snprintf(small, sizeof(small), "%s/fsync-probe", dir);
        static const char page[4096];
        for (unsigned i = 0; i < reps; i++) {
                uint64_t t0 = na_now_mono_us();
                _cleanup_close_ int fd = open(small, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 || na_write_all(fd, page, sizeof(page), small, &e) < 0 || fsync(fd) < 0)
                        fail("fsync probe", &e);
                v[i] = (double)(na_now_mono_us() - t0) / 1000.0;
        }
        double fsync_ms = median(v, reps);
        line("  one fsync of a new 4 KiB file (a create does 5 before booting)", fsync_ms);

        /* The floor: libvirt itself, on a connection of its own to the same node file. */
        virConnectPtr conn = virConnectOpen(uri);
        if (!conn)
                fail("virConnectOpen", NULL);
        double *start = calloc(reps, sizeof(double));
        if (!start)
                fail("calloc", NULL);
        for (unsigned i = 0; i < reps; i++) {
                struct vm_meta mi;
                fill_meta(&mi, i + 1);
                char ifname[NA_IFNAME_LEN], mac[18];
                na_vps_ifname(mi.id, ifname);
                vm_mac_from_id(mi.id, mac);
                struct vm_domain_spec spec = { .id = mi.id, .name = mi.name, .domain_type = "test", .meta = &mi,
                                               .disk_path = disk, .seed_path = iso, .ifname = ifname, .mac = mac };
                _cleanup_free_ char *xml = vm_domain_xml(&spec);
                uint64_t t0 = na_now_mono_us();
                virDomainPtr dom = xml ? virDomainDefineXML(conn, xml) : NULL;
                uint64_t t1 = na_now_mono_us();
                if (!dom || virDomainCreate(dom) < 0)
                        fail("define and start", NULL);
                uint64_t t2 = na_now_mono_us();
                virDomainFree(dom);
                v[i] = (double)(t1 - t0) / 1000.0;
                start[i] = (double)(t2 - t0) / 1000.0;
        }
        double define_ms = median(v, reps);
        line("libvirt define alone", define_ms);
        line("libvirt define + start", median(start, reps));
        printf("  floor of create to booting with its durability: define + 5 fsyncs = %.1f ms\n",
               define_ms + 5 * fsync_ms);
        virConnectClose(conn);
        free(start);
        free(v);
}
