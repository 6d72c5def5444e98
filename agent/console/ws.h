/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The WebSocket client the live consoles dial out with (AGENT-API 4.3; docs/consoles.md
 * says why wslay). Two halves:
 *
 *   Dial (off the loop: a job's worker thread, blocking with a deadline): resolve,
 *   connect, TLS verified as for the controller link (CA file, pinned public key,
 *   client certificate, host name checked), the HTTP/1.1 Upgrade with
 *   `Authorization: Bearer`, Sec-WebSocket-Accept checked.
 *
 *       struct ws_url u;  ws_url_parse(url, allow_insecure, &u, "url", &err);
 *       struct ws_dialed *d;  ws_dial(&u, &tls, token, 10000, checkpoint, ctx, &d, &err);
 *
 *   Run (on the loop, no thread): wslay's frame engine over the non-blocking socket,
 *   pings answered and sent every 30 s, client masking, fragmented messages joined,
 *   messages above max_msg closed with 1009, protocol garbage with 1002.
 *
 *       struct ws *w;  ws_start(loop, d, &cb, userdata, 64 * 1024, &w, &err);   // d is taken
 *       ws_send(w, WS_TEXT, "hi", 2);  ws_close(w, 1000, "bye");  ...  ws_free(w);
 *
 * The pure parts (URL, key, accept, response head) are in agent/console/ws-handshake.c and
 * unit-tested on their own.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/base/loop.h"
#include "common/error.h"

#define WS_HEAD_MAX 16384 /* the relay's HTTP answer head */
#define WS_SNDBUF (256 * 1024) /* SO_SNDBUF of a console's socket (the kernel doubles it) */

struct ws_url {
        bool tls;        /* wss:// */
        char host[256];  /* without brackets for IPv6 */
        char port[8];
        char path[2048]; /* path and query, "/" at least */
        char host_header[300];
};

/*
 * wss://host[:port]/path, or ws:// when allow_insecure and the host is loopback
 * (localhost, 127.0.0.0/8, ::1). VALIDATION_ERROR on field otherwise.
 */
int ws_url_parse(const char *url, bool allow_insecure, struct ws_url *ret, const char *field, struct na_error *err);

/*
 * Whether console.open may dial u (AGENT-API 4.3): its host is the controller's (the
 * host of controller_url, any port) or one of relays ("host[,host...]", [consoles]
 * relays; IPv6 in brackets or not), compared without case. VALIDATION_ERROR on field
 * otherwise.
 */
int ws_url_allowed(const struct ws_url *u, const char *controller_url, const char *relays, const char *field,
                   struct na_error *err);

/* A random Sec-WebSocket-Key (base64 of 16 bytes) into key[25]. */
int ws_key_new(char key[25]);
/* The Sec-WebSocket-Accept the server must answer for key, into out[29]. */
void ws_accept_for(const char *key, char out[29]);

/*
 * Check the answer head (everything up to and including the blank line): status 101,
 * Upgrade: websocket, Connection: upgrade, the accept for key. Any other status is
 * an error naming it (*ret_status gets it, 0 when the head does not parse).
 */
int ws_check_response(const char *head, size_t len, const char *key, int *ret_status, struct na_error *err);

struct ws_tls {
        const char *ca_file;       /* NULL: the system's bundle */
        const char *pinned_pubkey; /* "sha256//<base64>[;sha256//...]" or NULL */
        const char *client_cert, *client_key;
};

/* A connection through its Upgrade, not yet on the loop. */
struct ws_dialed;
void ws_dialed_free(struct ws_dialed *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ws_dialed *, ws_dialed_free)

typedef int (*ws_checkpoint_fn)(void *userdata, struct na_error *err);

/* Blocking (never on the loop): at most timeout_ms in all; checkpoint (may be NULL)
 * is asked between steps and every 100 ms of waiting. */
int ws_dial(const struct ws_url *u, const struct ws_tls *tls, const char *token, int timeout_ms,
            ws_checkpoint_fn checkpoint, void *cp_userdata, struct ws_dialed **ret, struct na_error *err);

enum ws_kind { WS_TEXT = 1, WS_BINARY = 2 };

struct ws_callbacks {
        /* A whole message (fragments joined). */
        void (*on_message)(void *userdata, enum ws_kind kind, const uint8_t *data, size_t len);
        /* The send queue fell below ws's low mark: more may be sent. */
        void (*on_drain)(void *userdata);
        /* The connection is over (closing handshake done, peer gone, protocol error):
         * code as sent or received (1006: none), reason text. Called once; ws_free() may
         * be called from it. */
        void (*on_closed)(void *userdata, uint16_t code, const char *reason);
};

#define WS_LOW_MARK (256u * 1024u) /* on_drain when the queued bytes fall below this */

struct ws;
int ws_start(struct loop *loop, struct ws_dialed *d, const struct ws_callbacks *cb, void *userdata, size_t max_msg,
             struct ws **ret, struct na_error *err);
/* Queue a message (copied). -EPIPE once closing. */
int ws_send(struct ws *w, enum ws_kind kind, const void *data, size_t len);
/* Bytes queued in the engine, not yet on the socket. */
size_t ws_queued(const struct ws *w);
/* Start the closing handshake; on_closed follows (at most 2 s later). */
void ws_close(struct ws *w, uint16_t code, const char *reason);
void ws_free(struct ws *w);
/* The peer's address as "host:port" (for status). */
const char *ws_peer(const struct ws *w);
