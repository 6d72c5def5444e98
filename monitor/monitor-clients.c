/* SPDX-License-Identifier: GPL-2.0-or-later */
/* nodeagent-monitor: APPDIR/monitor.sock (SOCK_SEQPACKET, 0600): console lines in, system lines in, notifications out. */
#include "monitor/monitor.h"

#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

static int sock_path(const struct monitor *m, struct sockaddr_un *sa)
{
        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        size_t n = (size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/monitor.sock", m->dir);
        return n < sizeof(sa->sun_path) ? 0 : -ENAMETOOLONG;
}

int mon_listen(struct monitor *m, char *errbuf, size_t errlen)
{
        struct sockaddr_un sa;
        if (sock_path(m, &sa) < 0) {
                snprintf(errbuf, errlen, "%s/monitor.sock: path too long for a unix socket", m->dir);
                return -ENAMETOOLONG;
        }
        m->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (m->listen_fd < 0)
                goto fail;
        unlink(sa.sun_path);
        if (bind(m->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0600) < 0 ||
            listen(m->listen_fd, 8) < 0)
                goto fail;
        return mon_epoll_mod(m, EPOLL_CTL_ADD, m->listen_fd, EPOLLIN, MON_TAG(MON_TAG_LISTEN, 0));
fail:
        snprintf(errbuf, errlen, "listen on %s: %s", sa.sun_path, strerror(errno));
        return -errno;
}

static void client_close(struct monitor *m, struct mon_client *c)
{
        if (c->fd < 0)
                return;
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        c->pending = 0;
}

/* Send one message; 0 sent, -EAGAIN no room (the caller keeps it pending), other < 0 the client is gone. */
static int client_send(struct mon_client *c, const char *msg, size_t len)
{
        ssize_t n = RETRY_EINTR(send(c->fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL));
        if (n == (ssize_t)len)
                return 0;
        return n < 0 && errno == EAGAIN ? -EAGAIN : -EPIPE;
}

static void client_flush(struct monitor *m, int index)
{
        struct mon_client *c = &m->clients[index];
        static const unsigned order[] = { MON_PEND_OUTPUT, MON_PEND_STARTED, MON_PEND_EXIT };
        for (size_t i = 0; i < ARRAY_SIZE(order) && c->fd >= 0; i++) {
                if (!(c->pending & order[i]))
                        continue;
                char msg[64];
                int len;
                if (order[i] == MON_PEND_OUTPUT)
                        len = snprintf(msg, sizeof(msg), "O%llu", (unsigned long long)app_ring_next_seq(m->ring));
                else if (order[i] == MON_PEND_STARTED)
                        len = snprintf(msg, sizeof(msg), "R");
                else
                        len = snprintf(msg, sizeof(msg), "X%d %d", m->exit_code, m->exit_signal);
                int r = client_send(c, msg, (size_t)len);
                if (r == -EAGAIN) {
                        mon_epoll_mod(m, EPOLL_CTL_MOD, c->fd, EPOLLIN | EPOLLOUT, MON_TAG(MON_TAG_CLIENT, index));
                        return;
                }
                if (r < 0) {
                        client_close(m, c);
                        return;
                }
                c->pending &= ~order[i];
        }
        if (c->fd >= 0)
                mon_epoll_mod(m, EPOLL_CTL_MOD, c->fd, EPOLLIN, MON_TAG(MON_TAG_CLIENT, index));
}

void mon_notify(struct monitor *m, unsigned what)
{
        for (int i = 0; i < MON_CLIENTS_MAX; i++)
                if (m->clients[i].fd >= 0) {
                        m->clients[i].pending |= what;
                        client_flush(m, i);
                }
}

void mon_accept(struct monitor *m)
{
        for (;;) {
                int fd = accept4(m->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return;
                }
                struct ucred cred;
                socklen_t clen = sizeof(cred);
                int slot = -1;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 &&
                    (cred.uid == 0 || cred.uid == geteuid()))
                        for (int i = 0; i < MON_CLIENTS_MAX && slot < 0; i++)
                                if (m->clients[i].fd < 0)
                                        slot = i;
                if (slot < 0 || mon_epoll_mod(m, EPOLL_CTL_ADD, fd, EPOLLIN, MON_TAG(MON_TAG_CLIENT, slot)) < 0) {
                        close(fd);
                        continue;
                }
                /* A (re)attaching client learns where the output stands and whether the app has started. */
                m->clients[slot] = (struct mon_client){ .fd = fd,
                                                        .pending = MON_PEND_OUTPUT | (m->started ? MON_PEND_STARTED : 0) };
                client_flush(m, slot);
        }
}

static bool has_byte(const char *p, size_t n, char b) { return memchr(p, b, n) != NULL; }

/* One message from a client: the answer ("K" or "E<reason>") it gets. */
static const char *client_message(struct monitor *m, const char *msg, size_t len)
{
        if (len == 0)
                return "empty message";
        const char *text = msg + 1;
        size_t tlen = len - 1;
        switch (msg[0]) {
        case 'L':
                if (tlen > MON_LINE_MAX)
                        return "line too long";
                if (has_byte(text, tlen, '\0') || has_byte(text, tlen, '\n'))
                        return "line holds a NUL or newline";
                return mon_stdin_queue(m, text, tlen);
        case 'S':
                if (tlen > APP_RING_TEXT_MAX)
                        return "system line too long";
                if (has_byte(text, tlen, '\0'))
                        return "system line holds a NUL";
                mon_system_line(m, text, tlen);
                return NULL;
        default:
                return "unknown message";
        }
}

void mon_client_event(struct monitor *m, int index, uint32_t events)
{
        struct mon_client *c = &m->clients[index];
        static char msg[MON_MSG_MAX + 1];
        while (c->fd >= 0 && (events & EPOLLIN)) {
                struct iovec iov = { msg, MON_MSG_MAX };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
                ssize_t n = RETRY_EINTR(recvmsg(c->fd, &mh, MSG_DONTWAIT));
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0) {
                        client_close(m, c);
                        return;
                }
                const char *reason = (mh.msg_flags & MSG_TRUNC) ? "message too long"
                                                                 : client_message(m, msg, (size_t)n);
                char answer[128];
                int alen = reason ? snprintf(answer, sizeof(answer), "E%s", reason) : snprintf(answer, sizeof(answer), "K");
                if (client_send(c, answer, (size_t)alen) < 0) {
                        client_close(m, c); /* a client that does not read its answers is dropped */
                        return;
                }
        }
        if (c->fd >= 0 && (events & (EPOLLHUP | EPOLLERR)) && !(events & EPOLLIN)) {
                client_close(m, c);
                return;
        }
        if (c->fd >= 0 && (events & EPOLLOUT))
                client_flush(m, index);
}

void mon_clients_close(struct monitor *m)
{
        for (int i = 0; i < MON_CLIENTS_MAX; i++)
                client_close(m, &m->clients[i]);
        if (m->listen_fd >= 0) {
                epoll_ctl(m->epfd, EPOLL_CTL_DEL, m->listen_fd, NULL);
                closep(&m->listen_fd);
                m->listen_fd = -1;
                unlinkat(m->dirfd, "monitor.sock", 0);
        }
}
