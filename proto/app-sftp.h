/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of app.sftp.set (AGENT-API 4.2): params {enabled, passwordHash?,
 * publicKeys?, readOnly?} and the result {sftpUsername, host, port, enabled}. No I/O.
 *
 *   struct proto_app_sftp_set *p;
 *   if (proto_app_sftp_set_decode(params, &p, &err) < 0) return ...;   // 422 with details
 *   ... each p->public_keys[i] parsed with libssh by the handler (sftp/sftp-auth.h) ...
 *   proto_app_sftp_set_free(p);
 *
 * enabled is required. passwordHash: absent keeps the stored one, null removes it, a
 * string must be a crypt(3) hash of SHA-512 ("$6$...") or yescrypt ("$y$...")
 * (proto_app_sftp_hash_problem). publicKeys: absent keeps, null or [] removes, else
 * at most 100 OpenSSH lines (one line each, at most 16384 bytes). readOnly: absent
 * keeps (false for a new user).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_APP_SFTP_KEYS_MAX 100
#define PROTO_APP_SFTP_KEY_MAX 16384
#define PROTO_APP_SFTP_HASH_MAX 512

enum proto_app_sftp_change { PROTO_SFTP_KEEP, PROTO_SFTP_CLEAR, PROTO_SFTP_SET };

struct proto_app_sftp_set {
        bool enabled;
        enum proto_app_sftp_change password, keys, read_only_change;
        char *password_hash;
        char **public_keys; /* n_keys lines */
        size_t n_keys;
        bool read_only;
};

/* NULL when s looks like a crypt(3) SHA-512 or yescrypt hash (as text), else why not. */
const char *proto_app_sftp_hash_problem(const char *s);
int proto_app_sftp_set_decode(json_t *params, struct proto_app_sftp_set **ret, struct na_error *err);
void proto_app_sftp_set_free(struct proto_app_sftp_set *p);
json_t *proto_app_sftp_set_encode(const char *sftp_username, const char *host, unsigned port, bool enabled);
