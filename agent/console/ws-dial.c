/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Dialling a relay (blocking, on a worker thread, bounded by a deadline): resolve,
 * non-blocking connect with poll, TLS verified like the controller link (CA file or
 * the system's bundle, host name or address checked, pinned public key, client
 * certificate), then the HTTP/1.1 Upgrade. The loop never runs any of this.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/console/ws-internal.h"
#include "agent/console/ws.h"
#include "common/macro.h"
#include "common/timeutil.h"

void ws_dialed_free(struct ws_dialed *d)
{
        if (!d)
                return;
        if (d->ssl)
                SSL_free(d->ssl);
        if (d->ctx)
                SSL_CTX_free(d->ctx);
        if (d->fd >= 0)
                close(d->fd);
        free(d->extra);
        free(d);
}

struct dial {
        const struct ws_url *u;
        uint64_t deadline_us;
        ws_checkpoint_fn checkpoint;
        void *cp;
};

static int tls_error(struct na_error *err, const char *what, const struct ws_url *u)
{
        char buf[256] = "";
        int saved = errno;
        unsigned long e = ERR_get_error();
        if (e)
                ERR_error_string_n(e, buf, sizeof(buf));
        else if (saved)
                snprintf(buf, sizeof(buf), "%s", strerror(saved));
        ERR_clear_error();
        na_error_set(err, EPROTO, NA_E_DRIVER, "relay %s:%s: %s%s%s", u->host, u->port, what, *buf ? ": " : "", buf);
        na_error_detail(err, "reason", json_string(*buf ? buf : what));
        return -EPROTO;
}

/* Wait for events on fd until the deadline, asking the checkpoint every 100 ms. */
static int wait_fd(struct dial *d, int fd, short events, const char *what, struct na_error *err)
{
        for (;;) {
                uint64_t now = na_now_mono_us();
                if (now >= d->deadline_us) {
                        na_error_set(err, ETIMEDOUT, NA_E_DRIVER, "relay %s:%s: timed out %s", d->u->host, d->u->port,
                                     what);
                        na_error_detail(err, "reason", json_string("timed out"));
                        return -ETIMEDOUT;
                }
                int ms = (int)((d->deadline_us - now) / 1000);
                struct pollfd p = { .fd = fd, .events = events };
                int n = poll(&p, 1, ms > 100 ? 100 : ms + 1);
                if (n < 0 && errno != EINTR)
                        return na_error_sys(err, errno, "relay %s:%s: poll", d->u->host, d->u->port);
                if (n > 0)
                        return 0;
                if (d->checkpoint) {
                        int r = d->checkpoint(d->cp, err);
                        if (r < 0)
                                return r;
                }
        }
}

static int tcp_connect(struct dial *d, int *ret_fd, char *peer, size_t peerlen, struct na_error *err)
{
        const struct ws_url *u = d->u;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
        int g = getaddrinfo(u->host, u->port, &hints, &res);
        if (g != 0) {
                na_error_set(err, EHOSTUNREACH, NA_E_DRIVER, "relay %s: cannot resolve: %s", u->host, gai_strerror(g));
                na_error_detail(err, "reason", json_string(gai_strerror(g)));
                return -EHOSTUNREACH;
        }
        int last = ECONNREFUSED;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        last = errno;
                        continue;
                }
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        last = errno;
                        close(fd);
                        continue;
                }
                struct na_error werr = NA_ERROR_INIT;
                int r = wait_fd(d, fd, POLLOUT, "connecting", &werr);
                if (r < 0) {
                        close(fd);
                        freeaddrinfo(res);
                        na_error_move(err, &werr);
                        return r;
                }
                int so = 0;
                socklen_t sl = sizeof(so);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl);
                if (so) {
                        last = so;
                        close(fd);
                        continue;
                }
                int one = 1, sndbuf = WS_SNDBUF;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                /* A fixed send buffer: the kernel's share of a slow reader's backlog stays
                 * small too (autotuning would grow it to megabytes per session). */
                setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
                char h[NI_MAXHOST], s[NI_MAXSERV];
                if (getnameinfo(ai->ai_addr, ai->ai_addrlen, h, sizeof(h), s, sizeof(s), NI_NUMERICHOST | NI_NUMERICSERV) == 0)
                        snprintf(peer, peerlen, "%s:%s", h, s);
                freeaddrinfo(res);
                *ret_fd = fd;
                return 0;
        }
        freeaddrinfo(res);
        na_error_set(err, last, NA_E_DRIVER, "relay %s:%s: cannot connect: %s", u->host, u->port, strerror(last));
        na_error_detail(err, "reason", json_string(strerror(last)));
        return -last;
}

