/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The image store (drivers/app/image/app-image-*.c) on layouts written by tests/harness/mkimage.py:
 * resolve by tag, digest, image index and Docker media types; not found; corrupt
 * blobs; unpack once, concurrently, after a crash; whiteouts across layers; list;
 * delete.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/app/image/app-image.h"
#include "image-test.h"

struct fixture {
        char *dir, *images, *cache;
        json_t *bb; /* mkimage --json of bb:1.0 */
};

static json_t *mkimage_json(const char *layout, const char *tag, const char *a1, const char *a2, const char *a3)
{
        char *out = mkimage(layout, tag, "--json", a1, a2, a3, NULL);
        json_t *j = json_loads(out, 0, NULL);
        assert_non_null(j);
        free(out);
        return j;
}

static int setup(void **state)
{
        if (geteuid() != 0) {
                fprintf(stderr, "needs root (layer owners)\n");
                exit(77);
        }
        struct fixture *f = calloc(1, sizeof(*f));
        f->dir = unit_tmpdir("app-image");
        f->images = pathf("%s/images", f->dir);
        f->cache = pathf("%s/cache", f->dir);
        char *bb = pathf("%s/bb", f->images);
        f->bb = mkimage_json(bb, "1.0", "--cmd", "[\"sh\",\"-c\",\"echo hi\"]", NULL);
        free(mkimage(bb, "idx", "--index", NULL));
        free(bb);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        json_decref(f->bb);
        unit_rmrf_free(f->dir);
        free(f->images);
        free(f->cache);
        free(f);
        return 0;
}

static struct proto_image_ref ref_of(const char *s)
{
        struct proto_image_ref ref;
        struct na_error err = NA_ERROR_INIT;
        if (proto_image_ref_parse(s, NULL, &ref, &err) < 0)
                fail_msg("%s: %s", s, err.message);
        return ref;
}

static const char *jstr(json_t *j, const char *key)
{
        return json_string_value(json_object_get(j, key));
}

static void test_resolve_by_tag_digest_index_docker(void **state)
{
        struct fixture *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct app_image img;
        struct proto_image_ref ref = ref_of("bb:1.0");
        assert_int_equal(app_image_resolve(f->images, &ref, true, &img, &err), 0);
        assert_string_equal(img.manifest_digest, jstr(f->bb, "manifest"));
        assert_string_equal(img.config_digest, jstr(f->bb, "config"));
        assert_int_equal(img.n_layers, 1);
        assert_string_equal(img.layers[0].digest, json_string_value(json_array_get(json_object_get(f->bb, "layers"), 0)));
        assert_string_equal(img.layers[0].media_type, "application/vnd.oci.image.layer.v1.tar+gzip");
        assert_int_equal(img.size_bytes, json_integer_value(json_object_get(f->bb, "sizeBytes")));
        assert_non_null(img.cmd);
        assert_string_equal(img.cmd[0], "sh");
        assert_string_equal(img.cmd[2], "echo hi");
        assert_null(img.cmd[3]);
        assert_null(img.entrypoint);
        assert_string_equal(img.env[0], "PATH=/bin");
        assert_string_equal(img.working_dir, "/home/container");
        assert_null(img.user);
        app_image_clear(&img);

        char by_digest[200];
        snprintf(by_digest, sizeof(by_digest), "bb@%s", jstr(f->bb, "manifest"));
        ref = ref_of(by_digest);
        assert_int_equal(app_image_resolve(f->images, &ref, false, &img, &err), 0);
        assert_string_equal(img.manifest_digest, jstr(f->bb, "manifest"));
        app_image_clear(&img);

        /* An image index: its linux/amd64 manifest (the same as bb:1.0 without a command). */
        ref = ref_of("bb:idx");
        assert_int_equal(app_image_resolve(f->images, &ref, true, &img, &err), 0);
        assert_int_equal(img.n_layers, 1);
        assert_null(img.cmd);
        char *bb = pathf("%s/bb", f->images);
        json_t *ij = mkimage_json(bb, "idx", "--index", NULL, NULL); /* deterministic: the same digests again */
        free(bb);
        assert_string_equal(img.manifest_digest, jstr(ij, "manifest"));
        assert_string_not_equal(img.manifest_digest, jstr(ij, "digest"));
        json_decref(ij);
        app_image_clear(&img);
        char *dk = pathf("%s/docker/img", f->images);
        json_t *d = mkimage_json(dk, "d", "--docker", NULL, NULL);
        free(dk);

        ref = ref_of("docker/img:d");
        assert_int_equal(app_image_resolve(f->images, &ref, true, &img, &err), 0);
        assert_string_equal(img.manifest_digest, jstr(d, "manifest"));
        assert_string_equal(img.layers[0].media_type, "application/vnd.docker.image.rootfs.diff.tar.gzip");
        app_image_clear(&img);
        app_image_clear(&img); /* idempotent */
        json_decref(d);
        assert_false(na_error_is_set(&err));
}

