/*
 * The safe path layer (drivers/app/app-fs*.c) on a real directory, as root: a table
 * of hostile paths run through every operation (each refused with the contract's code
 * and the canary beside the volume checked unchanged after each), a directory swapped
 * for a symbolic link between resolution and use and in a racing thread, hard links
 * to a file outside, UTF-8 boundaries of read_text, ownership of what is created,
 * move and delete of directories, and a listing cut at its bound.
 *
 * Layout: <tmp>/outside/{canary, dir/} beside <tmp>/vol, the volume.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unit.h"
#include "drivers/app/app-fs.h"

#define UID 1000065536u
#define GID 1000065537u
#define CANARY "canary: nothing outside the volume may change\n"

struct fx {
        char *dir, *vol, *outside, *canary;
        struct stat canary_st;
        struct app_fs *fs;
};

static char *pathf(const char *fmt, ...) _printf_(1, 2);
static char *pathf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
                abort();
        va_end(ap);
        return s;
}

static void must(int r, const char *what)
{
        if (r < 0)
                fail_msg("%s: %s", what, strerror(errno));
}

static void vsymlink(struct fx *f, const char *target, const char *name)
{
        char *p = pathf("%s/%s", f->vol, name);
        must(symlink(target, p), p);
        free(p);
}

static void vfile(struct fx *f, const char *name, const void *data, size_t len)
{
        free(unit_write(f->vol, name, data, len, 0644));
}

static void vmkdir(struct fx *f, const char *name)
{
        char *p = pathf("%s/%s", f->vol, name);
        must(mkdir(p, 0755), p);
        free(p);
}

static int setup(void **state)
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

static int teardown(void **state)
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
static void check_outside(struct fx *f, const char *after)
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

static int run_op(struct fx *f, enum op op, const char *path, struct na_error *err)
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

static const char *op_field(enum op op)
{
        return op == OP_MOVE_FROM ? "from" : op == OP_MOVE_TO ? "to" : "path";
}

static bool has_field_error(const struct na_error *err, const char *field, const char *want)
{
        json_t *a = err->details ? json_object_get(json_object_get(err->details, field), "_errors") : NULL;
        size_t i;
        json_t *m;
        json_array_foreach(a, i, m) if (strstr(json_string_value(m), want)) return true;
        return false;
}

static void test_hostile_paths(void **state)
{
        struct fx *f = *state;
        char long_comp[300], long_path[4200];
        memset(long_comp, 'n', 256);
        long_comp[256] = '\0';
        for (size_t i = 0; i < 4098; i += 2)
                long_path[i] = 'a', long_path[i + 1] = '/';
        long_path[4097] = '\0';
        struct {
                const char *path;
                const char *want; /* part of the message under the field */
        } table[] = {
                /* Refused as text: ".." at every depth, ".", empty, "//", control bytes, lengths. */
                { "..", "'..'" },
                { "../outside/canary", "'..'" },
                { "/../outside/canary", "'..'" },
                { "sub/../../outside/canary", "'..'" },
                { "sub/a/../../../outside/canary", "'..'" },
                { "sub/a/b/../../../../outside/canary", "'..'" },
                { "sub/..", "'..'" },
                { ".", "'.'" },
                { "./mine", "'.'" },
                { "sub/./file.txt", "'.'" },
                { "", "empty" },
                { "//", "empty" },
                { "//etc/passwd", "empty" },
                { "sub//file.txt", "empty" },
                { "sub/", "end with" },
                { "a\nb", "control" },
                { "\x1b]0;x\x07", "control" },
                { "bad\xff", "UTF-8" },
                { "a/\xc0\xae\xc0\xae/x", "UTF-8" }, /* overlong "..": never decoded as dots */
                { long_comp, "255" },
                { long_path, "4096" },
                /* Valid text, refused by the kernel: links that leave. */
                { "etc/na-app-fs-test", "leaves the app's volume" },
                { "etc/na-app-fs-test/x", "leaves the app's volume" },
                { "up/canary", "leaves the app's volume" },
                { "up/dir/new", "leaves the app's volume" },
                { "c1/canary", "leaves the app's volume" },
                { "proc/etc/na-app-fs-test", "leaves the app's volume" },
                { "cwd/canary", "leaves the app's volume" },
                { "dotdot/outside/canary", "leaves the app's volume" },
                { "deep/x/canary", "leaves the app's volume" },
                { "abs/canary", "leaves the app's volume" },
                { "mixed/canary", "leaves the app's volume" },
                { "/up/canary", "leaves the app's volume" },
        };
        size_t n = sizeof(table) / sizeof(*table);
        assert_true(n >= 25);
        for (size_t i = 0; i < n; i++) {
                for (enum op op = 0; op < OP_N; op++) {
                        struct na_error err = NA_ERROR_INIT;
                        int r = run_op(f, op, table[i].path, &err);
                        if (r >= 0)
                                fail_msg("%s %.40s: accepted", op_names[op], table[i].path);
                        if (!streq(err.code, NA_E_VALIDATION) || err.http_status != 422 ||
                            !has_field_error(&err, op_field(op), table[i].want))
                                fail_msg("%s %.40s: %s %d %s (wanted 422 on %s: %s)", op_names[op], table[i].path,
                                         err.code, err.http_status, err.message, op_field(op), table[i].want);
                        na_error_clear(&err);
                        char after[128];
                        snprintf(after, sizeof(after), "%s %.40s", op_names[op], table[i].path);
                        check_outside(f, after);
                }
        }
        /* "mine" is still where it was (no move went anywhere). */
        char *mine = pathf("%s/mine", f->vol);
        assert_int_equal(unit_file_size(mine), 5);
        free(mine);
}

