/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * App backups (app.backup.*): the parts the crun driver's backup functions
 * (app-oci-backup.c) are made of, one idea per file:
 *   app-backup-ignore.c   the ignore patterns (.gitignore-like) matcher
 *   app-backup-write.c    the archive writer: a walk of the volume into tar + zstd,
 *                         hashed (sha256) while it is written
 *   app-backup-extract.c  the extractor of a restore: every entry beneath a new
 *                         directory, hostile entries refused
 *   app-backup-store.c    <backups_dir>/<app id>/: records, list, delete, retention,
 *                         temporary files and their sweep
 *   app-backup-freeze.c   freezing an app's cgroup (v1 freezer or v2 cgroup.freeze)
 *   app-backup-snapshot.c a copy-on-write snapshot of the disk image (FIFREEZE, FICLONE)
 *
 * A backup is <backups_dir>/<app id>/<backupId>.tar.zst (pax tar, zstd) and its record
 * <backupId>.json ({backupId, appId, createdAt, sizeBytes, sha256, format}), written
 * last and atomically: a backup without its record does not exist. The data is
 * written as <backupId>.tar.zst.partial (or an O_TMPFILE for adopted downloads),
 * fsynced and renamed; *.partial files are swept by the next backup.
 *
 * The archive holds the volume's entries with relative names ("dir/file", never "."
 * or "./"), directories before what they hold, regular files, directories and
 * symbolic links (stored as links, never followed); sockets, fifos and devices are
 * skipped; a file with several hard links is stored once per name (whole each time). Owners are in the container's view (host id - id base; ids outside the
 * app's range become 0). A file with holes is stored as a GNU sparse file (pax
 * "GNU.sparse.major=1"): its data regions only, and restored with the same holes; a
 * file with more data to read than the volume's size is refused (QUOTA_EXCEEDED).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/progress.h"
#include "proto/app-backup.h"

/* ---- ignore patterns ---------------------------------------------------------------
 * Like .gitignore: blank lines and lines starting with "#" are skipped; "!" re-includes
 * what an earlier pattern excluded; a trailing "/" matches directories only; a pattern
 * with a "/" other than a trailing one is anchored at the volume's root (a leading "/"
 * only anchors), one without matches the name at any depth. "*" matches within a
 * component, "?" one character but "/", "[...]" a class ("[!...]" or "[^...]"
 * negated, ranges "a-z"), "**" any number of components (as a whole component: at
 * the start, between two slashes or at the end), "\" escapes the next character. The last pattern that matches decides. A
 * directory excluded is not walked, so nothing below it can be re-included. */
struct app_backup_ignore;
int app_backup_ignore_new(char *const *patterns, struct app_backup_ignore **ret, struct na_error *err);
void app_backup_ignore_free(struct app_backup_ignore *ig); /* NULL-safe */
/* Whether rel (relative to the volume's root, no leading "/") is excluded; ig may be NULL. */
bool app_backup_ignored(const struct app_backup_ignore *ig, const char *rel, bool is_dir);
/* One glob (no "!", no trailing "/") against a whole path; exposed for tests. */
bool app_backup_glob(const char *pattern, const char *path);

/* ---- the archive writer ------------------------------------------------------------ */
struct app_backup_write_opts {
        uint32_t id_base, id_count;            /* the app's host ids */
        const struct app_backup_ignore *ignore; /* NULL: none */
        uint64_t total_bytes;                   /* for percent: the volume's used size; 0: unknown */
        uint64_t max_file_bytes;                /* what may be read of one file (the volume's size); 0: no limit */
        const struct na_progress *progress;     /* stage "archiving"; checkpoint between files */
        int zstd_level;                         /* 0: 3 */
};
struct app_backup_written {
        uint64_t size_bytes; /* of the compressed archive */
        char sha256[65];
        uint64_t files, bytes_in;
};
/* Archive the tree under volume_fd (a directory) into out_fd (written from where it is). */
int app_backup_write(int volume_fd, int out_fd, const struct app_backup_write_opts *o, struct app_backup_written *ret,
                     struct na_error *err);

