/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * HAProxy's runtime API over its stats socket: one command per connection (the
 * non-interactive mode: HAProxy answers and closes), every step bounded by a deadline.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "common/fileio.h"
#include "common/timeutil.h"
#include "routing/app-haproxy-internal.h"

#define CLI_REPLY_MAX (16u << 20)

int app_haproxy_cli(const char *sock_path, const char *cmd, unsigned timeout_ms, char **ret, struct na_error *err)
{
        long long deadline = na_now_mono_ms() + timeout_ms;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(sock_path) >= sizeof(sa.sun_path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "haproxy runtime API: socket path %s too long",
                                    sock_path);
        strcpy(sa.sun_path, sock_path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return na_error_sys(err, errno, "haproxy runtime API: socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                if (errno != EINPROGRESS && errno != EAGAIN)
                        return na_error_sys(err, errno, "haproxy runtime API: connect %s", sock_path);
                int r = na_wait_fd(fd, POLLOUT, deadline);
                if (r < 0)
                        return na_error_sys(err, -r, "haproxy runtime API: connect %s", sock_path);
        }
        _cleanup_free_ char *line = na_strdupf("%s\n", cmd);
        if (!line)
                return na_error_sys(err, ENOMEM, "haproxy runtime API");
        size_t len = strlen(line), off = 0;
        while (off < len) {
                ssize_t k = send(fd, line + off, len - off, MSG_NOSIGNAL);
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = na_wait_fd(fd, POLLOUT, deadline);
                        if (r < 0)
                                return na_error_sys(err, -r, "haproxy runtime API: send to %s", sock_path);
                        continue;
                }
                if (k < 0)
                        return na_error_sys(err, errno, "haproxy runtime API: send to %s", sock_path);
                off += (size_t)k;
        }
        _cleanup_free_ char *out = NULL;
        size_t out_len = 0, out_cap = 0;
        for (;;) {
                if (out_len + 4096 + 1 > out_cap) {
                        if (out_cap >= CLI_REPLY_MAX)
                                return na_error_set(err, EMSGSIZE, NA_E_INTERNAL, "haproxy runtime API: reply too long");
                        size_t ncap = out_cap ? out_cap * 2 : 8192;
                        char *nb = realloc(out, ncap);
                        if (!nb)
                                return na_error_sys(err, ENOMEM, "haproxy runtime API");
                        out = nb;
                        out_cap = ncap;
                }
                ssize_t k = recv(fd, out + out_len, out_cap - out_len - 1, 0);
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = na_wait_fd(fd, POLLIN, deadline);
                        if (r < 0)
                                return na_error_sys(err, -r, "haproxy runtime API: no answer from %s", sock_path);
                        continue;
                }
                if (k < 0)
                        return na_error_sys(err, errno, "haproxy runtime API: read from %s", sock_path);
                if (k == 0)
                        break;
                out_len += (size_t)k;
        }
        if (!out) {
                out = strdup("");
                if (!out)
                        return na_error_sys(err, ENOMEM, "haproxy runtime API");
        } else {
                out[out_len] = '\0';
        }
        *ret = TAKE_PTR(out);
        return 0;
}
