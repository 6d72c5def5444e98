/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live consoles (AGENT-API 4.3): the params of console.open and console.close, the
 * result of console.open, and the text frames an app console exchanges with the
 * relay. JSON in, validated C structs out (VALIDATION_ERROR on the exact field); no I/O.
 *
 *   struct proto_console_open *o;  proto_console_open_decode(params, &o, &err);
 *   struct proto_console_input in; proto_console_input_decode(text, len, &in, &err);
 *   json_t *line = proto_console_line_encode(seq, ts_ms, "stdout", text, len);
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "proto/app-files.h"
#include "proto/app-params.h"

#define PROTO_CONSOLE_SESSION_MAX 128  /* sessionId: 1..128 of [A-Za-z0-9._-] */
#define PROTO_CONSOLE_URL_MAX 2048
#define PROTO_CONSOLE_TOKEN_MAX 4096   /* printable ASCII, no space */
#define PROTO_CONSOLE_IDLE_DEFAULT 900
#define PROTO_CONSOLE_IDLE_MIN 1
#define PROTO_CONSOLE_IDLE_MAX 86400
#define PROTO_CONSOLE_FRAME_MAX (64 * 1024) /* a frame from the relay above this closes with 1009 */

enum proto_console_mode {
        PROTO_CONSOLE_VPS_SERIAL = 0,
        PROTO_CONSOLE_VPS_VNC,
        PROTO_CONSOLE_APP,
        PROTO_CONSOLE_FILES, /* live file editing: one file of an app's volume */
};
extern const char *const proto_console_modes[]; /* "vps-serial", "vps-vnc", "app", "files", NULL */

/* Mode files: a relay frame above this closes with 1009 (a write's content is at most
 * PROTO_APP_FILES_WRITE_MAX decoded bytes; JSON escapes take the rest). */
#define PROTO_CONSOLE_FILES_FRAME_MAX (6u << 20)
#define PROTO_CONSOLE_FILES_CONTENT_MAX 524288 /* a file frame carries content up to this; above: binary */

struct proto_console_open {
        char session_id[PROTO_CONSOLE_SESSION_MAX + 1];
        char url[PROTO_CONSOLE_URL_MAX + 1];
        char token[PROTO_CONSOLE_TOKEN_MAX + 1];
        enum proto_console_mode mode;
        int64_t idle_sec;
        char path[PROTO_APP_FILES_PATH_MAX + 1]; /* mode files only (required there, refused elsewhere) */
};
int proto_console_open_decode(json_t *params, struct proto_console_open **ret, struct na_error *err);
void proto_console_open_free(struct proto_console_open *p);

struct proto_console_close {
        char session_id[PROTO_CONSOLE_SESSION_MAX + 1];
};
int proto_console_close_decode(json_t *params, struct proto_console_close **ret, struct na_error *err);
void proto_console_close_free(struct proto_console_close *p);

/* {sessionId, openedAt}. */
json_t *proto_console_opened_encode(const char *session_id, int64_t opened_at_ms);

/* A text frame from the relay to an app console. */
enum proto_console_input_type { PROTO_CONSOLE_INPUT_LINE, PROTO_CONSOLE_INPUT_POWER };
struct proto_console_input {
        enum proto_console_input_type type;
        char line[PROTO_APP_LINE_MAX + 1]; /* LINE */
        size_t len;
        enum proto_app_power_action action; /* POWER */
};
/* {"type":"line","line":…} or {"type":"power","action":…}; anything else is a
 * VALIDATION_ERROR whose message says what is wrong (for a system line back). */
int proto_console_input_decode(const char *text, size_t len, struct proto_console_input *ret, struct na_error *err);

/* The text of an app console output frame: {"seq","ts","stream","text"} (newly allocated). */
char *proto_console_line_text(int64_t seq, int64_t ts_ms, const char *stream, const char *text, size_t len);

/*
 * Mode files (live file editing). A text frame from the relay:
 * {"type":"write","baseVersion":"<version>"|null,"content":"<text>"}; baseVersion null
 * means "the file does not exist" (it is created only if it still does not). content is
 * at most PROTO_APP_FILES_WRITE_MAX bytes of UTF-8. Anything else is a VALIDATION_ERROR
 * (code PROTO_CONSOLE_FILES_TOO_LARGE's message for the size) for an error frame back.
 */
#define PROTO_CONSOLE_VERSION_MAX 96
struct proto_console_files_write {
        bool has_base;                               /* false: baseVersion null */
        char base_version[PROTO_CONSOLE_VERSION_MAX + 1];
        char *content;                               /* owned, NUL-terminated (may hold NULs: use len) */
        size_t len;
};
int proto_console_files_write_decode(const char *text, size_t len, struct proto_console_files_write *ret,
                                     struct na_error *err);
void proto_console_files_write_clear(struct proto_console_files_write *w);

/* Frames to the relay (newly allocated text, NULL when out of memory):
 *   {"type":"file","path","version","bytes","content"} or with "binary":true and no content;
 *   {"type":"gone","path"};  {"type":"written","version"};
 *   {"type":"conflict","version","bytes","content"|"binary":true} (version null: the file is gone);
 *   {"type":"error","code","error","field"?}. */
char *proto_console_file_text(const char *type, const char *path, const char *version, uint64_t bytes,
                              const char *content, size_t len, bool binary);
char *proto_console_gone_text(const char *path);
char *proto_console_written_text(const char *version, uint64_t bytes);
char *proto_console_error_text(const char *code, const char *message, const char *field);
