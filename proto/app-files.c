/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The params of app.files.* and their results (proto/app-files.h). */
#include "proto/app-files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "proto/decode.h"
#include "proto/text.h"

const char *const proto_app_file_types[] = { "file", "directory", "symlink", "other", NULL };

const char *proto_app_files_path_problem(const char *path, size_t len)
{
        if (!path || len == 0)
                return "must not be empty";
        if (len > PROTO_APP_FILES_PATH_MAX)
                return "must be at most 4096 bytes";
        if (memchr(path, '\0', len))
                return "must not contain NUL characters";
        const unsigned char *p = (const unsigned char *)path;
        for (size_t i = 0; i < len;) {
                if (p[i] < 0x20 || p[i] == 0x7f)
                        return "must not contain control characters";
                size_t n = proto_utf8_seq(p + i, len - i);
                if (n == 0)
                        return "must be valid UTF-8";
                i += n;
        }
        if (len == 1 && path[0] == '/')
                return NULL; /* the root */
        size_t i = path[0] == '/' ? 1 : 0;
        for (;;) {
                const char *slash = memchr(path + i, '/', len - i);
                size_t clen = (slash ? (size_t)(slash - path) : len) - i;
                if (clen == 0)
                        return slash ? "must not contain empty components ('//')" : "must not end with '/'";
                if (clen > PROTO_APP_FILES_NAME_MAX)
                        return "must not have a component longer than 255 bytes";
                if ((clen == 1 && path[i] == '.') || (clen == 2 && path[i] == '.' && path[i + 1] == '.'))
                        return "must not contain '.' or '..' components";
                if (!slash)
                        return NULL;
                i += clen + 1;
        }
}

const char *proto_app_files_path_relative(const char *path)
{
        if (path[0] == '/')
                path++;
        return *path ? path : ".";
}

int proto_app_files_path_field(json_t *obj, const char *prefix, const char *key, unsigned flags,
                               const char **out, struct na_error *err)
{
        json_t *v = obj && json_is_object(obj) ? json_object_get(obj, key) : NULL;
        char fp[256];
        if (v && json_is_string(v)) {
                const char *problem = proto_app_files_path_problem(json_string_value(v), json_string_length(v));
                if (problem)
                        return na_error_field(err, proto_path(fp, sizeof(fp), prefix, key), "%s", problem);
        }
        return proto_string(obj, prefix, key, flags, 1, PROTO_APP_FILES_PATH_MAX, out, err);
}

static int dup_path(const char *s, char **ret, struct na_error *err)
{
        if (!(*ret = strdup(s)))
                return na_error_sys(err, ENOMEM, "app.files params");
        return 0;
}

void proto_app_files_path_free(struct proto_app_files_path *p)
{
        if (!p)
                return;
        free(p->path);
        free(p);
}

