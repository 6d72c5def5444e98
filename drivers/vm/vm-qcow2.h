/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A qcow2 (version 3) overlay written in-process: an empty copy-on-write disk of a
 * given virtual size whose backing file is a template image, the same layout
 * `qemu-img create -f qcow2 -F FMT -b BACKING PATH SIZE` makes (header, one
 * refcount table cluster, one refcount block, an all-zero L1 table), in a few
 * pwrites and without a child process. Its cost does not depend on the size of
 * the disk or of the backing image. Used by vm-libvirt-storage.c.
 *
 *   r = vm_qcow2_overlay_write(fd, 20ull << 30, "/images/debian.raw", "raw", err);
 */
#pragma once

#include <stdint.h>

#include "common/error.h"

/* The longest backing file name qemu accepts. */
#define VM_QCOW2_BACKING_MAX 1023

/*
 * Write the overlay to fd from offset 0 (fd is truncated first). size is the
 * virtual size in bytes, a multiple of 512, at most 64 TiB; backing an absolute path
 * (qemu opens it when the disk is used); backing_format "raw" or "qcow2". -EINVAL for
 * bad arguments, -errno of a write; the message does not name fd's path (the caller
 * adds it).
 */
int vm_qcow2_overlay_write(int fd, uint64_t size, const char *backing, const char *backing_format,
                           struct na_error *err);

/*
 * Whether the first len bytes of a disk image (at least VM_QCOW2_HEAD) are the header
 * of a standalone qcow2: version 2 or 3, no backing file, no external data file, not
 * marked corrupt, no feature this check does not know. A disk from outside the node
 * (an imported backup) must pass it before qemu opens it: a backing file or a data
 * file names a path on the node, another customer's disk for instance. 0, or -EINVAL
 * with the reason in err (na_error_field on field).
 */
#define VM_QCOW2_HEAD 104
int vm_qcow2_check_standalone(const unsigned char *head, size_t len, const char *field, struct na_error *err);
