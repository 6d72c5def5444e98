/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Pulling app images from a registry (OCI Distribution API v2) into the node's image
 * store: <images_dir>/<name>/ as an OCI image layout (oci-layout, index.json,
 * blobs/sha256/<hex>), the same layout `skopeo copy docker://… oci:<dir>:<tag>` writes.
 *
 * Blocking (libcurl's easy interface): call it from a worker thread, never from the
 * event loop, after the program's curl_global_init(). Thread-safe: one pull shares
 * nothing with another. TLS is always verified; plain http only to a loopback host,
 * only with allow_insecure_http, and a redirect never goes from https to http.
 * Anonymous first; a 401 is answered with a bearer token from the challenge's realm
 * (basic credentials sent to the realm when configured) or with basic credentials;
 * credentials never go to another origin (the storage a blob GET redirects to).
 * Manifests, the config and the layers are stored exactly as served, each verified
 * against its digest while it streams to a temporary file; a dropped connection is
 * resumed with a Range request (restarted when the server ignores Range), up to 6
 * attempts with backoff. An OCI index or a Docker manifest list is resolved to the
 * node's platform (linux/amd64 on x86-64) and only that image is stored, with the
 * index blob itself. Finally index.json gets the entry for the tag (annotation
 * org.opencontainers.image.ref.name) naming the platform's manifest, as skopeo
 * writes it; a digest reference gets an entry without annotations for what the
 * digest names (the index, when it names one), so "<name>@<digest>" resolves with
 * app_image_resolve(). Pulls of one layout serialize on an flock of its directory
 * (the lock app_image_layout_lock() takes). When a pull fails, the blobs it wrote are
 * removed again, and so is the layout directory when the pull created it: nothing
 * half-made stays.
 *
 *   struct app_registry_options o = {.url = "https://registry.example.net"};
 *   char digest[72];
 *   uint64_t bytes;
 *   if (app_registry_pull(&o, &ref, "/var/lib/nodeagent/images", &progress, digest, &bytes, &err) < 0)
 *           ... err.code: IMAGE_NOT_FOUND (404, MANIFEST_UNKNOWN, NAME_UNKNOWN),
 *               VALIDATION_ERROR (options), DRIVER_ERROR with details.reason
 *               ("unauthorized", "tls", "network", "digest-mismatch", "bad-manifest",
 *               "unsupported-media-type", "no-platform", "blob-unknown", "http-status",
 *               "bad-layout", "image-too-large"), INTERNAL_ERROR (local I/O), or whatever
 *               progress->checkpoint said (a stopped job).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"
#include "proto/app-image-ref.h"

struct app_registry_options {
        const char *url;                 /* [apps] registry: "https://registry.example.net", a path prefix is allowed */
        const char *ca_file;             /* [apps] registry_ca_file; NULL: the system's bundle */
        const char *username, *password; /* optional: basic auth, also sent to a token realm */
        bool allow_insecure_http;        /* http:// only to a loopback host, and only with this */
        /* The most one pull may download (manifest, config and layers, as the manifest
         * states them; [apps] image_pull_max_mb); 0: APP_REGISTRY_MAX_BYTES_DEFAULT. A
         * larger image is refused before a blob is fetched, and each blob stops at the
         * size its descriptor states: DRIVER_ERROR, details.reason "image-too-large",
         * errnum EFBIG. */
        uint64_t max_bytes;
};
#define APP_REGISTRY_MAX_BYTES_DEFAULT (4ull << 30)

/* The stage name progress reports use; percent is by bytes, message "12.3 of 40.0 MB". */
#define APP_REGISTRY_STAGE "pulling-image"

/*
 * Pull ref (by tag or by digest) from the registry into <images_dir>/<ref->name>/.
 * On success ret_manifest_digest holds "sha256:<hex>" of the image manifest that
 * index.json now names (the platform's manifest when the reference was an index) and
 * ret_bytes the image's size (manifest + config + layers as the manifest states them).
 * Either out-parameter may be NULL. Blobs already present with the right content are
 * not downloaded again. images_dir is created when missing.
 */
int app_registry_pull(const struct app_registry_options *o, const struct proto_image_ref *ref, const char *images_dir,
                      const struct na_progress *progress, char ret_manifest_digest[72], uint64_t *ret_bytes,
                      struct na_error *err);
