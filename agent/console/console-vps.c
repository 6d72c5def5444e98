/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Server consoles (AGENT-API 4.3, modes "vps-serial" and "vps-vnc"): the descriptor
 * the VM driver hands out (drivers/vm.h console_open: the serial port's pty, or the
 * VNC display's own connection) watched on the loop, its bytes as
 * binary frames to the relay and the relay's binary frames written back. The relay's
 * pace is respected: while a session holds CONSOLE_VPS_HIGH bytes not yet sent, the
 * socket is not read (RFB cannot lose a byte); what the relay sends waits in a buffer
 * of at most CONSOLE_QUEUE_MAX bytes while the socket is full.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <termios.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/console/console-internal.h"
#include "agent/base/log.h"
#include "agent/base/services.h"
#include "drivers/vm.h"

#define CONSOLE_VPS_HIGH (512u * 1024u)
#define CONSOLE_VPS_READ (64u * 1024u)

static size_t backlog(struct console_session *s)
{
        return s->qbytes + (s->ws ? ws_queued(s->ws) : 0);
}

static void on_vps(void *userdata, int fd, uint32_t revents);

static void rewatch(struct console_session *s)
{
        if (s->vps_fd < 0)
                return;
        uint32_t ev = (backlog(s) < CONSOLE_VPS_HIGH ? EPOLLIN : 0) | (s->vps_in_len ? EPOLLOUT : 0);
        struct na_error err = NA_ERROR_INIT;
        if (loop_watch(s->c->opt.loop, s->vps_fd, ev, on_vps, s, &err) < 0) {
                log_warn("console %s: %s", s->id, err.message);
                na_error_clear(&err);
                console_end(s, 1011, "internal-error");
        }
}

static void reopen_tick(void *userdata);

/*
 * The serial pty hung up while the server may still run (qemu's pty reports a hangup
 * while the guest brings its serial port up at boot): open the same pty again every
 * 200 ms for up to 15 s before calling the console gone. Opening a pty by its path
 * is local and quick, never IPC.
 */
static bool serial_retry(struct console_session *s)
{
        if (s->mode != PROTO_CONSOLE_VPS_SERIAL || !s->vps_path[0] || s->vps_retries >= 75)
                return false;
        if (!s->vps_timer && !(s->vps_timer = loop_timer_new(s->c->opt.loop, reopen_tick, s)))
                return false;
        loop_unwatch(s->c->opt.loop, s->vps_fd);
        close(s->vps_fd);
        s->vps_fd = -1;
        s->vps_retries++;
        loop_timer_arm_ms(s->vps_timer, 200);
        return true;
}

static void gone(struct console_session *s)
{
        if (serial_retry(s))
                return;
        const struct agent_services *sv = s->c->opt.services;
        bool exists = sv->vps_exists && sv->vps_exists(sv, s->target_id);
        console_end(s, 1000, exists ? "target-stopped" : "target-deleted");
}

static void on_vps(void *userdata, int fd, uint32_t revents)
{
        struct console_session *s = userdata;
        if (revents & EPOLLOUT) {
                ssize_t n = write(fd, s->vps_in, s->vps_in_len); /* non-blocking; SIGPIPE is ignored */
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        gone(s);
                        return;
                }
                if (n > 0) {
                        memmove(s->vps_in, s->vps_in + n, s->vps_in_len - (size_t)n);
                        s->vps_in_len -= (size_t)n;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                char buf[CONSOLE_VPS_READ];
                for (int i = 0; i < 4 && backlog(s) < CONSOLE_VPS_HIGH; i++) {
                        ssize_t n = read(fd, buf, sizeof(buf));
                        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                                break;
                        if (n <= 0) {
                                gone(s);
                                return;
                        }
                        console_send(s, WS_BINARY, buf, (size_t)n);
                }
        }
        rewatch(s);
}

static void reopen_tick(void *userdata)
{
        struct console_session *s = userdata;
        int fd = open(s->vps_path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        struct termios tio;
        if (fd >= 0 && tcgetattr(fd, &tio) == 0) {
                cfmakeraw(&tio);
                tcsetattr(fd, TCSANOW, &tio);
        }
        if (fd < 0) {
                s->vps_path[0] = 0; /* the pty is gone: the server stopped */
                gone(s);
                return;
        }
        s->vps_fd = fd;
        rewatch(s);
}

int console_vps_start(struct console_session *s, struct na_error *err)
{
        /* consoles_open() opened it on the job's worker (blocking IPC, and its failure fails the job). */
        if (s->vps_fd < 0)
                return na_error_set(err, EBADF, NA_E_INTERNAL, "console %s: no console socket", s->id);
        if (s->mode == PROTO_CONSOLE_VPS_SERIAL) { /* its path, to open again after a hangup */
                char link[64];
                snprintf(link, sizeof(link), "/proc/self/fd/%d", s->vps_fd);
                ssize_t n = readlink(link, s->vps_path, sizeof(s->vps_path) - 1);
                s->vps_path[n > 0 && strncmp(s->vps_path, "/dev/pts/", 9) == 0 ? n : 0] = 0;
        }
        return loop_watch(s->c->opt.loop, s->vps_fd, EPOLLIN, on_vps, s, err);
}

void console_vps_input(struct console_session *s, const uint8_t *data, size_t len)
{
        if (s->vps_fd < 0)
                return;
        if (s->vps_in_len + len > CONSOLE_QUEUE_MAX) {
                console_end(s, 1008, "input-overflow");
                return;
        }
        uint8_t *p = realloc(s->vps_in, s->vps_in_len + len);
        if (!p) {
                console_end(s, 1011, "internal-error");
                return;
        }
        s->vps_in = p;
        memcpy(s->vps_in + s->vps_in_len, data, len);
        s->vps_in_len += len;
        rewatch(s);
}

void console_vps_drained(struct console_session *s)
{
        rewatch(s);
}

void console_vps_stop(struct console_session *s)
{
        loop_timer_free(s->vps_timer);
        s->vps_timer = NULL;
        if (s->vps_fd >= 0) {
                loop_unwatch(s->c->opt.loop, s->vps_fd);
                close(s->vps_fd);
                s->vps_fd = -1;
        }
        free(s->vps_in);
        s->vps_in = NULL;
        s->vps_in_len = 0;
}
