/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The safe path layer (volume/app-fs*.c) against an app that changes its volume
 * while the layer works in it, as root on a real directory: a directory swapped for a
 * symbolic link to outside between resolution and use, a thread swapping them with
 * RENAME_EXCHANGE while every operation runs below, and a tree deleted while its
 * directories move up to the root. The canary outside is checked after each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fs-fixture.h"

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

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_swap_between_check_and_use),
                cmocka_unit_test(test_swap_race),
                cmocka_unit_test(test_delete_while_moving),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
