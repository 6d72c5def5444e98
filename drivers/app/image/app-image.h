/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The OCI image store of apps (AGENT-API 4.2, "image"): OCI image layouts under
 * images_dir (what `skopeo copy docker://… oci:<images_dir>/<name>:<tag>` and umoci
 * write: <name>/oci-layout, <name>/index.json, <name>/blobs/sha256/<hex>), resolved,
 * verified and unpacked once per manifest digest into <cache_dir>/<hex>/rootfs.
 *
 *   struct proto_image_ref ref;            (proto/app-image-ref.h)
 *   struct app_image img;
 *   _cleanup_free_ char *rootfs = NULL;
 *   if (app_image_unpack(images_dir, &ref, cache_dir, progress, &img, &rootfs, &err) < 0) ...
 *   ... img.entrypoint, img.cmd, img.env ...  rootfs is read-only from now on
 *   app_image_clear(&img);
 *
 * Every blob (manifest, config, each layer) is checked against its sha256 digest
 * before it is used; a mismatch is DRIVER_ERROR "image X: blob sha256:… does not match
 * its digest" (also in details.reason). A missing layout, tag, digest or blob is
 * IMAGE_NOT_FOUND naming the image. Both OCI and Docker schema2 media types are
 * accepted; an index entry that is itself an image index yields its linux/amd64
 * manifest. JSON blobs are read with a 4 MiB bound, everything relative to the
 * layout's directory fd (openat2 RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS).
 *
 * Writers of a layout (the registry pull) should hold app_image_layout_lock() while
 * they rewrite its index.json; app_image_delete() does.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"
#include "proto/app-image-ref.h"

#define APP_IMAGE_JSON_MAX (4u << 20) /* bound of every JSON blob and index.json */
/*
 * Beside an unpacked root (<cache_dir>/<hex>/): one line saying which device nodes
 * the layers held and the unpack skipped ("skipped 3 device nodes of the layers
 * (/dev/null, ...): a container gets its devices from the runtime"); absent when none.
 */
#define APP_IMAGE_SKIPPED_FILE "skipped-devices"

struct app_image_layer {
        char digest[72];       /* "sha256:<hex>" */
        char media_type[128];
        uint64_t size;         /* compressed, as the manifest says */
};

struct app_image {
        char manifest_digest[72]; /* the platform manifest (not the index that led to it) */
        char config_digest[72];
        struct app_image_layer *layers;
        size_t n_layers;
        uint64_t size_bytes; /* manifest + config + layers */
        /* From the config's "config"; NULL-terminated vectors, NULL when absent or null. */
        char **entrypoint, **cmd, **env;
        char *working_dir, *user; /* NULL when absent or empty */
        char *stop_signal;        /* StopSignal as written ("SIGINT", "2"); NULL when absent or empty */
};

/*
 * Find ref in <images_dir>/<ref.name>/index.json, read and verify its manifest and
 * config; with verify_layers, also hash every layer blob (else only its presence and
 * size are checked). *ret is written only on success; free it with app_image_clear().
 */
int app_image_resolve(const char *images_dir, const struct proto_image_ref *ref, bool verify_layers,
                      struct app_image *ret, struct na_error *err);
/* Free what *img holds and zero it; NULL-safe, idempotent. */
void app_image_clear(struct app_image *img);

/*
 * Unpack ref once per manifest digest into <cache_dir>/<hex>/rootfs (cache_dir is
 * created 0711 when missing). The layers go into a temporary directory beside it
 * that is renamed into place when complete; callers for the same digest (threads or
 * processes) serialize on <cache_dir>/<hex>.lock and the later ones find it done; a
 * temporary directory left by a crash is removed by the next unpack. Each layer is
 * hashed while it is read and the unpack fails when it does not match its digest.
 * progress gets stage "unpacking" with the percent of compressed layer bytes read;
 * its checkpoint is asked between layers, within them (every 256 entries and 64 MiB
 * of data) and while waiting for the lock; its error is returned as it is.
 * ret_img and ret_rootfs may be NULL; both are written only on success.
 */
int app_image_unpack(const char *images_dir, const struct proto_image_ref *ref, const char *cache_dir,
                     const struct na_progress *progress, struct app_image *ret_img, char **ret_rootfs,
                     struct na_error *err);

/*
 * What one unpack may write (issue 20: a 94 KB zstd layer of zeros unpacked to 2.8
 * GiB and filled the file system every app's disk lives on). Counted while writing,
 * across all the layers of the image: data bytes written (holes of sparse entries
 * cost nothing) and entries made (each an inode, or a name). The free space and free
 * inodes of the cache's file system are read again every APP_UNPACK_CHECK_BYTES of
 * data and APP_UNPACK_CHECK_FILES entries; the unpack stops before it would leave
 * less than reserve_percent of either free. A refusal is DRIVER_ERROR (errnum EFBIG,
 * details.reason "image-too-large", details.limit naming the [apps] key) whose
 * message names the image, the limit and where it stopped; the half-unpacked root is
 * removed, so the space comes back at once.
 */
