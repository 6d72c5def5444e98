/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The qcow2 overlay header (docs/interop/qcow2.txt in qemu's tree). All numbers
 * big-endian. With 64 KiB clusters (cluster_bits 16) the file is:
 *
 *   cluster 0   header (112 bytes, as qemu 7 writes it), header extensions (the
 *               backing file's format, then the end marker), the backing file name
 *   cluster 1   refcount table: one entry, the offset of the refcount block
 *   cluster 2   refcount block: 16-bit counts, 1 for each cluster in use (0, 1, 2
 *               and the L1 table's)
 *   cluster 3-  L1 table, all zeros (nothing allocated: every read falls through to
 *               the backing file); the file ends where the table ends
 *
 * Each L1 entry covers one L2 table of 8192 entries of 64 KiB: 512 MiB of disk.
 */
#include "drivers/vm/vm-qcow2.h"

#include "common/fileio.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define CLUSTER_BITS 16
#define CLUSTER ((uint64_t)1 << CLUSTER_BITS)
#define L2_ENTRIES (CLUSTER / 8)
#define HEADER_LEN 112
#define EXT_BACKING_FORMAT 0xE2792ACAu
#define REFTABLE_OFF (1 * CLUSTER)
#define REFBLOCK_OFF (2 * CLUSTER)
#define L1_OFF (3 * CLUSTER)
#define MAX_SIZE ((uint64_t)64 << 40)

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
        for (int i = 0; i < bytes; i++)
                p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

int vm_qcow2_overlay_write(int fd, uint64_t size, const char *backing, const char *backing_format,
                           struct na_error *err)
{
        if (size == 0 || size % 512 != 0 || size > MAX_SIZE)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "qcow2 overlay: bad size %llu bytes",
                                    (unsigned long long)size);
        size_t blen = backing ? strlen(backing) : 0;
        if (blen == 0 || blen > VM_QCOW2_BACKING_MAX || backing[0] != '/')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "qcow2 overlay: bad backing file '%s'",
                                    backing ? backing : "");
        if (!backing_format || (!streq(backing_format, "raw") && !streq(backing_format, "qcow2")))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "qcow2 overlay: bad backing format '%s'",
                                    backing_format ? backing_format : "");

        uint64_t l1_size = (size + CLUSTER * L2_ENTRIES - 1) / (CLUSTER * L2_ENTRIES);
        uint64_t l1_clusters = (l1_size * 8 + CLUSTER - 1) / CLUSTER;
        uint64_t used = 3 + l1_clusters; /* header, refcount table, refcount block, L1 */

        /* Header, one extension (backing format, padded to 8) and the end marker, then the name. */
        size_t flen = strlen(backing_format);
        size_t name_off = HEADER_LEN + 8 + ((flen + 7) & ~(size_t)7) + 8;
        uint8_t head[HEADER_LEN + 8 + 8 + 8 + VM_QCOW2_BACKING_MAX];
        memset(head, 0, sizeof(head));
        memcpy(head, "QFI\xfb", 4);
        put_be(head + 4, 3, 4);                   /* version */
        put_be(head + 8, name_off, 8);            /* backing_file_offset */
        put_be(head + 16, blen, 4);               /* backing_file_size */
        put_be(head + 20, CLUSTER_BITS, 4);
        put_be(head + 24, size, 8);               /* virtual size */
        put_be(head + 32, 0, 4);                  /* crypt_method: none */
        put_be(head + 36, l1_size, 4);
        put_be(head + 40, L1_OFF, 8);
        put_be(head + 48, REFTABLE_OFF, 8);
        put_be(head + 56, 1, 4);                  /* refcount_table_clusters */
        put_be(head + 60, 0, 4);                  /* nb_snapshots */
        put_be(head + 64, 0, 8);                  /* snapshots_offset */
        /* 72..95: incompatible, compatible and autoclear features: none */
        put_be(head + 96, 4, 4);                  /* refcount_order: 16-bit refcounts */
        put_be(head + 100, HEADER_LEN, 4);        /* header_length; byte 104, compression type 0: zlib */
        put_be(head + HEADER_LEN, EXT_BACKING_FORMAT, 4);
        put_be(head + HEADER_LEN + 4, flen, 4);
        memcpy(head + HEADER_LEN + 8, backing_format, flen);
        /* the end-of-extensions marker (type 0, length 0) is already zeros */
        memcpy(head + name_off, backing, blen);

        uint8_t reftable[8];
        put_be(reftable, REFBLOCK_OFF, 8);
        uint8_t refblock[2 * 64];
        _Static_assert(3 + ((MAX_SIZE / (CLUSTER * L2_ENTRIES)) * 8 + CLUSTER - 1) / CLUSTER <= 64,
                       "the refcount block buffer holds every metadata cluster");
        for (uint64_t i = 0; i < used; i++)
                put_be(refblock + 2 * i, 1, 2);

        if (ftruncate(fd, 0) < 0)
                return na_error_sys(err, errno, "write qcow2 overlay: truncate");
        int r = na_pwrite_all(fd, head, name_off + blen, 0, "qcow2 overlay", err);
        if (r == 0)
                r = na_pwrite_all(fd, reftable, sizeof(reftable), REFTABLE_OFF, "qcow2 overlay", err);
        if (r == 0)
                r = na_pwrite_all(fd, refblock, 2 * used, REFBLOCK_OFF, "qcow2 overlay", err);
        if (r < 0)
                return r;
        /* The L1 table is zeros: a hole up to its end. */
        if (ftruncate(fd, (off_t)(L1_OFF + l1_size * 8)) < 0)
                return na_error_sys(err, errno, "write qcow2 overlay: truncate");
        return 0;
}

static uint64_t get_be(const unsigned char *p, int bytes)
{
        uint64_t v = 0;
        for (int i = 0; i < bytes; i++)
                v = v << 8 | p[i];
        return v;
}

#define INCOMPAT_DIRTY (1ull << 0)
#define INCOMPAT_COMPRESSION_TYPE (1ull << 3)
#define INCOMPAT_EXTL2 (1ull << 4)

int vm_qcow2_check_standalone(const unsigned char *head, size_t len, const char *field, struct na_error *err)
{
        if (len < VM_QCOW2_HEAD || memcmp(head, "QFI\xfb", 4) != 0)
                return na_error_field(err, field, "does not hold a qcow2 disk image");
        uint64_t version = get_be(head + 4, 4);
        if (version != 2 && version != 3)
                return na_error_field(err, field, "holds a qcow2 image of version %llu (2 or 3 only)",
                                      (unsigned long long)version);
        if (get_be(head + 8, 8) != 0 || get_be(head + 16, 4) != 0)
                return na_error_field(err, field, "holds a qcow2 image with a backing file: refused");
        uint64_t incompat = version == 3 ? get_be(head + 72, 8) : 0;
        if (incompat & ~(INCOMPAT_DIRTY | INCOMPAT_COMPRESSION_TYPE | INCOMPAT_EXTL2))
                return na_error_field(err, field,
                                      "holds a qcow2 image with an external data file, marked corrupt or with "
                                      "unknown features (0x%llx): refused",
                                      (unsigned long long)incompat);
        return 0;
}
