/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The VM driver's helpers that need no hypervisor: child processes, checksums,
 * per-server metadata, templates, the cloud-init seed, domain XML text and backup
 * archives. Private to drivers/; no libvirt here.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/digest.h"
#include "common/fileio.h"
#include "common/spawn.h"
#include "drivers/vm.h"

/* ---- vm-util.c ---- */

/* Lower-case copy of a valid server id (UUID) into buf[37]; -EINVAL with VALIDATION-free error otherwise. */
int vm_id_normalize(const char *id, char buf[PROTO_VPS_ID_LEN + 1], struct na_error *err);
/* The server's MAC address, 52:54:00 and three bytes of SHA-256(id). */
void vm_mac_from_id(const char *id, char mac[18]);
/* Size of a disk image's guest view: raw = file size, qcow2 = header size. */
int vm_image_virtual_size(const char *path, const char *format, uint64_t *ret, struct na_error *err);

/* ---- vm-meta.c: <meta_dir>/<id>.json, mode 0600 ---- */

struct vm_meta {
        char id[PROTO_VPS_ID_LEN + 1];
        char *name;
        char hostname[PROTO_VPS_HOSTNAME_MAX + 1];
        struct proto_vps_plan plan;
        char *template_id;
        char *image_slug;
        enum proto_vps_os os;
        char *password_hash;   /* SHA-512 crypt; NULL: none */
        char **ssh_keys;       /* NULL-terminated; NULL: none */
        char ssh_key_id[PROTO_VPS_ID_LEN + 1];
        json_t *inputs;        /* NULL: none */
        char *kernel;          /* direct kernel boot of the installed template; NULL: boot the disk */
        char *initrd;
        char *cmdline;
        int64_t created_at_ms;
        bool has_network;      /* false: made before servers had a network (DHCP seed) */
        struct proto_vps_network network;
        int64_t generation;    /* increases with every install: cloud-init's instance-id */
        bool want_running;
        bool installing;
};
void vm_meta_clear(struct vm_meta *m);
/* -ENOENT (err not set) when the server has no metadata. */
int vm_meta_load(const char *meta_dir, const char *id, struct vm_meta *m, struct na_error *err);
int vm_meta_save(const char *meta_dir, const struct vm_meta *m, struct na_error *err);
int vm_meta_remove(const char *meta_dir, const char *id, struct na_error *err);
size_t vm_meta_ssh_key_count(const struct vm_meta *m);
/* Every server id with metadata in meta_dir, to fn until it returns nonzero (returned); -errno of opendir. */
int vm_meta_foreach_id(const char *meta_dir, int (*fn)(const char *id, void *data), void *data);
int vm_meta_set_keys(struct vm_meta *m, char *const *keys, struct na_error *err);
struct vm_create_spec;
/* The server is already what this vps.create asks for: its name, hostname, plan,
 * template, keys, inputs and password as they are now. */
bool vm_meta_matches_create(const struct vm_meta *m, const struct vm_create_spec *spec);

/* ---- vm-hostnet.c: routed mode on the host, through rtnetlink ---- */

/*
 * Put a server's host side in place: on the tap ifname the next hop
 * (VM_ROUTED_GW4/32, VM_ROUTED_GW6/64), a host route per address of net, and on the
 * uplink (NULL: none) a proxy neighbour entry per address. The addresses of old
 * (NULL: none) that net lacks lose theirs. Without the tap only the removals
 * happen (*ret_applied false); the rest waits for its start. Idempotent.
 */
int vm_hostnet_apply(const char *ifname, const char *uplink, const struct proto_vps_network *net,
                     const struct proto_vps_network *old, bool *ret_applied, struct na_error *err);
/* The proxy entries of net on the uplink (vps.delete); the routes went with the tap. */
int vm_hostnet_forget(const char *uplink, const struct proto_vps_network *net, struct na_error *err);

/* ---- vm-templates.c ---- */

struct vm_template {
        char *id;
        char *image_slug;
        enum proto_vps_os os;
        char *format;      /* "qcow2" or "raw" */
        char *path;        /* absolute, inside images_dir */
        char *sha256;      /* 64 lower-case hex */
        json_t *inputs;    /* the inputs schema; NULL: no inputs */
        char *kernel;      /* absolute; NULL: boot from the disk */
        char *initrd;
        char *cmdline;
};
void vm_template_clear(struct vm_template *t);

struct vm_templates;
int vm_templates_new(const char *file, const char *images_dir, const char *cache_file, struct vm_templates **ret,
                     struct na_error *err);
void vm_templates_free(struct vm_templates *t);
/*
 * Copy the template (id, image_slug) into *ret, reloading the file when it
 * changed. Unknown ones: VALIDATION_ERROR on fields->id / fields->image_slug.
 */
int vm_templates_get(struct vm_templates *t, const char *id, const char *image_slug,
                     const struct vm_template_fields *fields, struct vm_template *ret, struct na_error *err);
