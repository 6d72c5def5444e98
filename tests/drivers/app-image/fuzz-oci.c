/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the OCI JSON documents an app image is made of: the image
 * index, the manifest and the config, read both as a registry sends them
 * (app-registry-manifest.c: reg_manifest_kind, reg_index_choose, reg_manifest_parse)
 * and as the image store resolves a layout on disk (app-image-layout.c:
 * app_layout_read_index, then app_image_resolve_descriptor through manifest, config
 * and layer blobs, with and without the blob walk of image deletion).
 *
 * The input holds up to four parts separated by a line "@@": index.json, a manifest,
 * a config and a layer blob. Digests cannot be found by a fuzzer, so before a part
 * is used, "@C@", "@L@" and "@M@" in it become the sha256 digest of the config, the
 * layer and the manifest ("sha256:<hex>") and "@CS@", "@LS@", "@MS@" their sizes:
 * the seeds reach the config and the layer checks this way. The parts are written as
 * a layout (index.json, blobs/sha256/<hex>) in a directory of this process.
 * Contracts: no crash or leak, a result and its error agree, an accepted image has
 * digests of the right shape. Built as a libFuzzer target by fuzz/CMakeLists.txt.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/macro.h"
#include "drivers/app/image/app-image-internal.h"
#include "drivers/app/image/app-image.h"
#include "drivers/app/image/app-registry-internal.h"
#include "volume/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long reg_ok, reg_refused, images, refused;

