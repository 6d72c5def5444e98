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
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "volume/volume.h"

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
/* Drop the file; the target stays as it was. NULL-safe, idempotent. */
void app_fs_tmp_abort(struct app_fs_tmp *t);
