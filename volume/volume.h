/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The safe path layer of an app's volume: the only way the files kinds (and later
 * SFTP and backups) touch a volume. Design and what is refused: docs/app-files.md.
 *
 *   struct app_fs *fs;
 *   r = app_fs_open("/var/lib/nodeagent/apps/apps/<id>/disk/volume", uid_base, uid_base, &fs, &err);
 *   r = app_fs_read_text(fs, "config/server.properties", 0, 524288, &text, &err);
 *   r = app_fs_write(fs, "/config/server.properties", data, len, NULL, &err);
 *   app_fs_close(fs);
 *
 * Every user path is first checked as text (proto_app_files_path_problem: no "..",
 * no ".", no "//", ...), then resolved beneath the volume root's directory fd with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV): symbolic links
 * inside the volume that stay inside are followed; one that leaves (absolute, or
 * ".." above the root, or into another mount) is refused by the kernel. Mutations
 * resolve the parent directory that way and then act on the last component with the
 * *at calls, never following a link there (the link itself is moved or deleted).
 * Hard links are never created. Files and directories created are owned by uid:gid.
 *
 * Errors (field is "path", or "from"/"to" for move):
 *   422 VALIDATION_ERROR on the field: malformed text, "the path leaves the app's volume",
 *       too many levels of symbolic links, an offset past the end;
 *   404 FILE_NOT_FOUND naming the path;
 *   409 INVALID_STATE: is a directory, not a directory, a symbolic link where a file is
 *       written, a target that exists (move), the volume's root (move, delete);
 *   409 QUOTA_EXCEEDED: the volume has no room, nothing written;
 *   500 INTERNAL_ERROR otherwise.
 * Functions return 0 or a negative errno-style value with err filled; ret_ values are
 * written only on success. A struct app_fs holds only the root fd: threads may share it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"
#include "proto/app-files.h"
#include "volume/volume.h"

struct app_fs;

/* Open the volume root (a directory; not itself a symbolic link) for uid:gid. */
int app_fs_open(const char *volume_dir, uid_t uid, gid_t gid, struct app_fs **ret, struct na_error *err);
/* As app_fs_open over a root directory already open (taken: closed by app_fs_close, or here on failure). */
int app_fs_adopt(int root_fd, uid_t uid, gid_t gid, struct app_fs **ret, struct na_error *err);
void app_fs_close(struct app_fs *fs); /* NULL-safe */
int app_fs_root_fd(const struct app_fs *fs); /* borrowed; O_PATH|O_DIRECTORY */

/*
 * Resolve path (checked as text first; errors under field) beneath the root with
 * openat2(flags | O_CLOEXEC) and the layer's resolve flags, following links that stay
 * inside. *ret_fd is the new descriptor.
 */
int app_fs_resolve(struct app_fs *fs, const char *field, const char *path, int flags, int *ret_fd,
                   struct na_error *err);
/*
 * The parent of path, resolved as above (O_PATH|O_DIRECTORY), and its last component
 * (a pointer into path; "." for the root itself, which callers that mutate refuse).
 */
int app_fs_resolve_parent(struct app_fs *fs, const char *field, const char *path, int *ret_dir_fd,
                          const char **ret_name, struct na_error *err);

/* list: at most max entries (0: PROTO_APP_FILES_LIST_MAX), sorted by name; *ret_cut when more were there. */
struct app_fs_listing {
        struct proto_app_file_entry *entries; /* names owned */
        size_t n;
        bool cut;
};
int app_fs_list(struct app_fs *fs, const char *path, size_t max, struct app_fs_listing *ret, struct na_error *err);
void app_fs_listing_clear(struct app_fs_listing *l);

/*
 * read_text (reference 2.9 and 4.6): at most limit (1..524288) bytes from offset.
 * content is NUL-terminated and valid UTF-8 (it may hold NUL bytes: use bytes), or NULL
 * when binary. bytes is how many bytes of the file this answer covers (the next page
 * starts at offset + bytes); truncated when the file goes on after them. A multi-byte
 * sequence cut by the limit ends the answer before it; when that leaves nothing, or
 * the bytes are not valid UTF-8 (also: an offset inside a sequence, a file ending in
 * the middle of one), binary is true and bytes is what was read. An offset past the
 * end is VALIDATION_ERROR on "offset"; at the end, an empty text.
 */
