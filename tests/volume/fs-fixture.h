/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The fixture of the safe path layer's tests on a real directory (test-app-fs.c,
 * test-app-fs-race.c): <tmp>/outside/{canary, dir/} beside <tmp>/vol, the volume,
 * which holds links that leave in every way a volume can hold one and links that stay
 * inside; check_outside() says whether anything outside changed; run_op() runs one of
 * the layer's operations on a path. Header-only (static inline), as tests/common/unit.h.
 */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unit.h"
#include "volume/volume.h"

#define UID 1000065536u
#define GID 1000065537u
#define CANARY "canary: nothing outside the volume may change\n"

struct fx {
        char *dir, *vol, *outside, *canary;
        struct stat canary_st;
        struct app_fs *fs;
};

static inline char *pathf(const char *fmt, ...) _printf_(1, 2);
static inline char *pathf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
                abort();
        va_end(ap);
        return s;
}

static inline void must(int r, const char *what)
{
        if (r < 0)
                fail_msg("%s: %s", what, strerror(errno));
}

static inline void vsymlink(struct fx *f, const char *target, const char *name)
{
        char *p = pathf("%s/%s", f->vol, name);
        must(symlink(target, p), p);
        free(p);
}

static inline void vfile(struct fx *f, const char *name, const void *data, size_t len)
{
        free(unit_write(f->vol, name, data, len, 0644));
}

static inline void vmkdir(struct fx *f, const char *name)
{
        char *p = pathf("%s/%s", f->vol, name);
        must(mkdir(p, 0755), p);
        free(p);
}

/* Temporary files the layer left in dir (".na-*"): none, after any write or abort. */
static inline int leftovers(const char *dir)
{
        int n = 0;
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)))
                n += strncmp(e->d_name, ".na-", 4) == 0;
        if (d)
                closedir(d);
        return n;
}

static inline int setup(void **state)
{
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (owners of created files)\n");
                exit(77);
        }
        struct fx *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("app-fs");
        f->vol = pathf("%s/vol", f->dir);
        f->outside = pathf("%s/outside", f->dir);
        must(mkdir(f->vol, 0755), "mkdir vol");
        must(chown(f->vol, UID, GID), "chown vol");
        must(mkdir(f->outside, 0755), "mkdir outside");
        free(unit_write_str(f->outside, "canary", CANARY, 0600));
        char *od = pathf("%s/dir", f->outside);
        must(mkdir(od, 0755), od);
        free(od);
        f->canary = pathf("%s/canary", f->outside);
        must(stat(f->canary, &f->canary_st), "stat canary");

        /* Links that leave, in every way a volume can hold one. */
        vsymlink(f, "/etc", "etc");
        vsymlink(f, "../outside", "up");
        vsymlink(f, "c2", "c1");
        vsymlink(f, "c3", "c2");
        vsymlink(f, "../outside", "c3");
        vsymlink(f, "/proc/self/root", "proc");
        vsymlink(f, "/proc/self/cwd", "cwd");
        vsymlink(f, "..", "dotdot");
        vmkdir(f, "deep");
        vsymlink(f, "../../outside", "deep/x");
        char *abs = pathf("%s", f->outside);
        vsymlink(f, abs, "abs");
        free(abs);
        vsymlink(f, "sub/../../outside", "mixed");
        /* And ones that stay inside. */
        vmkdir(f, "sub");
        vfile(f, "sub/file.txt", "inside\n", 7);
        vsymlink(f, "sub/file.txt", "inlink");
        vsymlink(f, "../sub", "deep/back");
        vfile(f, "mine", "mine\n", 5);

        struct na_error err = NA_ERROR_INIT;
        if (app_fs_open(f->vol, UID, GID, &f->fs, &err) < 0)
                fail_msg("open: %s", err.message);
        *state = f;
        return 0;
}

static inline int teardown(void **state)
{
        struct fx *f = *state;
        app_fs_close(f->fs);
        unit_rmrf_free(f->dir);
        free(f->vol);
        free(f->outside);
        free(f->canary);
        free(f);
        return 0;
}

