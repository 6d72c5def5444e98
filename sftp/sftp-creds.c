/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An app's SFTP credentials file (sftp-creds.h). */
#include "sftp/sftp-creds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/macro.h"

bool sftp_username_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 1 || n > 63)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
                        return false;
        }
        return true;
}

static bool same_text(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

bool sftp_user_equal(const struct sftp_user *a, const struct sftp_user *b)
{
        if (!same_text(a->app_id, b->app_id) || !same_text(a->volume_dir, b->volume_dir) || a->uid != b->uid ||
            a->gid != b->gid || a->enabled != b->enabled || a->read_only != b->read_only ||
            a->file_access != b->file_access || !same_text(a->password_hash, b->password_hash) ||
            a->n_keys != b->n_keys)
                return false;
        for (size_t i = 0; i < a->n_keys; i++)
                if (!same_text(a->public_keys[i], b->public_keys[i]))
                        return false;
        return true;
}

void sftp_user_clear(struct sftp_user *u)
{
        if (!u)
                return;
        free(u->app_id);
        free(u->volume_dir);
        free(u->password_hash);
        for (size_t i = 0; i < u->n_keys; i++)
                free(u->public_keys[i]);
        free(u->public_keys);
        *u = (struct sftp_user){ 0 };
}

static int bad(struct na_error *err, const char *what)
{
        return na_error_set(err, EINVAL, NA_E_INTERNAL, "sftp credentials: %s", what);
}

static int get_uint32(json_t *o, const char *key, uint32_t *out, struct na_error *err)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "sftp credentials: %s must be a 32-bit id", key);
        *out = (uint32_t)json_integer_value(v);
        return 0;
}

static int get_bool(json_t *o, const char *key, bool *out, struct na_error *err)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_boolean(v))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "sftp credentials: %s must be a boolean", key);
        *out = json_is_true(v);
        return 0;
}

static int get_string(json_t *o, const char *key, bool nullable, size_t max, char **out, struct na_error *err)
{
        json_t *v = json_object_get(o, key);
        if (nullable && (!v || json_is_null(v)))
                return 0;
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max ||
            strlen(json_string_value(v)) != json_string_length(v))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "sftp credentials: %s must be a string", key);
        if (!(*out = strdup(json_string_value(v))))
                return na_error_sys(err, ENOMEM, "sftp credentials");
        return 0;
}

int sftp_user_parse(const char *text, size_t len, struct sftp_user *ret, struct na_error *err)
{
        json_error_t je;
        _cleanup_json_ json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!o || !json_is_object(o))
                return bad(err, "not a JSON object");
        struct sftp_user u = { 0 };
        json_t *keys = NULL;
        int r;
        if ((r = get_string(o, "appId", false, 128, &u.app_id, err)) < 0 ||
            (r = get_string(o, "volumeDir", false, 4096, &u.volume_dir, err)) < 0 ||
            (r = get_uint32(o, "uid", &u.uid, err)) < 0 || (r = get_uint32(o, "gid", &u.gid, err)) < 0 ||
            (r = get_bool(o, "enabled", &u.enabled, err)) < 0 || (r = get_bool(o, "readOnly", &u.read_only, err)) < 0 ||
            (r = get_bool(o, "fileAccess", &u.file_access, err)) < 0 ||
            (r = get_string(o, "passwordHash", true, SFTP_HASH_MAX, &u.password_hash, err)) < 0)
                goto fail;
        if (u.volume_dir[0] != '/') {
                r = bad(err, "volumeDir must be absolute");
                goto fail;
        }
        keys = json_object_get(o, "publicKeys");
        if (keys && !json_is_null(keys)) {
                if (!json_is_array(keys) || json_array_size(keys) > SFTP_KEYS_MAX) {
                        r = bad(err, "publicKeys must be an array of at most 100 lines");
                        goto fail;
                }
                if (json_array_size(keys) && !(u.public_keys = calloc(json_array_size(keys), sizeof(char *)))) {
                        r = na_error_sys(err, ENOMEM, "sftp credentials");
                        goto fail;
                }
                size_t i;
                json_t *k;
                json_array_foreach(keys, i, k)
                {
                        if (!json_is_string(k) || json_string_length(k) > SFTP_KEY_LINE_MAX) {
                                r = bad(err, "publicKeys must hold strings");
                                goto fail;
                        }
                        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                        if (!(u.public_keys[u.n_keys] = strdup(json_string_value(k)))) {
                                r = na_error_sys(err, ENOMEM, "sftp credentials");
                                goto fail;
                        }
                        NA_ANALYZER_FP_END
                        u.n_keys++;
                }
        }
        *ret = u;
        return 0;
fail:
        sftp_user_clear(&u);
        return r;
}

int sftp_user_load(const char *users_dir, const char *username, struct sftp_user *ret, struct na_error *err)
{
        if (!sftp_username_valid(username))
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "sftp user: not a valid user name");
        _cleanup_free_ char *path = na_strdupf("%s/%s.json", users_dir, username);
        if (!path)
                return na_error_sys(err, ENOMEM, "sftp user %s", username);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = na_read_file(path, 1 << 22, &text, &len, err);
        if (r < 0)
                return na_error_prefix(err, "sftp user %s", username);
        r = sftp_user_parse(text, len, ret, err);
        return r < 0 ? na_error_prefix(err, "sftp user %s", username) : 0;
}

int sftp_user_store(const char *users_dir, const char *username, const struct sftp_user *u, struct na_error *err)
{
        if (!sftp_username_valid(username))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "sftp user %s: not a valid user name", username);
        int r = na_mkdir_p(users_dir, 0700, err);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *keys = json_array();
        for (size_t i = 0; keys && i < u->n_keys; i++)
                json_array_append_new(keys, json_string(u->public_keys[i]));
        _cleanup_json_ json_t *o = json_pack(
                "{s:s, s:s, s:I, s:I, s:b, s:b, s:b, s:s?, s:O}", "appId", u->app_id, "volumeDir", u->volume_dir, "uid",
                (json_int_t)u->uid, "gid", (json_int_t)u->gid, "enabled", u->enabled, "readOnly", u->read_only,
                "fileAccess", u->file_access, "passwordHash", u->password_hash, "publicKeys", keys);
        _cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        _cleanup_free_ char *path = na_strdupf("%s/%s.json", users_dir, username);
        if (!text || !path)
                return na_error_sys(err, ENOMEM, "sftp user %s", username);
        r = na_atomic_write(path, text, strlen(text), 0600, err);
        return r < 0 ? na_error_prefix(err, "sftp user %s", username) : 0;
}

int sftp_user_remove_app(const char *users_dir, const char *app_id, struct na_error *err)
{
        DIR *d = opendir(users_dir);
        if (!d)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "sftp users %s", users_dir);
        int r = 0;
        for (struct dirent *de; (de = readdir(d));) {
                size_t n = strlen(de->d_name);
                if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
                        continue;
                char name[64];
                if (n - 5 >= sizeof(name))
                        continue;
                memcpy(name, de->d_name, n - 5);
                name[n - 5] = '\0';
                struct sftp_user u = { 0 };
                struct na_error e = NA_ERROR_INIT;
                if (sftp_user_load(users_dir, name, &u, &e) == 0 && strcmp(u.app_id, app_id) == 0 &&
                    unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = na_error_sys(err, errno, "sftp user %s: remove", name);
                na_error_clear(&e);
                sftp_user_clear(&u);
        }
        closedir(d);
        return r;
}
