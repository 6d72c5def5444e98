/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Live consoles' params and frames (proto/console.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/app-internal.h"
#include "proto/console.h"
#include "proto/decode.h"
#include "proto/text.h"

const char *const proto_console_modes[] = { "vps-serial", "vps-vnc", "app", "files", NULL };

static int session_field(json_t *params, char *out, struct na_error *err)
{
        const char *s = NULL;
        int r = proto_string(params, NULL, "sessionId", PROTO_REQUIRED, 1, PROTO_CONSOLE_SESSION_MAX, &s, err);
        if (r != PROTO_PRESENT)
                return -EINVAL;
        size_t n = strlen(s);
        if (n > PROTO_CONSOLE_SESSION_MAX)
                return na_error_field(err, "sessionId", "at most %d characters", PROTO_CONSOLE_SESSION_MAX);
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_' || c == '.'))
                        return na_error_field(err, "sessionId", "only letters, digits, '-', '_' and '.'");
        }
        memcpy(out, s, n + 1);
        return 0;
}

void proto_console_open_free(struct proto_console_open *p)
{
        if (p)
                explicit_bzero(p->token, sizeof(p->token));
        free(p);
}

int proto_console_open_decode(json_t *params, struct proto_console_open **ret, struct na_error *err)
{
        struct proto_console_open *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "console.open params");
        bool ok = session_field(params, p->session_id, err) >= 0;
        const char *url = NULL, *token = NULL;
        int mode = 0;
        p->idle_sec = PROTO_CONSOLE_IDLE_DEFAULT;
        if (proto_string(params, NULL, "url", PROTO_REQUIRED, 1, PROTO_CONSOLE_URL_MAX, &url, err) == PROTO_PRESENT) {
                if (strlen(url) > PROTO_CONSOLE_URL_MAX)
                        ok &= na_error_field(err, "url", "at most %d bytes", PROTO_CONSOLE_URL_MAX) >= 0;
                else if (strncasecmp(url, "wss://", 6) != 0 && strncasecmp(url, "ws://", 5) != 0)
                        ok &= na_error_field(err, "url", "must be a wss:// URL") >= 0;
                else
                        memcpy(p->url, url, strlen(url) + 1);
        } else
                ok = false;
        if (proto_string(params, NULL, "token", PROTO_REQUIRED, 1, PROTO_CONSOLE_TOKEN_MAX, &token, err) == PROTO_PRESENT) {
                size_t n = strlen(token);
                bool printable = n <= PROTO_CONSOLE_TOKEN_MAX;
                for (size_t i = 0; printable && i < n; i++)
                        printable = token[i] > 0x20 && token[i] < 0x7f;
                if (!printable)
                        ok &= na_error_field(err, "token", "printable ASCII without spaces, at most %d bytes",
                                             PROTO_CONSOLE_TOKEN_MAX) >= 0;
                else
                        memcpy(p->token, token, n + 1);
        } else
                ok = false;
        ok &= proto_enum(params, NULL, "mode", PROTO_REQUIRED, proto_console_modes, &mode, err) > 0;
        ok &= proto_int(params, NULL, "idleSec", 0, PROTO_CONSOLE_IDLE_MIN, PROTO_CONSOLE_IDLE_MAX, &p->idle_sec, err) >= 0;
        /* path: mode files only, with the files kinds' rules (proto/app-files.h). */
        json_t *jpath = json_object_get(params, "path");
        if (ok && mode == PROTO_CONSOLE_FILES) {
                const char *path = NULL;
                if (proto_app_files_path_field(params, NULL, "path", PROTO_REQUIRED, &path, err) != PROTO_PRESENT)
                        ok = false;
                else if (strlen(path) > PROTO_APP_FILES_PATH_MAX)
                        ok &= na_error_field(err, "path", "at most %d bytes", PROTO_APP_FILES_PATH_MAX) >= 0;
                else
                        memcpy(p->path, path, strlen(path) + 1);
        } else if (ok && jpath)
                ok &= na_error_field(err, "path", "only for mode files") >= 0;
        if (!ok || na_error_is_set(err)) {
                proto_console_open_free(p);
                return -EINVAL;
        }
        p->mode = (enum proto_console_mode)mode;
        *ret = p;
        return 0;
}

void proto_console_close_free(struct proto_console_close *p)
{
        free(p);
}