static void test_not_found(void **state)
{
        struct fixture *f = *state;
        const char *refs[] = {
                "nope:1.0", "bb:2.0", "bb/deeper:1.0",
                "bb@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        };
        for (size_t i = 0; i < ARRAY_SIZE(refs); i++) {
                struct na_error err = NA_ERROR_INIT;
                struct app_image img;
                struct proto_image_ref ref = ref_of(refs[i]);
                assert_true(app_image_resolve(f->images, &ref, false, &img, &err) < 0);
                assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
                assert_int_equal(err.http_status, 404);
                if (!strstr(err.message, refs[i]))
                        fail_msg("\"%s\" does not name %s", err.message, refs[i]);
                na_error_clear(&err);
                char *rootfs = NULL;
                assert_true(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err) < 0);
                assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
                assert_null(rootfs);
                na_error_clear(&err);
        }
        /* A store that does not exist at all. */
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref = ref_of("bb:1.0");
        struct app_image img;
        assert_true(app_image_resolve("/nonexistent/images", &ref, false, &img, &err) < 0);
        assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
        na_error_clear(&err);
}

/* Flip one byte of layout/blobs/sha256/<hex of digest>. */
static void corrupt(const char *layout, const char *digest)
{
        char *p = pathf("%s/blobs/sha256/%s", layout, digest + 7);
        int fd = open(p, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        unsigned char c;
        assert_int_equal(pread(fd, &c, 1, 20), 1);
        c ^= 0x20;
        assert_int_equal(pwrite(fd, &c, 1, 20), 1);
        close(fd);
        free(p);
}

static void assert_mismatch(struct na_error *err, const char *image, const char *digest)
{
        char want[300];
        snprintf(want, sizeof(want), "image %s: blob %s does not match its digest", image, digest);
        assert_string_equal(err->code, NA_E_DRIVER);
        assert_string_equal(err->message, want);
        assert_string_equal(json_string_value(json_object_get(err->details, "reason")), want);
        na_error_clear(err);
}

static void test_corrupt_blobs_are_refused(void **state)
{
        struct fixture *f = *state;
        char *layout = pathf("%s/corrupt", f->images);
        json_t *j = mkimage_json(layout, "c", "--cmd", "[\"true\"]", NULL);
        json_t *j2 = mkimage_json(layout, "m", "--cmd", "[\"false\"]", NULL);
        struct na_error err = NA_ERROR_INIT;
        struct app_image img;
        char *rootfs = NULL;

        /* A corrupt layer: found by a verifying resolve and by the unpack, which leaves nothing. */
        const char *layer = json_string_value(json_array_get(json_object_get(j, "layers"), 0));
        corrupt(layout, layer);
        struct proto_image_ref ref = ref_of("corrupt:c");
        assert_int_equal(app_image_resolve(f->images, &ref, false, &img, &err), 0);
        app_image_clear(&img);
        assert_true(app_image_resolve(f->images, &ref, true, &img, &err) < 0);
        assert_mismatch(&err, "corrupt:c", layer);
        assert_true(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err) < 0);
        assert_mismatch(&err, "corrupt:c", layer);
        char *hexdir = pathf("%s/%s", f->cache, jstr(j, "manifest") + 7);
        assert_int_equal(unit_dir_entries(hexdir), 0); /* no rootfs, no temporary */
        free(hexdir);

        /* A corrupt config, then a corrupt manifest. */
        corrupt(layout, jstr(j, "config"));
        assert_true(app_image_resolve(f->images, &ref, false, &img, &err) < 0);
        assert_mismatch(&err, "corrupt:c", jstr(j, "config"));
        corrupt(layout, jstr(j, "manifest"));
        assert_true(app_image_resolve(f->images, &ref, false, &img, &err) < 0);
        assert_mismatch(&err, "corrupt:c", jstr(j, "manifest"));

        /* A missing blob is IMAGE_NOT_FOUND. */
        char *p = pathf("%s/blobs/sha256/%s", layout, jstr(j2, "config") + 7);
        assert_int_equal(unlink(p), 0);
        free(p);
        ref = ref_of("corrupt:m");
        assert_true(app_image_resolve(f->images, &ref, false, &img, &err) < 0);
        assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
        assert_non_null(strstr(err.message, "corrupt:m"));
        na_error_clear(&err);

        /* A FIFO planted as a blob is refused, not waited on. */
        json_t *j3 = mkimage_json(layout, "f", "--cmd", "[\"fifo\"]", NULL);
        p = pathf("%s/blobs/sha256/%s", layout, jstr(j3, "config") + 7);
        assert_int_equal(unlink(p), 0);
        assert_int_equal(mkfifo(p, 0644), 0);
        free(p);
        ref = ref_of("corrupt:f");
        assert_true(app_image_resolve(f->images, &ref, false, &img, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "not a regular file"));
        na_error_clear(&err);
        json_decref(j3);
        json_decref(j);
        json_decref(j2);
        free(layout);
}

