/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The exec helper's request format: encode and validate, no I/O. */
#include "common/spawnd.h"

#include <errno.h>
#include <string.h>

static int put(char *buf, size_t cap, size_t *off, const char *s)
{
        size_t n = strlen(s) + 1;
        if (n > cap - *off)
                return -E2BIG;
        memcpy(buf + *off, s, n);
        *off += n;
        return 0;
}

int na_spawnd_encode(const struct na_spawnd_cmd *c, char *buf, size_t cap, size_t *ret_len)
{
        if (!c || !c->path || c->path[0] != '/' || !c->argv || !c->argv[0] || (c->flags & ~NA_SPAWND_FLAGS) ||
            c->nfds < 3 || c->nfds > NA_SPAWND_MAX_FDS || !c->fds)
                return -EINVAL;
        struct na_spawnd_hdr h = { .magic = NA_SPAWND_MAGIC, .flags = c->flags, .nfds = c->nfds };
        if (cap > NA_SPAWND_MAX_MSG)
                cap = NA_SPAWND_MAX_MSG;
        if (cap < sizeof(h))
                return -E2BIG;
        size_t off = sizeof(h);
        int r = put(buf, cap, &off, c->path);
        for (; r == 0 && c->argv[h.argc]; h.argc++)
                r = h.argc >= NA_SPAWND_MAX_ARGS ? -E2BIG : put(buf, cap, &off, c->argv[h.argc]);
        for (; r == 0 && c->envp && c->envp[h.envc]; h.envc++)
                r = h.envc >= NA_SPAWND_MAX_ENV ? -E2BIG : put(buf, cap, &off, c->envp[h.envc]);
        if (r < 0)
                return r;
        h.strings_len = (uint32_t)(off - sizeof(h));
        memcpy(buf, &h, sizeof(h));
        *ret_len = off;
        return 0;
}

int na_spawnd_decode(char *buf, size_t len, unsigned nfds_received, struct na_spawnd_req *req)
{
        struct na_spawnd_hdr h;
        if (!buf || len < sizeof(h) || len > NA_SPAWND_MAX_MSG)
                return -EINVAL;
        memcpy(&h, buf, sizeof(h));
        if (h.magic != NA_SPAWND_MAGIC || (h.flags & ~NA_SPAWND_FLAGS) || h.strings_len != len - sizeof(h) ||
            h.nfds != nfds_received || h.nfds < 3 || h.argc < 1)
                return -EINVAL;
        if (h.nfds > NA_SPAWND_MAX_FDS || h.argc > NA_SPAWND_MAX_ARGS || h.envc > NA_SPAWND_MAX_ENV)
                return -E2BIG;
        /* Exactly 1 + argc + envc strings, each NUL-terminated, filling the rest. */
        char *p = buf + sizeof(h), *end = buf + len;
        char *strs[1 + NA_SPAWND_MAX_ARGS + NA_SPAWND_MAX_ENV];
        size_t want = 1 + (size_t)h.argc + h.envc, got = 0;
        while (p < end) {
                char *nul = memchr(p, '\0', (size_t)(end - p));
                if (!nul || got == want)
                        return -EINVAL;
                strs[got++] = p;
                p = nul + 1;
        }
        if (got != want || strs[0][0] != '/')
                return -EINVAL;
        for (size_t i = 0; i < h.envc; i++)
                if (!strchr(strs[1 + h.argc + i], '=') || strs[1 + h.argc + i][0] == '=')
                        return -EINVAL;
        req->flags = h.flags;
        req->nfds = h.nfds;
        req->path = strs[0];
        for (size_t i = 0; i < h.argc; i++)
                req->argv[i] = strs[1 + i];
        req->argv[h.argc] = NULL;
        for (size_t i = 0; i < h.envc; i++)
                req->envp[i] = strs[1 + h.argc + i];
        req->envp[h.envc] = NULL;
        return 0;
}
