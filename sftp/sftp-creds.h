/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An app's SFTP credentials as the agent writes them and nodeagent-sftpd reads them at
 * each login (no IPC between the two): <storage_dir>/sftp/users/<sftpUsername>.json,
 * root-owned, mode 0600, replaced atomically (temporary, fsync, rename).
 *
 *   {"appId": "...", "volumeDir": "/.../disk/volume", "uid": 1000065536, "gid": 1000065536,
 *    "enabled": true, "readOnly": false, "fileAccess": true,
 *    "passwordHash": "$6$..." | null, "publicKeys": ["ssh-ed25519 AAAA... c", ...]}
 *
 *   struct sftp_user u = {0};
 *   r = sftp_user_load("/var/lib/nodeagent/apps/sftp/users", "mc-7f3a", &u, &err);
 *   ... sftp_user_clear(&u);
 *   r = sftp_user_store(users_dir, "mc-7f3a", &u, &err);
 *   r = sftp_user_remove_app(users_dir, app_id, &err);   (app.delete)
 *
 * A user name is 1..63 of [a-z0-9._-] starting with a letter or a digit (the app's
 * sftpUsername, proto_app_sftp_username_problem); nothing else ever names a file.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SFTP_USERS_SUBDIR "sftp/users"
#define SFTP_KEYS_MAX 100
#define SFTP_HASH_MAX 512
#define SFTP_KEY_LINE_MAX 16384

struct sftp_user {
        char *app_id;
        char *volume_dir;
        uint32_t uid, gid;
        bool enabled, read_only, file_access;
        char *password_hash; /* NULL: no password login */
        char **public_keys;  /* n_keys OpenSSH lines */
        size_t n_keys;
};

bool sftp_username_valid(const char *s);
/* Parse the file's text (strict: every field of the right type; volumeDir absolute). */
int sftp_user_parse(const char *text, size_t len, struct sftp_user *ret, struct na_error *err);
/* Load users_dir/<username>.json; -ENOENT (err filled) when there is none. */
int sftp_user_load(const char *users_dir, const char *username, struct sftp_user *ret, struct na_error *err);
/* Write users_dir/<username>.json (0600, atomic), creating users_dir (0700) when missing. */
int sftp_user_store(const char *users_dir, const char *username, const struct sftp_user *u, struct na_error *err);
/* Remove every users_dir/<name>.json whose appId is app_id (0 when none, or no users_dir). */
int sftp_user_remove_app(const char *users_dir, const char *app_id, struct na_error *err);
/* Whether a and b grant the same (every field; keys in the same order). */
bool sftp_user_equal(const struct sftp_user *a, const struct sftp_user *b);
void sftp_user_clear(struct sftp_user *u);
