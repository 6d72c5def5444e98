/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Child processes in exec form, with their output bounded and their stderr kept for errors. */
#include "common/spawn.h"

#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "common/fault.h"
#include "common/macro.h"
#include "common/spawnd.h"

static void append_tail(char *tail, size_t cap, size_t *len, const char *data, size_t n)
{
        /* Keep the last cap-1 bytes: messages end with the reason. */
        if (n >= cap - 1) {
                memcpy(tail, data + n - (cap - 1), cap - 1);
                *len = cap - 1;
        } else {
                if (*len + n > cap - 1) {
                        size_t drop = *len + n - (cap - 1);
                        memmove(tail, tail + drop, *len - drop);
                        *len -= drop;
                }
                memcpy(tail + *len, data, n);
                *len += n;
        }
        tail[*len] = '\0';
}

static void strip_trailing(char *s)
{
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
                s[--n] = '\0';
}

int na_spawn_start(const struct na_spawnd_cmd *c, pid_t *ret_pid, int *ret_handle, struct na_error *err)
{
        *ret_handle = -1;
        if (na_spawnd_active())
                return na_spawnd_spawn(c, ret_pid, ret_handle, err); /* outside the agent's seccomp filter */
        if (c->flags & NA_SPAWND_DETACH)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "run %s: detached without the exec helper", c->path);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        for (unsigned i = 0; i < c->nfds; i++)
                posix_spawn_file_actions_adddup2(&fa, c->fds[i], (int)i);
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
        if (c->flags & NA_SPAWND_SETPGROUP) {
                flags |= POSIX_SPAWN_SETPGROUP;
                posix_spawnattr_setpgroup(&attr, 0);
        }
        posix_spawnattr_setflags(&attr, flags);
        int r = posix_spawn(ret_pid, c->path, &fa, &attr, c->argv, c->envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        return r != 0 ? na_error_sys(err, r, "run %s", c->path) : 0;
}

/* stdout kept up to max bytes (na_spawn's ret_out). */
struct keep_out {
        char *buf;
        size_t len, cap, max;
};

static int keep_out(void *userdata, const char *data, size_t n)
{
        struct keep_out *k = userdata;
        size_t take = n < k->max - k->len ? n : k->max - k->len;
        if (take == 0)
                return 0;
        if (k->len + take + 1 > k->cap) {
                size_t ncap = (k->len + take + 1) * 2;
                char *nb = realloc(k->buf, ncap);
                if (!nb)
                        return -ENOMEM;
                k->buf = nb;
                k->cap = ncap;
        }
        memcpy(k->buf + k->len, data, take);
        k->len += take;
        k->buf[k->len] = '\0';
        return 0;
}

int na_spawn(char *const argv[], const struct na_progress *progress, char **ret_out, size_t out_max,
             struct na_error *err)
{
        _cleanup_free_ char *out = NULL;
        struct keep_out k = { .max = out_max };
        int r = na_spawn_stream(argv, progress, ret_out ? keep_out : NULL, &k, err);
        out = k.buf;
        if (r < 0 || !ret_out)
                return r;
        if (!out) {
                out = strdup("");
                if (!out)
                        return na_error_sys(err, ENOMEM, "run %s", argv[0]);
        }
        *ret_out = TAKE_PTR(out);
        return 0;
}

int na_spawn_stream(char *const argv[], const struct na_progress *progress, na_spawn_out_fn on_out, void *userdata,
                    struct na_error *err)
{
        int outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
        if (pipe2(outp, O_CLOEXEC) < 0)
                return na_error_sys(err, errno, "run %s: pipe", argv[0]);
        if (pipe2(errp, O_CLOEXEC) < 0) {
                int e = errno;
                close(outp[0]);
                close(outp[1]);
                return na_error_sys(err, e, "run %s: pipe", argv[0]);
        }
        _cleanup_close_ int out_r = outp[0], err_r = errp[0];
        char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)"LC_ALL=C", NULL };
        pid_t pid;
        int r;
        _cleanup_close_ int handle = -1;
        {
                _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                const int fds[] = { null, outp[1], errp[1] };
                struct na_spawnd_cmd c = { .path = argv[0], .argv = argv, .envp = envp, .fds = fds, .nfds = 3 };
                r = null < 0 ? na_error_sys(err, errno, "run %s: /dev/null", argv[0])
                             : na_spawn_start(&c, &pid, &handle, err);
                close(outp[1]);
                close(errp[1]);
                if (r < 0)
                        return r;
        }

        char tail[512] = "";
        size_t tail_len = 0;
        bool killed = false;
        struct na_error stop = NA_ERROR_INIT;
        int open_fds = 2;
        while (open_fds > 0) {
                struct pollfd p[2] = { { out_r, POLLIN, 0 }, { err_r, POLLIN, 0 } };
                int n = NA_FAULT("spawn.poll") ? (errno = ENOMEM, -1) : poll(p, 2, 500);
                if (n < 0 && errno != EINTR) {
                        /* The child may be blocked on a full pipe: it must die before we wait. */
                        r = -errno;
                        kill(pid, SIGKILL);
                        break;
                }
                if (!killed && na_progress_checkpoint(progress, &stop) < 0) {
                        kill(pid, SIGKILL);
                        killed = true;
                }
                for (int i = 0; i < 2 && n > 0; i++) {
                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)) || p[i].fd < 0)
                                continue;
                        char buf[8192];
                        ssize_t k = read(p[i].fd, buf, sizeof(buf));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0) {
                                if (i == 0) {
                                        close(out_r);
                                        out_r = -1;
                                } else {
                                        close(err_r);
                                        err_r = -1;
                                }
                                open_fds--;
                                continue;
                        }
                        if (i == 1) {
                                append_tail(tail, sizeof(tail), &tail_len, buf, (size_t)k);
                        } else if (on_out && r == 0) {
                                int o = on_out(userdata, buf, (size_t)k);
                                if (o < 0) {
                                        kill(pid, SIGKILL);
                                        killed = true;
                                        r = o;
                                }
                        }
                }
        }
        int status = 0;
        if (handle >= 0) {
                int w = na_spawnd_wait(handle, &status);
                if (w < 0) {
                        na_error_clear(&stop);
                        return na_error_sys(err, -w, "wait for %s (exec helper)", argv[0]);
                }
        } else {
                while (waitpid(pid, &status, 0) < 0) {
                        if (errno != EINTR) {
                                na_error_clear(&stop);
                                return na_error_sys(err, errno, "wait for %s", argv[0]);
                        }
                }
        }
        if (killed && na_error_is_set(&stop)) {
                na_error_move(err, &stop);
                return -err->errnum;
        }
        na_error_clear(&stop);
        if (r < 0)
                return na_error_sys(err, -r, "run %s", argv[0]);
        strip_trailing(tail);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (WIFEXITED(status))
                na_error_set(err, EIO, NA_E_DRIVER, "%s exited with status %d: %s", argv[0], WEXITSTATUS(status),
                             tail[0] ? tail : "(no message)");
        else
                na_error_set(err, EIO, NA_E_DRIVER, "%s killed by signal %d: %s", argv[0],
                             WIFSIGNALED(status) ? WTERMSIG(status) : 0, tail[0] ? tail : "(no message)");
        na_error_detail(err, "reason", json_string(err->message));
        return -EIO;
}