/* The canary is byte for byte, owner, mode and time what it was; outside holds exactly {canary, dir}, dir empty. */
static inline void check_outside(struct fx *f, const char *after)
{
        size_t len = 0;
        char *c = unit_slurp(f->canary, &len);
        if (!c || len != strlen(CANARY) || memcmp(c, CANARY, len))
                fail_msg("after %s: the canary changed", after);
        free(c);
        struct stat st;
        must(stat(f->canary, &st), "stat canary");
        if (st.st_ino != f->canary_st.st_ino || st.st_uid != 0 || (st.st_mode & 07777) != 0600 ||
            st.st_mtim.tv_sec != f->canary_st.st_mtim.tv_sec || st.st_mtim.tv_nsec != f->canary_st.st_mtim.tv_nsec)
                fail_msg("after %s: the canary's inode, owner, mode or time changed", after);
        if (unit_dir_entries(f->outside) != 2)
                fail_msg("after %s: outside holds %d entries", after, unit_dir_entries(f->outside));
        char *od = pathf("%s/dir", f->outside);
        if (unit_dir_entries(od) != 0)
                fail_msg("after %s: outside/dir is not empty", after);
        free(od);
        if (unit_dir_entries(f->dir) != 2)
                fail_msg("after %s: the test directory holds %d entries", after, unit_dir_entries(f->dir));
        /* The /etc paths of the table name a file that must never come to exist. */
        if (access("/etc/na-app-fs-test", F_OK) == 0)
                fail_msg("after %s: /etc/na-app-fs-test exists", after);
}

enum op {
        OP_LIST, OP_READ, OP_WRITE, OP_WRITE_AT, OP_MKDIR, OP_MOVE_FROM, OP_MOVE_TO, OP_DELETE, OP_STAT, OP_OPEN,
        OP_CHMOD, OP_UTIMENS, OP_N
};
static const char *const op_names[OP_N] = { "list",    "read_text", "write", "write at",  "mkdir", "move from",
                                            "move to", "delete",    "stat",  "open_read", "chmod", "utimens" };

static inline int run_op(struct fx *f, enum op op, const char *path, struct na_error *err)
{
        switch (op) {
        case OP_LIST: {
                struct app_fs_listing l;
                int r = app_fs_list(f->fs, path, 0, &l, err);
                if (r == 0)
                        app_fs_listing_clear(&l);
                return r;
        }
        case OP_READ: {
                struct app_fs_text t;
                int r = app_fs_read_text(f->fs, path, 0, 524288, &t, err);
                if (r == 0)
                        app_fs_text_clear(&t);
                return r;
        }
        case OP_WRITE:
                return app_fs_write(f->fs, path, "pwned\n", 6, NULL, err);
        case OP_WRITE_AT: {
                struct app_fs_write_opts o = { .in_place = true, .offset = 0, .truncate = true };
                return app_fs_write(f->fs, path, "pwned\n", 6, &o, err);
        }
        case OP_MKDIR:
                return app_fs_mkdir(f->fs, path, err);
        case OP_MOVE_FROM:
                return app_fs_move(f->fs, path, "moved-here", err);
        case OP_MOVE_TO:
                return app_fs_move(f->fs, "mine", path, err);
        case OP_DELETE:
                return app_fs_delete(f->fs, path, err);
        case OP_STAT: {
                struct proto_app_file_entry e;
                return app_fs_stat(f->fs, path, &e, err);
        }
        case OP_CHMOD:
                return app_fs_chmod(f->fs, path, 0777, err);
        case OP_UTIMENS: {
                struct timespec ts[2] = { { .tv_sec = 1 }, { .tv_sec = 1 } };
                return app_fs_utimens(f->fs, path, ts, err);
        }
        default: {
                int fd;
                struct stat st;
                int r = app_fs_open_read(f->fs, path, &fd, &st, err);
                if (r == 0)
                        close(fd);
                return r;
        }
        }
}

static inline const char *op_field(enum op op)
{
        return op == OP_MOVE_FROM ? "from" : op == OP_MOVE_TO ? "to" : "path";
}

static inline bool has_field_error(const struct na_error *err, const char *field, const char *want)
{
        json_t *a = err->details ? json_object_get(json_object_get(err->details, field), "_errors") : NULL;
        size_t i;
        json_t *m;
        json_array_foreach(a, i, m) if (strstr(json_string_value(m), want)) return true;
        return false;
}

static inline void read_ok(struct fx *f, const char *path, uint64_t off, uint32_t limit, struct app_fs_text *t)
{
        struct na_error err = NA_ERROR_INIT;
        if (app_fs_read_text(f->fs, path, off, limit, t, &err) < 0)
                fail_msg("read %s: %s", path, err.message);
}

static inline void check_owner(struct fx *f, const char *name, uid_t uid, gid_t gid, mode_t mode)
{
        char *p = pathf("%s/%s", f->vol, name);
        struct stat st;
        must(lstat(p, &st), p);
        if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode)
                fail_msg("%s: %u:%u %04o, wanted %u:%u %04o", name, st.st_uid, st.st_gid, st.st_mode & 07777, uid, gid,
                         mode);
        free(p);
}