struct app_fs_text {
        char *content;
        size_t bytes;
        bool truncated;
        bool binary;
};
int app_fs_read_text(struct app_fs *fs, const char *path, uint64_t offset, uint32_t limit, struct app_fs_text *ret,
                     struct na_error *err);
void app_fs_text_clear(struct app_fs_text *t);

/*
 * write. Without opts (or opts->in_place false): the whole file is replaced through
 * a temporary name in the same directory renamed over it (an existing file keeps its
 * owner and permission bits; a new one is uid:gid 0644). With opts->in_place: the
 * bytes go at opts->offset of the file (created when missing; an offset past its end
 * is VALIDATION_ERROR on "offset"), and with opts->truncate the file ends after them.
 * A directory, or a symbolic link as the last component, is INVALID_STATE; so is an
 * in-place write to a file with other hard links. Room is checked first (fstatvfs)
 * and reserved (fallocate) before a byte is written: QUOTA_EXCEEDED with nothing
 * written, and ENOSPC or EDQUOT during the write is QUOTA_EXCEEDED too (the temporary
 * is removed; an in-place write's file gets its old size back).
 */
struct app_fs_write_opts {
        bool in_place;
        uint64_t offset;
        bool truncate;
};
int app_fs_write(struct app_fs *fs, const char *path, const void *data, size_t len,
                 const struct app_fs_write_opts *opts, struct na_error *err);

/* mkdir -p: every missing directory created 0755 and owned by uid:gid; an existing directory is success. */
int app_fs_mkdir(struct app_fs *fs, const char *path, struct na_error *err);
/*
 * move with renameat2(RENAME_NOREPLACE): an existing "to" is refused (INVALID_STATE),
 * never overwritten; "to"'s parent must exist. A directory moved into itself is
 * VALIDATION_ERROR on "to". The root cannot be moved (INVALID_STATE).
 */
int app_fs_move(struct app_fs *fs, const char *from, const char *to, struct na_error *err);
/*
 * delete: a file, a symbolic link (never its target) or a directory with everything
 * in it (app_fs_rm_rf). The root cannot be deleted (INVALID_STATE).
 */
int app_fs_delete(struct app_fs *fs, const char *path, struct na_error *err);
/*
 * rm -rf of name under dir_fd that never follows a link and never climbs with "..":
 * each level is reopened from the top directory with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
 * so a tree the app renames while it is deleted can make it start over (at most
 * 64 times, then -EAGAIN) but never take it outside. ENOENT is success.
 */
int app_fs_rm_rf(int dir_fd, const char *name, struct na_error *err);

/*
 * chmod: permission bits 0..01777 (setuid and setgid are refused: VALIDATION_ERROR on
 * "mode") of a file or directory. The last component is opened O_PATH|O_NOFOLLOW
 * and checked, then opened again O_NOFOLLOW for fchmod (never fchmodat through
 * /proc/self/fd, a magic link); a symbolic link or a special file is INVALID_STATE.
 */
int app_fs_chmod(struct app_fs *fs, const char *path, mode_t mode, struct na_error *err);
/* utimensat(times, AT_SYMLINK_NOFOLLOW) on the last component: a link's own times, never its target's. */
int app_fs_utimens(struct app_fs *fs, const char *path, const struct timespec times[2], struct na_error *err);

/*
 * For export: open path (following links that stay inside) read-only as a regular
 * file; *ret_st is its fstat. A directory or a special file is INVALID_STATE.
 */
int app_fs_open_read(struct app_fs *fs, const char *path, int *ret_fd, struct stat *ret_st, struct na_error *err);
/* stat of path (the last component not followed): one list entry; name borrowed from path. */
int app_fs_stat(struct app_fs *fs, const char *path, struct proto_app_file_entry *ret, struct na_error *err);

