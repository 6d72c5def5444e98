/* SPDX-License-Identifier: GPL-2.0-or-later */
/* An open-addressing hash set of paths with flags (FNV-1a, grown at half full). */
#include "drivers/app/image/app-layer-pathset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"

static uint64_t hash_n(const char *s, size_t n)
{
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char)s[i];
                h *= 1099511628211ull;
        }
        return h;
}

/* The slot holding s[0..n) or the empty slot where it belongs. */
static size_t slot_of(const struct app_pathset *s, const char *key, size_t n)
{
        size_t i = hash_n(key, n) & (s->cap - 1);
        while (s->keys[i] && !(strlen(s->keys[i]) == n && memcmp(s->keys[i], key, n) == 0))
                i = (i + 1) & (s->cap - 1);
        return i;
}

static int grow(struct app_pathset *s)
{
        size_t ncap = s->cap ? s->cap * 2 : 64;
        struct app_pathset ns = { calloc(ncap, sizeof(char *)), calloc(ncap, 1), ncap, s->n };
        if (!ns.keys || !ns.flags) {
                free(ns.keys);
                free(ns.flags);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s->cap; i++)
                if (s->keys[i]) {
                        size_t j = slot_of(&ns, s->keys[i], strlen(s->keys[i]));
                        ns.keys[j] = s->keys[i];
                        ns.flags[j] = s->flags[i];
                }
        free(s->keys);
        free(s->flags);
        *s = ns;
        return 0;
}

static int add(struct app_pathset *s, const char *key, size_t n, uint8_t flag)
{
        if ((s->n + 1) * 2 > s->cap && grow(s) < 0)
                return -ENOMEM;
        size_t i = slot_of(s, key, n);
        if (!s->keys[i]) {
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                if (!(s->keys[i] = strndup(key, n)))
                        return -ENOMEM;
                NA_ANALYZER_FP_END
                s->n++;
        }
        s->flags[i] |= flag;
        return 0;
}

int app_pathset_mark(struct app_pathset *s, const char *path)
{
        size_t n = strlen(path);
        if (add(s, path, n, APP_PATH_MADE) < 0)
                return -ENOMEM;
        for (size_t i = n; i > 0; i--)
                if (path[i - 1] == '/' && add(s, path, i - 1, APP_PATH_ABOVE_MADE) < 0)
                        return -ENOMEM;
        return 0;
}

unsigned app_pathset_get(const struct app_pathset *s, const char *path)
{
        if (!s->cap)
                return 0;
        size_t i = slot_of(s, path, strlen(path));
        return s->keys[i] ? s->flags[i] : 0;
}

void app_pathset_free(struct app_pathset *s)
{
        for (size_t i = 0; i < s->cap; i++)
                free(s->keys[i]);
        free(s->keys);
        free(s->flags);
        memset(s, 0, sizeof(*s));
}
