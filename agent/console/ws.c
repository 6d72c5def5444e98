/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The loop half of the WebSocket client: wslay's event engine over a non-blocking
 * socket (plain or OpenSSL), watched on the agent's loop. wslay masks what we send,
 * joins fragments, answers pings, and closes with 1009 (message above max_msg), 1002
 * (protocol garbage) or 1007 (text that is not UTF-8) on its own; we send a ping
 * every 30 s and give the closing handshake 2 s before dropping the socket.
 *
 * What wslay sends is gathered in a 16 KiB buffer (one TLS record) and written when
 * it fills or when the engine is done for this turn: an app console is one frame per
 * line, and one write (and one TLS record) per line capped a session near 1 MB/s.
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "agent/console/ws-internal.h"
#include "agent/console/ws.h"
#include "common/macro.h"

#define PING_MS 30000
#define OBUF 16384
#define CLOSE_GRACE_MS 2000

struct ws {
        struct loop *loop;
        struct ws_dialed *d;
        wslay_event_context_ptr ctx;
        const struct ws_callbacks *cb;
        void *userdata;
        struct loop_timer *ping_timer, *close_timer;
        uint32_t events;
        bool eof;          /* the peer closed the TCP connection */
        bool io_failed;
        bool proto_error;  /* a frame wslay could not parse: we sent 1002 ourselves */
        bool closing;      /* we queued a close */
        bool done;         /* on_closed was called */
        bool drain_wanted;
        size_t extra_off;
        uint16_t close_code_rx;
        char reason_rx[124];
        char reason_tx[124];
        size_t olen;         /* bytes in obuf not yet written */
        uint8_t obuf[OBUF];
};

