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

const char *const proto_console_modes[] = { "vps-serial", "vps-vnc", "app", NULL };

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
