/* SPDX-License-Identifier: GPL-2.0-or-later */
/* drivers/app/image/app-layer.c: applying layer tars beneath a root, and refusing hostile ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "drivers/app/image/app-image.h"
#include "image-test.h"

struct fixture {
        char *dir;    /* <tmp> */
        char *root;   /* <tmp>/root, made afresh per case */
        char *canary; /* <tmp>/canary: must stay exactly as it is */
};

static int setup(void **state)
{
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (owners and device nodes)\n");
                exit(77);
        }
        struct fixture *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("app-layer");
        f->root = pathf("%s/root", f->dir);
        f->canary = pathf("%s/canary", f->dir);
        assert_int_equal(mkdir(f->root, 0755), 0);
        assert_int_equal(mkdir(f->canary, 0755), 0);
        free(unit_write_str(f->canary, "keep", "canary", 0644));
        free(unit_write_str(f->dir, "outside", "outside", 0644));
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        unit_rmrf_free(f->dir);
        free(f->root);
        free(f->canary);
        free(f);
        return 0;
}

/* Apply the tar at path onto f->root; returns what app_layer_apply returned, err filled. */
static int apply(struct fixture *f, const char *tar, struct na_error *err)
{
        int root_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = open(tar, O_RDONLY | O_CLOEXEC);
        assert_true(root_fd >= 0 && fd >= 0);
        int r = app_layer_apply(root_fd, fd, NULL, err);
        close(fd);
        close(root_fd);
        return r;
}

static void reset_root(struct fixture *f)
{
        char *r = strdup(f->root);
        unit_rmrf_free(r);
        assert_int_equal(mkdir(f->root, 0755), 0);
}

/* Nothing beside the root changed: the canary holds only "keep", the fixture only its four names. */
static void assert_outside_untouched(struct fixture *f)
{
        assert_int_equal(unit_dir_entries(f->canary), 1);
        assert_int_equal(unit_dir_entries(f->dir), 4); /* root, canary, outside, layer.tar */
        struct stat st;
        char *outside = pathf("%s/outside", f->dir);
        assert_int_equal(stat(outside, &st), 0);
        assert_int_equal(st.st_nlink, 1);
        free(outside);
        assert_false(exists("/etc/x"));
        assert_false(exists("/x"));
}

struct hostile {
        const char *what;
        struct tar_entry e[4];
        size_t n;
        const char *refused; /* the entry the error must name */
};