/* Write what obuf holds. 0: all written or the socket is full (the rest waits); -1: failed. */
static int flush_out(struct ws *w)
{
        struct ws_dialed *d = w->d;
        while (w->olen) {
                ssize_t n;
                if (d->ssl) {
                        ERR_clear_error();
                        int r = SSL_write(d->ssl, w->obuf, (int)w->olen);
                        if (r <= 0) {
                                int e = SSL_get_error(d->ssl, r);
                                ERR_clear_error();
                                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                                        return 0;
                                w->io_failed = true;
                                return -1;
                        }
                        n = r;
                } else {
                        n = send(d->fd, w->obuf, w->olen, MSG_NOSIGNAL);
                        if (n < 0) {
                                if (errno == EAGAIN || errno == EINTR)
                                        return 0;
                                w->io_failed = true;
                                return -1;
                        }
                }
                memmove(w->obuf, w->obuf + n, w->olen - (size_t)n);
                w->olen -= (size_t)n;
        }
        return 0;
}

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user_data)
{
        (void)flags;
        struct ws *w = user_data;
        struct ws_dialed *d = w->d;
        if (d->extra && w->extra_off < d->extra_len) {
                size_t n = d->extra_len - w->extra_off;
                if (n > len)
                        n = len;
                memcpy(buf, d->extra + w->extra_off, n);
                w->extra_off += n;
                return (ssize_t)n;
        }
        if (d->ssl) {
                ERR_clear_error();
                int r = SSL_read(d->ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
                if (r > 0)
                        return r;
                int e = SSL_get_error(d->ssl, r);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                        return -1;
                }
                ERR_clear_error();
                if (e == SSL_ERROR_ZERO_RETURN || r == 0)
                        w->eof = true;
                else
                        w->io_failed = true;
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        ssize_t n = recv(d->fd, buf, len, 0);
        if (n > 0)
                return n;
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (n == 0)
                w->eof = true;
        else
                w->io_failed = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user_data)
{
        (void)flags;
        struct ws *w = user_data;
        if (w->olen == OBUF && flush_out(w) < 0) {
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        size_t room = OBUF - w->olen;
        if (!room) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        size_t n = len < room ? len : room;
        memcpy(w->obuf + w->olen, data, n);
        w->olen += n;
        return (ssize_t)n;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user_data)
{
        (void)user_data;
        if (RAND_bytes(buf, (int)len) != 1) {
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return 0;
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user_data)
{
        (void)ctx;
        struct ws *w = user_data;
        if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) {
                if (!w->closing && w->cb->on_message)
                        w->cb->on_message(w->userdata, arg->opcode == WSLAY_TEXT_FRAME ? WS_TEXT : WS_BINARY, arg->msg,
                                          arg->msg_length);
        } else if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
                w->close_code_rx = arg->status_code;
                size_t n = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
                if (n >= sizeof(w->reason_rx))
                        n = sizeof(w->reason_rx) - 1;
                if (n)
                        memcpy(w->reason_rx, arg->msg + 2, n);
                w->reason_rx[n] = 0;
        }
}

static const struct wslay_event_callbacks wslay_cbs = {
        .recv_callback = recv_cb,
        .send_callback = send_cb,
        .genmask_callback = genmask_cb,
        .on_msg_recv_callback = msg_cb,
};

static void finish(struct ws *w)
{
        if (w->done)
                return;
        w->done = true;
        loop_unwatch(w->loop, w->d->fd);
        loop_timer_disarm(w->ping_timer);
        loop_timer_disarm(w->close_timer);
        uint16_t code;
        const char *reason;
        if (w->proto_error) {
                code = 1002;
                reason = "protocol error";
        } else if (wslay_event_get_close_received(w->ctx)) {
                code = w->close_code_rx ? w->close_code_rx : 1005;
                reason = w->reason_rx;
        } else if (wslay_event_get_close_sent(w->ctx)) {
                code = wslay_event_get_status_code_sent(w->ctx);
                reason = w->reason_tx[0] ? w->reason_tx
                         : code == 1009  ? "message too big"
                         : code == 1002  ? "protocol error"
                         : code == 1007  ? "invalid text"
                                         : "";
        } else {
                code = 1006;
                reason = w->eof ? "the relay closed the connection" : "the connection failed";
        }
        char r[sizeof(w->reason_rx)];
        snprintf(r, sizeof(r), "%s", reason);
        if (w->cb->on_closed)
                w->cb->on_closed(w->userdata, code, r); /* may free w */
}

static void on_io(void *userdata, int fd, uint32_t revents);

/* After any engine call: the events to watch, or the end. */
static void update(struct ws *w)
{
        if (w->done)
                return;
        bool rd = wslay_event_want_read(w->ctx), wr = wslay_event_want_write(w->ctx) || w->olen;
        if (w->eof || w->io_failed || w->proto_error || (!rd && !wr)) {
                finish(w);
                return;
        }
        uint32_t ev = (rd ? EPOLLIN : 0) | (wr ? EPOLLOUT : 0);
        /* A TLS read may need a write and back: watching both while either is wanted is harmless. */
        if (ev != w->events) {
                struct na_error err = NA_ERROR_INIT;
                if (loop_watch(w->loop, w->d->fd, ev, on_io, w, &err) < 0) {
                        na_error_clear(&err);
                        w->io_failed = true;
                        finish(w);
                        return;
                }
                w->events = ev;
        }
}

/*
 * wslay answers a frame it cannot parse (a control frame in pieces, a length with its
 * top bit set) with a close frame without a status code. We say 1002 instead: its
 * close is never sent (writing is shut), ours goes out in one best-effort write.
 */
static void protocol_error(struct ws *w)
{
        static const char reason[] = "protocol error";
        uint8_t frame[2 + 4 + 2 + sizeof(reason) - 1], mask[4];
        size_t plen = 2 + sizeof(reason) - 1;
        frame[0] = 0x88; /* FIN, close */
        frame[1] = (uint8_t)(0x80 | plen);
        if (RAND_bytes(mask, sizeof(mask)) != 1)
                memset(mask, 0x5a, sizeof(mask));
        memcpy(frame + 2, mask, 4);
        uint8_t payload[2 + sizeof(reason) - 1] = { 1002 >> 8, 1002 & 0xff };
        memcpy(payload + 2, reason, sizeof(reason) - 1);
        for (size_t i = 0; i < plen; i++)
                frame[6 + i] = payload[i] ^ mask[i % 4];
        wslay_event_shutdown_write(w->ctx);
        wslay_event_shutdown_read(w->ctx);
        (void)flush_out(w); /* best effort, as the frame below */
        if (w->d->ssl) {
                ERR_clear_error();
                (void)SSL_write(w->d->ssl, frame, (int)(6 + plen));
                ERR_clear_error();
        } else
                (void)send(w->d->fd, frame, 6 + plen, MSG_NOSIGNAL);
        w->proto_error = true;
}

static void on_io(void *userdata, int fd, uint32_t revents)
{
        (void)fd;
        struct ws *w = userdata;
        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && wslay_event_want_read(w->ctx)) {
                int r = wslay_event_recv(w->ctx);
                if (r == WSLAY_ERR_CALLBACK_FAILURE && !w->eof && !w->io_failed)
                        protocol_error(w);
        }
        if (!w->done && !w->eof && !w->io_failed) {
                if (wslay_event_want_write(w->ctx))
                        (void)wslay_event_send(w->ctx);
                (void)flush_out(w);
        }
        if (!w->eof && !w->io_failed && w->drain_wanted && ws_queued(w) < WS_LOW_MARK) {
                w->drain_wanted = false;
                if (w->cb->on_drain)
                        w->cb->on_drain(w->userdata);
        }
        update(w);
}