struct stages {
        pthread_mutex_t lock;
        int last, hundreds, calls;
};

static void on_stage(void *userdata, const char *stage, int percent, const char *message)
{
        struct stages *s = userdata;
        (void)message;
        assert_string_equal(stage, "unpacking");
        pthread_mutex_lock(&s->lock);
        s->calls++;
        if (percent == 100)
                s->hundreds++;
        s->last = percent;
        pthread_mutex_unlock(&s->lock);
}

static void test_unpack_once(void **state)
{
        struct fixture *f = *state;
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref = ref_of("bb:1.0");
        struct stages s = { PTHREAD_MUTEX_INITIALIZER, -1, 0, 0 };
        struct na_progress progress = { .stage = on_stage, .userdata = &s };
        struct app_image img;
        char *rootfs = NULL;
        /* A temporary left by a crash is removed. */
        char *stale = pathf("%s/%s/rootfs.tmp-unpack/bin", f->cache, jstr(f->bb, "manifest") + 7);
        struct na_error e2 = NA_ERROR_INIT;
        assert_int_equal(na_mkdir_p(stale, 0755, &e2), 0);
        free(stale);

        assert_int_equal(app_image_unpack(f->images, &ref, f->cache, &progress, &img, &rootfs, &err), 0);
        char *want = pathf("%s/%s/rootfs", f->cache, jstr(f->bb, "manifest") + 7);
        assert_string_equal(rootfs, want);
        assert_string_equal(img.cmd[0], "sh");
        assert_int_equal(s.last, 100);
        assert_int_equal(s.hundreds, 1);
        char *hexdir = pathf("%s/%s", f->cache, jstr(f->bb, "manifest") + 7);
        assert_int_equal(unit_dir_entries(hexdir), 1); /* rootfs only */
        free(hexdir);

        struct stat st, st2;
        char *p = pathf("%s/bin/busybox", rootfs);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(st.st_size, unit_file_size("/bin/busybox"));
        free(p);
        char target[32] = "";
        p = pathf("%s/bin/sh", rootfs);
        assert_int_equal(readlink(p, target, sizeof(target) - 1), 7);
        assert_string_equal(target, "busybox");
        free(p);
        p = pathf("%s/tmp", rootfs);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 01777);
        free(p);
        p = pathf("%s/etc/passwd", rootfs);
        char *passwd = unit_slurp(p, NULL);
        assert_non_null(strstr(passwd, "nobody:x:65534"));
        free(passwd);
        free(p);
        assert_int_equal(stat(rootfs, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        /* The root works: its busybox runs the image's command in it. */
        const char *argv[] = { "/usr/sbin/chroot", rootfs, "/bin/sh", "-c", "cd /home/container && echo hi from $PWD",
                               NULL };
        char *out = NULL;
        if (na_spawn((char *const *)argv, NULL, &out, 4096, &err) < 0)
                fail_msg("chroot: %s", err.message);
        assert_string_equal(out, "hi from /home/container\n");
        free(out);
        app_image_clear(&img);
        free(rootfs);

        /* The second call finds it done: same directory, nothing unpacked. */
        s.hundreds = s.calls = 0;
        rootfs = NULL;
        assert_int_equal(app_image_unpack(f->images, &ref, f->cache, &progress, NULL, &rootfs, &err), 0);
        assert_int_equal(stat(rootfs, &st2), 0);
        assert_int_equal(st.st_ino, st2.st_ino);
        assert_int_equal(st.st_mtim.tv_nsec, st2.st_mtim.tv_nsec);
        assert_int_equal(s.calls, 0);
        free(rootfs);
        free(want);
}

struct racer {
        struct fixture *f;
        struct stages s;
        int r;
        char *rootfs;
};

static void *race(void *arg)
{
        struct racer *r = arg;
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref;
        (void)proto_image_ref_parse("race:1", NULL, &ref, &err);
        struct na_progress progress = { .stage = on_stage, .userdata = &r->s };
        r->r = app_image_unpack(r->f->images, &ref, r->f->cache, &progress, NULL, &r->rootfs, &err);
        na_error_clear(&err);
        return NULL;
}

static void test_concurrent_unpack(void **state)
{
        struct fixture *f = *state;
        char *layout = pathf("%s/race", f->images);
        free(mkimage(layout, "1", "--cmd", "[\"ls\"]", NULL));
        free(layout);
        struct racer r[2] = {
                { f, { PTHREAD_MUTEX_INITIALIZER, -1, 0, 0 }, -1, NULL },
                { f, { PTHREAD_MUTEX_INITIALIZER, -1, 0, 0 }, -1, NULL },
        };
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
                assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
        for (int i = 0; i < 2; i++)
                pthread_join(t[i], NULL);
        assert_int_equal(r[0].r, 0);
        assert_int_equal(r[1].r, 0);
        assert_string_equal(r[0].rootfs, r[1].rootfs);
        /* Exactly one of them unpacked (and reached 100 %); the other found it done. */
        assert_int_equal(r[0].s.hundreds + r[1].s.hundreds, 1);
        char *sh = pathf("%s/bin/sh", r[0].rootfs);
        assert_true(exists(sh));
        free(sh);
        free(r[0].rootfs);
        free(r[1].rootfs);
}

static void test_whiteouts_across_layers(void **state)
{
        struct fixture *f = *state;
        char *layout = pathf("%s/wh", f->images);
        free(mkimage(layout, "1", "--no-base", "--extra-layer",
                     "[{\"path\":\"a\",\"type\":\"dir\"},{\"path\":\"a/keep\"},{\"path\":\"a/gone\"},"
                     "{\"path\":\"a/sub\",\"type\":\"dir\"},{\"path\":\"a/sub/x\"},"
                     "{\"path\":\"o\",\"type\":\"dir\"},{\"path\":\"o/old\"},{\"path\":\"o/oldsub\",\"type\":\"dir\"},"
                     "{\"path\":\"o/oldsub/y\"}]",
                     "--extra-layer",
                     "[{\"path\":\"a/gone\",\"type\":\"whiteout\"},{\"path\":\"a/sub\",\"type\":\"whiteout\"},"
                     "{\"path\":\"o\",\"type\":\"dir\"},{\"path\":\"o/new1\"},{\"path\":\"o/oldsub/z\"},"
                     "{\"path\":\"o\",\"type\":\"opaque\"},{\"path\":\"o/new2\"}]",
                     "--compress", "none", NULL));
        free(layout);
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref = ref_of("wh:1");
        char *rootfs = NULL;
        assert_int_equal(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err), 0);
        const char *present[] = { "a/keep", "o/new1", "o/new2", "o/oldsub/z" };
        const char *absent[] = { "a/gone", "a/sub", "o/old", "o/oldsub/y", "a/.wh.gone", "o/.wh..wh..opq" };
        for (size_t i = 0; i < ARRAY_SIZE(present); i++) {
                char *p = pathf("%s/%s", rootfs, present[i]);
                if (!exists(p))
                        fail_msg("%s is missing", present[i]);
                free(p);
        }
        for (size_t i = 0; i < ARRAY_SIZE(absent); i++) {
                char *p = pathf("%s/%s", rootfs, absent[i]);
                if (exists(p))
                        fail_msg("%s is still there", absent[i]);
                free(p);
        }
        free(rootfs);
}

