/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * SFTP credentials checked (libssh keys, libxcrypt hashes): what app.sftp.set accepts
 * and what nodeagent-sftpd compares at login. No I/O.
 *
 * A password hash is a crypt(3) hash of one of two kinds: SHA-512 ("$6$[rounds=N$]salt$
 * 86 chars") or yescrypt ("$y$params$salt$hash"), of [./0-9A-Za-z$=] only.
 * A public key line is "<type> <base64> [comment]" as in authorized_keys (no options),
 * of the types ssh-ed25519, ecdsa-sha2-nistp256/384/521 and ssh-rsa (used with the
 * rsa-sha2-256/512 signatures; at least 2048 bits).
 *
 *   const char *why = sftp_hash_problem(h);              NULL: acceptable
 *   ssh_key k; why = sftp_key_line_parse(line, &k);     NULL: *k set (ssh_key_free it)
 *   if (sftp_password_matches(password, hash)) ...      constant-time comparison
 */
#pragma once

#include <libssh/libssh.h>
#include <stdbool.h>

const char *sftp_hash_problem(const char *hash);
const char *sftp_key_line_parse(const char *line, ssh_key *ret);
bool sftp_password_matches(const char *password, const char *hash);
/* Whether key equals the key of one of lines (lines that do not parse are skipped). */
bool sftp_key_listed(const ssh_key key, char *const *lines, size_t n);