/* "sha256//b64[;sha256//b64...]" against the peer's public key. */
static bool pin_matches(SSL *ssl, const char *pins)
{
        X509 *cert = SSL_get1_peer_certificate(ssl);
        if (!cert)
                return false;
        unsigned char *der = NULL;
        int n = i2d_PUBKEY(X509_get0_pubkey(cert), &der);
        X509_free(cert);
        if (n <= 0)
                return false;
        unsigned char md[32];
        unsigned int mdlen = 0;
        EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
        OPENSSL_free(der);
        char b64[64];
        EVP_EncodeBlock((unsigned char *)b64, md, (int)mdlen);
        for (const char *p = pins; *p;) {
                size_t len = strcspn(p, ";");
                if (len > 8 && strncmp(p, "sha256//", 8) == 0 && len - 8 == strlen(b64) && strncmp(p + 8, b64, len - 8) == 0)
                        return true;
                p += len;
                if (*p == ';')
                        p++;
        }
        return false;
}

static int tls_open(struct dial *d, struct ws_dialed *wd, const struct ws_tls *tls, struct na_error *err)
{
        const struct ws_url *u = d->u;
        wd->ctx = SSL_CTX_new(TLS_client_method());
        if (!wd->ctx)
                return tls_error(err, "TLS context", u);
        SSL_CTX_set_min_proto_version(wd->ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(wd->ctx, SSL_VERIFY_PEER, NULL);
        if (tls->ca_file ? SSL_CTX_load_verify_locations(wd->ctx, tls->ca_file, NULL) != 1
                         : SSL_CTX_set_default_verify_paths(wd->ctx) != 1)
                return tls_error(err, "cannot load the CA certificates", u);
        if (tls->client_cert && (SSL_CTX_use_certificate_chain_file(wd->ctx, tls->client_cert) != 1 ||
                                 SSL_CTX_use_PrivateKey_file(wd->ctx, tls->client_key ? tls->client_key : tls->client_cert,
                                                             SSL_FILETYPE_PEM) != 1))
                return tls_error(err, "cannot load the client certificate", u);
        wd->ssl = SSL_new(wd->ctx);
        if (!wd->ssl || SSL_set_fd(wd->ssl, wd->fd) != 1)
                return tls_error(err, "TLS session", u);
        unsigned char ip[16];
        bool is_ip = inet_pton(AF_INET, u->host, ip) == 1 || inet_pton(AF_INET6, u->host, ip) == 1;
        if (is_ip) {
                if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(wd->ssl), u->host) != 1)
                        return tls_error(err, "TLS address check", u);
        } else if (SSL_set_tlsext_host_name(wd->ssl, u->host) != 1 || SSL_set1_host(wd->ssl, u->host) != 1)
                return tls_error(err, "TLS host name check", u);
        for (;;) {
                ERR_clear_error();
                int r = SSL_connect(wd->ssl);
                if (r == 1)
                        break;
                int e = SSL_get_error(wd->ssl, r);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                        long v = SSL_get_verify_result(wd->ssl);
                        if (v != X509_V_OK) {
                                const char *why = X509_verify_cert_error_string(v);
                                ERR_clear_error();
                                na_error_set(err, EPROTO, NA_E_DRIVER, "relay %s:%s: TLS certificate refused: %s", u->host,
                                             u->port, why);
                                na_error_detail(err, "reason", json_string(why));
                                return -EPROTO;
                        }
                        return tls_error(err, "TLS handshake failed", u);
                }
                int w = wait_fd(d, wd->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "in the TLS handshake", err);
                if (w < 0)
                        return w;
        }
        if (tls->pinned_pubkey && !pin_matches(wd->ssl, tls->pinned_pubkey)) {
                na_error_set(err, EPROTO, NA_E_DRIVER, "relay %s:%s: the public key does not match pinned_pubkey", u->host,
                             u->port);
                na_error_detail(err, "reason", json_string("public key pin mismatch"));
                return -EPROTO;
        }
        return 0;
}

static ssize_t io_write(struct dial *d, struct ws_dialed *wd, const char *buf, size_t len, struct na_error *err)
{
        size_t off = 0;
        while (off < len) {
                ssize_t n;
                short ev = POLLOUT;
                if (wd->ssl) {
                        ERR_clear_error();
                        int r = SSL_write(wd->ssl, buf + off, (int)(len - off));
                        n = r;
                        if (r <= 0) {
                                int e = SSL_get_error(wd->ssl, r);
                                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                                        /* With TLS 1.3 the relay judges our client
                                         * certificate after the handshake: its alert
                                         * ("certificate required", "unknown ca") waits
                                         * unread; read it so the error says why. */
                                        if (!ERR_peek_error()) {
                                                char b;
                                                int keep = errno;
                                                (void)SSL_read(wd->ssl, &b, 1);
                                                errno = keep;
                                        }
                                        return tls_error(err, "TLS write", d->u);
                                }
                                ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
                        }
                } else {
                        n = send(wd->fd, buf + off, len - off, MSG_NOSIGNAL);
                        if (n < 0 && errno != EAGAIN && errno != EINTR)
                                return na_error_sys(err, errno, "relay %s:%s: send", d->u->host, d->u->port);
                }
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                int w = wait_fd(d, wd->fd, ev, "sending the upgrade", err);
                if (w < 0)
                        return w;
        }
        return (ssize_t)off;
}