/* Links to outside are objects of their own inside the volume: listed, moved and deleted as links, never followed. */
static void test_links_themselves(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct proto_app_file_entry e;
        assert_int_equal(app_fs_stat(f->fs, "up", &e, &err), 0);
        assert_int_equal(e.type, PROTO_APP_FILE_SYMLINK);
        /* Writing over a link is refused, whatever it points to. */
        assert_true(app_fs_write(f->fs, "up", "x", 1, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        struct app_fs_write_opts o = { .in_place = true };
        assert_true(app_fs_write(f->fs, "abs", "x", 1, &o, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        /* Reading a link that leaves: refused. */
        struct app_fs_text t;
        assert_true(app_fs_read_text(f->fs, "proc", 0, 10, &t, &err) < 0);
        assert_string_equal(err.code, NA_E_VALIDATION);
        na_error_clear(&err);
        /* Reading through links that stay inside: followed. */
        assert_int_equal(app_fs_read_text(f->fs, "inlink", 0, 100, &t, &err), 0);
        assert_string_equal(t.content, "inside\n");
        app_fs_text_clear(&t);
        assert_int_equal(app_fs_read_text(f->fs, "deep/back/file.txt", 0, 100, &t, &err), 0);
        assert_string_equal(t.content, "inside\n");
        app_fs_text_clear(&t);
        /* A link that leaves, moved and then deleted: the link goes, its target stays. */
        vsymlink(f, "../outside", "up2");
        assert_int_equal(app_fs_move(f->fs, "up2", "sub/up3", &err), 0);
        assert_int_equal(app_fs_delete(f->fs, "sub/up3", &err), 0);
        vsymlink(f, "../outside", "up4");
        assert_int_equal(app_fs_delete(f->fs, "up4", &err), 0);
        check_outside(f, "deleting links");
}

/* A directory swapped for a link to outside after its fd was taken: the fd still names the directory inside. */
static void test_swap_between_check_and_use(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        vmkdir(f, "sw");
        vfile(f, "sw/canary", "mine", 4);
        int dir;
        const char *name;
        assert_int_equal(app_fs_resolve_parent(f->fs, "path", "sw/canary", &dir, &name, &err), 0);
        char *sw = pathf("%s/sw", f->vol), *moved = pathf("%s/sw-real", f->vol);
        must(rename(sw, moved), "rename");
        vsymlink(f, "../outside", "sw");
        /* What the layer does with the parent fd it holds: never reaches outside. */
        must(unlinkat(dir, name, 0), "unlinkat through the held fd");
        close(dir);
        check_outside(f, "unlink through a swapped parent");
        char *inner = pathf("%s/canary", moved);
        assert_int_equal(access(inner, F_OK), -1);
        free(inner);
        /* And a new resolution sees the link and refuses. */
        assert_true(app_fs_write(f->fs, "sw/canary", "x", 1, NULL, &err) < 0);
        assert_true(has_field_error(&err, "path", "leaves"));
        na_error_clear(&err);
        unlink(sw);
        free(sw);
        free(moved);
}

struct swapper {
        struct fx *f;
        atomic_bool stop;
        unsigned long swaps;
};

static void *swap_loop(void *arg)
{
        struct swapper *s = arg;
        char *a = pathf("%s/race", s->f->vol), *b = pathf("%s/race-other", s->f->vol);
        while (!atomic_load(&s->stop)) {
                if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0)
                        s->swaps++;
        }
        free(a);
        free(b);
        return NULL;
}

/* A thread swaps a directory and a link to outside as fast as it can while every operation runs on paths below it. */
static void test_swap_race(void **state)
{
        struct fx *f = *state;
        vmkdir(f, "race");
        vfile(f, "race/canary", "mine", 4);
        vsymlink(f, "../outside", "race-other");
        struct swapper s = { .f = f };
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, swap_loop, &s), 0);
        unsigned long ok = 0, refused = 0;
        for (int i = 0; i < 3000; i++) {
                for (enum op op = 0; op < OP_N; op++) {
                        if (op == OP_MOVE_FROM || op == OP_MKDIR)
                                continue;
                        struct na_error err = NA_ERROR_INIT;
                        const char *p = op == OP_LIST ? "race" : "race/canary";
                        if (op == OP_MOVE_TO)
                                p = "race/moved";
                        int r = run_op(f, op, p, &err);
                        if (r == 0)
                                ok++;
                        else if (streq(err.code, NA_E_VALIDATION) || streq(err.code, NA_E_FILE_NOT_FOUND) ||
                                 streq(err.code, NA_E_INVALID_STATE))
                                refused++;
                        else
                                fail_msg("%s during the race: %s %s", op_names[op], err.code, err.message);
                        na_error_clear(&err);
                        if (op == OP_MOVE_TO && r == 0) {
                                /* Put "mine" back for the next round (it went into the real directory). */
                                struct na_error e2 = NA_ERROR_INIT;
                                char *real = pathf("%s/race/moved", f->vol), *other = pathf("%s/race-other/moved", f->vol);
                                char *mine = pathf("%s/mine", f->vol);
                                bool back = false;
                                for (int k = 0; k < 100000 && !back; k++)
                                        back = rename(real, mine) == 0 || rename(other, mine) == 0;
                                if (!back)
                                        fail_msg("moved file lost");
                                free(real);
                                free(other);
                                free(mine);
                                na_error_clear(&e2);
                        }
                }
        }
        atomic_store(&s.stop, true);
        pthread_join(th, NULL);
        fprintf(stderr, "race: %lu swaps, %lu operations done inside, %lu refused\n", s.swaps, ok, refused);
        assert_true(s.swaps > 100);
        assert_true(refused > 0);
        check_outside(f, "the swap race");
}

/* Hard links to a file outside (possible only on a plain directory: a volume is its own file system). */
static void test_hard_links(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        char *hl = pathf("%s/hl", f->vol);
        must(link(f->canary, hl), "link");
        struct app_fs_write_opts o = { .in_place = true, .offset = 0 };
        assert_true(app_fs_write(f->fs, "hl", "pwned", 5, &o, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_write(f->fs, "hl", "", 0, &(struct app_fs_write_opts){ .in_place = true, .truncate = true }, &err) < 0);
        na_error_clear(&err);
        check_outside(f, "in-place write to a hard link");
        /* A whole-file write replaces the name, never the shared inode. */
        assert_int_equal(app_fs_write(f->fs, "hl", "pwned", 5, NULL, &err), 0);
        check_outside(f, "whole write to a hard link");
        must(unlink(hl), "unlink");
        must(link(f->canary, hl), "link");
        assert_int_equal(app_fs_delete(f->fs, "hl", &err), 0);
        assert_int_equal(app_fs_move(f->fs, "mine", "mine", &err) < 0, 1); /* onto itself: exists */
        na_error_clear(&err);
        check_outside(f, "delete of a hard link");
        free(hl);
}

static void read_ok(struct fx *f, const char *path, uint64_t off, uint32_t limit, struct app_fs_text *t)
{
        struct na_error err = NA_ERROR_INIT;
        if (app_fs_read_text(f->fs, path, off, limit, t, &err) < 0)
                fail_msg("read %s: %s", path, err.message);
}

static void test_utf8_boundaries(void **state)
{
        struct fx *f = *state;
        const size_t L = 524288;
        unsigned char *buf = malloc(L + 16);
        const unsigned char emoji[4] = { 0xf0, 0x9f, 0x98, 0x80 };
        struct app_fs_text t;
        struct na_error err = NA_ERROR_INIT;

        /* A 4-byte emoji across the limit, at each of the three cut points. */
        for (size_t cut = 1; cut <= 3; cut++) {
                size_t pre = L - cut;
                memset(buf, 'a', pre);
                memcpy(buf + pre, emoji, 4);
                buf[pre + 4] = 'b';
                vfile(f, "emoji.txt", buf, pre + 5);
                read_ok(f, "emoji.txt", 0, (uint32_t)L, &t);
                assert_false(t.binary);
                assert_true(t.truncated);
                assert_int_equal(t.bytes, pre);
                assert_int_equal(strlen(t.content), pre);
                app_fs_text_clear(&t);
                read_ok(f, "emoji.txt", pre, (uint32_t)L, &t);
                assert_false(t.binary || t.truncated);
                assert_int_equal(t.bytes, 5);
                assert_memory_equal(t.content, "\xf0\x9f\x98\x80" "b", 5);
                app_fs_text_clear(&t);
        }
        /* The emoji ending exactly at the limit: whole, and nothing after it. */
        memset(buf, 'a', L - 4);
        memcpy(buf + L - 4, emoji, 4);
        vfile(f, "exact.txt", buf, L);
        read_ok(f, "exact.txt", 0, (uint32_t)L, &t);
        assert_false(t.binary || t.truncated);
        assert_int_equal(t.bytes, L);
        app_fs_text_clear(&t);
        /* One byte more than the limit: truncated at a character boundary. */
        buf[L] = 'z';
        vfile(f, "over.txt", buf, L + 1);
        read_ok(f, "over.txt", 0, (uint32_t)L, &t);
        assert_true(t.truncated);
        assert_int_equal(t.bytes, L);
        app_fs_text_clear(&t);
        /* Invalid bytes: binary, no content. */
        vfile(f, "bin", "ab\xff" "cd", 5);
        read_ok(f, "bin", 0, 100, &t);
        assert_true(t.binary);
        assert_null(t.content);
        assert_int_equal(t.bytes, 5);
        app_fs_text_clear(&t);
        /* A file that ends inside a sequence is not text. */
        vfile(f, "endcut", "ab\xf0\x9f", 4);
        read_ok(f, "endcut", 0, 100, &t);
        assert_true(t.binary);
        app_fs_text_clear(&t);
        /* An offset inside a sequence is not text either. */
        vfile(f, "mid", "\xf0\x9f\x98\x80", 4);
        read_ok(f, "mid", 1, 100, &t);
        assert_true(t.binary);
        app_fs_text_clear(&t);
        /* A limit smaller than the character: binary, bytes read, more remains. */
        read_ok(f, "mid", 0, 2, &t);
        assert_true(t.binary && t.truncated);
        assert_int_equal(t.bytes, 2);
        app_fs_text_clear(&t);
        /* Small limits page through text without cutting a character. */
        vfile(f, "h", "h\xc3\xa9llo", 6);
        read_ok(f, "h", 0, 2, &t);
        assert_string_equal(t.content, "h");
        assert_true(t.truncated);
        app_fs_text_clear(&t);
        read_ok(f, "h", 1, 2, &t);
        assert_string_equal(t.content, "\xc3\xa9");
        app_fs_text_clear(&t);
        /* Empty file, offset at the end, past the end. */
        vfile(f, "empty", "", 0);
        read_ok(f, "empty", 0, 524288, &t);
        assert_false(t.binary || t.truncated);
        assert_int_equal(t.bytes, 0);
        assert_string_equal(t.content, "");
        app_fs_text_clear(&t);
        read_ok(f, "h", 6, 10, &t);
        assert_int_equal(t.bytes, 0);
        assert_false(t.truncated);
        app_fs_text_clear(&t);
        assert_true(app_fs_read_text(f->fs, "h", 7, 10, &t, &err) < 0);
        assert_true(has_field_error(&err, "offset", "past the end"));
        na_error_clear(&err);
        /* Not files. */
        assert_true(app_fs_read_text(f->fs, "sub", 0, 10, &t, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        char *fifo = pathf("%s/fifo", f->vol);
        must(mkfifo(fifo, 0644), "mkfifo");
        assert_true(app_fs_read_text(f->fs, "fifo", 0, 10, &t, &err) < 0); /* and it does not hang */
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_write(f->fs, "fifo", "x", 1, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        unlink(fifo);
        free(fifo);
        assert_true(app_fs_read_text(f->fs, "nope/x", 0, 10, &t, &err) < 0);
        assert_string_equal(err.code, NA_E_FILE_NOT_FOUND);
        assert_int_equal(err.http_status, 404);
        assert_non_null(strstr(err.message, "nope/x"));
        na_error_clear(&err);
        assert_true(app_fs_read_text(f->fs, "mine/x", 0, 10, &t, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        free(buf);
}

static void check_owner(struct fx *f, const char *name, uid_t uid, gid_t gid, mode_t mode)
{
        char *p = pathf("%s/%s", f->vol, name);
        struct stat st;
        must(lstat(p, &st), p);
        if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode)
                fail_msg("%s: %u:%u %04o, wanted %u:%u %04o", name, st.st_uid, st.st_gid, st.st_mode & 07777, uid, gid,
                         mode);
        free(p);
}

static void test_write_and_ownership(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_fs_mkdir(f->fs, "/w/a/b", &err), 0);
        check_owner(f, "w", UID, GID, 0755);
        check_owner(f, "w/a", UID, GID, 0755);
        check_owner(f, "w/a/b", UID, GID, 0755);
        assert_int_equal(app_fs_mkdir(f->fs, "w/a/b", &err), 0); /* exists: fine */
        assert_int_equal(app_fs_mkdir(f->fs, "/", &err), 0);
        assert_true(app_fs_mkdir(f->fs, "mine/x", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_mkdir(f->fs, "mine", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        /* mkdir -p through a link that stays inside. */
        assert_int_equal(app_fs_mkdir(f->fs, "deep/back/made", &err), 0);
        check_owner(f, "sub/made", UID, GID, 0755);

        assert_int_equal(app_fs_write(f->fs, "w/a/new.txt", "hello", 5, NULL, &err), 0);
        check_owner(f, "w/a/new.txt", UID, GID, 0644);
        struct app_fs_text t;
        read_ok(f, "/w/a/new.txt", 0, 100, &t);
        assert_string_equal(t.content, "hello");
        app_fs_text_clear(&t);
        /* A replace keeps an existing file's owner and mode. */
        char *p = pathf("%s/w/a/new.txt", f->vol);
        must(chown(p, UID + 5, GID + 5), "chown");
        must(chmod(p, 0600), "chmod");
        assert_int_equal(app_fs_write(f->fs, "w/a/new.txt", "bye", 3, NULL, &err), 0);
        check_owner(f, "w/a/new.txt", UID + 5, GID + 5, 0600);
        assert_int_equal(unit_file_size(p), 3);
        /* In place: at an offset, then truncated after it; created when missing. */
        struct app_fs_write_opts o = { .in_place = true, .offset = 3 };
        assert_int_equal(app_fs_write(f->fs, "w/a/new.txt", "!!", 2, &o, &err), 0);
        read_ok(f, "w/a/new.txt", 0, 100, &t);
        assert_string_equal(t.content, "bye!!");
        app_fs_text_clear(&t);
        o = (struct app_fs_write_opts){ .in_place = true, .offset = 1, .truncate = true };
        assert_int_equal(app_fs_write(f->fs, "w/a/new.txt", "o", 1, &o, &err), 0);
        read_ok(f, "w/a/new.txt", 0, 100, &t);
        assert_string_equal(t.content, "bo");
        app_fs_text_clear(&t);
        o = (struct app_fs_write_opts){ .in_place = true, .offset = 3 };
        assert_true(app_fs_write(f->fs, "w/a/new.txt", "x", 1, &o, &err) < 0);
        assert_true(has_field_error(&err, "offset", "past the end"));
        na_error_clear(&err);
        o = (struct app_fs_write_opts){ .in_place = true };
        assert_int_equal(app_fs_write(f->fs, "w/created-in-place", "x", 1, &o, &err), 0);
        check_owner(f, "w/created-in-place", UID, GID, 0644);
        o.offset = 1;
        assert_true(app_fs_write(f->fs, "w/missing", "x", 1, &o, &err) < 0);
        assert_true(has_field_error(&err, "offset", "past the end"));
        na_error_clear(&err);
        free(p);
        /* Directories and the root are not files; a missing parent is not found. */
        assert_true(app_fs_write(f->fs, "w/a", "x", 1, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_write(f->fs, "/", "x", 1, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_write(f->fs, "nodir/x", "x", 1, NULL, &err) < 0);
        assert_string_equal(err.code, NA_E_FILE_NOT_FOUND);
        na_error_clear(&err);
        /* No temporary left behind. */
        struct app_fs_listing l;
        assert_int_equal(app_fs_list(f->fs, "w/a", 0, &l, &err), 0);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.entries[0].name, "b");
        assert_int_equal(l.entries[0].type, PROTO_APP_FILE_DIRECTORY);
        assert_string_equal(l.entries[1].name, "new.txt");
        assert_int_equal(l.entries[1].type, PROTO_APP_FILE);
        assert_int_equal(l.entries[1].bytes, 2);
        assert_int_equal(l.entries[1].mode, 0600);
        assert_false(l.cut);
        app_fs_listing_clear(&l);
        check_outside(f, "writes");
}

static void test_chmod_utimens(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_fs_write(f->fs, "attr", "x", 1, NULL, &err), 0);
        assert_int_equal(app_fs_chmod(f->fs, "attr", 0600, &err), 0);
        check_owner(f, "attr", UID, GID, 0600);
        assert_int_equal(app_fs_chmod(f->fs, "sub", 0750, &err), 0);
        char *p = pathf("%s/sub", f->vol);
        struct stat st;
        must(stat(p, &st), p);
        assert_int_equal(st.st_mode & 07777, 0750);
        must(chmod(p, 0755), p);
        free(p);
        assert_true(app_fs_chmod(f->fs, "attr", 04755, &err) < 0);
        assert_true(has_field_error(&err, "mode", "setuid"));
        na_error_clear(&err);
        /* A link, whatever it points to, is refused: chmod never goes through one. */
        assert_true(app_fs_chmod(f->fs, "up", 0777, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_chmod(f->fs, "inlink", 0777, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        /* utimens on a link sets the link's own times. */
        struct timespec ts[2] = { { .tv_sec = 1000000 }, { .tv_sec = 1000000 } };
        assert_int_equal(app_fs_utimens(f->fs, "abs", ts, &err), 0);
        p = pathf("%s/abs", f->vol);
        must(lstat(p, &st), p);
        assert_int_equal(st.st_mtim.tv_sec, 1000000);
        free(p);
        assert_int_equal(app_fs_utimens(f->fs, "attr", ts, &err), 0);
        struct proto_app_file_entry e;
        assert_int_equal(app_fs_stat(f->fs, "attr", &e, &err), 0);
        assert_int_equal(e.modified_ms, 1000000000);
        assert_int_equal(e.mode, 0600);
        assert_int_equal(app_fs_delete(f->fs, "attr", &err), 0);
        check_outside(f, "chmod and utimens");
}

static void test_move_and_delete(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_fs_mkdir(f->fs, "m/a/b/c", &err), 0);
        assert_int_equal(app_fs_write(f->fs, "m/a/b/c/f", "deep", 4, NULL, &err), 0);
        assert_int_equal(app_fs_write(f->fs, "m/a/top", "top", 3, NULL, &err), 0);
        vsymlink(f, "../../../outside", "m/a/b/escape");
        vsymlink(f, "/etc", "m/a/etc");
        assert_int_equal(app_fs_mkdir(f->fs, "m2", &err), 0);
        /* A directory moves with its contents. */
        assert_int_equal(app_fs_move(f->fs, "m/a", "m2/a", &err), 0);
        struct app_fs_text t;
        read_ok(f, "m2/a/b/c/f", 0, 10, &t);
        assert_string_equal(t.content, "deep");
        app_fs_text_clear(&t);
        /* Never over an existing target; both stay as they were. */
        assert_int_equal(app_fs_write(f->fs, "m2/x", "x", 1, NULL, &err), 0);
        assert_true(app_fs_move(f->fs, "m2/a/top", "m2/x", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        assert_int_equal(err.http_status, 409);
        na_error_clear(&err);
        assert_true(app_fs_move(f->fs, "m2/x", "m2/a", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        read_ok(f, "m2/x", 0, 10, &t);
        assert_string_equal(t.content, "x");
        app_fs_text_clear(&t);
        /* Into itself, the root, missing things. */
        assert_true(app_fs_move(f->fs, "m2/a", "m2/a/b/inside", &err) < 0);
        assert_true(has_field_error(&err, "to", "into itself"));
        na_error_clear(&err);
        assert_true(app_fs_move(f->fs, "/", "m2/root", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_move(f->fs, "m2/x", "/", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_true(app_fs_move(f->fs, "m2/nope", "m2/y", &err) < 0);
        assert_string_equal(err.code, NA_E_FILE_NOT_FOUND);
        assert_non_null(strstr(err.message, "m2/nope"));
        na_error_clear(&err);
        assert_true(app_fs_move(f->fs, "m2/x", "m2/nodir/y", &err) < 0);
        assert_string_equal(err.code, NA_E_FILE_NOT_FOUND);
        na_error_clear(&err);
        /* Delete a tree holding links that leave: the links go, their targets stay. */
        assert_int_equal(app_fs_delete(f->fs, "m2/a", &err), 0);
        char *p = pathf("%s/m2/a", f->vol);
        assert_int_equal(access(p, F_OK), -1);
        free(p);
        check_outside(f, "deleting a tree with links out");
        assert_int_equal(access("/etc/passwd", F_OK), 0);
        assert_int_equal(app_fs_delete(f->fs, "m2/x", &err), 0);
        assert_true(app_fs_delete(f->fs, "m2/x", &err) < 0);
        assert_string_equal(err.code, NA_E_FILE_NOT_FOUND);
        na_error_clear(&err);
        assert_true(app_fs_delete(f->fs, "/", &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        /* A tree 600 directories deep. */
        char deep[4000] = "d";
        for (int i = 0; i < 600; i++)
                strcat(deep, "/x");
        assert_int_equal(app_fs_mkdir(f->fs, deep, &err), 0);
        assert_int_equal(app_fs_write(f->fs, "d/x/x/file", "f", 1, NULL, &err), 0);
        assert_int_equal(app_fs_delete(f->fs, "d", &err), 0);
        assert_int_equal(app_fs_delete(f->fs, "m2", &err), 0);
        assert_int_equal(app_fs_delete(f->fs, "m", &err), 0);
        check_outside(f, "deletes");
}

struct mover {
        struct fx *f;
        atomic_bool stop;
        unsigned long moves;
};

/* Moves a directory of the tree being deleted up to the volume's root and back, as an app could. */
static void *move_loop(void *arg)
{
        struct mover *m = arg;
        char *in = pathf("%s/victim/a/b", m->f->vol), *out = pathf("%s/b-escaped", m->f->vol);
        while (!atomic_load(&m->stop)) {
                if (rename(in, out) == 0)
                        m->moves++;
                if (rename(out, in) == 0)
                        m->moves++;
        }
        free(in);
        free(out);
        return NULL;
}

/*
 * Delete a tree while its directories move up to the root: an rm -rf that climbed with
 * ".." would climb from a moved directory into the root (and past it, out of a mounted
 * volume) and remove what lies there. Only what is below the deleted directory may go.
 */
static void test_delete_while_moving(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_fs_write(f->fs, "keep", "keep", 4, NULL, &err), 0);
        unsigned long done = 0, failed = 0, moves = 0;
        for (int round = 0; round < 60; round++) {
                assert_int_equal(app_fs_mkdir(f->fs, "victim/a/b/c/d/e/f/g", &err), 0);
                for (int i = 0; i < 20; i++) {
                        char name[64];
                        snprintf(name, sizeof(name), "victim/a/b/c/d/e/f/g/file%d", i);
                        assert_int_equal(app_fs_write(f->fs, name, "x", 1, NULL, &err), 0);
                        snprintf(name, sizeof(name), "victim/a/b/c/file%d", i);
                        assert_int_equal(app_fs_write(f->fs, name, "x", 1, NULL, &err), 0);
                }
                struct mover m = { .f = f };
                pthread_t th;
                assert_int_equal(pthread_create(&th, NULL, move_loop, &m), 0);
                int r = app_fs_delete(f->fs, "victim", &err);
                atomic_store(&m.stop, true);
                pthread_join(th, NULL);
                moves += m.moves;
                if (r == 0)
                        done++;
                else
                        failed++;
                na_error_clear(&err);
                struct app_fs_text t;
                if (app_fs_read_text(f->fs, "keep", 0, 10, &t, &err) < 0)
                        fail_msg("round %d: a file beside the deleted tree is gone: %s", round, err.message);
                assert_string_equal(t.content, "keep");
                app_fs_text_clear(&t);
                check_outside(f, "a delete racing moves");
                (void)app_fs_delete(f->fs, "victim", &err);
                na_error_clear(&err);
                (void)app_fs_delete(f->fs, "b-escaped", &err);
                na_error_clear(&err);
        }
        fprintf(stderr, "delete race: %lu deleted, %lu refused, %lu moves\n", done, failed, moves);
        assert_int_equal(app_fs_delete(f->fs, "keep", &err), 0);
}

static void test_list_bound(void **state)
{
        struct fx *f = *state;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_fs_mkdir(f->fs, "many", &err), 0);
        char *d = pathf("%s/many", f->vol);
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        must(dfd, d);
        for (int i = 0; i < 10050; i++) {
                char name[32];
                snprintf(name, sizeof(name), "f%05d", i);
                int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                must(fd, name);
                close(fd);
        }
        close(dfd);
        struct app_fs_listing l;
        assert_int_equal(app_fs_list(f->fs, "many", 0, &l, &err), 0);
        assert_int_equal(l.n, 10000);
        assert_true(l.cut);
        for (size_t i = 1; i < l.n; i++)
                assert_true(strcmp(l.entries[i - 1].name, l.entries[i].name) < 0);
        json_t *j = proto_app_files_list_encode(l.entries, l.n);
        assert_int_equal(json_array_size(j), 10000);
        json_decref(j);
        app_fs_listing_clear(&l);
        assert_int_equal(app_fs_list(f->fs, "many", 20000, &l, &err), 0);
        assert_int_equal(l.n, 10050);
        assert_false(l.cut);
        app_fs_listing_clear(&l);
        assert_int_equal(app_fs_list(f->fs, "/", 0, &l, &err), 0);
        assert_false(l.cut);
        bool saw_up = false;
        for (size_t i = 0; i < l.n; i++)
                if (streq(l.entries[i].name, "up"))
                        saw_up = l.entries[i].type == PROTO_APP_FILE_SYMLINK;
        assert_true(saw_up);
        app_fs_listing_clear(&l);
        assert_true(app_fs_list(f->fs, "mine", 0, &l, &err) < 0);
        assert_string_equal(err.code, NA_E_INVALID_STATE);
        na_error_clear(&err);
        assert_int_equal(app_fs_delete(f->fs, "many", &err), 0);
        free(d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hostile_paths),
                cmocka_unit_test(test_links_themselves),
                cmocka_unit_test(test_swap_between_check_and_use),
                cmocka_unit_test(test_swap_race),
                cmocka_unit_test(test_hard_links),
                cmocka_unit_test(test_utf8_boundaries),
                cmocka_unit_test(test_write_and_ownership),
                cmocka_unit_test(test_chmod_utimens),
                cmocka_unit_test(test_move_and_delete),
                cmocka_unit_test(test_delete_while_moving),
                cmocka_unit_test(test_list_bound),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