static void test_zstd_and_hostile_image(void **state)
{
        struct fixture *f = *state;
        assert_int_equal(access("/usr/bin/zstd", X_OK), 0); /* scripts/deps.sh installs it */
        {
                char *layout = pathf("%s/zst", f->images);
                free(mkimage(layout, "1", "--compress", "zstd", NULL));
                free(layout);
                struct na_error err = NA_ERROR_INIT;
                struct proto_image_ref ref = ref_of("zst:1");
                char *rootfs = NULL;
                assert_int_equal(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err), 0);
                char *sh = pathf("%s/bin/sh", rootfs);
                assert_true(exists(sh));
                free(sh);
                free(rootfs);
        }
        /* A hostile layer refuses the image and leaves no root behind. */
        char *layout = pathf("%s/evil", f->images);
        json_t *j = mkimage_json(layout, "1", "--extra-layer",
                                 "[{\"path\":\"e\",\"type\":\"symlink\",\"target\":\"/\"},{\"path\":\"e/x\"}]", NULL);
        free(layout);
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref = ref_of("evil:1");
        char *rootfs = NULL;
        assert_true(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err) < 0);
        assert_string_equal(err.code, NA_E_DRIVER);
        assert_non_null(strstr(err.message, "image evil:1: layer sha256:"));
        assert_non_null(strstr(err.message, "\"e/x\""));
        char *hexdir = pathf("%s/%s", f->cache, jstr(j, "manifest") + 7);
        assert_int_equal(unit_dir_entries(hexdir), 0);
        free(hexdir);
        assert_false(exists("/x"));
        na_error_clear(&err);
        json_decref(j);
}