static void test_hostile_layers_are_refused(void **state)
{
        struct fixture *f = *state;
        /* The canary's path from / and from the root's directory, for symlinks that point out. */
        char *abs_canary_x = pathf("%s/x", f->canary + 1);         /* "tmp/na-unit-…/canary/x" */
        char *up3_path = pathf("evil/%s/x", f->canary + 1);          /* through evil -> ../../.. */
        char *abs_path = pathf("evil/%s", abs_canary_x);             /* through evil -> / */
        /* How many ".." from the root reach "/": one per component of f->root. */
        char up[4096] = "";
        for (const char *p = f->root; *p; p++)
                if (*p == '/')
                        strcat(up, up[0] ? "/.." : "..");
        /* A name over PATH_MAX (pax headers carry it), and one component over NAME_MAX. */
        char long_name[5200] = "", long_comp[300];
        for (int i = 0; i < 25; i++)
                strcat(long_name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/");
        strcat(long_name, "x");
        memset(long_comp, 'b', 299);
        long_comp[299] = '\0';
        const struct hostile cases[] = {
                { "name over PATH_MAX", { { T_FILE, long_name, .data = "x" } }, 1, "longer than PATH_MAX" },
                { "component over NAME_MAX", { { T_FILE, long_comp, .data = "x" } }, 1, "longer than NAME_MAX" },
                { "a good entry, then a bad one", { { T_FILE, "ok", .data = "x" }, { T_FILE, "../x" } }, 2, "../x" },
                { "parent component", { { T_FILE, "../canary/x", .data = "x" } }, 1, "../canary/x" },
                { "parent inside", { { T_DIR, "a" }, { T_FILE, "a/../../canary/x", .data = "x" } }, 2,
                  "a/../../canary/x" },
                { "absolute", { { T_FILE, "/etc/x", .data = "x" } }, 1, "/etc/x" },
                { "symlink to / then through it",
                  { { T_SYMLINK, "evil", "/" }, { T_FILE, abs_path, .data = "x" } }, 2, abs_path },
                { "symlink up then through it",
                  { { T_SYMLINK, "evil", up }, { T_FILE, up3_path, .data = "x" } }, 2, up3_path },
                { "symlink to canary then through it",
                  { { T_SYMLINK, "evil", "../canary" }, { T_FILE, "evil/x", .data = "x" } }, 2, "evil/x" },
                { "hard link out", { { T_HARDLINK, "l", "../outside" } }, 1, "l" },
                { "hard link absolute", { { T_HARDLINK, "l", "/etc/passwd" } }, 1, "l" },
                { "hard link through a symlink",
                  { { T_SYMLINK, "evil", "/etc" }, { T_HARDLINK, "l", "evil/passwd" } }, 2, "l" },
                { "under an in-root symlink",
                  { { T_DIR, "d" }, { T_SYMLINK, "s", "d" }, { T_FILE, "s/x", .data = "x" } }, 3, "s/x" },
                { "hard link through an in-root symlink",
                  { { T_DIR, "d" }, { T_FILE, "d/f", .data = "f" }, { T_SYMLINK, "s", "d" },
                    { T_HARDLINK, "h", "s/f" } }, 4, "h" },
                { "whiteout through a symlink",
                  { { T_SYMLINK, "evil", "../canary" }, { T_FILE, "evil/.wh.keep" } }, 2, "evil/.wh.keep" },
                { "opaque through a symlink",
                  { { T_SYMLINK, "evil", "../canary" }, { T_FILE, "evil/.wh..wh..opq" } }, 2, "evil/.wh..wh..opq" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                reset_root(f);
                char *tar = write_tar(f->dir, "layer.tar", cases[i].e, cases[i].n);
                struct na_error err = NA_ERROR_INIT;
                int r = apply(f, tar, &err);
                if (r >= 0)
                        fail_msg("case \"%s\" was not refused", cases[i].what);
                print_message("%s: %s\n", cases[i].what, err.message);
                assert_string_equal(err.code, NA_E_DRIVER);
                if (!strstr(err.message, cases[i].refused))
                        fail_msg("case \"%s\": message \"%s\" does not name %s", cases[i].what, err.message,
                                 cases[i].refused);
                assert_non_null(json_object_get(err.details, "reason"));
                assert_outside_untouched(f);
                na_error_clear(&err);
                free(tar);
        }
        free(abs_canary_x);
        free(up3_path);
        free(abs_path);
}

static void on_skip(void *userdata, const char *path)
{
        char *names = userdata;
        strcat(names, path);
        strcat(names, ";");
}

/* Device nodes (what mmdebstrap's roots hold under /dev) are skipped and named, never a refusal. */
static void test_device_nodes_are_skipped(void **state)
{
        struct fixture *f = *state;
        reset_root(f);
        const struct tar_entry e[] = {
                { T_DIR, "dev", .mode = 0755 },
                { T_CHR, "dev/null" },
                { T_BLK, "dev/sda" },
                { T_FILE, "etc/after", .data = "the rest of the layer" },
        };
        char *tar = write_tar(f->dir, "layer.tar", e, ARRAY_SIZE(e));
        char names[256] = "";
        struct app_layer_opts opts = { .on_skip = on_skip, .userdata = names };
        int root_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = open(tar, O_RDONLY | O_CLOEXEC);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_layer_apply(root_fd, fd, &opts, &err), 0);
        close(fd);
        assert_string_equal(names, "dev/null;dev/sda;");
        struct stat st;
        assert_int_equal(fstatat(root_fd, "dev/null", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(fstatat(root_fd, "etc/after", &st, AT_SYMLINK_NOFOLLOW), 0);
        /* Without a listener: skipped all the same. */
        reset_root(f);
        close(root_fd);
        assert_int_equal(apply(f, tar, &err), 0);
        free(tar);
}

static void test_what_a_layer_may_hold(void **state)
{
        struct fixture *f = *state;
        reset_root(f);
        const struct tar_entry e[] = {
                { T_DIR, "./" , .mode = 0755 },
                { T_DIR, "etc", .mode = 0755 },
                { T_FILE, "etc/su", .data = "#!", .mode = 06755, .uid = 1234, .gid = 5678 },
                { T_FILE, "deep/er/file", .data = "implicit parents" },
                { T_SYMLINK, "abs", "/etc/passwd" }, /* created as is, never followed */
                { T_SYMLINK, "up", "../../.." },
                { T_HARDLINK, "etc/su2", "etc/su" },
                { T_FIFO, "fifo", .mode = 0600 },
                { T_DIR, "tmp", .mode = 01777 },
                { T_FILE, "etc/su", .data = "replaced", .mode = 0700 }, /* a later entry wins */
        };
        char *tar = write_tar(f->dir, "layer.tar", e, ARRAY_SIZE(e));
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(apply(f, tar, &err), 0);
        free(tar);

        struct stat st;
        char *p = pathf("%s/etc/su", f->root);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        char *body = unit_slurp(p, NULL);
        assert_string_equal(body, "replaced");
        free(body);
        free(p);
        p = pathf("%s/etc/su2", f->root); /* linked to the first etc/su: setuid and setgid stripped */
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(st.st_uid, 1234);
        assert_int_equal(st.st_gid, 5678);
        assert_int_equal(st.st_mtime, 1700000000);
        free(p);
        p = pathf("%s/deep/er/file", f->root);
        assert_true(exists(p));
        free(p);
        char target[64] = "";
        p = pathf("%s/abs", f->root);
        assert_int_equal(readlink(p, target, sizeof(target) - 1), 11);
        assert_string_equal(target, "/etc/passwd");
        free(p);
        p = pathf("%s/fifo", f->root);
        assert_int_equal(lstat(p, &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
        free(p);
        p = pathf("%s/tmp", f->root);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 01777);
        assert_int_equal(st.st_mtime, 1700000000); /* directory times are set after their contents */
        free(p);
        assert_outside_untouched(f);
}

static void test_whiteouts_in_one_root(void **state)
{
        struct fixture *f = *state;
        reset_root(f);
        const struct tar_entry lower[] = {
                { T_DIR, "a" }, { T_FILE, "a/keep", .data = "k" }, { T_FILE, "a/gone", .data = "g" },
                { T_DIR, "a/sub" }, { T_FILE, "a/sub/x", .data = "x" }, { T_SYMLINK, "a/link", "/" },
                { T_DIR, "o" }, { T_FILE, "o/old", .data = "o" }, { T_DIR, "o/oldsub" },
                { T_FILE, "o/oldsub/y", .data = "y" },
        };
        const struct tar_entry upper[] = {
                { T_FILE, "a/.wh.gone" }, { T_FILE, "a/.wh.sub" }, { T_FILE, "a/.wh.link" },
                { T_FILE, "missing/.wh.nothing" },
                { T_DIR, "o" }, { T_FILE, "o/new1", .data = "1" },     /* before the marker */
                { T_FILE, "o/oldsub/z", .data = "z" },                  /* under a lower directory */
                { T_FILE, "o/.wh..wh..opq" },
                { T_FILE, "o/new2", .data = "2" },                      /* after the marker */
                { T_FILE, "o/.wh.new1" },                               /* its own layer's: spared */
        };
        struct na_error err = NA_ERROR_INIT;
        char *tar = write_tar(f->dir, "layer.tar", lower, ARRAY_SIZE(lower));
        assert_int_equal(apply(f, tar, &err), 0);
        free(tar);
        tar = write_tar(f->dir, "layer.tar", upper, ARRAY_SIZE(upper));
        assert_int_equal(apply(f, tar, &err), 0);
        free(tar);
        const char *present[] = { "a/keep", "o/new1", "o/new2", "o/oldsub/z" };
        const char *absent[] = { "a/gone", "a/sub", "a/link", "o/old", "o/oldsub/y", "missing", "a/.wh.gone",
                                 "o/.wh..wh..opq" };
        for (size_t i = 0; i < ARRAY_SIZE(present); i++) {
                char *p = pathf("%s/%s", f->root, present[i]);
                if (!exists(p))
                        fail_msg("%s is missing", present[i]);
                free(p);
        }
        for (size_t i = 0; i < ARRAY_SIZE(absent); i++) {
                char *p = pathf("%s/%s", f->root, absent[i]);
                if (exists(p))
                        fail_msg("%s is still there", absent[i]);
                free(p);
        }
        assert_outside_untouched(f);
}

static void test_digest_checked_while_reading(void **state)
{
        struct fixture *f = *state;
        reset_root(f);
        const struct tar_entry e[] = { { T_FILE, "f", .data = "data" } };
        char *tar = write_tar(f->dir, "layer.tar", e, 1);
        int root_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = open(tar, O_RDONLY | O_CLOEXEC);
        struct app_layer_opts opts = {
                .digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                .size = (uint64_t)unit_file_size(tar),
        };
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_layer_apply(root_fd, fd, &opts, &err), -EBADMSG);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "does not match its digest"));
        na_error_clear(&err);
        close(fd);
        close(root_fd);
        free(tar);
}

/* One ustar header block (checksummed) for name, typeflag and size. */
static void ustar_header(unsigned char h[512], const char *name, char type, size_t size)
{
        memset(h, 0, 512);
        snprintf((char *)h, 100, "%s", name);
        snprintf((char *)h + 100, 8, "%07o", 0644);
        snprintf((char *)h + 108, 8, "%07o", 0);
        snprintf((char *)h + 116, 8, "%07o", 0);
        snprintf((char *)h + 124, 12, "%011zo", size);
        snprintf((char *)h + 136, 12, "%011o", 1700000000);
        h[156] = (unsigned char)type;
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (int i = 0; i < 512; i++)
                sum += h[i];
        snprintf((char *)h + 148, 8, "%06o", sum);
}

/*
 * A pax "path" holding a NUL ("ok\0/../../canary/nul"): libarchive reads names as C
 * strings, so the name ends at the NUL and the entry is "ok", inside the root.
 */
static void test_nul_in_a_pax_name_ends_it(void **state)
{
        struct fixture *f = *state;
        reset_root(f);
        static const char value[] = "path=ok\0/../../canary/nul\n";
        char record[64];
        size_t vlen = sizeof(value) - 1, rlen = vlen + 3; /* "NN " + value */
        assert_int_equal(snprintf(record, sizeof(record), "%zu ", rlen), 3);
        memcpy(record + 3, value, vlen);
        unsigned char tar[512 * 6] = {0};
        ustar_header(tar, "PaxHeaders/placeholder", 'x', rlen);
        memcpy(tar + 512, record, rlen);
        ustar_header(tar + 1024, "placeholder", '0', 2);
        memcpy(tar + 1536, "hi", 2);
        char *path = pathf("%s/layer.tar", f->dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_int_equal(write(fd, tar, sizeof(tar)), (ssize_t)sizeof(tar));
        close(fd);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(apply(f, path, &err), 0);
        free(path);
        char *ok = pathf("%s/ok", f->root);
        assert_true(exists(ok));
        free(ok);
        assert_int_equal(unit_dir_entries(f->root), 1);
        assert_outside_untouched(f);
}

/*
 * Random byte flips of a layer with every kind of entry: never a crash, never a write
 * outside. NA_MUTATION_ROUNDS and NA_MUTATION_SEED (default 400 and 1234) run it longer.
 */
static void test_mutated_layers_stay_inside(void **state)
{
        struct fixture *f = *state;
        const struct tar_entry e[] = {
                { T_DIR, "d" }, { T_FILE, "d/f", .data = "some file content" }, { T_SYMLINK, "s", "../canary" },
                { T_HARDLINK, "h", "d/f" }, { T_FIFO, "p" }, { T_FILE, "d/.wh.f" }, { T_FILE, "d/.wh..wh..opq" },
                { T_FILE, "e/x", .data = "implicit parent" },
        };
        char *tar = write_tar(f->dir, "layer.tar", e, ARRAY_SIZE(e));
        size_t len = 0;
        unsigned char *orig = (unsigned char *)unit_slurp(tar, &len);
        unsigned char *buf = malloc(len);
        const char *env_rounds = getenv("NA_MUTATION_ROUNDS"), *env_seed = getenv("NA_MUTATION_SEED");
        int rounds = env_rounds ? atoi(env_rounds) : 400;
        srandom(env_seed ? (unsigned)atoi(env_seed) : 1234u);
        int refused = 0;
        for (int round = 0; round < rounds; round++) {
                memcpy(buf, orig, len);
                int flips = 1 + (int)(random() % 8);
                for (int k = 0; k < flips; k++)
                        buf[(size_t)random() % len] = (unsigned char)random();
                /* Every other round, fix the header checksums so the flips reach names, types and links. */
                for (size_t off = 0; round % 2 && off + 512 <= len; off += 512) {
                        unsigned char *h = buf + off;
                        if (memcmp(h + 257, "ustar", 5) != 0)
                                continue;
                        memset(h + 148, ' ', 8);
                        unsigned sum = 0;
                        for (int i = 0; i < 512; i++)
                                sum += h[i];
                        snprintf((char *)h + 148, 8, "%06o", sum);
                }
                int fd = open(tar, O_WRONLY | O_TRUNC | O_CLOEXEC);
                assert_int_equal(write(fd, buf, len), (ssize_t)len);
                close(fd);
                reset_root(f);
                struct na_error err = NA_ERROR_INIT;
                if (apply(f, tar, &err) < 0) {
                        refused++;
                        assert_non_null(err.code);
                        json_t *j = na_error_to_json(&err); /* the message is valid JSON whatever the names */
                        assert_non_null(json_object_get(j, "error"));
                        json_decref(j);
                }
                na_error_clear(&err);
                assert_outside_untouched(f);
        }
        print_message("%d of %d mutated layers refused\n", refused, rounds);
        free(buf);
        free(orig);
        free(tar);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hostile_layers_are_refused),
                cmocka_unit_test(test_what_a_layer_may_hold),
                cmocka_unit_test(test_device_nodes_are_skipped),
                cmocka_unit_test(test_whiteouts_in_one_root),
                cmocka_unit_test(test_digest_checked_while_reading),
                cmocka_unit_test(test_nul_in_a_pax_name_ends_it),
                cmocka_unit_test(test_mutated_layers_stay_inside),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
