/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A minimal ISO 9660 writer for the cloud-init NoCloud seed: one root directory of
 * a few small files, with Rock Ridge (RRIP 1.10) and Joliet names so that readers
 * see the exact lower-case names with hyphens ("meta-data", "network-config"), as
 * `genisoimage -J -r` makes them. No external program: the image is a handful of
 * sectors written with pwrite. Used by vm-seed.c; no libvirt here.
 *
 *   struct vm_iso_file files[] = { { "meta-data", md, strlen(md) }, ... };
 *   r = vm_iso_write(fd, "cidata", files, ARRAY_SIZE(files), time(NULL), err);
 */
#pragma once

#include <stddef.h>
#include <time.h>

#include "common/error.h"

/* Names: 1..64 of [a-z0-9._-], unique; each one's 8.3 upper-case ISO 9660 name must be unique too. */
#define VM_ISO_NAME_MAX 64
/* The volume identifier: 1..16 of [a-z0-9_] (what blkid shows as LABEL). */
#define VM_ISO_VOLID_MAX 16

struct vm_iso_file {
        const char *name;
        const void *data;
        size_t len; /* < 4 GiB */
};

/*
 * Write the image of at most 8 files to fd from offset 0 (fd is truncated first, then
 * to the image's size, a multiple of 2048). when is the creation time (UTC) of the
 * volume and of every file. Fails before writing anything with -EINVAL (a bad name or
 * label, too many files, names that do not fit in one directory sector) or -EFBIG,
 * else with -errno of a write; the message says which, without the file's path (the
 * caller adds it).
 */
int vm_iso_write(int fd, const char *volume_id, const struct vm_iso_file *files, size_t n_files, time_t when,
                 struct na_error *err);