static int stop_now(void *userdata, struct na_error *err)
{
        int *calls = userdata;
        if (++*calls < 2)
                return 0;
        return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "job cancelled");
}

static void test_checkpoint_stops_between_layers(void **state)
{
        struct fixture *f = *state;
        char *layout = pathf("%s/stop", f->images);
        json_t *j = mkimage_json(layout, "1", "--extra-layer", "[{\"path\":\"second\"}]", NULL);
        free(layout);
        int calls = 0;
        struct na_progress progress = { .checkpoint = stop_now, .userdata = &calls };
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref = ref_of("stop:1");
        char *rootfs = NULL;
        assert_int_equal(app_image_unpack(f->images, &ref, f->cache, &progress, NULL, &rootfs, &err), -ECANCELED);
        assert_string_equal(err.code, NA_E_JOB_CANCELLED);
        assert_int_equal(calls, 2); /* the second ask (inside the first layer: 256 entries) stopped it */
        char *hexdir = pathf("%s/%s", f->cache, jstr(j, "manifest") + 7);
        assert_int_equal(unit_dir_entries(hexdir), 0);
        free(hexdir);
        na_error_clear(&err);
        json_decref(j);
}

/* What skopeo writes (its own index.json) resolves and unpacks too. */
static void test_skopeo_layout(void **state)
{
        struct fixture *f = *state;
        /* scripts/deps.sh installs skopeo: its absence is a failure, not a skip. */
        assert_int_equal(access("/usr/bin/skopeo", X_OK), 0);
        char *src = pathf("oci:%s/bb:1.0", f->images);
        char *dst = pathf("oci:%s/skopeo/bb:copied", f->images);
        char *skdir = pathf("%s/skopeo/bb", f->images);
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(na_mkdir_p(skdir, 0755, &err), 0);
        const char *argv[] = { "/usr/bin/skopeo", "--insecure-policy", "copy", "-q", src, dst, NULL };
        if (na_spawn((char *const *)argv, NULL, NULL, 0, &err) < 0)
                fail_msg("skopeo: %s", err.message);
        struct proto_image_ref ref = ref_of("skopeo/bb:copied");
        struct app_image img;
        assert_int_equal(app_image_resolve(f->images, &ref, true, &img, &err), 0);
        assert_string_equal(img.cmd[0], "sh");
        app_image_clear(&img);
        char *rootfs = NULL;
        assert_int_equal(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err), 0);
        char *sh = pathf("%s/bin/sh", rootfs);
        assert_true(exists(sh));
        free(sh);
        free(rootfs);
        free(src);
        free(dst);
        free(skdir);
}

