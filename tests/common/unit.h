/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Small helpers shared by the unit tests of common/, proto/ and agent/: private
 * temporary directories that are removed again, and whole-file writes and reads.
 * Header-only (static inline) so each test program stays one file plus this.
 */
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh directory /tmp/na-unit-<tag>-XXXXXX (under $TMPDIR when set); abort on failure. */
static inline char *unit_tmpdir(const char *tag)
{
        const char *base = getenv("TMPDIR");
        char tmpl[4096];
        snprintf(tmpl, sizeof(tmpl), "%s/na-unit-%s-XXXXXX", base && *base ? base : "/tmp", tag);
        char *dir = mkdtemp(tmpl);
        if (!dir) {
                perror("mkdtemp");
                abort();
        }
        return strdup(dir);
}

static inline int unit_rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        if (type == FTW_DP)
                return rmdir(path) < 0 ? -1 : 0;
        return unlink(path) < 0 ? -1 : 0;
}

/* rm -rf path (never follows symbolic links) and free it. */
static inline void unit_rmrf_free(char *path)
{
        if (!path)
                return;
        nftw(path, unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(path);
}

/* A private directory and one file path in it: the fixture of the journal-backed tests. */
struct unit_dir_fixture {
        char *dir;
        char *path; /* <dir>/<file>, not created */
};

static inline struct unit_dir_fixture *unit_dir_fixture_new(const char *tag, const char *file)
{
        struct unit_dir_fixture *f = calloc(1, sizeof(*f));
        if (!f)
                abort();
        f->dir = unit_tmpdir(tag);
        if (asprintf(&f->path, "%s/%s", f->dir, file) < 0)
                abort();
        return f;
}

static inline void unit_dir_fixture_free(struct unit_dir_fixture *f)
{
        if (!f)
                return;
        unit_rmrf_free(f->dir);
        free(f->path);
        free(f);
}

/* Write text to dir/name (or to name when dir is NULL) with mode; returns the full path (caller frees). */
static inline char *unit_write(const char *dir, const char *name, const void *data, size_t len, mode_t mode)
{
        char *path = NULL;
        if (dir) {
                if (asprintf(&path, "%s/%s", dir, name) < 0)
                        abort();
        } else
                path = strdup(name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0 || write(fd, data, len) != (ssize_t)len || fchmod(fd, mode) < 0) {
                perror(path);
                abort();
        }
        close(fd);
        return path;
}

static inline char *unit_write_str(const char *dir, const char *name, const char *text, mode_t mode)
{
        return unit_write(dir, name, text, strlen(text), mode);
}

/* The whole file (NUL-terminated) or NULL; *len gets its size when not NULL. */
static inline char *unit_slurp(const char *path, size_t *len)
{
        FILE *f = fopen(path, "rbe");
        if (!f)
                return NULL;
        size_t cap = 4096, n = 0;
        char *buf = malloc(cap);
        for (;;) {
                if (n + 1 >= cap) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                }
                size_t got = fread(buf + n, 1, cap - n - 1, f);
                if (got == 0)
                        break;
                n += got;
        }
        fclose(f);
        buf[n] = '\0';
        if (len)
                *len = n;
        return buf;
}

static inline off_t unit_file_size(const char *path)
{
        struct stat st;
        return stat(path, &st) < 0 ? -1 : st.st_size;
}

/* Count the entries of a directory other than . and .. */
static inline int unit_dir_entries(const char *dir)
{
        int n = 0;
        DIR *d = opendir(dir);
        if (!d)
                return -1;
        for (struct dirent *e; (e = readdir(d));)
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}