struct app_unpack_limits {
        uint64_t max_bytes;       /* [apps] image_unpack_max_mb in bytes; 0: APP_UNPACK_MAX_BYTES_DEFAULT */
        uint64_t max_files;       /* [apps] image_unpack_max_files; 0: APP_UNPACK_MAX_FILES_DEFAULT */
        unsigned reserve_percent; /* [apps] image_unpack_reserve_percent; 0: none (only max_* apply) */
};
#define APP_UNPACK_MAX_BYTES_DEFAULT (8ull << 30) /* 8 GiB */
#define APP_UNPACK_MAX_FILES_DEFAULT 500000u
#define APP_UNPACK_RESERVE_PERCENT_DEFAULT 5u
#define APP_UNPACK_CHECK_BYTES (8u << 20)
#define APP_UNPACK_CHECK_FILES 256u

/* The running count of one unpack (all its layers); zero it, set limits and label. */
struct app_unpack_budget {
        const struct app_unpack_limits *limits; /* NULL: the defaults */
        const char *label;                      /* the image, for messages */
        uint64_t bytes, files;                  /* written so far */
        uint64_t next_check_bytes, next_check_files;
};

/* app_image_unpack within limits (NULL: the defaults above, reserve included). */
int app_image_unpack_bounded(const char *images_dir, const struct proto_image_ref *ref, const char *cache_dir,
                             const struct app_unpack_limits *limits, const struct na_progress *progress,
                             struct app_image *ret_img, char **ret_rootfs, struct na_error *err);

/*
 * Every tagged manifest of every layout under images_dir (names may contain '/'), as
 * a JSON array of {image: "name:tag", digest, sizeBytes} sorted by image. digest is
 * the index.json entry's (what "name@digest" resolves); an entry whose blobs cannot
 * be read is left out.
 */
int app_image_list(const char *images_dir, json_t **ret, struct na_error *err);

/*
 * Remove ref from its layout: by tag, the manifest with that tag; by digest, every
 * entry with that digest. index.json is rewritten atomically; blobs the removed
 * entries referenced and no remaining entry of that layout references are removed;
 * <cache_dir>/<hex> of the removed manifest is removed when no remaining manifest of
 * any layout has that digest (cache_dir may be NULL: nothing unpacked to remove).
 * IMAGE_NOT_FOUND when ref is not there. Whether an app still uses the image is the
 * caller's question.
 */
int app_image_delete(const char *images_dir, const char *cache_dir, const struct proto_image_ref *ref,
                     struct na_error *err);

/* An exclusive flock on the layout directory <images_dir>/<name> (created when missing); close the fd to release. */
int app_image_layout_lock(const char *images_dir, const char *name, int *ret_fd, struct na_error *err);

/*
 * Apply one layer tar (plain, gzip or zstd: libarchive detects the filter) read from
 * layer_fd onto the directory root_fd. Entries are created beneath root_fd only:
 * each parent directory is opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
 * RESOLVE_NO_MAGICLINKS) (an entry is never written through a symbolic link, even
 * one inside the root), then the entry is made relative to that fd, never following
 * a link. The whole layer is refused (DRIVER_ERROR naming the entry and the reason)
 * on an absolute path, a ".." component, a parent path through a symbolic link, a
 * hard link whose target is outside or through a symbolic link, sockets, names over
 * PATH_MAX or components over NAME_MAX. Character and block devices are skipped
 * (opts->on_skip is told their names): a container gets its devices from the runtime. A NUL cannot be
 * refused: libarchive hands names as C strings, so a pax name "ok\0/../x" arrives as
 * "ok" (and stays inside). What was applied before the refusal stays: apply into a
 * temporary root and throw it away on failure (app_image_unpack does).
 * Symbolic links are created as they are: their targets are the container's
 * business and are never followed here. Whiteouts: ".wh.<name>" removes <name> of
 * earlier layers (recursively, never following links); ".wh..wh..opq" empties its
 * directory of what earlier layers put there, keeping what this layer adds whatever
 * the entry order. Owners (uid/gid of the tar), modes, mtimes, file contents and
 * FIFOs are kept; setuid and setgid bits are stripped; extended attributes are not
 * applied.
 */
struct app_layer_opts {
        const char *digest; /* "sha256:<hex>": hash every byte of layer_fd, -EBADMSG when it differs; NULL: no check */
        uint64_t size;      /* with digest: the blob's size; another size fails as a mismatch */
        void (*on_read)(void *userdata, uint64_t bytes_read); /* compressed bytes read so far; may be NULL */
        void *userdata;
        void (*on_skip)(void *userdata, const char *path); /* a device node skipped; may be NULL */
        const struct na_progress *progress; /* its checkpoint is asked every 256 entries and 64 MiB of data; may be NULL */
        struct app_unpack_budget *budget;   /* charged for every byte and entry before it is written; NULL: unbounded */
};
int app_layer_apply(int root_fd, int layer_fd, const struct app_layer_opts *opts, struct na_error *err);

