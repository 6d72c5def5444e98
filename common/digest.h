/* SPDX-License-Identifier: GPL-2.0-or-later */
/* SHA-256 of files and buffers as lower-case hex. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "common/progress.h"

/*
 * SHA-256 of a file as 64 lower-case hex digits (buf of 65). meter (may be NULL) gets
 * the file's size as its total and the bytes hashed as they go; its progress'
 * checkpoint is polled every 256 MiB.
 */
int na_sha256_file(const char *path, struct na_progress_meter *meter, char hex[65], struct na_error *err);
void na_sha256_hex(const unsigned char digest[32], char hex[65]);
/* SHA-256 of len bytes at data as hex (buf of 65); 0, or -ENOMEM. */
int na_sha256_buf(const void *data, size_t len, char hex[65]);
