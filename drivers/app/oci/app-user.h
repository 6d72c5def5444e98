/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The user an app's process runs as (AGENT-API 4.2, "The image's own settings"):
 * template.user, else the image's User, else root; "user" or "user:group", each a name
 * or a number. Names are resolved in the image's own /etc/passwd and /etc/group, read
 * beneath the unpacked root (openat2 RESOLVE_IN_ROOT: a symbolic link resolves as it
 * would inside the container, never out of the root; files over 4 MiB are refused).
 * Numbers are taken as given, without a look-up (Docker's rule), and must lie in the
 * range an app's user namespace maps (0..65535).
 *
 *   user           uid of user; gid its passwd entry's (0 for a number with no entry)
 *   user:group     uid of user; gid of group
 * Supplementary groups: every group of /etc/group that lists the user's name (when the
 * uid has a name), less the primary one, at most APP_USER_GROUPS_MAX.
 *
 * The ids are the container's; the host's are uid_base + id (app-ids.h).
 *
 *      struct app_user u;
 *      r = app_user_resolve(rootfs, "postgres", &u, &err);     u.uid 101, u.gid 104
 *      -ENOENT (VALIDATION_ERROR, "no user 'x' in the image's /etc/passwd") when a name is missing
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define APP_USER_GROUPS_MAX 32
#define APP_USER_ID_MAX 65535u

struct app_user {
        uint32_t uid, gid;
        uint32_t groups[APP_USER_GROUPS_MAX]; /* supplementary, without gid */
        size_t n_groups;
};

/* Resolve spec (NULL or "": root) in the root file system at root; *ret written only on success. */
int app_user_resolve(const char *root, const char *spec, struct app_user *ret, struct na_error *err);

/* The same from the texts of /etc/passwd and /etc/group (NULL: the file is missing). */
int app_user_resolve_text(const char *passwd, const char *group, const char *spec, struct app_user *ret,
                          struct na_error *err);
