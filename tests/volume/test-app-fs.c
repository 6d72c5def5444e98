/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The safe path layer (volume/app-fs*.c) on a real directory, as root: a table
 * of hostile paths run through every operation (each refused with the contract's code
 * and the canary beside the volume checked unchanged after each), hard links to a file
 * outside, UTF-8 boundaries of read_text, ownership of what is created, chmod and
 * utimens, move and delete of directories, and a listing cut at its bound. The races
 * are in test-app-fs-race.c; the fixture in fs-fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fs-fixture.h"

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
                cmocka_unit_test(test_hard_links),
                cmocka_unit_test(test_utf8_boundaries),
                cmocka_unit_test(test_write_and_ownership),
                cmocka_unit_test(test_chmod_utimens),
                cmocka_unit_test(test_move_and_delete),
                cmocka_unit_test(test_list_bound),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
