/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Field readers shared by the app decoders (proto/app-deploy.c, proto/app-params.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/app-image-ref.h"

struct proto_app_template;
struct proto_app_plan;

/* An exec-form command at prefix.key: 1..100 items of 1..1000 characters; returns as proto_strv. */
int proto_app_command_field(json_t *obj, const char *prefix, const char *key, unsigned flags, char ***out,
                            struct na_error *err);
/* A required image reference at prefix.key; returns as proto_string (PROTO_PRESENT when parsed). */
int proto_app_image_field(json_t *obj, const char *prefix, const char *key, struct proto_image_ref *out,
                          struct na_error *err);
/* A one-line text at path of at most PROTO_APP_LINE_MAX bytes, no NUL, CR or LF; min_bytes 0 or 1. */
int proto_app_line_field(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_bytes,
                         const char **out, size_t *out_len, struct na_error *err);
/* cpuCores from thousandths: an integer when whole, else a real. */
json_t *proto_app_cpu_json(int64_t millis);
/* app.deploy's parts, shared with app.update (proto/app-update.c): params.template and
 * params.plan (required; false with the problems in err), and a required free text
 * (name, version: 1..max characters, no control characters). The template's env is
 * allocated even when it fails (free it with proto_strv_free, and its command). */
bool proto_app_template_decode(json_t *params, struct proto_app_template *out, struct na_error *err);
bool proto_app_plan_decode(json_t *params, struct proto_app_plan *out, struct na_error *err);
bool proto_app_text_field(json_t *obj, const char *key, size_t max_chars, const char **out, struct na_error *err);
