/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The relay end of one console session, in C, for bench_console.py's throughput figure
 * (a Python relay reading one frame per line tops out near 1 MB/s and hides the
 * agent's own rate). One wss:// connection on loopback with the test CA's server
 * certificate: the HTTP upgrade, one text frame sent (the line that starts the app's
 * output), then every frame read and counted until a text frame ends with the end
 * marker. Frames are not unmasked except the bytes compared with the markers.
 *
 *   relay-sink CERTS_DIR START_TEXT COUNT_TAIL END_TAIL
 *
 * Prints "port N" on its first line once it listens, then after the end marker one
 * JSON line: {"frames": counted frames, "bytes": their payload bytes, "otherFrames",
 * "firstToLastSec": from the first counted frame to the end marker}. Exit 0, or 1 with
 * the reason on stderr. A bench tool, not part of the agent.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define BUF (1u << 20)

static SSL *ssl;
static unsigned char buf[BUF];
static size_t have, pos;

static void die(const char *what)
{
        fprintf(stderr, "relay-sink: %s\n", what);
        ERR_print_errors_fp(stderr);
        exit(1);
}

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* At least n bytes buffered from pos (n <= BUF), reading more as needed. */
static void need(size_t n)
{
        if (have - pos >= n)
                return;
        memmove(buf, buf + pos, have - pos);
        have -= pos;
        pos = 0;
        while (have < n) {
                int r = SSL_read(ssl, buf + have, (int)(BUF - have));
                if (r <= 0)
                        die("the agent closed the connection");
                have += (size_t)r;
        }
}

static void write_all(const void *p, size_t n)
{
        while (n) {
                int r = SSL_write(ssl, p, (int)n);
                if (r <= 0)
                        die("write");
                p = (const char *)p + r;
                n -= (size_t)r;
        }
}

static void upgrade(void)
{
        char *end;
        for (;;) {
                need(have - pos + 1);
                buf[have < BUF ? have : BUF - 1] = '\0';
                if ((end = strstr((char *)buf + pos, "\r\n\r\n")))
                        break;
        }
        char *key = strcasestr((char *)buf + pos, "\nSec-WebSocket-Key:");
        if (!key || key > end)
                die("no Sec-WebSocket-Key");
        key += 19;
        while (*key == ' ')
                key++;
        char kk[128];
        size_t kl = strcspn(key, "\r\n");
        if (kl > 60)
                die("bad key");
        snprintf(kk, sizeof(kk), "%.*s%s", (int)kl, key, GUID);
        unsigned char sha[SHA_DIGEST_LENGTH];
        SHA1((unsigned char *)kk, strlen(kk), sha);
        unsigned char acc[64];
        EVP_EncodeBlock(acc, sha, sizeof(sha));
        char resp[256];
        int n = snprintf(resp, sizeof(resp),
                         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Accept: %s\r\n\r\n",
                         acc);
        write_all(resp, (size_t)n);
        pos = (size_t)(end + 4 - (char *)buf);
}

static void send_text(const char *text)
{
        size_t n = strlen(text);
        unsigned char head[4] = { 0x81, 0, 0, 0 };
        size_t hl = 2;
        if (n < 126)
                head[1] = (unsigned char)n;
        else {
                head[1] = 126;
                head[2] = (unsigned char)(n >> 8);
                head[3] = (unsigned char)n;
                hl = 4;
        }
        write_all(head, hl);
        write_all(text, n);
}

/* Does the (masked) payload at p of length n end with tail? */
static int ends_with(const unsigned char *p, uint64_t n, const unsigned char mask[4], const char *tail)
{
        size_t tl = strlen(tail);
        if (n < tl)
                return 0;
        for (size_t i = 0; i < tl; i++) {
                uint64_t off = n - tl + i;
                unsigned char c = p[off] ^ (mask ? mask[off & 3] : 0);
                if (c != (unsigned char)tail[i])
                        return 0;
        }
        return 1;
}

int main(int argc, char **argv)
{
        if (argc != 5)
                die("usage: relay-sink CERTS_DIR START_TEXT COUNT_TAIL END_TAIL");
        char cert[4096], key[4096];
        snprintf(cert, sizeof(cert), "%s/server.pem", argv[1]);
        snprintf(key, sizeof(key), "%s/server.key", argv[1]);
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
                die("certificate");
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof(a);
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4) < 0 ||
            getsockname(ls, (struct sockaddr *)&a, &al) < 0)
                die("listen");
        printf("port %u\n", ntohs(a.sin_port));
        fflush(stdout);
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                die("accept");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1)
                die("TLS handshake");
        upgrade();
        send_text(argv[2]);
        uint64_t frames = 0, bytes = 0, other = 0;
        double first = 0;
        for (;;) {
                need(2);
                unsigned op = buf[pos] & 15, masked = buf[pos + 1] & 0x80;
                uint64_t n = buf[pos + 1] & 127;
                size_t hl = 2;
                if (n == 126) {
                        need(4);
                        n = ((uint64_t)buf[pos + 2] << 8) | buf[pos + 3];
                        hl = 4;
                } else if (n == 127) {
                        need(10);
                        n = 0;
                        for (int i = 0; i < 8; i++)
                                n = n << 8 | buf[pos + 2 + i];
                        hl = 10;
                }
                if (n > BUF - 14)
                        die("a frame larger than the buffer");
                need(hl + (masked ? 4 : 0) + n);
                const unsigned char *mask = masked ? buf + pos + hl : NULL;
                const unsigned char *p = buf + pos + hl + (masked ? 4 : 0);
                if (op == 1 && ends_with(p, n, mask, argv[3])) {
                        if (!frames)
                                first = now();
                        frames++;
                        bytes += n;
                } else if (op == 1 && ends_with(p, n, mask, argv[4])) {
                        printf("{\"frames\": %llu, \"bytes\": %llu, \"otherFrames\": %llu, \"firstToLastSec\": %.6f}\n",
                               (unsigned long long)frames, (unsigned long long)bytes, (unsigned long long)other,
                               frames ? now() - first : 0.0);
                        fflush(stdout);
                        return 0;
                } else if (op == 9) {
                        unsigned char pong[2 + 125];
                        if (n <= 125) {
                                pong[0] = 0x8a;
                                pong[1] = (unsigned char)n;
                                for (uint64_t i = 0; i < n; i++)
                                        pong[2 + i] = p[i] ^ (mask ? mask[i & 3] : 0);
                                write_all(pong, 2 + n);
                        }
                } else
                        other++;
                pos += hl + (masked ? 4 : 0) + n;
        }
}