static ssize_t io_read(struct dial *d, struct ws_dialed *wd, char *buf, size_t len, struct na_error *err)
{
        for (;;) {
                ssize_t n;
                short ev = POLLIN;
                if (wd->ssl) {
                        ERR_clear_error();
                        int r = SSL_read(wd->ssl, buf, (int)len);
                        if (r > 0)
                                return r;
                        int e = SSL_get_error(wd->ssl, r);
                        if (e == SSL_ERROR_ZERO_RETURN)
                                return 0;
                        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                                return tls_error(err, "TLS read", d->u);
                        ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
                } else {
                        n = recv(wd->fd, buf, len, 0);
                        if (n >= 0)
                                return n;
                        if (errno != EAGAIN && errno != EINTR)
                                return na_error_sys(err, errno, "relay %s:%s: recv", d->u->host, d->u->port);
                }
                int w = wait_fd(d, wd->fd, ev, "waiting for the upgrade answer", err);
                if (w < 0)
                        return w;
        }
}

int ws_dial(const struct ws_url *u, const struct ws_tls *tls, const char *token, int timeout_ms,
            ws_checkpoint_fn checkpoint, void *cp_userdata, struct ws_dialed **ret, struct na_error *err)
{
        struct dial d = { .u = u, .deadline_us = na_now_mono_us() + (uint64_t)timeout_ms * 1000, .checkpoint = checkpoint,
                          .cp = cp_userdata };
        _cleanup_(ws_dialed_freep) struct ws_dialed *wd = calloc(1, sizeof(*wd));
        if (!wd)
                return na_error_sys(err, ENOMEM, "relay %s", u->host);
        wd->fd = -1;
        int r = tcp_connect(&d, &wd->fd, wd->peer, sizeof(wd->peer), err);
        if (r < 0)
                return r;
        if (u->tls && (r = tls_open(&d, wd, tls, err)) < 0)
                return r;

        char key[25];
        if (ws_key_new(key) < 0)
                return na_error_set(err, EIO, NA_E_INTERNAL, "relay %s: no random bytes for the key", u->host);
        _cleanup_free_ char *req = NULL;
        int n = asprintf(&req,
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n"
                         "User-Agent: nodeagent\r\n\r\n",
                         u->path, u->host_header, key, token);
        if (n < 0)
                return na_error_sys(err, ENOMEM, "relay %s", u->host);
        ssize_t w = io_write(&d, wd, req, (size_t)n, err);
        if (w < 0)
                return (int)w;

        _cleanup_free_ char *head = malloc(WS_HEAD_MAX + 1);
        if (!head)
                return na_error_sys(err, ENOMEM, "relay %s", u->host);
        size_t have = 0;
        char *end = NULL;
        while (!end) {
                if (have >= WS_HEAD_MAX)
                        return na_error_set(err, EPROTO, NA_E_DRIVER, "relay %s:%s: answer head larger than %u bytes",
                                            u->host, u->port, WS_HEAD_MAX);
                ssize_t got = io_read(&d, wd, head + have, WS_HEAD_MAX - have, err);
                if (got < 0)
                        return (int)got;
                if (got == 0)
                        return na_error_set(err, ECONNRESET, NA_E_DRIVER, "relay %s:%s: closed before answering",
                                            u->host, u->port);
                have += (size_t)got;
                head[have] = 0;
                end = memmem(head, have, "\r\n\r\n", 4);
        }
        size_t head_len = (size_t)(end + 4 - head);
        int status;
        r = ws_check_response(head, head_len, key, &status, err);
        if (r < 0) {
                na_error_prefix(err, "relay %s:%s", u->host, u->port);
                if (status)
                        na_error_detail(err, "httpStatus", json_integer(status));
                return r;
        }
        if (have > head_len) {
                wd->extra = malloc(have - head_len);
                if (!wd->extra)
                        return na_error_sys(err, ENOMEM, "relay %s", u->host);
                memcpy(wd->extra, head + head_len, have - head_len);
                wd->extra_len = have - head_len;
        }
        *ret = TAKE_PTR(wd);
        return 0;
}
