/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The controller link's bearer token: read, re-read when its file changes (rotation). */
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>

#include "agent/link/link-internal.h"
#include "agent/base/log.h"

#define TOKEN_MAX 4096

int link_read_token(struct link *l, char **ret, struct na_error *err)
{
        return config_read_token(l->opt.cfg->token_file, TOKEN_MAX + 1, ret, err);
}

void link_reload_token(struct link *l)
{
        struct na_error err = NA_ERROR_INIT;
        char *token = NULL;
        if (link_read_token(l, &token, &err) < 0) {
                log_error("controller link: %s; keeping the token in use", err.message);
                na_error_clear(&err);
                return;
        }
        if (l->token && streq(l->token, token)) {
                free(token);
                return;
        }
        if (http_set_token(l->http, token) < 0) {
                log_error("controller link: out of memory taking the new token from %s; keeping the token in use",
                          l->opt.cfg->token_file);
                free(token);
                return;
        }
        bool first = !l->token;
        free(l->token);
        l->token = token;
        if (!first) {
                log_info("controller link: token file %s changed; using the new token", l->opt.cfg->token_file);
                if (l->state == LINK_AUTH_REFUSED) {
                        loop_timer_disarm(l->retry_timer);
                        link_send_hello(l); /* a rotated token is worth trying at once */
                }
        }
}

static void inotify_event(void *userdata, int fd, uint32_t revents)
{
        struct link *l = userdata;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool ours = false;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *)p;
                        if (ev->len && streq(ev->name, l->token_base))
                                ours = true;
                        p += sizeof(*ev) + ev->len;
                }
        }
        if (ours)
                link_reload_token(l);
}

void link_watch_token(struct link *l)
{
        snprintf(l->token_dir, sizeof(l->token_dir), "%s", l->opt.cfg->token_file);
        char *slash = strrchr(l->token_dir, '/');
        if (!slash)
                return;
        snprintf(l->token_base, sizeof(l->token_base), "%s", slash + 1);
        *(slash == l->token_dir ? slash + 1 : slash) = '\0';
        l->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (l->inotify_fd < 0)
                return;
        l->inotify_wd = inotify_add_watch(l->inotify_fd, l->token_dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ATTRIB);
        if (l->inotify_wd < 0 || loop_watch(l->loop, l->inotify_fd, EPOLLIN, inotify_event, l, NULL) < 0) {
                log_warn("controller link: cannot watch %s for token rotation; the token is re-read after a 401 "
                         "and on SIGHUP",
                         l->token_dir);
                close(l->inotify_fd);
                l->inotify_fd = -1;
        }
}

void link_unwatch_token(struct link *l)
{
        if (l->inotify_fd >= 0) {
                loop_unwatch(l->loop, l->inotify_fd);
                close(l->inotify_fd);
                l->inotify_fd = -1;
        }
}
