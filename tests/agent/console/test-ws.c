/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent/console/ws.h: the opening (URL rules, the RFC 6455 accept value, the answer head
 * check) and the frame engine on the loop against a hand-written relay on a
 * socketpair: text and binary messages, fragments joined, our frames masked, pings
 * answered, the relay's close answered, 1009 above the size limit, 1002 on garbage,
 * the connection lost.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/console/ws-internal.h"
#include "agent/console/ws.h"

/* ---- the opening ---- */

static void url_rules(void **state)
{
        (void)state;
        struct ws_url u;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(ws_url_parse("wss://relay.example.com/c/1?x=2", false, &u, "url", &err), 0);
        assert_true(u.tls);
        assert_string_equal(u.host, "relay.example.com");
        assert_string_equal(u.port, "443");
        assert_string_equal(u.path, "/c/1?x=2");
        assert_string_equal(u.host_header, "relay.example.com");
        assert_int_equal(ws_url_parse("wss://[::1]:8443", false, &u, "url", &err), 0);
        assert_string_equal(u.host, "::1");
        assert_string_equal(u.port, "8443");
        assert_string_equal(u.path, "/");
        assert_string_equal(u.host_header, "[::1]:8443");
        assert_int_equal(ws_url_parse("ws://127.0.0.1:9/r", true, &u, "url", &err), 0);
        assert_false(u.tls);

        static const char *const bad[] = {
                "https://relay/x", "ws://relay.example.com/x", "ws://127.0.0.1/x" /* insecure off */,
                "wss://", "wss://user@host/x", "wss://host:0/x", "wss://host:70000/", "wss://host/x#frag",
                "wss://ho st/x", "wss://host/\x01", "wss://[::1/x", "wss://host:12ab/",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int r = ws_url_parse(bad[i], i == 2 ? false : false, &u, "url", &err);
                assert_true(r < 0);
                assert_string_equal(err.code, NA_E_VALIDATION);
                na_error_clear(&err);
        }
        /* ws:// with allow_insecure, but not loopback. */
        assert_true(ws_url_parse("ws://10.0.0.1/x", true, &u, "url", &err) < 0);
        na_error_clear(&err);
}

/* console.open dials the controller's host or a relay of [consoles] relays, nothing else (issue 25). */
static void url_allowed(void **state)
{
        (void)state;
        struct ws_url u;
        struct na_error err = NA_ERROR_INIT;
        static const char *const ctl = "https://api.example.com:8443/agent/v1";
        static const char *const relays = "relay1.example.net, [2001:db8::7],Relay2.Example.net";
        static const char *const good[] = {
                "wss://api.example.com/relay/1", "wss://API.example.com:9443/r", "wss://relay1.example.net/x",
                "wss://relay2.example.net:444/x", "wss://[2001:db8::7]/x",
        };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                assert_int_equal(ws_url_parse(good[i], false, &u, "url", &err), 0);
                assert_int_equal(ws_url_allowed(&u, ctl, relays, "url", &err), 0);
        }
        static const char *const bad[] = {
                "wss://evil.example.com/relay", "wss://api.example.com.evil.net/x", "wss://relay1.example.ne/x",
                "wss://example.com/x", "wss://127.0.0.1/x", "wss://[2001:db8::8]/x", "wss://relay1/x",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(ws_url_parse(bad[i], false, &u, "url", &err), 0);
                assert_true(ws_url_allowed(&u, ctl, relays, "url", &err) < 0);
                assert_string_equal(err.code, NA_E_VALIDATION);
                assert_non_null(json_object_get(err.details, "url"));
                na_error_clear(&err);
        }
        /* No relays configured: the controller's host only; no controller URL: nothing. */
        assert_int_equal(ws_url_parse("wss://relay1.example.net/x", false, &u, "url", &err), 0);
        assert_true(ws_url_allowed(&u, ctl, NULL, "url", &err) < 0);
        na_error_clear(&err);
        assert_int_equal(ws_url_parse("wss://api.example.com/x", false, &u, "url", &err), 0);
        assert_true(ws_url_allowed(&u, NULL, "", "url", &err) < 0);
        na_error_clear(&err);
}

static void accept_value(void **state)
{
        (void)state;
        char out[29];
        ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==", out); /* RFC 6455 1.3 */
        assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        char k1[25], k2[25];
        assert_int_equal(ws_key_new(k1), 0);
        assert_int_equal(ws_key_new(k2), 0);
        assert_int_equal(strlen(k1), 24);
        assert_string_not_equal(k1, k2);
}

