/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli), as used by iSCSI, ext4 and btrfs. crc starts at 0. */
uint32_t na_crc32c(uint32_t crc, const void *data, size_t len);