static json_t *find_image(json_t *list, const char *image)
{
        size_t i;
        json_t *v;
        json_array_foreach (list, i, v)
                if (streq(jstr(v, "image"), image))
                        return v;
        return NULL;
}

static void test_list(void **state)
{
        struct fixture *f = *state;
        char *layout = pathf("%s/games/mc", f->images);
        json_t *j = mkimage_json(layout, "2", NULL, NULL, NULL);
        free(layout);
        layout = pathf("%s/games", f->images); /* a layout above another */
        free(mkimage(layout, "0", NULL));
        free(layout);
        struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *list = NULL;
        assert_int_equal(app_image_list(f->images, &list, &err), 0);
        json_t *bb = find_image(list, "bb:1.0"), *mc = find_image(list, "games/mc:2"), *idx = find_image(list, "bb:idx");
        assert_non_null(bb);
        assert_non_null(mc);
        assert_non_null(idx);
        assert_non_null(find_image(list, "games:0"));
        assert_string_equal(jstr(bb, "digest"), jstr(f->bb, "digest"));
        assert_int_equal(json_integer_value(json_object_get(bb, "sizeBytes")),
                         json_integer_value(json_object_get(f->bb, "sizeBytes")));
        assert_string_equal(jstr(mc, "digest"), jstr(j, "digest"));
        /* Sorted by image. */
        for (size_t i = 1; i < json_array_size(list); i++)
                assert_true(strcmp(jstr(json_array_get(list, i - 1), "image"), jstr(json_array_get(list, i), "image")) <
                            0);
        json_decref(j);
        _cleanup_json_ json_t *empty = NULL;
        assert_int_equal(app_image_list("/nonexistent/images", &empty, &err), 0);
        assert_int_equal(json_array_size(empty), 0);
}

static bool blob_exists(const char *layout, const char *digest)
{
        char *p = pathf("%s/blobs/sha256/%s", layout, digest + 7);
        bool r = exists(p);
        free(p);
        return r;
}

