/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The exec helper: its process (fork, serve, reap) and the agent's client side. */
#include "common/spawnd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"

#define MAX_CHILDREN 1024
#define FD_PARK 64 /* descriptors are moved above this before they take 0..nfds-1 */

static int spawnd_fd = -1; /* the agent's end; -1: no helper */
static pid_t spawnd_pid;

pid_t na_spawnd_pid(void)
{
        return spawnd_pid;
}

bool na_spawnd_active(void)
{
        return spawnd_fd >= 0;
}

/* ---- the helper's process ---- */

struct child {
        pid_t pid;
        int reply;
};

static void reply(int fd, int32_t error, int32_t value)
{
        struct na_spawnd_reply r = { error, value };
        (void)!send(fd, &r, sizeof(r), MSG_NOSIGNAL);
}

/* In the new process: only async-signal-safe calls. */
static _Noreturn void exec_child(const struct na_spawnd_req *req, const int *fds, int errfd)
{
        sigset_t none;
        sigemptyset(&none);
        for (int s = 1; s < NSIG; s++)
                signal(s, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if ((req->flags & NA_SPAWND_SETPGROUP) && setpgid(0, 0) < 0)
                goto fail;
        int parked[NA_SPAWND_MAX_FDS];
        for (unsigned i = 0; i < req->nfds; i++)
                if ((parked[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, FD_PARK)) < 0)
                        goto fail;
        for (unsigned i = 0; i < req->nfds; i++)
                if (dup2(parked[i], (int)i) < 0) /* dup2 clears FD_CLOEXEC on i */
                        goto fail;
        /* Everything else goes at exec, the error pipe included (its EOF says "exec worked"). */
        if (close_range(req->nfds, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                goto fail;
        execve(req->path, req->argv, req->envp);
fail:;
        int e = errno;
        (void)!write(errfd, &e, sizeof(e));
        _exit(127);
}

/* Fork (twice when detached) and exec; the pid, or -errno. For a detached program the
 * intermediate child is reaped here. */
static pid_t start(const struct na_spawnd_req *req, const int *fds)
{
        int errp[2], pidp[2] = { -1, -1 };
        if (pipe2(errp, O_CLOEXEC) < 0)
                return -errno;
        bool detach = req->flags & NA_SPAWND_DETACH;
        if (detach && pipe2(pidp, O_CLOEXEC) < 0) {
                int e = errno;
                close(errp[0]);
                close(errp[1]);
                return -e;
        }
        pid_t pid = fork();
        if (pid == 0) {
                if (!detach)
                        exec_child(req, fds, errp[1]);
                pid_t gc = fork();
                if (gc == 0)
                        exec_child(req, fds, errp[1]);
                (void)!write(pidp[1], &gc, sizeof(gc));
                _exit(gc < 0 ? 1 : 0);
        }
        int fork_errno = errno;
        close(errp[1]);
        if (detach)
                close(pidp[1]);
        if (pid < 0) {
                close(errp[0]);
                if (detach)
                        close(pidp[0]);
                return -fork_errno;
        }
        if (detach) {
                RETRY_EINTR(waitpid(pid, NULL, 0));
                pid_t gc = -1;
                if (RETRY_EINTR(read(pidp[0], &gc, sizeof(gc))) != (ssize_t)sizeof(gc) || gc <= 0)
                        gc = -EAGAIN;
                close(pidp[0]);
                pid = gc;
        }
        int e = 0;
        ssize_t n = RETRY_EINTR(read(errp[0], &e, sizeof(e))); /* EOF: exec happened */
        close(errp[0]);
        if (n == (ssize_t)sizeof(e) && pid > 0) {
                if (!detach)
                        RETRY_EINTR(waitpid(pid, NULL, 0));
                return -(e ? e : EIO);
        }
        return pid;
}

static void serve_request(int sock, struct child *kids, size_t *nkids)
{
        static char buf[NA_SPAWND_MAX_MSG];
        union {
                char b[CMSG_SPACE(sizeof(int) * (1 + NA_SPAWND_MAX_FDS))];
                struct cmsghdr align;
        } cbuf;
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b, .msg_controllen = sizeof(cbuf) };
        ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        if (n == 0)
                _exit(0); /* the agent is gone */
        if (n < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return;
                _exit(1);
        }
        int fds[1 + NA_SPAWND_MAX_FDS];
        unsigned nfds = 0;
        bool bad = m.msg_flags & (MSG_TRUNC | MSG_CTRUNC);
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
                        bad = true;
                        continue;
                }
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (nfds < ARRAY_SIZE(fds))
                                fds[nfds++] = fd;
                        else
                                close(fd), bad = true;
                }
        }
        struct na_spawnd_req req;
        int r = -EINVAL;
        if (!bad && nfds >= 1)
                r = na_spawnd_decode(buf, (size_t)n, nfds - 1, &req);
        if (r == 0 && !(req.flags & NA_SPAWND_DETACH) && *nkids >= MAX_CHILDREN)
                r = -EAGAIN;
        if (r == 0) {
                pid_t pid = start(&req, fds + 1);
                r = pid < 0 ? (int)pid : 0;
                if (r == 0) {
                        reply(fds[0], 0, pid);
                        if (!(req.flags & NA_SPAWND_DETACH)) {
                                kids[(*nkids)++] = (struct child){ pid, fds[0] };
                                fds[0] = -1;
                        }
                }
        }
        if (r < 0 && nfds >= 1)
                reply(fds[0], -r, 0);
        for (unsigned i = 0; i < nfds; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

static void reap(struct child *kids, size_t *nkids)
{
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                for (size_t i = 0; i < *nkids; i++) {
                        if (kids[i].pid != pid)
                                continue;
                        reply(kids[i].reply, 0, status);
                        close(kids[i].reply);
                        kids[i] = kids[--*nkids];
                        break;
                }
        }
}