/*
 * POSIX-like calls for nodeagent-sftpd (volume/app-fs-posix.c), with the same
 * path rules and errors as above (field "path", or "target" for symlink). Each keeps
 * the kernel's errno as err->errnum (and -errno as the return) so a caller can map it
 * to its own protocol's status.
 *
 * open_file: open(2) flags O_RDONLY/O_WRONLY/O_RDWR with O_APPEND, O_CREAT, O_TRUNC,
 *   O_EXCL; links that stay inside are followed (also for the last component);
 *   a new file gets mode & 0777 (less the umask) and, when the caller is root, uid:gid;
 *   a directory is INVALID_STATE (EISDIR), anything but a regular file EINVAL.
 * opendir: an O_RDONLY|O_DIRECTORY fd of path (links inside followed).
 * lstat: the last component not followed; stat: followed (inside only).
 * truncate: a regular file, never through a link (O_NOFOLLOW on the last component).
 * remove: a file or a link (never a directory: EISDIR); rmdir: an empty directory.
 * mkdir1: one directory (the parent must exist), mode & 0777, uid:gid when root.
 * readlink: the link's text (*ret malloc'd). symlink: a link at path whose target is
 *   relative and stays inside the volume as text (sftp/sftp-path.h's rule), else
 *   VALIDATION_ERROR on "target" (EPERM).
 * rename: renameat2 with flags (0 or RENAME_NOREPLACE), the root refused.
 */
int app_fs_open_file(struct app_fs *fs, const char *path, int flags, mode_t mode, int *ret_fd, struct na_error *err);
int app_fs_opendir(struct app_fs *fs, const char *path, int *ret_fd, struct na_error *err);
int app_fs_lstat(struct app_fs *fs, const char *path, struct stat *ret, struct na_error *err);
int app_fs_stat_follow(struct app_fs *fs, const char *path, struct stat *ret, struct na_error *err);
int app_fs_truncate(struct app_fs *fs, const char *path, uint64_t size, struct na_error *err);
int app_fs_remove(struct app_fs *fs, const char *path, struct na_error *err);
int app_fs_rmdir(struct app_fs *fs, const char *path, struct na_error *err);
int app_fs_mkdir1(struct app_fs *fs, const char *path, mode_t mode, struct na_error *err);
int app_fs_readlink(struct app_fs *fs, const char *path, char **ret, struct na_error *err);
int app_fs_symlink(struct app_fs *fs, const char *target, const char *path, struct na_error *err);
int app_fs_rename(struct app_fs *fs, const char *from, const char *to, unsigned flags, struct na_error *err);
/*
 * Whether a symbolic link at link_path (absolute, canonical: "/a/b") with text target
 * stays inside the volume when followed as text: the target is relative and no ".."
 * of it climbs above "/". Absolute targets are refused (inside the container "/" is
 * another root; openat2 beneath the volume refuses them anyway).
 */
bool app_fs_symlink_target_inside(const char *link_path, const char *target);

/*
 * Seed a new, empty volume (volume_fd, its root) from its image (AGENT-API 4.2
 * "Volume seeding"): what the unpacked image (image_root_fd) holds at volume_path is
 * copied in, owned by uid:gid (the app's user on the host), links as links, special
 * files skipped, set-id bits dropped. The image is resolved in its own root, never out
 * of it. A volume that holds anything is left alone. All or nothing: a seed that fails
 * (QUOTA_EXCEEDED when it does not fit) leaves the volume empty again. *ret_entries:
 * what was copied (0 when the image holds nothing there, or the volume was not empty).
 */
int app_fs_seed(int image_root_fd, const char *volume_path, int volume_fd, uid_t uid, gid_t gid, uint64_t *ret_entries,
                struct na_error *err);

/* ---- files that replace their target only when complete (app-fs-tmp.c) ---- */