int proto_console_close_decode(json_t *params, struct proto_console_close **ret, struct na_error *err)
{
        struct proto_console_close *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "console.close params");
        if (session_field(params, p->session_id, err) < 0) {
                free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

json_t *proto_console_opened_encode(const char *session_id, int64_t opened_at_ms)
{
        char at[64];
        na_format_time_ms((uint64_t)opened_at_ms, at, sizeof(at));
        return json_pack("{s:s, s:s}", "sessionId", session_id, "openedAt", at);
}

static const char *const input_types[] = { "line", "power", NULL };

int proto_console_input_decode(const char *text, size_t len, struct proto_console_input *ret, struct na_error *err)
{
        json_error_t jerr;
        _cleanup_json_ json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!o || !json_is_object(o))
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "a frame must be a JSON object: %s",
                                    o ? "wrong type" : jerr.text);
        int type = 0;
        if (proto_enum(o, NULL, "type", PROTO_REQUIRED, input_types, &type, err) != PROTO_PRESENT)
                return -EINVAL;
        memset(ret, 0, sizeof(*ret));
        ret->type = (enum proto_console_input_type)type;
        if (ret->type == PROTO_CONSOLE_INPUT_LINE) {
                const char *line = NULL;
                size_t n = 0;
                if (proto_app_line_field(o, NULL, "line", PROTO_REQUIRED, 0, &line, &n, err) < 0 || !line)
                        return -EINVAL;
                memcpy(ret->line, line, n);
                ret->line[n] = 0;
                ret->len = n;
                return 0;
        }
        int action = 0;
        if (proto_enum(o, NULL, "action", PROTO_REQUIRED, proto_app_power_actions, &action, err) != PROTO_PRESENT)
                return -EINVAL;
        ret->action = (enum proto_app_power_action)action;
        return 0;
}

char *proto_console_line_text(int64_t seq, int64_t ts_ms, const char *stream, const char *text, size_t len)
{
        char at[64];
        na_format_time_ms((uint64_t)ts_ms, at, sizeof(at));
        _cleanup_json_ json_t *o = json_pack("{s:I, s:s, s:s, s:o}", "seq", (json_int_t)seq, "ts", at, "stream", stream,
                                             "text", proto_text_json(text, len));
        return o ? json_dumps(o, JSON_COMPACT) : NULL;
}

/* ---- mode files ---- */

void proto_console_files_write_clear(struct proto_console_files_write *w)
{
        if (!w)
                return;
        free(w->content);
        memset(w, 0, sizeof(*w));
}

int proto_console_files_write_decode(const char *text, size_t len, struct proto_console_files_write *ret,
                                     struct na_error *err)
{
        static const char *const types[] = { "write", NULL };
        json_error_t jerr;
        _cleanup_json_ json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
        if (!o || !json_is_object(o))
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "a frame must be a JSON object: %s",
                                    o ? "wrong type" : jerr.text);
        int type = 0;
        if (proto_enum(o, NULL, "type", PROTO_REQUIRED, types, &type, err) != PROTO_PRESENT)
                return -EINVAL;
        memset(ret, 0, sizeof(*ret));
        json_t *base = json_object_get(o, "baseVersion");
        if (!base)
                return na_error_field(err, "baseVersion", "required: the version the content is based on, or null "
                                                          "for a file that does not exist");
        if (json_is_string(base)) {
                if (json_string_length(base) < 1 || json_string_length(base) > PROTO_CONSOLE_VERSION_MAX)
                        return na_error_field(err, "baseVersion", "1..%d characters", PROTO_CONSOLE_VERSION_MAX);
                memcpy(ret->base_version, json_string_value(base), json_string_length(base) + 1);
                ret->has_base = true;
        } else if (!json_is_null(base))
                return na_error_field(err, "baseVersion", "a version string or null");
        json_t *content = json_object_get(o, "content");
        if (!json_is_string(content))
                return na_error_field(err, "content", content ? "must be a string" : "required");
        size_t n = json_string_length(content);
        if (n > PROTO_APP_FILES_WRITE_MAX) {
                na_error_set(err, EFBIG, NA_E_VALIDATION, "content: %zu bytes; a write is at most %u bytes", n,
                             PROTO_APP_FILES_WRITE_MAX);
                na_error_detail(err, "content", json_pack("{s:[s]}", "_errors", "too large"));
                return -EFBIG;
        }
        if (!(ret->content = malloc(n + 1)))
                return na_error_sys(err, ENOMEM, "write frame");
        memcpy(ret->content, json_string_value(content), n);
        ret->content[n] = 0;
        ret->len = n;
        return 0;
}

static char *dump(json_t *o)
{
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return t;
}

char *proto_console_file_text(const char *type, const char *path, const char *version, uint64_t bytes,
                              const char *content, size_t len, bool binary)
{
        json_t *o = json_pack("{s:s, s:o, s:I}", "type", type, "version", version ? json_string(version) : json_null(),
                              "bytes", (json_int_t)bytes);
        if (o && path)
                json_object_set_new(o, "path", json_string(path));
        if (o && binary)
                json_object_set_new(o, "binary", json_true());
        else if (o && content)
                json_object_set_new(o, "content", json_stringn(content, len));
        return dump(o);
}

char *proto_console_gone_text(const char *path)
{
        return dump(json_pack("{s:s, s:s}", "type", "gone", "path", path));
}

char *proto_console_written_text(const char *version, uint64_t bytes)
{
        return dump(json_pack("{s:s, s:s, s:I}", "type", "written", "version", version, "bytes", (json_int_t)bytes));
}

char *proto_console_error_text(const char *code, const char *message, const char *field)
{
        json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "error", message);
        if (o && field)
                json_object_set_new(o, "field", json_string(field));
        return dump(o);
}