static _Noreturn void helper_main(int sock, pid_t parent)
{
        static struct child kids[MAX_CHILDREN];
        size_t nkids = 0;
        /* Die with the agent; keep only the socket (and 0-2 for a crash message). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        if (dup2(sock, 3) < 0 || close_range(4, ~0U, 0) < 0)
                _exit(1);
        sock = 3;
        /* A Ctrl-C or a signal to the agent's process group is the agent's to handle: the
         * helper ends when the agent's end of the socket closes (or with the agent). */
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                _exit(1);
        for (;;) {
                struct pollfd p[2] = { { sock, POLLIN, 0 }, { sfd, POLLIN, 0 } };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                if (p[1].revents) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                                ;
                        reap(kids, &nkids);
                }
                if (p[0].revents & POLLIN)
                        serve_request(sock, kids, &nkids);
                else if (p[0].revents & (POLLHUP | POLLERR))
                        _exit(0);
        }
}

int na_spawnd_start(pid_t *ret_pid, struct na_error *err)
{
        if (spawnd_fd >= 0)
                return na_error_set(err, EALREADY, NA_E_INTERNAL, "exec helper: already started");
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return na_error_sys(err, errno, "exec helper: socketpair");
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid == 0) {
                close(sv[0]);
                helper_main(sv[1], parent);
        }
        int e = errno;
        close(sv[1]);
        if (pid < 0) {
                close(sv[0]);
                return na_error_sys(err, e, "exec helper: fork");
        }
        spawnd_fd = sv[0];
        spawnd_pid = pid;
        if (ret_pid)
                *ret_pid = pid;
        return 0;
}

/* ---- the agent's side ---- */

int na_spawnd_spawn(const struct na_spawnd_cmd *c, pid_t *ret_pid, int *ret_handle, struct na_error *err)
{
        const char *what = c && c->path ? c->path : "(no path)";
        if (spawnd_fd < 0)
                return na_error_set(err, ENOTCONN, NA_E_INTERNAL, "run %s: no exec helper", what);
        _cleanup_free_ char *buf = malloc(NA_SPAWND_MAX_MSG);
        if (!buf)
                return na_error_sys(err, ENOMEM, "run %s", what);
        size_t len = 0;
        int r = na_spawnd_encode(c, buf, NA_SPAWND_MAX_MSG, &len);
        if (r < 0)
                return na_error_set(err, -r, NA_E_INTERNAL, "run %s: %s", what,
                                    r == -E2BIG ? "command too long for the exec helper" : "invalid command");
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return na_error_sys(err, errno, "run %s: socketpair", what);
        _cleanup_close_ int mine = sv[0], theirs = sv[1];
        int fds[1 + NA_SPAWND_MAX_FDS];
        fds[0] = theirs;
        memcpy(fds + 1, c->fds, c->nfds * sizeof(int));
        union {
                char b[CMSG_SPACE(sizeof(fds))];
                struct cmsghdr align;
        } cbuf;
        memset(&cbuf, 0, sizeof(cbuf));
        struct iovec iov = { buf, len };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
                            .msg_controllen = CMSG_SPACE(sizeof(int) * (1 + c->nfds)) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (1 + c->nfds));
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (1 + c->nfds));
        if (RETRY_EINTR(sendmsg(spawnd_fd, &m, MSG_NOSIGNAL)) < 0)
                return na_error_sys(err, errno, "run %s: exec helper", what);
        close(TAKE_FD(theirs));
        struct na_spawnd_reply rep;
        ssize_t n = RETRY_EINTR(recv(mine, &rep, sizeof(rep), 0));
        if (n != (ssize_t)sizeof(rep))
                return na_error_set(err, EPIPE, NA_E_INTERNAL, "run %s: the exec helper did not answer", what);
        if (rep.error)
                return na_error_sys(err, rep.error, "run %s", what);
        if (rep.value <= 0)
                return na_error_set(err, EIO, NA_E_INTERNAL, "run %s: the exec helper answered pid %d", what,
                                    (int)rep.value);
        *ret_pid = rep.value;
        if (ret_handle && !(c->flags & NA_SPAWND_DETACH))
                *ret_handle = TAKE_FD(mine);
        return 0;
}

int na_spawnd_wait(int handle, int *ret_status)
{
        struct na_spawnd_reply rep;
        ssize_t n = RETRY_EINTR(recv(handle, &rep, sizeof(rep), 0));
        if (n < 0)
                return -errno;
        if (n != (ssize_t)sizeof(rep) || rep.error)
                return -ECHILD; /* the helper died before it saw the end */
        *ret_status = rep.value;
        return 0;
}
