/* SPDX-License-Identifier: GPL-2.0-or-later */
/* SFTP credentials checked (sftp-auth.h). */
#include "sftp/sftp-auth.h"

#include <crypt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "proto/app-files.h"
#include "proto/app-sftp.h"

/* Bits of the modulus of an ssh-rsa public key blob (string type, mpint e, mpint n); 0 when malformed. */
static unsigned rsa_bits(const char *b64)
{
        unsigned char *blob = NULL;
        size_t len = 0;
        if (proto_base64_decode(b64, strlen(b64), 1 << 16, &blob, &len) < 0)
                return 0;
        size_t off = 0;
        unsigned bits = 0;
        for (int field = 0; field < 3; field++) {
                if (len - off < 4)
                        goto out;
                uint32_t n = (uint32_t)blob[off] << 24 | (uint32_t)blob[off + 1] << 16 | (uint32_t)blob[off + 2] << 8 |
                             blob[off + 3];
                off += 4;
                if (n > len - off)
                        goto out;
                if (field == 2) {
                        const unsigned char *p = blob + off;
                        while (n && *p == 0)
                                p++, n--;
                        if (n) {
                                bits = n * 8;
                                for (unsigned char top = p[0]; !(top & 0x80); top <<= 1)
                                        bits--;
                        }
                }
                off += n;
        }
out:
        free(blob);
        return bits;
}

const char *sftp_hash_problem(const char *hash)
{
        const char *why = proto_app_sftp_hash_problem(hash);
        if (why)
                return why;
        /* Let libxcrypt itself say whether it can use it as a setting. */
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (!cd)
                return "could not be checked (out of memory)";
        const char *out = crypt_rn("probe", hash, cd, (int)sizeof(*cd));
        bool ok = out && out[0] != '*';
        free(cd);
        return ok ? NULL : "is not a hash this system's crypt(3) accepts";
}

bool sftp_password_matches(const char *password, const char *hash)
{
        if (!password || !hash || sftp_hash_problem(hash))
                return false;
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (!cd)
                return false;
        const char *out = crypt_rn(password, hash, cd, (int)sizeof(*cd));
        bool ok = false;
        if (out && out[0] != '*') {
                size_t n = strlen(hash);
                if (strlen(out) == n) {
                        unsigned char diff = 0;
                        for (size_t i = 0; i < n; i++)
                                diff |= (unsigned char)(out[i] ^ hash[i]);
                        ok = diff == 0;
                }
        }
        explicit_bzero(cd, sizeof(*cd));
        free(cd);
        return ok;
}

const char *sftp_key_line_parse(const char *line, ssh_key *ret)
{
        if (!line || !*line)
                return "must not be empty";
        if (strlen(line) > 16384)
                return "must be at most 16384 characters";
        if (strpbrk(line, "\r\n"))
                return "must be one line";
        _cleanup_free_ char *copy = strdup(line);
        if (!copy)
                return "could not be checked (out of memory)";
        char *save = NULL;
        char *type = strtok_r(copy, " \t", &save);
        char *b64 = type ? strtok_r(NULL, " \t", &save) : NULL;
        if (!type || !b64)
                return "must be an OpenSSH public key line: <type> <base64> [comment]";
        enum ssh_keytypes_e want = ssh_key_type_from_name(type);
        if (want != SSH_KEYTYPE_ED25519 && want != SSH_KEYTYPE_ECDSA_P256 && want != SSH_KEYTYPE_ECDSA_P384 &&
            want != SSH_KEYTYPE_ECDSA_P521 && want != SSH_KEYTYPE_RSA)
                return "must be a key of type ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa";
        ssh_key k = NULL;
        if (ssh_pki_import_pubkey_base64(b64, want, &k) != SSH_OK || !k)
                return "does not parse as an OpenSSH public key of its type";
        if (ssh_key_type(k) != want) {
                ssh_key_free(k);
                return "the key's data is not of the type the line names";
        }
        if (want == SSH_KEYTYPE_RSA && rsa_bits(b64) < 2048) {
                ssh_key_free(k);
                return "RSA keys must have at least 2048 bits";
        }
        if (ret)
                *ret = k;
        else
                ssh_key_free(k);
        return NULL;
}

bool sftp_key_listed(const ssh_key key, char *const *lines, size_t n)
{
        bool found = false;
        for (size_t i = 0; i < n && !found; i++) {
                ssh_key k = NULL;
                if (sftp_key_line_parse(lines[i], &k))
                        continue;
                found = ssh_key_cmp(key, k, SSH_KEY_CMP_PUBLIC) == 0;
                ssh_key_free(k);
        }
        return found;
}