/*
 * A new file beneath an app's volume that replaces path only when it is complete
 * (app.files.import, and any writer that streams a file of unknown size into a
 * volume): created beside the target in the target's directory, owned by the app's
 * uid:gid (or the existing file's owner and permission bits), renamed over the target
 * only on commit. Until then the target is untouched; an abort, or a crash, keeps
 * nothing (an unnamed O_TMPFILE where the file system has it; else a hidden
 * ".na-import-<random>" removed on abort).
 *
 *   struct app_fs_tmp t;
 *   r = app_fs_tmp_open(fs, "world/level.dat", &t, &err);   // same checks as app_fs_write
 *   ... pwrite(t.fd, ...) ...
 *   r = ok ? app_fs_tmp_commit(&t, &err) : (app_fs_tmp_abort(&t), r);
 *
 * The target's checks are app_fs_write's: path resolved beneath the root (field
 * "path"), the root itself, a directory, a symbolic link or a special file as the last
 * component are INVALID_STATE. ENOSPC/EDQUOT on commit is QUOTA_EXCEEDED.
 */
struct app_fs_tmp {
        int fd;          /* O_RDWR, the caller writes here */
        int dir_fd;      /* the target's directory (O_PATH) */
        const char *name; /* the target's last component (into path) */
        const char *path;
        bool named;      /* a hidden temporary name exists (no O_TMPFILE) */
        char tmp[64];
};

int app_fs_tmp_open(struct app_fs *fs, const char *path, struct app_fs_tmp *ret, struct na_error *err);
/* fsync, give the file a name, rename it over the target; t is released either way. */
int app_fs_tmp_commit(struct app_fs_tmp *t, struct na_error *err);
/* As app_fs_tmp_commit with renameat2's flags (RENAME_NOREPLACE: -EEXIST when the
 * target appeared meanwhile, nothing replaced). */
int app_fs_tmp_commit_flags(struct app_fs_tmp *t, unsigned rename_flags, struct na_error *err);
/* Drop the file; the target stays as it was. NULL-safe, idempotent. */
void app_fs_tmp_abort(struct app_fs_tmp *t);

/* ---- one file as live file editing sees it (app-fs-version.c; AGENT-API 4.3 mode files) ---- */

/*
 * The version of a file is an opaque string that changes whenever its content does:
 * "sha256:<hex>" of the content for a file of at most content_max bytes (the same bytes
 * give the same version, whoever wrote them), "meta:<inode>-<size>-<mtime ns>" for a
 * larger one (its content is never read whole). proto/README.md says why.
 */
#define APP_FS_VERSION_MAX 96
struct app_fs_file {
        bool exists;       /* a regular file is at the path (false: gone; the rest is empty) */
        int not_regular;   /* when !exists and something else is there: EISDIR, ELOOP (a link), EINVAL */
        char version[APP_FS_VERSION_MAX + 1];
        uint64_t bytes;
        bool binary;       /* not UTF-8, or more than content_max bytes: no content */
        char *content;     /* NUL-terminated when !binary (may hold NULs: bytes) */
        dev_t dir_dev;     /* the directory the path's last component was found in */
        ino_t dir_ino;
};
/* Resolve path's parent beneath the root and read the file (its last component never
 * followed). A missing file or directory is success with exists false. */
int app_fs_file_get(struct app_fs *fs, const char *path, size_t content_max, struct app_fs_file *ret,
                    struct na_error *err);
void app_fs_file_clear(struct app_fs_file *f);
/*
 * Replace path with data if its version is still base_version (NULL: if it still does
 * not exist): a temporary file in its directory owned as app_fs_tmp_open says, written,
 * the version checked again, then renamed over it (renameat2; RENAME_NOREPLACE when
 * base_version is NULL). QUOTA_EXCEEDED when the volume has no room: the old file stays.
 * On success *ret_conflict tells which: false, written, and ret_now->version is the new
 * version (content not filled); true, nothing written, and ret_now is the file as it is.
 * The caller serializes writers of the agent (the job layer's per-app queue); a writer
 * outside the agent (the app, SFTP) between the last check and the rename is not seen.
 */
int app_fs_file_replace_if(struct app_fs *fs, const char *path, const char *base_version, const void *data,
                           size_t len, size_t content_max, struct app_fs_file *ret_now, bool *ret_conflict,
                           struct na_error *err);
