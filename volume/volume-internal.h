/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Shared by the safe path layer's files (app-fs-path.c, app-fs-ops.c, app-fs-write.c). */
#pragma once

#include <sys/types.h>

#include "common/error.h"
#include "volume/volume.h"

struct app_fs {
        int root_fd; /* O_PATH|O_DIRECTORY of the volume root */
        uid_t uid;
        gid_t gid;
};

/* The resolve flags of every openat2 beneath the root. */
#define APP_FS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/*
 * Fill err from errno value e met while working on path (named by field): EXDEV is
 * VALIDATION_ERROR "the path leaves the app's volume" on field, ENOENT FILE_NOT_FOUND,
 * ENOTDIR/EISDIR/EEXIST/ENOTEMPTY INVALID_STATE, ENOSPC/EDQUOT QUOTA_EXCEEDED, ELOOP
 * and ENAMETOOLONG VALIDATION_ERROR on field, anything else INTERNAL_ERROR "<what> <path>".
 */
int app_fs_fail(struct na_error *err, int e, const char *field, const char *path, const char *what);
/* VALIDATION_ERROR on field with a message that also names it: "<field>: <msg>". */
int app_fs_invalid(struct na_error *err, const char *field, const char *msg);
/* Check path as text (errors on field); *ret_rel is the root-relative form ("." for the root). */
int app_fs_check(const char *field, const char *path, const char **ret_rel, struct na_error *err);
