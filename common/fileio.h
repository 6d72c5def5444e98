/* SPDX-License-Identifier: GPL-2.0-or-later */
/* File primitives of the state directory: atomic replace, bounded reads, the lock. */
#pragma once

#include <stddef.h>
#include <jansson.h>
#include <sys/types.h>

#include "common/error.h"

/*
 * Replace path with data atomically: a temporary file in the same directory,
 * fsync, rename over path, fsync of the directory. After a crash the file holds
 * either the old or the new content, never a mix.
 */
int na_atomic_write(const char *path, const void *data, size_t len, mode_t mode, struct na_error *err);

/* write(2) all of data (retrying short writes and EINTR); the error names path. */
int na_write_all(int fd, const void *data, size_t len, const char *path, struct na_error *err);

/* pwrite(2) all of data at off (retrying short writes and EINTR); the error names what. */
int na_pwrite_all(int fd, const void *data, size_t len, off_t off, const char *what, struct na_error *err);

/* Read a whole file of at most max bytes into a NUL-terminated buffer. */
int na_read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct na_error *err);

/* fsync the directory that holds path (after a rename or create inside it). */
int na_fsync_parent(const char *path, struct na_error *err);

/* mkdir -p with mode for the directories it creates. */
int na_mkdir_p(const char *path, mode_t mode, struct na_error *err);

/*
 * Take the state directory's lock (a POSIX write lock on <dir>/lock holding our
 * pid). A second agent gets an error naming the holder's pid. The returned fd
 * keeps the lock until closed.
 */
int na_statedir_lock(const char *dir, int *ret_fd, struct na_error *err);

/* asprintf that returns NULL on failure. */
char *na_strdupf(const char *fmt, ...) _printf_(1, 2);
/* unlink that ignores ENOENT. */
int na_unlink(const char *path, struct na_error *err);
/* A JSON file of at most max bytes (read with O_CLOEXEC, unlike json_load_file); NULL when absent or bad. */
json_t *na_json_load(const char *path, size_t max);
/* fsync a file by path. */
int na_fsync_path(const char *path, struct na_error *err);
/*
 * poll fd for events until deadline (na_now_mono_ms() clock), retrying EINTR: 0 when
 * ready, -ETIMEDOUT, or -errno. fd -1 only waits until the deadline.
 */
int na_wait_fd(int fd, short events, long long deadline_ms);