/* Check inputs (may be NULL) against the template's schema; errors under field. */
int vm_template_check_inputs(const struct vm_template *t, json_t *inputs, const char *field, struct na_error *err);
/*
 * Verify the image's sha256 once per (path, size, mtime); remembered in the cache
 * file. While it hashes, the current stage's percent follows the bytes read.
 */
int vm_templates_verify(struct vm_templates *t, const struct vm_template *tmpl, const struct na_progress *progress,
                        struct na_error *err);

/* ---- vm-seed.c: cloud-init NoCloud seed ---- */

/* SHA-512 crypt(3) hash ("$6$<random salt>$...") of a password. */
int vm_password_hash(const char *password, char **ret, struct na_error *err);
/* password hashes to hash with hash's own salt (both NULL: true; one NULL: false). */
bool vm_password_matches(const char *password, const char *hash);
/*
 * The three seed documents (exposed for tests): new strings. net (NULL: routed) says
 * how the guest reaches the world: a server with a network gets a static
 * network-config, one without (made before servers had one) DHCP.
 */
int vm_seed_documents(const struct vm_meta *m, const char *mac, const struct vm_netcfg *net, char **ret_meta_data,
                      char **ret_user_data, char **ret_network_config, struct na_error *err);
/*
 * Write the seed ISO (volume id "cidata") to path, atomically and durably: a fsynced
 * ".partial" file renamed over it, then the directory fsynced.
 */
int vm_seed_write(const struct vm_meta *m, const char *mac, const struct vm_netcfg *net, const char *path,
                  struct na_error *err);

/* ---- vm-xml.c: domain XML text ---- */

struct vm_domain_spec {
        const char *id;
        const char *name;         /* the server's name (title) */
        const char *domain_type;  /* "kvm", "qemu" or "test" */
        const char *emulator;     /* NULL: libvirt's default */
        const struct vm_meta *meta;
        const char *disk_path;    /* qcow2 */
        const char *seed_path;    /* NULL: no seed */
        const char *console_log;  /* NULL: the serial console is not logged */
        const char *kernel;       /* NULL: boot from the disk */
        const char *initrd;
        const char *cmdline;
        const char *ifname;
        const char *mac;
        const char *bridge;       /* NULL: routed (a bare tap); else the bridge the tap joins */
};
/* The domain XML, newly allocated; NULL on ENOMEM. */
char *vm_domain_xml(const struct vm_domain_spec *s);
/* XML text escaping, newly allocated. */
char *vm_xml_escape(const char *s);
/*
 * The text of the first <tag>...</tag> in xml before stop (may be NULL),
 * unescaped, newly allocated; NULL when absent.
 */
char *vm_xml_text(const char *xml, const char *tag, const char *stop);

/* ---- vm-archive.c: zstd archives with their sha256 ---- */

/*
 * Compress src into dst (created, fsynced; never left half-written under dst on
 * failure: the caller writes to a temporary name and renames). Fills the sha256
 * and size of the compressed bytes. meter (may be NULL) counts src's bytes read of
 * its size; its progress' checkpoint is polled every 64 MiB.
 */
int vm_archive_compress(const char *src, const char *dst, const char *meta, struct na_progress_meter *meter,
                        char sha256[65], uint64_t *ret_size, struct na_error *err);
/*
 * meta (may be NULL): a short text (at most VM_ARCHIVE_META_MAX bytes, the server's
 * record: JSON) written first, as a zstd skippable frame, which every zstd decoder
 * passes over; vm_archive_meta reads it back (*ret NULL: the archive has none).
 */
#define VM_ARCHIVE_META_MAX (64u << 10)
int vm_archive_meta(int fd, char **ret, struct na_error *err);
/*
 * qemu-img's -p output ("    (12.34/100%)\r" over and over) fed in pieces as they
 * come from its stdout; returns the latest whole percent seen (-1: none yet).
 */
struct vm_qemu_progress {
        char num[16];
        size_t len;
        bool in;
        int percent;
};
#define VM_QEMU_PROGRESS_INIT { .percent = -1 }
int vm_qemu_progress_feed(struct vm_qemu_progress *q, const char *data, size_t n);

/*
 * Decompress src into dst, verifying that src's sha256 is expected_sha256 (else
 * -EBADMSG). meter (may be NULL) counts src's bytes read, as for compress.
 */
int vm_archive_decompress(const char *src, const char *dst, const char *expected_sha256,
                          struct na_progress_meter *meter, struct na_error *err);
/* The same check without keeping the bytes, from fd's current offset; the first
 * head_len bytes decoded are copied into head (fewer: the rest zeroed). */
int vm_archive_verify_fd(int fd, const char *what, const char *expected_sha256, unsigned char *head, size_t head_len,
                         char ret_sha256[65], struct na_progress_meter *meter, struct na_error *err);
