/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Image references of apps (AGENT-API 4.2): "<name>:<tag>" or "<name>@sha256:<hex>".
 * <name> is one or more components of lowercase letters, digits, '.', '_' and '-'
 * separated by '/', never "." or ".." as a component and never empty; it names the
 * OCI image layout <images_dir>/<name>/ and the repository in the registry. <tag> is
 * [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. The digest is "sha256:" and 64 lower-case hex.
 * No I/O: a pure parser, fuzzed with the params decoders.
 *
 *   struct proto_image_ref ref;
 *   if (proto_image_ref_parse("games/minecraft:1.20", "template.image", &ref, &err) < 0) ...
 *   ref.name = "games/minecraft", ref.tag = "1.20", ref.digest = ""
 */
#pragma once

#include "common/error.h"

#define PROTO_IMAGE_NAME_MAX 255
#define PROTO_IMAGE_TAG_MAX 128
#define PROTO_IMAGE_DIGEST_LEN 71 /* "sha256:" + 64 hex */

struct proto_image_ref {
        char name[PROTO_IMAGE_NAME_MAX + 1];
        char tag[PROTO_IMAGE_TAG_MAX + 1];       /* "" when given by digest */
        char digest[PROTO_IMAGE_DIGEST_LEN + 1]; /* "" when given by tag */
};

/*
 * Parse s into *ret. A malformed reference is a VALIDATION_ERROR on field (a path as
 * for na_error_field, e.g. "template.image"; NULL: the payload), saying what is wrong.
 */
int proto_image_ref_parse(const char *s, const char *field, struct proto_image_ref *ret, struct na_error *err);

/* "<name>:<tag>" or "<name>@<digest>" into buf (at least 400 bytes). */
const char *proto_image_ref_format(const struct proto_image_ref *ref, char *buf, size_t len);