static void answer_head(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        int status;
        const char *key = "dGhlIHNhbXBsZSBub25jZQ==";
        const char *good = "HTTP/1.1 101 Switching Protocols\r\nupgrade:  WebSocket\r\nConnection: keep-alive, Upgrade\r\n"
                           "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        assert_int_equal(ws_check_response(good, strlen(good), key, &status, &err), 0);
        assert_int_equal(status, 101);

        static const char *const bad[] = {
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
                "SSH-2.0-OpenSSH\r\n\r\n",
                "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_true(ws_check_response(bad[i], strlen(bad[i]), key, &status, &err) < 0);
                assert_string_equal(err.code, NA_E_DRIVER);
                if (i == 0)
                        assert_int_equal(status, 401);
                na_error_clear(&err);
        }
}

/* ---- the frame engine against a hand-written relay ---- */

struct rig {
        struct loop *loop;
        struct ws *ws;
        int peer;
        struct loop_timer *watchdog;
        char texts[8][256];
        size_t ntexts;
        size_t binary_len;
        bool closed;
        uint16_t code;
        char reason[128];
};

static void on_message(void *userdata, enum ws_kind kind, const uint8_t *data, size_t len)
{
        struct rig *r = userdata;
        if (kind == WS_BINARY)
                r->binary_len = len;
        else if (r->ntexts < 8)
                snprintf(r->texts[r->ntexts++], sizeof(r->texts[0]), "%.*s", (int)len, (const char *)data);
        loop_quit(r->loop, 1);
}

static void on_closed(void *userdata, uint16_t code, const char *reason)
{
        struct rig *r = userdata;
        r->closed = true;
        r->code = code;
        snprintf(r->reason, sizeof(r->reason), "%s", reason);
        loop_quit(r->loop, 2);
}

static const struct ws_callbacks cbs = { .on_message = on_message, .on_closed = on_closed };

static void watchdog(void *userdata)
{
        loop_quit(((struct rig *)userdata)->loop, -99);
}

static struct rig *rig_new(size_t max_msg)
{
        struct rig *r = calloc(1, sizeof(*r));
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(loop_new(&r->loop, &err), 0);
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        fcntl(sv[0], F_SETFL, O_NONBLOCK);
        r->peer = sv[1];
        struct ws_dialed *d = calloc(1, sizeof(*d));
        d->fd = sv[0];
        snprintf(d->peer, sizeof(d->peer), "socketpair");
        assert_int_equal(ws_start(r->loop, d, &cbs, r, max_msg, &r->ws, &err), 0);
        r->watchdog = loop_timer_new(r->loop, watchdog, r);
        loop_timer_arm_ms(r->watchdog, 10000);
        return r;
}

static void rig_free(struct rig *r)
{
        ws_free(r->ws);
        loop_timer_free(r->watchdog);
        loop_free(r->loop);
        if (r->peer >= 0)
                close(r->peer);
        free(r);
}

/* An unmasked server frame. */
static void peer_frame(struct rig *r, bool fin, int op, const void *data, size_t len)
{
        uint8_t head[10];
        size_t h = 0;
        head[h++] = (uint8_t)((fin ? 0x80 : 0) | op);
        if (len < 126)
                head[h++] = (uint8_t)len;
        else {
                head[h++] = 126;
                head[h++] = (uint8_t)(len >> 8);
                head[h++] = (uint8_t)len;
        }
        assert_int_equal(write(r->peer, head, h), (ssize_t)h);
        if (len)
                assert_int_equal(write(r->peer, data, len), (ssize_t)len);
}

/* Read one client frame from the peer side: must be masked; payload unmasked into buf. */
static int peer_read(struct rig *r, uint8_t *buf, size_t cap, size_t *len)
{
        uint8_t h[2], mask[4];
        assert_int_equal(read(r->peer, h, 2), 2);
        assert_true(h[1] & 0x80); /* clients mask */
        size_t n = h[1] & 0x7f;
        assert_true(n < 126);
        assert_int_equal(read(r->peer, mask, 4), 4);
        assert_true(n <= cap);
        if (n)
                assert_int_equal(read(r->peer, buf, n), (ssize_t)n);
        for (size_t i = 0; i < n; i++)
                buf[i] ^= mask[i % 4];
        *len = n;
        return h[0] & 0x0f;
}