static void ping_tick(void *userdata)
{
        struct ws *w = userdata;
        if (w->done || w->closing)
                return;
        struct wslay_event_msg m = { .opcode = WSLAY_PING, .msg = (const uint8_t *)"na", .msg_length = 2 };
        (void)wslay_event_queue_msg(w->ctx, &m);
        loop_timer_arm_ms(w->ping_timer, PING_MS);
        update(w);
}

static void close_tick(void *userdata)
{
        struct ws *w = userdata;
        finish(w); /* the peer did not finish the closing handshake in time */
}

int ws_start(struct loop *loop, struct ws_dialed *d, const struct ws_callbacks *cb, void *userdata, size_t max_msg,
             struct ws **ret, struct na_error *err)
{
        struct ws *w = calloc(1, sizeof(*w));
        if (!w) {
                ws_dialed_free(d);
                return na_error_sys(err, ENOMEM, "websocket");
        }
        w->loop = loop;
        w->d = d;
        w->cb = cb;
        w->userdata = userdata;
        if (wslay_event_context_client_init(&w->ctx, &wslay_cbs, w) != 0) {
                ws_dialed_free(d);
                free(w);
                return na_error_sys(err, ENOMEM, "websocket");
        }
        wslay_event_config_set_max_recv_msg_length(w->ctx, max_msg);
        if (d->ssl)
                SSL_set_mode(d->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        w->ping_timer = loop_timer_new(loop, ping_tick, w);
        w->close_timer = loop_timer_new(loop, close_tick, w);
        w->events = EPOLLIN;
        if (!w->ping_timer || !w->close_timer || loop_watch(loop, d->fd, EPOLLIN, on_io, w, err) < 0) {
                if (!na_error_is_set(err))
                        na_error_sys(err, ENOMEM, "websocket");
                w->done = true;
                ws_free(w);
                return -ENOMEM;
        }
        loop_timer_arm_ms(w->ping_timer, PING_MS);
        *ret = w;
        /* Frames that came with the answer head, and whatever TLS already buffered. */
        if (d->extra_len || (d->ssl && SSL_pending(d->ssl)))
                on_io(w, d->fd, EPOLLIN);
        return 0;
}

int ws_send(struct ws *w, enum ws_kind kind, const void *data, size_t len)
{
        if (w->done || w->closing)
                return -EPIPE;
        struct wslay_event_msg m = { .opcode = kind == WS_TEXT ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                                     .msg = data,
                                     .msg_length = len };
        int r = wslay_event_queue_msg(w->ctx, &m);
        if (r != 0)
                return r == WSLAY_ERR_NOMEM ? -ENOMEM : -EPIPE;
        if (ws_queued(w) >= WS_LOW_MARK)
                w->drain_wanted = true;
        update(w);
        return 0;
}

size_t ws_queued(const struct ws *w)
{
        return wslay_event_get_queued_msg_length(w->ctx) + w->olen;
}

void ws_close(struct ws *w, uint16_t code, const char *reason)
{
        if (w->done || w->closing)
                return;
        w->closing = true;
        snprintf(w->reason_tx, sizeof(w->reason_tx), "%s", reason ? reason : "");
        (void)wslay_event_queue_close(w->ctx, code, (const uint8_t *)w->reason_tx, strlen(w->reason_tx));
        loop_timer_arm_ms(w->close_timer, CLOSE_GRACE_MS);
        update(w);
}

void ws_free(struct ws *w)
{
        if (!w)
                return;
        if (w->d)
                loop_unwatch(w->loop, w->d->fd);
        loop_timer_free(w->ping_timer);
        loop_timer_free(w->close_timer);
        if (w->ctx)
                wslay_event_context_free(w->ctx);
        ws_dialed_free(w->d);
        free(w);
}

const char *ws_peer(const struct ws *w)
{
        return w->d->peer;
}
