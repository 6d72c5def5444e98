/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of app.files.* (AGENT-API 4.2; reference 2.9 and 4.6): the path text
 * check every file path goes through before anything touches a volume, the params
 * decoders of list, read_text, write, mkdir, move and delete, and the encoders of
 * their results. No I/O, no logging: JSON in, validated C structs out (or
 * VALIDATION_ERROR with every problem under its field), and back.
 *
 *   struct proto_app_files_write *w;
 *   if (proto_app_files_write_decode(params, &w, &err) < 0) return ...;   // 422 with details
 *   ... app_fs_write(fs, w->path, w->data, w->len, ...) (volume/volume.h) ...
 *   proto_app_files_write_free(w);
 *
 * Paths (proto_app_files_path_problem): relative to the volume's root, a leading "/"
 * meaning that root and "/" alone the root itself; no empty component ("//", a
 * trailing "/"), no "." or ".." component (refused, never resolved), no NUL or
 * control character (0x01..0x1f, 0x7f), valid UTF-8, each component at most 255
 * bytes, the whole at most 4096 bytes. Whether a valid path stays inside the volume
 * once symbolic links are followed is the kernel's answer (openat2 RESOLVE_BENEATH,
 * volume/volume.h), not this text check's.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define PROTO_APP_FILES_PATH_MAX 4096          /* bytes of a path */
#define PROTO_APP_FILES_NAME_MAX 255           /* bytes of one component */
#define PROTO_APP_FILES_READ_MAX 524288        /* read_text: limit 1..this, the default */
#define PROTO_APP_FILES_WRITE_MAX (4u << 20)   /* write: decoded bytes */
#define PROTO_APP_FILES_LIST_MAX 10000         /* list: entries returned at most */

/*
 * NULL when path (len bytes, which may hold NUL) is a valid file path, else a static
 * message saying what is wrong ("must not contain '..' components", ...).
 */
const char *proto_app_files_path_problem(const char *path, size_t len);
/*
 * The path relative to the volume root: the leading "/" dropped, "." for the root.
 * Only for paths proto_app_files_path_problem() accepted; returns a pointer into path
 * or the static ".".
 */
const char *proto_app_files_path_relative(const char *path);

/* A path field at prefix.key, checked as above; returns as proto_string. */
int proto_app_files_path_field(json_t *obj, const char *prefix, const char *key, unsigned flags,
                               const char **out, struct na_error *err);

/* app.files.list, app.files.mkdir, app.files.delete: {path}. */
struct proto_app_files_path {
        char *path;
};
int proto_app_files_path_decode(json_t *params, struct proto_app_files_path **ret, struct na_error *err);
void proto_app_files_path_free(struct proto_app_files_path *p);

/* app.files.read_text: {path, offset? (>= 0, default 0), limit? (1..524288, default 524288)}. */
struct proto_app_files_read {
        char *path;
        int64_t offset;
        int64_t limit;
};
int proto_app_files_read_decode(json_t *params, struct proto_app_files_read **ret, struct na_error *err);
void proto_app_files_read_free(struct proto_app_files_read *p);

/*
 * app.files.write: {path, contentBase64 (standard alphabet, padding required, no
 * whitespace; decoded at most 4 MiB), offset? (>= 0), truncate? (bool)}.
 * Without offset and unless truncate is false, the whole file is replaced
 * (has_offset false, truncate true); otherwise the bytes are written in place at
 * offset (default 0) and, with truncate, the file is cut after them.
 */
struct proto_app_files_write {
        char *path;
        unsigned char *data;
        size_t len;
        bool has_offset;
        int64_t offset;
        bool truncate;
};
int proto_app_files_write_decode(json_t *params, struct proto_app_files_write **ret, struct na_error *err);
void proto_app_files_write_free(struct proto_app_files_write *p);

/* app.files.move: {from, to}. */
struct proto_app_files_move {
        char *from;
        char *to;
};
int proto_app_files_move_decode(json_t *params, struct proto_app_files_move **ret, struct na_error *err);
void proto_app_files_move_free(struct proto_app_files_move *p);

/*
 * Strict base64 (RFC 4648 section 4, padded): 0 with *ret (malloc'd, never NULL, may
 * be empty) and *ret_len; -EINVAL for bad text, -EFBIG when it decodes to more than max.
 */
int proto_base64_decode(const char *text, size_t len, size_t max, unsigned char **ret, size_t *ret_len);

/* Results. */
/* read_text (reference 2.9): {path, content? (absent when binary), bytes, truncated, binary}. */
json_t *proto_app_files_read_encode(const char *path, const char *content, size_t bytes, bool truncated,
                                    bool binary);

enum proto_app_file_type { PROTO_APP_FILE, PROTO_APP_FILE_DIRECTORY, PROTO_APP_FILE_SYMLINK, PROTO_APP_FILE_OTHER };
extern const char *const proto_app_file_types[]; /* "file", "directory", "symlink", "other", NULL */

struct proto_app_file_entry {
        const char *name;    /* any bytes; encoded with U+FFFD for what is not UTF-8 */
        enum proto_app_file_type type;
        uint64_t bytes;
        int64_t modified_ms; /* epoch milliseconds */
        uint32_t mode;       /* permission bits (07777) */
};
/* list: [{name, type, bytes, modifiedAt (RFC 3339), mode ("0644": octal text)}]. */
json_t *proto_app_files_list_encode(const struct proto_app_file_entry *entries, size_t n);
/* write: {path, bytes}. */
json_t *proto_app_files_write_encode(const char *path, uint64_t bytes);
