/*
 * The ignore patterns of app.backup.create: a small .gitignore-like matcher
 * (rules in drivers/app/backup/app-backup-parts.h). Patterns are parsed once; matching is a
 * recursive glob whose "*" and "**" backtrack over one path (at most 4096 bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "drivers/app/backup/app-backup-parts.h"

struct rule {
        char *glob;     /* without "!", leading "/" and trailing "/" */
        bool negate;
        bool dir_only;
        bool anchored;  /* matched against the whole path, else against the last component */
};

struct app_backup_ignore {
        struct rule *rules;
        size_t n;
};

/* [...] at p against c: 1 match, 0 no match, -1 not a class (no closing "]"). *len: bytes of the class. */
static int class_match(const char *p, char c, size_t *len)
{
        const char *q = p + 1;
        bool neg = false;
        if (*q == '!' || *q == '^') {
                neg = true;
                q++;
        }
        bool hit = false, first = true;
        for (; *q && (first || *q != ']'); first = false) {
                char lo = *q;
                if (lo == '\\' && q[1])
                        lo = *++q;
                q++;
                char hi = lo;
                if (*q == '-' && q[1] && q[1] != ']') {
                        q++;
                        if (*q == '\\' && q[1])
                                q++;
                        hi = *q++;
                }
                if ((unsigned char)c >= (unsigned char)lo && (unsigned char)c <= (unsigned char)hi)
                        hit = true;
        }
        if (*q != ']')
                return -1;
        *len = (size_t)(q + 1 - p);
        return (hit != neg) && c != '/' ? 1 : 0;
}

/*
 * "*" backtracks only to the latest one (the classic linear-time wildcard match; a
 * "*" never crosses "/", so an earlier one could not do better); "**" recurses.
 */
static bool glob_at(const char *start, const char *p, const char *s)
{
        const char *star_p = NULL, *star_s = NULL;
        for (;;) {
                switch (*p) {
                case '\0':
                        if (*s == '\0')
                                return true;
                        goto mismatch;
                case '*':
                        if (p[1] == '*') {
                                const char *q = p + 2;
                                bool seg_start = p == start || p[-1] == '/';
                                if (*q == '\0')
                                        return true;
                                if (*q == '/' && seg_start) {
                                        /* "**" then a slash: zero or more whole components. */
                                        q++;
                                        for (const char *t = s; t; t = strchr(t, '/'), t = t ? t + 1 : NULL)
                                                if (glob_at(start, q, t))
                                                        return true;
                                        goto mismatch;
                                }
                                for (const char *t = s;; t++) {
                                        if (glob_at(start, q, t))
                                                return true;
                                        if (!*t)
                                                goto mismatch;
                                }
                        }
                        star_p = ++p;
                        star_s = s;
                        continue;
                case '?':
                        if (!*s || *s == '/')
                                goto mismatch;
                        p++;
                        s++;
                        continue;
                case '[': {
                        size_t len = 0;
                        int m = *s ? class_match(p, *s, &len) : 0;
                        if (m < 0) {
                                if (*s != '[')
                                        goto mismatch;
                                p++;
                                s++;
                                continue;
                        }
                        if (m == 0)
                                goto mismatch;
                        p += len;
                        s++;
                        continue;
                }
                case '\\':
                        if (p[1])
                                p++;
                        /* fall through */
                default:
                        if (*p != *s)
                                goto mismatch;
                        p++;
                        s++;
                        continue;
                }
        mismatch:
                if (!star_p || !*star_s || *star_s == '/')
                        return false;
                p = star_p;
                s = ++star_s;
        }
}

bool app_backup_glob(const char *pattern, const char *path)
{
        return glob_at(pattern, pattern, path);
}

void app_backup_ignore_free(struct app_backup_ignore *ig)
{
        if (!ig)
                return;
        for (size_t i = 0; i < ig->n; i++)
                free(ig->rules[i].glob);
        free(ig->rules);
        free(ig);
}

int app_backup_ignore_new(char *const *patterns, struct app_backup_ignore **ret, struct na_error *err)
{
        size_t n = 0;
        while (patterns && patterns[n])
                n++;
        struct app_backup_ignore *ig = calloc(1, sizeof(*ig));
        if (!ig || !(ig->rules = calloc(n + 1, sizeof(*ig->rules)))) {
                free(ig);
                return na_error_sys(err, ENOMEM, "ignore patterns");
        }
        for (size_t i = 0; i < n; i++) {
                const char *p = patterns[i];
                struct rule r = { 0 };
                if (*p == '\0' || *p == '#')
                        continue;
                if (*p == '!') {
                        r.negate = true;
                        p++;
                }
                size_t len = strlen(p);
                /* Trailing spaces are dropped unless escaped, as git does. */
                while (len > 0 && p[len - 1] == ' ' && !(len > 1 && p[len - 2] == '\\'))
                        len--;
                if (len > 0 && p[len - 1] == '/') {
                        r.dir_only = true;
                        len--;
                }
                if (*p == '/') {
                        r.anchored = true;
                        p++;
                        len = len > 0 ? len - 1 : 0;
                }
                if (len == 0)
                        continue;
                r.glob = strndup(p, len);
                if (!r.glob) {
                        app_backup_ignore_free(ig);
                        return na_error_sys(err, ENOMEM, "ignore patterns");
                }
                if (strchr(r.glob, '/'))
                        r.anchored = true;
                ig->rules[ig->n++] = r;
        }
        *ret = ig;
        return 0;
}

bool app_backup_ignored(const struct app_backup_ignore *ig, const char *rel, bool is_dir)
{
        if (!ig)
                return false;
        const char *base = strrchr(rel, '/');
        base = base ? base + 1 : rel;
        for (size_t i = ig->n; i-- > 0;) {
                const struct rule *r = &ig->rules[i];
                if (r->dir_only && !is_dir)
                        continue;
                if (app_backup_glob(r->glob, r->anchored ? rel : base))
                        return !r->negate;
        }
        return false;
}