static void test_delete(void **state)
{
        struct fixture *f = *state;
        char *layout = pathf("%s/del", f->images);
        json_t *a = mkimage_json(layout, "a", "--cmd", "[\"a\"]", NULL);
        json_t *a2 = mkimage_json(layout, "a2", "--cmd", "[\"a\"]", NULL); /* the same manifest */
        json_t *b = mkimage_json(layout, "b", "--cmd", "[\"b\"]", NULL);
        const char *layer = json_string_value(json_array_get(json_object_get(a, "layers"), 0));
        struct na_error err = NA_ERROR_INIT;
        struct proto_image_ref ref = ref_of("del:a");
        char *rootfs = NULL;
        assert_int_equal(app_image_unpack(f->images, &ref, f->cache, NULL, NULL, &rootfs, &err), 0);
        char *hexdir = pathf("%s/%s", f->cache, jstr(a, "manifest") + 7);

        /* a2 still names the manifest: its blobs and its root stay. */
        assert_int_equal(app_image_delete(f->images, f->cache, &ref, &err), 0);
        struct app_image img;
        assert_true(app_image_resolve(f->images, &ref, false, &img, &err) < 0);
        assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
        na_error_clear(&err);
        assert_true(blob_exists(layout, jstr(a, "manifest")));
        assert_true(exists(rootfs));
        assert_true(app_image_delete(f->images, f->cache, &ref, &err) < 0);
        assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
        na_error_clear(&err);

        /* By digest: a2 goes, with its manifest and config; the layer b shares stays; the root goes. */
        char by_digest[200];
        snprintf(by_digest, sizeof(by_digest), "del@%s", jstr(a2, "manifest"));
        ref = ref_of(by_digest);
        assert_int_equal(app_image_delete(f->images, f->cache, &ref, &err), 0);
        assert_false(blob_exists(layout, jstr(a, "manifest")));
        assert_false(blob_exists(layout, jstr(a, "config")));
        assert_true(blob_exists(layout, layer));
        assert_true(blob_exists(layout, jstr(b, "config")));
        assert_false(exists(rootfs));
        assert_false(exists(hexdir));
        char *lock = pathf("%s.lock", hexdir);
        assert_false(exists(lock));
        free(lock);
        ref = ref_of("del:b");
        assert_int_equal(app_image_resolve(f->images, &ref, true, &img, &err), 0);
        app_image_clear(&img);

        /* The last one takes the layer with it. */
        assert_int_equal(app_image_delete(f->images, f->cache, &ref, &err), 0);
        assert_false(blob_exists(layout, layer));
        char *index = pathf("%s/index.json", layout);
        json_t *ij = json_load_file(index, 0, NULL);
        assert_int_equal(json_array_size(json_object_get(ij, "manifests")), 0);
        json_decref(ij);
        free(index);
        ref = ref_of("nope:1");
        assert_true(app_image_delete(f->images, f->cache, &ref, &err) < 0);
        assert_string_equal(err.code, NA_E_IMAGE_NOT_FOUND);
        na_error_clear(&err);
        free(hexdir);
        free(rootfs);
        free(layout);
        json_decref(a);
        json_decref(a2);
        json_decref(b);
}

static void test_layout_lock(void **state)
{
        struct fixture *f = *state;
        struct na_error err = NA_ERROR_INIT;
        int fd = -1;
        assert_int_equal(app_image_layout_lock(f->images, "new/layout", &fd, &err), 0);
        char *dir = pathf("%s/new/layout", f->images);
        int other = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(other >= 0);
        assert_int_equal(flock(other, LOCK_EX | LOCK_NB), -1); /* what a pull or a delete would wait for */
        close(fd);
        assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0);
        close(other);
        free(dir);
        assert_true(app_image_layout_lock(f->images, "../escape", &fd, &err) < 0);
        na_error_clear(&err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_resolve_by_tag_digest_index_docker),
                cmocka_unit_test(test_not_found),
                cmocka_unit_test(test_corrupt_blobs_are_refused),
                cmocka_unit_test(test_unpack_once),
                cmocka_unit_test(test_concurrent_unpack),
                cmocka_unit_test(test_whiteouts_across_layers),
                cmocka_unit_test(test_zstd_and_hostile_image),
                cmocka_unit_test(test_checkpoint_stops_between_layers),
                cmocka_unit_test(test_skopeo_layout),
                cmocka_unit_test(test_list),
                cmocka_unit_test(test_delete),
                cmocka_unit_test(test_layout_lock),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
