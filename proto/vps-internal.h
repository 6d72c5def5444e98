/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Field readers shared by the vps decoders (proto/vps-params.c, proto/vps-reinstall.c). */
#pragma once

#include <jansson.h>

#include "common/error.h"

/* Each returns what proto_string/proto_object return (< 0 invalid and recorded). */
int proto_vps_hostname_field(json_t *obj, const char *key, unsigned flags, const char **out, struct na_error *err);
int proto_vps_password_field(json_t *obj, const char *key, unsigned flags, const char **out, struct na_error *err);
int proto_vps_inputs_field(json_t *obj, const char *key, unsigned flags, json_t **out, struct na_error *err);
