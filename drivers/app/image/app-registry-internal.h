/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The parts of app_registry_pull (app-registry.c), shared between its files only:
 *   app-registry-http.c     one GET over libcurl: URL policy, manual redirects (https
 *                           only, credentials only to their own origin), headers, sinks
 *   app-registry-auth.c     the registry's GET with the 401 dance (bearer token, basic)
 *   app-registry-layout.c   the layout directory under images_dir, blobs from memory,
 *                           present-blob checks, clean-up of a failed pull, index.json
 *   app-registry-blob.c     streaming a blob to a temporary file with resume, progress
 *   app-registry-manifest.c manifests and indexes: parse, validate, choose a platform
 */
#pragma once

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "drivers/app/image/app-registry.h"

#define REG_URL_MAX 4096
#define REG_MAX_CHALLENGES 4
#define REG_HEX_LEN 64

/* One connection cache and the credentials that work, for the whole pull. */
struct reg_client {
        const struct app_registry_options *opt;
        CURL *easy;
        char base[REG_URL_MAX];   /* the options' url without trailing '/' */
        char origin[REG_URL_MAX]; /* scheme://host:port of base */
        char *auth;               /* "Authorization: ..." for the registry's origin, or NULL */
        char image[400];          /* the reference as given, for messages */
        char what[800];           /* "registry <url>: image <ref>", the prefix of every message */
        const struct na_progress *progress; /* its checkpoint is asked before every retry */
};

/* What one response said (the last hop's, after redirects). */
struct reg_response {
        long status;
        char content_type[256];
        char docker_digest[128];
        char content_range[128];
        char challenges[REG_MAX_CHALLENGES][1024]; /* WWW-Authenticate values */
        size_t n_challenges;
        char *body; /* a non-2xx body (at most 64 KiB), or a 2xx body without a sink */
        size_t len;
};

void reg_response_done(struct reg_response *r);

/* Where a 2xx body goes instead of memory. */
struct reg_sink {
        /* Once at the end of a 2xx response's headers; < 0 aborts the transfer. */
        int (*begin)(void *userdata, const struct reg_response *resp, struct na_error *err);
        int (*write)(void *userdata, const void *data, size_t len, struct na_error *err);
        void *userdata;
};

struct reg_get_args {
        const char *url;
        const char *const *headers; /* extra request headers, NULL-terminated; may be NULL */
        const char *auth;           /* "Authorization: ..." sent only while a hop stays on auth_origin */
        const char *auth_origin;
        const struct reg_sink *sink; /* NULL: a 2xx body goes to resp->body */
        size_t max_body;             /* bound of a 2xx body in memory */
        long timeout_sec;            /* whole transfer; 0: none (stalls end after 60 s anyway) */
};

int reg_client_init(struct reg_client *c, const struct app_registry_options *o, const struct proto_image_ref *ref,
                    struct na_error *err);
void reg_client_done(struct reg_client *c);

/* "scheme://host:port" of url into buf; whether the URL may be used (https, or http to loopback when allowed). */
int reg_url_origin(const char *url, char *buf, size_t len, bool *ret_loopback, bool *ret_https);
int reg_url_check(const struct reg_client *c, const char *url, const char *purpose, struct na_error *err);

/*
 * One GET, following up to 5 redirects by hand. Returns 0 when a response came (any
 * status, in *resp), < 0 with err set when there was none (err's details.reason "tls"
 * or "network"; *ret_code says which curl error, so callers can decide to retry), or
 * when the sink failed (its error).
 */
int reg_get(struct reg_client *c, const struct reg_get_args *a, struct reg_response *resp, CURLcode *ret_code,
            struct na_error *err);
bool reg_curl_retryable(CURLcode code);

/*
 * reg_get on the registry itself, answering a 401 once (per call) with what its
 * challenge asks for. A 401 that remains is returned as a response like any other.
 */
int reg_registry_get(struct reg_client *c, struct reg_get_args *a, struct reg_response *resp, CURLcode *ret_code,
                     struct na_error *err);

/* One WWW-Authenticate challenge: its scheme and the parameters a registry uses. */
struct reg_challenge {
        char scheme[32];
        char realm[1024], service[512], scope[1024];
};
/*
 * Parse the challenge at s (`Scheme k=v, k="v\"q", ...`; unknown parameters ignored,
 * long values cut); returns where the next challenge of the same header starts, or
 * NULL at the end. Never reads past the NUL, whatever s holds.
 */