#define CHECK(cond, ...)                                                           \
        do {                                                                       \
                if (!(cond)) {                                                     \
                        fprintf(stderr, "fuzz-oci: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                              \
                        fputc('\n', stderr);                                       \
                        abort();                                                   \
                }                                                                  \
        } while (0)

struct part {
        char *data;
        size_t len;
        char digest[72];
};

static void digest_of(struct part *p)
{
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_Digest(p->data, p->len, d, &dl, EVP_sha256(), NULL);
        memcpy(p->digest, "sha256:", 7);
        na_sha256_hex(d, p->digest + 7);
}

/* Replace every placeholder of p by its value (a new buffer). */
static void substitute(struct part *p, const char *const names[], const char *const values[], size_t n)
{
        size_t cap = p->len + 1;
        for (size_t i = 0; i < n; i++)
                cap += (p->len / strlen(names[i]) + 1) * strlen(values[i]);
        char *out = malloc(cap), *w = out;
        CHECK(out, "malloc");
        for (size_t at = 0; at < p->len;) {
                size_t i;
                for (i = 0; i < n; i++) {
                        size_t nl = strlen(names[i]);
                        if (p->len - at >= nl && memcmp(p->data + at, names[i], nl) == 0) {
                                memcpy(w, values[i], strlen(values[i]));
                                w += strlen(values[i]);
                                at += nl;
                                break;
                        }
                }
                if (i == n)
                        *w++ = p->data[at++];
        }
        p->data = out;
        p->len = (size_t)(w - out);
}

static void write_at(int dir_fd, const char *name, const struct part *p)
{
        int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0, "create %s: %s", name, strerror(errno));
        CHECK(write(fd, p->data, p->len) == (ssize_t)p->len, "write %s", name);
        close(fd);
}

static int layout_fd = -1, blobs_fd = -1;
/* On tmpfs when there is one: a disk makes each run wait for the file system. */
static char layout_dir[64];

static void layout_remove(void)
{
        struct na_error err = NA_ERROR_INIT;
        char *slash = strrchr(layout_dir, '/');
        *slash = '\0';
        int parent = open(layout_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        app_fs_rm_rf(parent, slash + 1, &err);
        na_error_clear(&err);
        close(parent);
}

static void layout_init(void)
{
        if (layout_fd >= 0)
                return;
        snprintf(layout_dir, sizeof(layout_dir), "%s/na-fuzz-oci-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        CHECK(mkdtemp(layout_dir), "mkdtemp: %s", strerror(errno));
        atexit(layout_remove);
        layout_fd = open(layout_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(layout_fd >= 0 && mkdirat(layout_fd, "blobs", 0700) == 0, "layout");
        int b = openat(layout_fd, "blobs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(b >= 0 && mkdirat(b, "sha256", 0700) == 0, "blobs");
        blobs_fd = openat(b, "sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(blobs_fd >= 0, "blobs/sha256");
        close(b);
}

static void registry(const struct part *p)
{
        struct reg_client c = { 0 };
        snprintf(c.what, sizeof(c.what), "registry fuzz: image x");
        char mt[256];
        bool is_index = false;
        struct na_error err = NA_ERROR_INIT;
        int r = reg_manifest_kind(&c, p->data, p->len, "application/json", mt, &is_index, &err);
        CHECK((r == 0) == !na_error_is_set(&err), "manifest kind: result and error disagree");
        if (r == 0) {
                if (is_index) {
                        struct reg_descriptor d;
                        r = reg_index_choose(&c, p->data, p->len, &d, &err);
                        CHECK(r < 0 || strlen(d.hex) == REG_HEX_LEN, "index entry hex %s", d.hex);
                } else {
                        struct reg_manifest m;
                        r = reg_manifest_parse(&c, p->data, p->len, mt, &m, &err);
                        if (r == 0) {
                                CHECK(strlen(m.config.hex) == REG_HEX_LEN, "config hex");
                                for (size_t i = 0; i < m.n_layers; i++)
                                        CHECK(strlen(m.layers[i].hex) == REG_HEX_LEN, "layer hex");
                                reg_manifest_done(&m);
                        }
                }
                CHECK((r == 0) == !na_error_is_set(&err), "registry parse: result and error disagree");
        }
        if (r == 0)
                reg_ok++;
        else
                reg_refused++;
        na_error_clear(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        layout_init();
        struct part parts[4] = { 0 };
        size_t n = 0;
        const char *s = (const char *)data, *end = s + size;
        while (n < 4) {
                const char *sep = n < 3 ? memmem(s, (size_t)(end - s), "\n@@\n", 4) : NULL;
                parts[n].data = (char *)s;
                parts[n].len = sep ? (size_t)(sep - s) : (size_t)(end - s);
                n++;
                if (!sep)
                        break;
                s = sep + 4;
        }
        struct part *index = &parts[0], *manifest = &parts[1], *config = &parts[2], *layer = &parts[3];
        char cs[24], ls[24], ms[24];
        digest_of(config);
        digest_of(layer);
        snprintf(cs, sizeof(cs), "%zu", config->len);
        snprintf(ls, sizeof(ls), "%zu", layer->len);
        const char *const n1[] = { "@CS@", "@LS@", "@C@", "@L@" };
        const char *const v1[] = { cs, ls, config->digest, layer->digest };
        substitute(manifest, n1, v1, 4);
        digest_of(manifest);
        snprintf(ms, sizeof(ms), "%zu", manifest->len);
        const char *const n2[] = { "@CS@", "@LS@", "@MS@", "@C@", "@L@", "@M@" };
        const char *const v2[] = { cs, ls, ms, config->digest, layer->digest, manifest->digest };
        substitute(index, n2, v2, 6);

        registry(index);
        registry(manifest);

        write_at(layout_fd, "index.json", index);
        struct part *blobs[] = { manifest, config, layer };
        for (size_t i = 0; i < ARRAY_SIZE(blobs); i++)
                write_at(blobs_fd, blobs[i]->digest + 7, blobs[i]);
        json_t *idx = NULL;
        struct na_error err = NA_ERROR_INIT;
        if (app_layout_read_index(layout_fd, "fuzz", &idx, &err) == 0) {
                size_t i;
                json_t *desc;
                json_array_foreach (json_object_get(idx, "manifests"), i, desc) {
                        if (i >= 8)
                                break;
                        struct app_image img = { 0 };
                        json_t *walked = json_object();
                        int r = app_image_resolve_descriptor(layout_fd, "fuzz", desc, true, &img, NULL, &err);
                        CHECK((r == 0) == !na_error_is_set(&err), "resolve: result and error disagree");
                        if (r == 0) {
                                images++;
                                CHECK(app_digest_valid(img.manifest_digest) && app_digest_valid(img.config_digest),
                                      "image digests %s %s", img.manifest_digest, img.config_digest);
                                for (size_t k = 0; k < img.n_layers; k++)
                                        CHECK(app_digest_valid(img.layers[k].digest), "layer digest");
                                app_image_clear(&img);
                        } else
                                refused++;
                        na_error_clear(&err);
                        /* The walk image deletion makes: every blob reached, no image asked for. */
                        r = app_image_resolve_descriptor(layout_fd, "fuzz", desc, false, NULL, walked, &err);
                        CHECK((r == 0) == !na_error_is_set(&err), "blob walk: result and error disagree");
                        na_error_clear(&err);
                        json_decref(walked);
                }
                json_decref(idx);
        } else
                refused++;
        na_error_clear(&err);
        for (size_t i = 0; i < ARRAY_SIZE(blobs); i++)
                unlinkat(blobs_fd, blobs[i]->digest + 7, 0);
        free(index->data);
        free(manifest->data);
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "registry: %lu parsed, %lu refused; layout: %lu images resolved, %lu refused\n", reg_ok,
                reg_refused, images, refused);
        return !reg_ok || !reg_refused || !images || !refused;
}
