/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * SFTP path text to a volume path (pure, no I/O). An SFTP client names files
 * relative to the session's start directory (the volume's root, shown as "/") or
 * absolutely; "." and ".." components are resolved here as text, ".." never going
 * above "/" (as in a chroot, "/.." is "/"). The result is absolute and canonical
 * ("/" or "/a/b"), ready for volume/volume.h, which then checks it again and
 * resolves it beneath the volume's root fd with openat2: a symbolic link that
 * leaves the volume is refused by the kernel there, whatever the text said.
 *
 *   char out[SFTP_PATH_MAX + 1];
 *   if (sftp_path_normalize(in, in_len, out, sizeof(out)) < 0) -> SSH_FX_NO_SUCH_FILE / failure
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define SFTP_PATH_MAX 4096

/* 0, or -EINVAL (NUL in the text), -ENAMETOOLONG (longer than out). */
int sftp_path_normalize(const char *in, size_t len, char *out, size_t out_size);
