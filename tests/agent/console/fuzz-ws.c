/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for what a relay can send a console: the input is the byte
 * stream after the upgrade, fed to the WebSocket client's frame engine (agent/console/ws.c
 * over wslay) on a real loop through a socketpair whose relay end then closes. Every
 * text message also goes through the app console's frame decoder
 * (proto_console_input_decode) and the files session's (proto_console_files_write_decode:
 * accepted, content at most 4 MiB and NUL-terminated at its length). Contract: no crash, no leak, the session always ends
 * (on_closed exactly once, with a code in 1000..4999), a decoded frame is a line (no
 * NUL, CR or LF, at most 4096 bytes) or a power action, a refusal is VALIDATION_ERROR.
 * Run under CTest by tests/proto/fuzz-driver.c (corpus, then seeded mutations).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/console/ws-internal.h"
#include "agent/console/ws.h"
#include "proto/console.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

#define CHECK(cond, ...)                                                            \
        do {                                                                        \
                if (!(cond)) {                                                      \
                        fprintf(stderr, "fuzz-ws: contract broken: %s: ", #cond);  \
                        fprintf(stderr, __VA_ARGS__);                               \
                        fputc('\n', stderr);                                        \
                        abort();                                                    \
                }                                                                   \
        } while (0)

static unsigned long messages, lines, powers, refused, writes, closes[6];

struct run {
        struct loop *loop;
        unsigned closed;
};

static void on_message(void *userdata, enum ws_kind kind, const uint8_t *data, size_t len)
{
        (void)userdata;
        messages++;
        if (kind != WS_TEXT)
                return;
        struct proto_console_input in;
        struct na_error err = NA_ERROR_INIT;
        struct proto_console_files_write w = { 0 };
        if (proto_console_files_write_decode((const char *)data, len, &w, &err) < 0) {
                CHECK(err.code && strcmp(err.code, NA_E_VALIDATION) == 0, "write refused with %s", err.code);
                CHECK(!w.content, "a refused write kept its content");
                na_error_clear(&err);
        } else {
                CHECK(w.content && w.len <= PROTO_APP_FILES_WRITE_MAX && w.content[w.len] == 0, "write of %zu", w.len);
                CHECK(!w.has_base || w.base_version[0], "an empty baseVersion");
                writes++;
        }
        proto_console_files_write_clear(&w);
        if (proto_console_input_decode((const char *)data, len, &in, &err) < 0) {
                CHECK(err.code && strcmp(err.code, NA_E_VALIDATION) == 0, "refused with %s", err.code);
                refused++;
                na_error_clear(&err);
                return;
        }
        CHECK(!na_error_is_set(&err), "accepted with an error set");
        if (in.type == PROTO_CONSOLE_INPUT_LINE) {
                CHECK(in.len <= PROTO_APP_LINE_MAX && strlen(in.line) == in.len, "line length %zu", in.len);
                CHECK(!strpbrk(in.line, "\r\n"), "a line with CR or LF");
                lines++;
        } else {
                CHECK(in.type == PROTO_CONSOLE_INPUT_POWER && (unsigned)in.action < 4, "type %d", in.type);
                powers++;
        }
}

static void on_closed(void *userdata, uint16_t code, const char *reason)
{
        struct run *r = userdata;
        (void)reason;
        r->closed++;
        CHECK(code >= 1000 && code <= 4999, "close code %u", code);
        closes[code == 1000 ? 0 : code == 1002 ? 1 : code == 1006 ? 2 : code == 1007 ? 3 : code == 1009 ? 4 : 5]++;
        loop_quit(r->loop, 0);
}

static const struct ws_callbacks cbs = { .on_message = on_message, .on_closed = on_closed };

static void stuck(void *userdata)
{
        (void)userdata;
        CHECK(0, "the session did not end within 5 s");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct run r = { 0 };
        struct na_error err = NA_ERROR_INIT;
        CHECK(loop_new(&r.loop, &err) == 0, "loop_new: %s", err.message);
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0, "socketpair");
        shutdown(sv[1], SHUT_WR); /* the relay said its piece; it still takes what the agent says */
        struct ws_dialed *d = calloc(1, sizeof(*d));
        CHECK(d, "calloc");
        d->fd = sv[0];
        if (size) {
                d->extra = malloc(size);
                CHECK(d->extra, "malloc");
                memcpy(d->extra, data, size);
                d->extra_len = size;
        }
        struct ws *w = NULL;
        CHECK(ws_start(r.loop, d, &cbs, &r, 4096, &w, &err) == 0, "ws_start: %s", err.message);
        struct loop_timer *t = loop_timer_new(r.loop, stuck, NULL);
        loop_timer_arm_ms(t, 5000);
        if (!r.closed)
                loop_run(r.loop);
        CHECK(r.closed == 1, "on_closed called %u times", r.closed);
        ws_free(w);
        loop_timer_free(t);
        loop_free(r.loop);
        close(sv[1]);
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out,
                "fuzz-ws: %lu messages (%lu lines, %lu power actions, %lu writes, %lu refused); closes 1000:%lu "
                "1002:%lu 1006:%lu 1007:%lu 1009:%lu other:%lu\n",
                messages, lines, powers, writes, refused, closes[0], closes[1], closes[2], closes[3], closes[4], closes[5]);
        /* Every outcome reached, or the corpus has rotted. */
        return !lines + !powers + !writes + !refused + !closes[0] + !closes[1] + !closes[2] + !closes[3] + !closes[4];
}
