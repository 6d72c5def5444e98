/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What the dial half (ws-dial.c) hands the loop half (ws.c): not for other modules. */
#pragma once

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

struct ws_dialed {
        int fd;          /* non-blocking, close-on-exec, connected */
        SSL_CTX *ctx;    /* NULL for ws:// */
        SSL *ssl;
        uint8_t *extra;  /* bytes read after the answer head: the first frames */
        size_t extra_len;
        char peer[300];
};