const char *reg_challenge_parse(const char *s, struct reg_challenge *ch);

/* Fill err for a failed registry response: IMAGE_NOT_FOUND, unauthorized, http-status. */
int reg_response_error(const struct reg_client *c, const struct reg_response *resp, const char *what,
                       struct na_error *err);
/* DRIVER_ERROR "<registry>: <image>: ..." with details.reason. */
int reg_fail(const struct reg_client *c, const char *reason, struct na_error *err, const char *fmt, ...) _printf_(4, 5);

/* Sleep before retry n (0-based): 250 ms doubling, at most 4 s. */
void reg_backoff(unsigned n);

/* Progress of the pull by bytes, and the job's safe points. */
struct reg_progress {
        const struct na_progress *progress;
        uint64_t done, total;
        uint64_t since_tick;
        int last_percent;
};
int reg_progress_add(struct reg_progress *p, uint64_t n, bool force, struct na_error *err);

/* The image layout being filled. */
struct reg_layout {
        int dirfd;   /* <images_dir>/<name> */
        int blobsfd; /* its blobs/sha256 */
        char path[4096];
        char *created_dirs[PROTO_IMAGE_NAME_MAX / 2 + 4]; /* relative to images_dir, innermost last */
        size_t n_created;
        int rootfd; /* images_dir */
        char (*new_blobs)[REG_HEX_LEN + 1];
        size_t n_new, cap_new;
};

int reg_layout_open(const char *images_dir, const char *name, const struct na_progress *progress,
                    struct reg_layout *l, struct na_error *err);
/* Remove what this pull made (its new blobs, the directories it created). */
void reg_layout_abort(struct reg_layout *l);
void reg_layout_close(struct reg_layout *l);
/* 1: blobs/sha256/<hex> holds size bytes with that digest; 0: it does not (a wrong one is removed). */
int reg_layout_blob_present(struct reg_layout *l, const char *hex, uint64_t size, struct na_error *err);
int reg_layout_blob_store(struct reg_layout *l, const char *hex, const void *data, size_t len, struct na_error *err);
/* Remember hex as written by this pull (removed by reg_layout_abort). */
int reg_layout_blob_note(struct reg_layout *l, const char *hex, struct na_error *err);
/* A temporary file in blobs/sha256 (O_TMPFILE-like name ".tmp-..."), and its publication. */
int reg_layout_tmp_open(struct reg_layout *l, char name[64], struct na_error *err);
int reg_layout_tmp_publish(struct reg_layout *l, int fd, const char *tmpname, const char *hex, struct na_error *err);
/* oci-layout when missing; index.json with the entry for tag (or, tag NULL, for the digest). */
int reg_layout_finish(struct reg_layout *l, const char *media_type, const char *hex, uint64_t size, const char *tag,
                      struct na_error *err);

/* Fetch blobs/sha256/<hex> of size bytes unless present; progress counts its bytes. */
int reg_blob_fetch(struct reg_client *c, struct reg_layout *l, const char *hex, uint64_t size,
                   struct reg_progress *p, struct na_error *err);

/* A descriptor of a manifest (digest "sha256:<hex>", hex is its tail). */
struct reg_descriptor {
        char media_type[256];
        char hex[REG_HEX_LEN + 1];
        uint64_t size;
};

/* An image manifest: config and layers. */
struct reg_manifest {
        char media_type[256];
        struct reg_descriptor config;
        struct reg_descriptor *layers;
        size_t n_layers;
};
void reg_manifest_done(struct reg_manifest *m);

#define REG_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define REG_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define REG_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define REG_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

/* The media type of a manifest body (its mediaType, else content_type, else its shape). */
int reg_manifest_kind(const struct reg_client *c, const char *body, size_t len, const char *content_type,
                      char media_type[256], bool *ret_index, struct na_error *err);
int reg_manifest_parse(const struct reg_client *c, const char *body, size_t len, const char *media_type,
                       struct reg_manifest *m, struct na_error *err);
/* The platform's entry of an index / manifest list. */
int reg_index_choose(const struct reg_client *c, const char *body, size_t len, struct reg_descriptor *ret,
                     struct na_error *err);
/* "sha256:<64 lower-case hex>" → hex; false when d is anything else. */
bool reg_digest_hex(const char *d, char hex[REG_HEX_LEN + 1]);