int proto_app_files_path_decode(json_t *params, struct proto_app_files_path **ret, struct na_error *err)
{
        const char *path = NULL;
        int r = proto_app_files_path_field(params, NULL, "path", PROTO_REQUIRED, &path, err);
        if (r < 0)
                return r;
        struct proto_app_files_path *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.files params");
        if ((r = dup_path(path, &p->path, err)) < 0) {
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void proto_app_files_read_free(struct proto_app_files_read *p)
{
        if (!p)
                return;
        free(p->path);
        free(p);
}

int proto_app_files_read_decode(json_t *params, struct proto_app_files_read **ret, struct na_error *err)
{
        const char *path = NULL;
        int64_t offset = 0, limit = PROTO_APP_FILES_READ_MAX;
        bool ok = proto_app_files_path_field(params, NULL, "path", PROTO_REQUIRED, &path, err) >= 0;
        ok &= proto_int(params, NULL, "offset", 0, 0, INT64_MAX, &offset, err) >= 0;
        ok &= proto_int(params, NULL, "limit", 0, 1, PROTO_APP_FILES_READ_MAX, &limit, err) >= 0;
        if (!ok)
                return -EINVAL;
        struct proto_app_files_read *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.files.read_text params");
        int r = dup_path(path, &p->path, err);
        if (r < 0) {
                free(p);
                return r;
        }
        p->offset = offset;
        p->limit = limit;
        *ret = p;
        return 0;
}

static int b64_value(unsigned char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int proto_base64_decode(const char *text, size_t len, size_t max, unsigned char **ret, size_t *ret_len)
{
        if (len % 4 != 0)
                return -EINVAL;
        size_t pad = 0;
        if (len >= 1 && text[len - 1] == '=')
                pad++;
        if (len >= 2 && text[len - 2] == '=')
                pad++;
        size_t out_len = len / 4 * 3 - pad;
        if (out_len > max)
                return -EFBIG;
        unsigned char *out = malloc(out_len ? out_len : 1);
        if (!out)
                return -ENOMEM;
        size_t o = 0;
        for (size_t i = 0; i < len; i += 4) {
                bool last = i + 4 == len;
                int v[4];
                for (size_t k = 0; k < 4; k++) {
                        unsigned char c = (unsigned char)text[i + k];
                        if (c == '=' && last && k >= 4 - pad)
                                v[k] = 0;
                        else if ((v[k] = b64_value(c)) < 0) {
                                free(out);
                                return -EINVAL;
                        }
                }
                uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
                /* Bits a padded quantum leaves unused must be zero (canonical text only). */
                if (last && ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))) {
                        free(out);
                        return -EINVAL;
                }
                unsigned char b[3] = { (unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w };
                size_t take = last ? 3 - pad : 3;
                memcpy(out + o, b, take);
                o += take;
        }
        *ret = out;
        *ret_len = o;
        return 0;
}

void proto_app_files_write_free(struct proto_app_files_write *p)
{
        if (!p)
                return;
        free(p->path);
        free(p->data);
        free(p);
}

int proto_app_files_write_decode(json_t *params, struct proto_app_files_write **ret, struct na_error *err)
{
        const char *path = NULL;
        int64_t offset = 0;
        bool truncate = true;
        bool ok = proto_app_files_path_field(params, NULL, "path", PROTO_REQUIRED, &path, err) >= 0;
        int ro = proto_int(params, NULL, "offset", 0, 0, INT64_MAX, &offset, err);
        ok &= ro >= 0;
        int rt = proto_bool(params, NULL, "truncate", 0, &truncate, err);
        ok &= rt >= 0;
        _cleanup_free_ unsigned char *data = NULL;
        size_t len = 0;
        /* Base64 of 4 MiB is 5,592,408 characters: a bound on the text before decoding. */
        const size_t text_max = (PROTO_APP_FILES_WRITE_MAX + 2) / 3 * 4;
        json_t *c = params && json_is_object(params) ? json_object_get(params, "contentBase64") : NULL;
        if (c && json_is_string(c)) {
                size_t tlen = json_string_length(c);
                int r = tlen > text_max ? -EFBIG
                                        : proto_base64_decode(json_string_value(c), tlen, PROTO_APP_FILES_WRITE_MAX,
                                                              &data, &len);
                if (r == -ENOMEM)
                        return na_error_sys(err, ENOMEM, "app.files.write params");
                if (r == -EFBIG) {
                        na_error_field(err, "contentBase64", "must decode to at most 4194304 bytes");
                        ok = false;
                } else if (r < 0) {
                        na_error_field(err, "contentBase64", "must be valid base64 (RFC 4648, padded, no whitespace)");
                        ok = false;
                }
        } else {
                ok &= proto_string(params, NULL, "contentBase64", PROTO_REQUIRED, 0, SIZE_MAX, NULL, err) >= 0;
        }
        if (!ok)
                return -EINVAL;
        struct proto_app_files_write *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.files.write params");
        int r = dup_path(path, &p->path, err);
        if (r < 0) {
                free(p);
                return r;
        }
        p->data = TAKE_PTR(data);
        p->len = len;
        /* truncate defaults to true for a whole-file write and to false for a write at an offset. */
        if (rt != PROTO_PRESENT)
                truncate = ro != PROTO_PRESENT;
        p->has_offset = ro == PROTO_PRESENT || !truncate;
        p->offset = offset;
        p->truncate = truncate;
        *ret = p;
        return 0;
}

void proto_app_files_move_free(struct proto_app_files_move *p)
{
        if (!p)
                return;
        free(p->from);
        free(p->to);
        free(p);
}

int proto_app_files_move_decode(json_t *params, struct proto_app_files_move **ret, struct na_error *err)
{
        const char *from = NULL, *to = NULL;
        bool ok = proto_app_files_path_field(params, NULL, "from", PROTO_REQUIRED, &from, err) >= 0;
        ok &= proto_app_files_path_field(params, NULL, "to", PROTO_REQUIRED, &to, err) >= 0;
        if (!ok)
                return -EINVAL;
        struct proto_app_files_move *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.files.move params");
        if (dup_path(from, &p->from, err) < 0 || dup_path(to, &p->to, err) < 0) {
                proto_app_files_move_free(p);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

json_t *proto_app_files_read_encode(const char *path, const char *content, size_t bytes, bool truncated,
                                    bool binary)
{
        json_t *o = json_object();
        if (!o)
                return NULL;
        int r = json_object_set_new(o, "path", json_string(path));
        if (!binary)
                r |= json_object_set_new(o, "content", json_stringn(content ? content : "", content ? bytes : 0));
        r |= json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
        r |= json_object_set_new(o, "truncated", json_boolean(truncated));
        r |= json_object_set_new(o, "binary", json_boolean(binary));
        if (r) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *proto_app_files_list_encode(const struct proto_app_file_entry *entries, size_t n)
{
        json_t *a = json_array();
        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const struct proto_app_file_entry *e = &entries[i];
                char when[64], mode[8];
                na_format_time_ms(e->modified_ms > 0 ? (uint64_t)e->modified_ms : 0, when, sizeof(when));
                snprintf(mode, sizeof(mode), "%04o", (unsigned)(e->mode & 07777));
                json_t *o = json_object();
                int r = !o || json_array_append_new(a, o);
                if (!r) {
                        r |= json_object_set_new(o, "name", proto_text_json(e->name, strlen(e->name)));
                        r |= json_object_set_new(o, "type", json_string(proto_app_file_types[e->type]));
                        r |= json_object_set_new(o, "bytes", json_integer((json_int_t)e->bytes));
                        r |= json_object_set_new(o, "modifiedAt", json_string(when));
                        r |= json_object_set_new(o, "mode", json_string(mode));
                }
                if (r) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

json_t *proto_app_files_write_encode(const char *path, uint64_t bytes)
{
        return json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)bytes);
}