/* ---- the extractor ------------------------------------------------------------------
 * Extract the archive read from archive_fd into dest_fd (an empty directory), every
 * entry's parent resolved beneath dest_fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) and the entry made
 * with O_EXCL/O_NOFOLLOW, so that no entry (nor a link an earlier entry made) can
 * lead outside. Refused, naming the entry (VALIDATION_ERROR on "backupId"): absolute
 * names, "." / ".." / empty components, names over 4096 bytes or components over
 * 255, a parent that is missing or a symbolic link, an entry that exists already,
 * devices, fifos, sockets, hard links whose target breaks these rules. Owners are
 * mapped into the app's range (ids outside 0..id_count-1 become the app's root).
 * ENOSPC/EDQUOT: QUOTA_EXCEEDED. what names the backup in messages ("app X: backup Y"). */
int app_backup_extract(int archive_fd, int dest_fd, uint32_t id_base, uint32_t id_count,
                       const struct na_progress *progress, const char *what, struct na_error *err);

/* ---- the store ---------------------------------------------------------------------- */
#define APP_BACKUP_SUFFIX ".tar.zst"
#define APP_BACKUP_FORMAT "tar+zstd"
/* <backups_dir>/<app_id>; created 0700 when create is set. */
int app_backup_dir(const char *backups_dir, const char *app_id, bool create, char **ret, struct na_error *err);
/* Remove <backups_dir>/<app_id> and every backup in it (app.delete); 0 when there is none. */
int app_backup_forget(const char *backups_dir, const char *app_id, struct na_error *err);
/* A complete backup's record; -ENOENT without err when there is none (or its data is gone). */
int app_backup_record_load(const char *dir, const char *bid, struct proto_app_backup *ret, struct na_error *err);
/* Every complete backup, oldest first. A missing dir is an empty list. */
int app_backup_records(const char *dir, struct proto_app_backup **ret, size_t *ret_n, struct na_error *err);
/* Record first (then it is not listed), then the data. Missing: 0. */
int app_backup_remove(const char *dir, const char *bid, struct na_error *err);
/* Retention after a new backup (proto_backup_retention). */
int app_backup_retain(const char *dir, const struct proto_vps_backup_limits *limits, struct na_error *err);
/* Remove the *.partial leftovers of backups cut short. */
void app_backup_sweep(const char *dir);
/* fsync data_fd, make it <bid>.tar.zst (from tmp_name, or an O_TMPFILE when tmp_name is
 * NULL), write the record; *ret filled. */
int app_backup_commit(const char *dir, const char *app_id, const char *bid, int data_fd, const char *tmp_name,
                      uint64_t size, const char *sha256, struct proto_app_backup *ret, struct na_error *err);
/* sha256 of what fd holds from offset 0 (leaves the offset at the end); *ret_size its length. */
int app_backup_hash_fd(int fd, const struct na_progress *progress, char sha256[65], uint64_t *ret_size,
                       struct na_error *err);

/* ---- freezing -------------------------------------------------------------------------
 * The app's cgroup ("nodeagent/app-<id>"): cgroup v2's cgroup.freeze when the host is
 * unified, else the v1 freezer hierarchy. -ENOENT (err set) when the cgroup is missing
 * (the app does not run). Thaw is idempotent and always tried after a freeze. */
int app_backup_freeze(const char *cgroup_rel, struct na_error *err);
int app_backup_thaw(const char *cgroup_rel, struct na_error *err);

/* ---- the copy-on-write snapshot --------------------------------------------------------
 * 1: image (the app's disk, mounted at disk) reflinked to clone and the clone mounted
 * read-only at mnt (drop it after with app_backup_snapshot_drop); 0: the storage file
 * system has no reflinks (nothing made); < 0: error. The disk's file system is frozen
 * (FIFREEZE) only for the clone itself. */
int app_backup_snapshot(const char *image, const char *disk, const char *clone, const char *mnt, struct na_error *err);
void app_backup_snapshot_drop(const char *clone, const char *mnt);
/* FITHAW of the file system mounted at disk (after an agent died during a snapshot). */
void app_backup_fs_thaw(const char *disk);
