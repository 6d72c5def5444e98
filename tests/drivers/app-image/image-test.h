/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers of the image store tests: run tests/harness/mkimage.py (found through
 * NA_SOURCE_DIR) and write layer tars directly with libarchive (hostile ones too).
 * Header-only, with tests/common/unit.h for temporary directories.
 *
 *   char *digest = mkimage("/tmp/x/images/bb", "1.0", "--cmd", "[\"sh\"]", NULL);
 *   struct tar_entry e[] = { { T_SYMLINK, "evil", "/" }, { T_FILE, "evil/x" } };
 *   char *tar = write_tar(dir, "layer.tar", e, 2);
 */
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/spawn.h"
#include "common/unit.h"

/* mkimage.py --layout layout --tag tag [args... NULL]; its stdout without the newline, or abort. */
static inline char *mkimage(const char *layout, const char *tag, ...)
{
        const char *src = getenv("NA_SOURCE_DIR");
        char script[4096];
        snprintf(script, sizeof(script), "%s/tests/harness/mkimage.py", src && *src ? src : NA_TEST_SOURCE_DIR);
        const char *argv[64] = { "/usr/bin/python3", script, "--layout", layout, "--tag", tag };
        size_t n = 6;
        va_list ap;
        va_start(ap, tag);
        for (const char *a; n < 63 && (a = va_arg(ap, const char *));)
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        struct na_error err = NA_ERROR_INIT;
        char *out = NULL;
        if (na_spawn((char *const *)argv, NULL, &out, 1 << 20, &err) < 0) {
                fprintf(stderr, "mkimage: %s\n", err.message);
                abort();
        }
        out[strcspn(out, "\n")] = '\0';
        return out;
}

enum tar_type { T_FILE, T_DIR, T_SYMLINK, T_HARDLINK, T_FIFO, T_CHR, T_BLK };

struct tar_entry {
        enum tar_type type;
        const char *path;
        const char *target; /* symlink or hard link target */
        const char *data;   /* file content */
        int mode;           /* 0: 0644 (files), 0755 (directories) */
        int uid, gid;
};

/* Write a plain tar (pax) of the entries, exactly as given, to dir/name; returns its path. */
static inline char *write_tar(const char *dir, const char *name, const struct tar_entry *e, size_t n)
{
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, name) < 0)
                abort();
        struct archive *a = archive_write_new();
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_add_filter_none(a) != ARCHIVE_OK ||
            archive_write_open_filename(a, path) != ARCHIVE_OK) {
                fprintf(stderr, "write_tar: %s\n", archive_error_string(a));
                abort();
        }
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *ae = archive_entry_new();
                archive_entry_set_pathname(ae, e[i].path);
                archive_entry_set_mtime(ae, 1700000000, 0);
                archive_entry_set_uid(ae, e[i].uid);
                archive_entry_set_gid(ae, e[i].gid);
                size_t size = 0;
                switch (e[i].type) {
                case T_FILE:
                        archive_entry_set_filetype(ae, AE_IFREG);
                        size = e[i].data ? strlen(e[i].data) : 0;
                        break;
                case T_DIR:
                        archive_entry_set_filetype(ae, AE_IFDIR);
                        break;
                case T_SYMLINK:
                        archive_entry_set_filetype(ae, AE_IFLNK);
                        archive_entry_set_symlink(ae, e[i].target);
                        break;
                case T_HARDLINK:
                        archive_entry_set_filetype(ae, AE_IFREG);
                        archive_entry_set_hardlink(ae, e[i].target);
                        break;
                case T_FIFO:
                        archive_entry_set_filetype(ae, AE_IFIFO);
                        break;
                case T_CHR:
                case T_BLK:
                        archive_entry_set_filetype(ae, e[i].type == T_CHR ? AE_IFCHR : AE_IFBLK);
                        archive_entry_set_rdevmajor(ae, 1);
                        archive_entry_set_rdevminor(ae, 3);
                        break;
                }
                archive_entry_set_perm(ae, e[i].mode ? (mode_t)e[i].mode : e[i].type == T_DIR ? 0755 : 0644);
                archive_entry_set_size(ae, (la_int64_t)size);
                if (archive_write_header(a, ae) != ARCHIVE_OK) {
                        fprintf(stderr, "write_tar %s: %s\n", e[i].path, archive_error_string(a));
                        abort();
                }
                if (size && archive_write_data(a, e[i].data, size) != (la_ssize_t)size)
                        abort();
                archive_entry_free(ae);
        }
        archive_write_close(a);
        archive_write_free(a);
        return path;
}

/* Does path exist (without following a final symbolic link)? */
static inline int exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

static inline char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *pathf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *p = NULL;
        if (vasprintf(&p, fmt, ap) < 0)
                abort();
        va_end(ap);
        return p;
}
