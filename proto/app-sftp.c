/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The wire side of app.sftp.set (proto/app-sftp.h). */
#include "proto/app-sftp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "proto/decode.h"

const char *proto_app_sftp_hash_problem(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0)
                return "must not be empty";
        if (n > PROTO_APP_SFTP_HASH_MAX)
                return "must be at most 512 characters";
        for (const char *p = s; *p; p++) {
                char c = *p;
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '/' || c == '$' || c == '='))
                        return "must be a crypt(3) hash: only [./0-9A-Za-z$=] characters";
        }
        int dollars = 0;
        for (const char *p = s; *p; p++)
                dollars += *p == '$';
        const char *last = strrchr(s, '$');
        if (strncmp(s, "$6$", 3) == 0) {
                /* $6$salt$hash or $6$rounds=N$salt$hash; the hash is 86 characters */
                if (dollars < 3 || dollars > 4 || strlen(last + 1) != 86 || last == s + 2)
                        return "must be a crypt(3) SHA-512 hash ($6$salt$ and 86 characters)";
                return NULL;
        }
        if (strncmp(s, "$y$", 3) == 0) {
                if (dollars != 4 || strlen(last + 1) < 40)
                        return "must be a crypt(3) yescrypt hash ($y$params$salt$hash)";
                return NULL;
        }
        return "must be a crypt(3) hash of SHA-512 ($6$) or yescrypt ($y$)";
}

void proto_app_sftp_set_free(struct proto_app_sftp_set *p)
{
        if (!p)
                return;
        free(p->password_hash);
        for (size_t i = 0; i < p->n_keys; i++)
                free(p->public_keys[i]);
        free(p->public_keys);
        free(p);
}

int proto_app_sftp_set_decode(json_t *params, struct proto_app_sftp_set **ret, struct na_error *err)
{
        if (!json_is_object(params))
                return na_error_field(err, NULL, "params must be an object");
        struct proto_app_sftp_set *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.sftp.set params");
        json_t *keys = NULL;
        const char *hash = NULL;
        int r = proto_bool(params, NULL, "enabled", PROTO_REQUIRED, &p->enabled, err);
        bool ro = false;
        r = proto_bool(params, NULL, "readOnly", 0, &ro, err);
        if (r == PROTO_PRESENT) {
                p->read_only_change = PROTO_SFTP_SET;
                p->read_only = ro;
        }
        r = proto_string(params, NULL, "passwordHash", PROTO_NULLABLE, 1, PROTO_APP_SFTP_HASH_MAX, &hash, err);
        if (r == PROTO_NULL)
                p->password = PROTO_SFTP_CLEAR;
        else if (r == PROTO_PRESENT) {
                const char *why = proto_app_sftp_hash_problem(hash);
                if (why)
                        na_error_field(err, "passwordHash", "%s", why);
                else if (!(p->password_hash = strdup(hash)))
                        goto oom;
                p->password = PROTO_SFTP_SET;
        }
        r = proto_array(params, NULL, "publicKeys", PROTO_NULLABLE, 0, PROTO_APP_SFTP_KEYS_MAX, &keys, err);
        if (r == PROTO_NULL)
                p->keys = PROTO_SFTP_CLEAR;
        else if (r == PROTO_PRESENT) {
                p->keys = json_array_size(keys) ? PROTO_SFTP_SET : PROTO_SFTP_CLEAR;
                if (json_array_size(keys) && !(p->public_keys = calloc(json_array_size(keys), sizeof(char *))))
                        goto oom;
                size_t i;
                json_t *k;
                json_array_foreach(keys, i, k)
                {
                        char field[32];
                        snprintf(field, sizeof(field), "publicKeys.%zu", i);
                        if (!json_is_string(k)) {
                                na_error_field(err, field, "must be a string");
                                continue;
                        }
                        const char *s = json_string_value(k);
                        size_t n = json_string_length(k);
                        if (n == 0 || n > PROTO_APP_SFTP_KEY_MAX || strlen(s) != n || strpbrk(s, "\r\n")) {
                                na_error_field(err, field, "must be one OpenSSH public key line of 1..16384 bytes");
                                continue;
                        }
                        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                        if (!(p->public_keys[p->n_keys] = strdup(s)))
                                goto oom;
                        NA_ANALYZER_FP_END
                        p->n_keys++;
                }
        }
        if (na_error_is_set(err)) {
                proto_app_sftp_set_free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
oom:
        proto_app_sftp_set_free(p);
        return na_error_sys(err, ENOMEM, "app.sftp.set params");
}

json_t *proto_app_sftp_set_encode(const char *sftp_username, const char *host, unsigned port, bool enabled)
{
        return json_pack("{s:s, s:s, s:I, s:b}", "sftpUsername", sftp_username, "host", host, "port", (json_int_t)port,
                         "enabled", enabled);
}