static void messages_and_fragments(void **state)
{
        (void)state;
        struct rig *r = rig_new(1024);
        peer_frame(r, true, 1, "hello", 5);
        assert_int_equal(loop_run(r->loop), 1);
        assert_string_equal(r->texts[0], "hello");
        peer_frame(r, false, 1, "fr", 2);
        peer_frame(r, true, 9, "p", 1); /* a ping between fragments */
        peer_frame(r, false, 0, "ag", 2);
        peer_frame(r, true, 0, "ments", 5);
        assert_int_equal(loop_run(r->loop), 1);
        assert_string_equal(r->texts[1], "fragments");
        uint8_t buf[64];
        size_t n;
        assert_int_equal(peer_read(r, buf, sizeof(buf), &n), 10); /* the pong */
        assert_int_equal(n, 1);
        assert_int_equal(buf[0], 'p');
        assert_int_equal(ws_send(r->ws, WS_TEXT, "back", 4), 0);
        loop_timer_arm_ms(r->watchdog, 200);
        assert_int_equal(loop_run(r->loop), -99); /* let it write */
        assert_int_equal(peer_read(r, buf, sizeof(buf), &n), 1);
        assert_memory_equal(buf, "back", 4);
        /* The relay closes: the agent answers with the same code. */
        peer_frame(r, true, 8, "\x0f\xa0see you", 9);
        loop_timer_arm_ms(r->watchdog, 10000);
        assert_int_equal(loop_run(r->loop), 2);
        assert_int_equal(r->code, 4000);
        assert_string_equal(r->reason, "see you");
        assert_int_equal(peer_read(r, buf, sizeof(buf), &n), 8);
        assert_true(n >= 2); /* wslay echoes the reason too */
        assert_int_equal(buf[0] << 8 | buf[1], 4000);
        rig_free(r);
}

static void too_big(void **state)
{
        (void)state;
        struct rig *r = rig_new(100);
        char big[200];
        memset(big, 'x', sizeof(big));
        peer_frame(r, true, 2, big, sizeof(big));
        /* The relay never answers the close: the agent gives up after its grace. */
        assert_int_equal(loop_run(r->loop), 2);
        assert_int_equal(r->code, 1009);
        uint8_t buf[64];
        size_t n;
        assert_int_equal(peer_read(r, buf, sizeof(buf), &n), 8);
        assert_int_equal(buf[0] << 8 | buf[1], 1009);
        rig_free(r);
}

static void garbage(void **state)
{
        (void)state;
        struct rig *r = rig_new(1024);
        /* A ping in pieces (FIN clear on a control frame), then a masked server frame. */
        uint8_t g[] = { 0x09, 0x01, 'x' };
        assert_int_equal(write(r->peer, g, sizeof(g)), (ssize_t)sizeof(g));
        assert_int_equal(loop_run(r->loop), 2);
        assert_int_equal(r->code, 1002);
        uint8_t buf[64];
        size_t n;
        assert_int_equal(peer_read(r, buf, sizeof(buf), &n), 8);
        assert_int_equal(buf[0] << 8 | buf[1], 1002);
        rig_free(r);

        r = rig_new(1024);
        uint8_t masked[] = { 0x81, 0x81, 1, 2, 3, 4, 'a' ^ 1 }; /* servers must not mask */
        assert_int_equal(write(r->peer, masked, sizeof(masked)), (ssize_t)sizeof(masked));
        assert_int_equal(loop_run(r->loop), 2);
        assert_int_equal(r->code, 1002);
        rig_free(r);

        r = rig_new(1024);
        peer_frame(r, true, 1, "\xff\xfe", 2); /* text that is not UTF-8 */
        assert_int_equal(loop_run(r->loop), 2);
        assert_int_equal(r->code, 1007);
        rig_free(r);
}

static void connection_lost(void **state)
{
        (void)state;
        struct rig *r = rig_new(1024);
        close(r->peer);
        r->peer = -1;
        assert_int_equal(loop_run(r->loop), 2);
        assert_int_equal(r->code, 1006);
        rig_free(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(url_rules),          cmocka_unit_test(url_allowed), cmocka_unit_test(accept_value),
                cmocka_unit_test(answer_head),        cmocka_unit_test(messages_and_fragments),
                cmocka_unit_test(too_big),            cmocka_unit_test(garbage),
                cmocka_unit_test(connection_lost),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
