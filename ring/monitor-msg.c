/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Connections to a running nodeagent-monitor and its messages (ring/monitor-msg.h). */
#include "ring/monitor-msg.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REQUEST_TIMEOUT_MS 2000
#define LINE_MAX_BYTES 4096
#define SYSTEM_MAX_BYTES 8192 /* APP_RING_TEXT_MAX: the monitor takes a system line up to one ring record */

static void sanitize(char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 ? (*s != '\n' && *s != '\t') : (unsigned char)*s > 0x7e)
                        *s = '?';
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sock_addr(const char *dir, struct sockaddr_un *sa, struct na_error *err)
{
        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/monitor.sock", dir) >= sizeof(sa->sun_path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s/monitor.sock: path too long", dir);
        return 0;
}

static int connect_to(const char *dir, int flags, int *ret_fd, struct na_error *err)
{
        struct sockaddr_un sa;
        int r = sock_addr(dir, &sa, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | flags, 0);
        if (fd < 0)
                return na_error_sys(err, errno, "socket");
        if (RETRY_EINTR(connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0) {
                if (errno == ENOENT || errno == ECONNREFUSED)
                        return na_error_set(err, errno, NA_E_INVALID_STATE, "%s: no monitor runs (the app is not running)",
                                            dir);
                return na_error_sys(err, errno, "connect to %s", sa.sun_path);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int app_monitor_connect(const char *dir, int *ret_fd, struct na_error *err)
{
        return connect_to(dir, SOCK_NONBLOCK, ret_fd, err);
}

int app_monitor_send(int fd, char type, const char *text, size_t len, struct na_error *err)
{
        if (type != 'L' && type != 'S')
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app monitor: unknown message type %c", type);
        if (len > (type == 'L' ? LINE_MAX_BYTES : SYSTEM_MAX_BYTES))
                return na_error_set(err, EMSGSIZE, NA_E_VALIDATION, "app monitor: message too long");
        char msg[1 + SYSTEM_MAX_BYTES];
        msg[0] = type;
        memcpy(msg + 1, text, len);
        ssize_t n = RETRY_EINTR(send(fd, msg, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT));
        if (n < 0 && errno == EAGAIN)
                return -EAGAIN;
        if (n != (ssize_t)(len + 1))
                return na_error_sys(err, n < 0 ? errno : EIO, "app monitor: send");
        return 0;
}

static int request(const char *dir, char type, const char *text, size_t len, struct na_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = connect_to(dir, 0, &fd, err);
        if (r < 0)
                return r;
        struct timeval tv = { .tv_sec = REQUEST_TIMEOUT_MS / 1000, .tv_usec = (REQUEST_TIMEOUT_MS % 1000) * 1000 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        r = app_monitor_send(fd, type, text, len, err);
        if (r == -EAGAIN)
                return na_error_set(err, EAGAIN, NA_E_INVALID_STATE, "%s: the monitor is not reading", dir);
        if (r < 0)
                return r;
        int64_t deadline = mono_ms() + REQUEST_TIMEOUT_MS;
        while (mono_ms() < deadline) {
                char buf[512];
                ssize_t n = RETRY_EINTR(recv(fd, buf, sizeof(buf), 0));
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0)
                        return na_error_set(err, EPIPE, NA_E_INVALID_STATE, "%s: the monitor went away (the app ended)",
                                            dir);
                struct app_monitor_msg msg;
                if (app_monitor_parse_message(buf, (size_t)n, &msg, err) < 0)
                        return -EBADMSG;
                if (msg.type == APP_MONITOR_MSG_ACK)
                        return 0;
                if (msg.type == APP_MONITOR_MSG_REFUSED)
                        return na_error_set(err, EAGAIN, NA_E_INVALID_STATE, "%s", msg.reason);
        }
        return na_error_set(err, ETIMEDOUT, NA_E_DRIVER, "%s: the monitor did not answer", dir);
}

int app_monitor_send_line(const char *dir, const char *line, struct na_error *err)
{
        size_t len = line ? strlen(line) : 0;
        if (!line || len > LINE_MAX_BYTES)
                return na_error_field(err, "line", "at most %d bytes", LINE_MAX_BYTES);
        if (memchr(line, '\n', len))
                return na_error_field(err, "line", "must not hold a newline");
        return request(dir, 'L', line, len, err);
}

int app_monitor_send_system(const char *dir, const char *text, struct na_error *err)
{
        return request(dir, 'S', text, strlen(text), err);
}

static bool parse_i64(const char *s, const char *end, int64_t *ret)
{
        char tmp[32];
        size_t n = (size_t)(end - s);
        if (n == 0 || n >= sizeof(tmp))
                return false;
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        char *e = NULL;
        errno = 0;
        long long v = strtoll(tmp, &e, 10);
        if (errno || *e)
                return false;
        *ret = v;
        return true;
}

int app_monitor_parse_message(const void *buf, size_t len, struct app_monitor_msg *ret, struct na_error *err)
{
        const char *p = buf, *end = p + len;
        *ret = (struct app_monitor_msg){ 0 };
        if (len == 0)
                goto bad;
        ret->type = (enum app_monitor_msg_type)p[0];
        int64_t a, b;
        switch (p[0]) {
        case 'O':
                if (!parse_i64(p + 1, end, &a) || a < 1)
                        goto bad;
                ret->next_seq = (uint64_t)a;
                return 0;
        case 'R':
        case 'K':
                return len == 1 ? 0 : na_error_set(err, EBADMSG, NA_E_DRIVER, "app monitor: bad message");
        case 'X': {
                const char *sp = memchr(p + 1, ' ', len - 1);
                if (!sp || !parse_i64(p + 1, sp, &a) || !parse_i64(sp + 1, end, &b) || a < 0 || a > 255 + 128 ||
                    b < 0 || b > 64)
                        goto bad;
                ret->exit_code = (int)a;
                ret->exit_signal = (int)b;
                return 0;
        }
        case 'E':
                snprintf(ret->reason, sizeof(ret->reason), "%.*s", (int)(len - 1), p + 1);
                sanitize(ret->reason);
                return 0;
        default:
                break;
        }
bad:
        return na_error_set(err, EBADMSG, NA_E_DRIVER, "app monitor: bad message");
}
