/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Private helpers of the image store (app-image-layout.c, app-image-store.c,
 * app-image-list.c): opening a layout and its blobs beneath images_dir, bounded and
 * verified JSON blobs, the descriptors of index.json. Not for other modules: use
 * app-image.h.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "drivers/app/image/app-image.h"

#define APP_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define APP_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define APP_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define APP_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define APP_REF_NAME_ANNOTATION "org.opencontainers.image.ref.name"

/* "sha256:" and 64 lower-case hex digits. */
bool app_digest_valid(const char *digest);
bool app_media_type_is_index(const char *mt);
bool app_media_type_is_manifest(const char *mt);

/* open(2) flags-and-resolve helper: openat2 beneath dir_fd, no magic links. */
int app_openat_beneath(int dir_fd, const char *path, int flags, bool no_symlinks);

/* The layout directory <images_dir>/<name> (O_RDONLY|O_DIRECTORY); IMAGE_NOT_FOUND naming label when absent. */
int app_layout_open(const char *images_dir, const char *name, const char *label, int *ret_fd, struct na_error *err);
/* index.json of a layout, parsed and checked (schemaVersion 2, manifests array); IMAGE_NOT_FOUND when absent. */
int app_layout_read_index(int layout_fd, const char *label, json_t **ret, struct na_error *err);
/* blobs/sha256/<hex> opened O_RDONLY; IMAGE_NOT_FOUND when absent. */
int app_layout_open_blob(int layout_fd, const char *label, const char *digest, int *ret_fd, struct na_error *err);
/* A JSON blob of the given size (at most APP_IMAGE_JSON_MAX), verified against digest, parsed. */
int app_layout_read_json_blob(int layout_fd, const char *label, const char *digest, uint64_t size, json_t **ret,
                              struct na_error *err);
/* DRIVER_ERROR "<label>: blob <digest> does not match its digest" with details.reason; returns -EBADMSG. */
int app_blob_mismatch(struct na_error *err, const char *label, const char *digest, const char *why);

/* A descriptor's digest, size and mediaType after checking them (mediaType may be NULL when absent). */
int app_descriptor_parse(json_t *desc, const char *label, const char **ret_digest, uint64_t *ret_size,
                         const char **ret_media_type, struct na_error *err);

/*
 * Resolve one descriptor of index.json (a manifest, or an image index whose
 * linux/amd64 manifest is taken) into *ret, verifying as app_image_resolve does.
 * With ret_blobs (a JSON object), every digest the descriptor reaches (the index,
 * all its manifests, configs and layers) is added as a key, whatever the platform.
 */
int app_image_resolve_descriptor(int layout_fd, const char *label, json_t *desc, bool verify_layers,
                                 struct app_image *ret, json_t *ret_blobs, struct na_error *err);

/*
 * Call fn for every layout under images_dir (a directory holding oci-layout and
 * index.json; its name is the path below images_dir), in name order, never
 * following symbolic links; layouts below a layout are found too (its blobs/ is
 * not searched). A non-zero return of fn stops the walk and is returned.
 */
int app_layouts_walk(const char *images_dir, int (*fn)(void *userdata, const char *name, int layout_fd, struct na_error *err),
                     void *userdata, struct na_error *err);

/* For _cleanup_: app_image_clear of a pointer that TAKE_PTR may empty. */
static inline void app_image_clearp(struct app_image **p)
{
        if (*p)
                app_image_clear(*p);
}

/*
 * Remove <cache_dir>/<hex> (an unpacked root) under its digest's lock; the rootfs is
 * renamed away first so a crash never leaves half of it looking complete.
 */
int app_image_cache_remove(const char *cache_dir, const char *hex, struct na_error *err);
