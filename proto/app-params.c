/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Params decoders of app.power, app.command.set, app.console.send, app.output, image.pull and image.delete. */
#include "proto/app-params.h"

#include <stdio.h>
#include <string.h>

#include "proto/app-internal.h"
#include "proto/decode.h"

const char *const proto_app_power_actions[] = { "start", "stop", "restart", "kill", NULL };

int proto_app_command_field(json_t *obj, const char *prefix, const char *key, unsigned flags, char ***out,
                            struct na_error *err)
{
        return proto_strv(obj, prefix, key, flags, 1, PROTO_APP_COMMAND_ARGS_MAX, 1, PROTO_APP_COMMAND_ARG_MAX, out,
                          err);
}

int proto_app_image_field(json_t *obj, const char *prefix, const char *key, struct proto_image_ref *out,
                          struct na_error *err)
{
        const char *s = NULL;
        char path[64];
        memset(out, 0, sizeof(*out));
        int r = proto_string(obj, prefix, key, PROTO_REQUIRED, 1, PROTO_APP_IMAGE_REF_MAX, &s, err);
        if (r != PROTO_PRESENT)
                return r;
        r = proto_image_ref_parse(s, proto_path(path, sizeof(path), prefix, key), out, err);
        return r < 0 ? r : PROTO_PRESENT;
}

int proto_app_line_field(json_t *obj, const char *prefix, const char *key, unsigned flags, size_t min_bytes,
                         const char **out, size_t *out_len, struct na_error *err)
{
        json_t *v = json_object_get(obj, key);
        char path[64];
        proto_path(path, sizeof(path), prefix, key);
        if (!v || json_is_null(v)) {
                if (flags & PROTO_REQUIRED)
                        return na_error_field(err, path, v ? "must not be null" : "is required");
                return PROTO_ABSENT;
        }
        if (!json_is_string(v))
                return na_error_field(err, path, "must be a string");
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (strlen(s) != len)
                return na_error_field(err, path, "must not contain NUL characters");
        if (len > PROTO_APP_LINE_MAX)
                return na_error_field(err, path, "must be at most %d bytes (got %zu)", PROTO_APP_LINE_MAX, len);
        if (len < min_bytes)
                return na_error_field(err, path, "must not be empty");
        if (strpbrk(s, "\r\n"))
                return na_error_field(err, path, "must be one line: no CR or LF characters");
        *out = s;
        if (out_len)
                *out_len = len;
        return PROTO_PRESENT;
}

#define DUP_OUT(type, value, what)                                     \
        ({                                                             \
                type *_o = malloc(sizeof(type));                       \
                if (!_o)                                               \
                        return na_error_sys(err, ENOMEM, "%s", what);  \
                *_o = (value);                                         \
                *ret = _o;                                             \
                0;                                                     \
        })

void proto_app_power_free(struct proto_app_power *p)
{
        free(p);
}

int proto_app_power_decode(json_t *params, struct proto_app_power **ret, struct na_error *err)
{
        struct proto_app_power p = { .grace_sec = PROTO_APP_GRACE_DEFAULT };
        int action = 0;
        bool ok = proto_enum(params, NULL, "action", PROTO_REQUIRED, proto_app_power_actions, &action, err) > 0;
        ok &= proto_int(params, NULL, "graceSec", 0, 0, PROTO_APP_GRACE_MAX, &p.grace_sec, err) >= 0;
        if (!ok)
                return -EINVAL;
        p.action = (enum proto_app_power_action)action;
        return DUP_OUT(struct proto_app_power, p, "app.power params");
}

void proto_app_command_set_free(struct proto_app_command_set *p)
{
        if (!p)
                return;
        proto_strv_free(p->command);
        free(p);
}

int proto_app_command_set_decode(json_t *params, struct proto_app_command_set **ret, struct na_error *err)
{
        char **command = NULL;
        int r = proto_app_command_field(params, NULL, "command", PROTO_REQUIRED | PROTO_NULLABLE, &command, err);
        if (r < 0)
                return r;
        struct proto_app_command_set *p = malloc(sizeof(*p));
        if (!p) {
                proto_strv_free(command);
                return na_error_sys(err, ENOMEM, "app.command.set params");
        }
        p->command = command;
        *ret = p;
        return 0;
}

void proto_app_console_send_free(struct proto_app_console_send *p)
{
        free(p);
}

int proto_app_console_send_decode(json_t *params, struct proto_app_console_send **ret, struct na_error *err)
{
        const char *line = NULL;
        size_t len = 0;
        int r = proto_app_line_field(params, NULL, "line", PROTO_REQUIRED, 0, &line, &len, err);
        if (r < 0)
                return r;
        struct proto_app_console_send *p = malloc(sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.console.send params");
        memcpy(p->line, line, len);
        p->line[len] = '\0';
        p->len = len;
        *ret = p;
        return 0;
}

void proto_app_output_free(struct proto_app_output_query *p)
{
        free(p);
}

int proto_app_output_decode(json_t *params, struct proto_app_output_query **ret, struct na_error *err)
{
        struct proto_app_output_query p = { .since_seq = -1, .limit = PROTO_APP_OUTPUT_LIMIT_DEFAULT };
        bool ok = proto_int(params, NULL, "sinceSeq", 0, 0, INT64_MAX, &p.since_seq, err) >= 0;
        ok &= proto_int(params, NULL, "limit", 0, 1, PROTO_APP_OUTPUT_LIMIT_MAX, &p.limit, err) >= 0;
        if (!ok)
                return -EINVAL;
        return DUP_OUT(struct proto_app_output_query, p, "app.output params");
}

void proto_app_image_free(struct proto_app_image_params *p)
{
        free(p);
}

int proto_app_image_decode(json_t *params, struct proto_app_image_params **ret, struct na_error *err)
{
        struct proto_app_image_params p;
        int r = proto_app_image_field(params, NULL, "image", &p.ref, err);
        if (r < 0)
                return r;
        return DUP_OUT(struct proto_app_image_params, p, "image params");
}
