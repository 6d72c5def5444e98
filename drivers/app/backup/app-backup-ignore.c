/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ignore patterns of app.backup.create: a small .gitignore-like matcher
 * (rules in drivers/app/backup/app-backup-parts.h). Each pattern is compiled once into a
 * sequence of positions of a nondeterministic automaton, and a path is matched by
 * carrying the set of live positions along it, 64 positions to a machine word:
 * time O(path length x pattern length / 64) whatever the pattern, never the
 * exponential backtracking of a recursive glob ("**a**a**a**a**a**b" against a long
 * name). Semantics (pinned by tests/drivers/app-backup/test-app-backup-unit.c):
 *   "*"   any run of characters but "/"                      (a star)
 *   "**"  at the end: anything; followed by "/" at the start of a component (or of
 *         the pattern): zero or more whole components ("(.*\/)?"); elsewhere: any
 *         run of characters, "/" included
 *   "?"   one character but "/"; "[...]" one character of a class, never "/" (an
 *         unclosed "[" is a plain "["); "\x" the character x; others themselves.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "drivers/app/backup/app-backup-parts.h"

/* ---- one compiled glob ---------------------------------------------------------- */

struct glob_class {
        size_t pos;
        uint64_t set[4]; /* the 256 byte values, "/" never in it */
};

struct glob {
        size_t n, words;         /* positions 0..n-1, position n: matched; words of n + 1 bits */
        uint64_t *one, *body;    /* "?" positions; the "(.*\/)?" positions */
        uint64_t *star, *dstar;  /* "*" (not over "/") and "**" (over anything) */
        uint64_t *skip;          /* positions left without consuming: star, dstar, body */
        size_t lit_at[257];      /* literal positions by byte: lit_pos[lit_at[c] .. lit_at[c + 1]] */
        size_t *lit_pos;
        struct glob_class *classes;
        size_t nclasses;
};

enum tok { T_LIT, T_ONE, T_CLASS, T_STAR, T_DSTAR, T_BODY };

struct token {
        enum tok kind;
        unsigned char c;
        const char *class_at; /* T_CLASS: its "[" in the pattern */
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

/* The pattern as positions (tokens: at most one per byte of the pattern). */
static size_t tokenize(const char *pattern, struct token *t)
{
        size_t n = 0;
        for (const char *p = pattern; *p;) {
                switch (*p) {
                case '*':
                        if (p[1] == '*') {
                                bool seg_start = p == pattern || p[-1] == '/';
                                const char *q = p + 2;
                                if (*q == '/' && seg_start) {
                                        t[n++] = (struct token){ .kind = T_BODY };
                                        p = q + 1;
                                } else {
                                        t[n++] = (struct token){ .kind = T_DSTAR };
                                        p = q;
                                }
                                continue;
                        }
                        t[n++] = (struct token){ .kind = T_STAR };
                        p++;
                        continue;
                case '?':
                        t[n++] = (struct token){ .kind = T_ONE };
                        p++;
                        continue;
                case '[': {
                        size_t len = 0;
                        if (class_match(p, 'x', &len) < 0) {
                                t[n++] = (struct token){ .kind = T_LIT, .c = '[' };
                                p++;
                                continue;
                        }
                        t[n++] = (struct token){ .kind = T_CLASS, .class_at = p };
                        p += len;
                        continue;
                }
                case '\\':
                        if (p[1])
                                p++;
                        /* fall through */
                default:
                        t[n++] = (struct token){ .kind = T_LIT, .c = (unsigned char)*p };
                        p++;
                        continue;
                }
        }
        return n;
}

static void set_bit(uint64_t *w, size_t i)
{
        w[i / 64] |= 1ull << (i % 64);
}

static bool get_bit(const uint64_t *w, size_t i)
{
        return (w[i / 64] >> (i % 64)) & 1;
}

static void glob_free(struct glob *g)
{
        if (!g)
                return;
        free(g->one);
        free(g->lit_pos);
        free(g->classes);
        free(g);
}

static struct glob *glob_compile(const char *pattern)
{
        size_t len = strlen(pattern);
        _cleanup_free_ struct token *t = calloc(len + 1, sizeof(*t));
        struct glob *g = calloc(1, sizeof(*g));
        if (!t || !g) {
                free(g);
                return NULL;
        }
        g->n = tokenize(pattern, t);
        g->words = (g->n + 1 + 63) / 64;
        size_t nlit = 0;
        for (size_t i = 0; i < g->n; i++) {
                nlit += t[i].kind == T_LIT;
                g->nclasses += t[i].kind == T_CLASS;
        }
        g->one = calloc(5 * g->words, sizeof(uint64_t)); /* one allocation for the five masks */
        g->lit_pos = calloc(nlit + 1, sizeof(*g->lit_pos));
        g->classes = calloc(g->nclasses + 1, sizeof(*g->classes));
        if (!g->one || !g->lit_pos || !g->classes) {
                glob_free(g);
                return NULL;
        }
        g->body = g->one + g->words;
        g->star = g->body + g->words;
        g->dstar = g->star + g->words;
        g->skip = g->dstar + g->words;
        /* Literal positions sorted by byte (a counting sort). */
        for (size_t i = 0; i < g->n; i++)
                if (t[i].kind == T_LIT)
                        g->lit_at[t[i].c + 1]++;
        for (size_t c = 1; c <= 256; c++)
                g->lit_at[c] += g->lit_at[c - 1];
        size_t fill[256];
        memcpy(fill, g->lit_at, sizeof(fill));
        size_t k = 0;
        for (size_t i = 0; i < g->n; i++) {
                switch (t[i].kind) {
                case T_LIT:
                        g->lit_pos[fill[t[i].c]++] = i;
                        break;
                case T_ONE:
                        set_bit(g->one, i);
                        break;
                case T_CLASS: {
                        struct glob_class *cl = &g->classes[k++];
                        cl->pos = i;
                        size_t clen;
                        for (unsigned c = 1; c < 256; c++)
                                if (class_match(t[i].class_at, (char)c, &clen) == 1)
                                        cl->set[c / 64] |= 1ull << (c % 64);
                        break;
                }
                case T_STAR:
                        set_bit(g->star, i);
                        set_bit(g->skip, i);
                        break;
                case T_DSTAR:
                        set_bit(g->dstar, i);
                        set_bit(g->skip, i);
                        break;
                case T_BODY:
                        set_bit(g->body, i);
                        set_bit(g->skip, i);
                        break;
                }
        }
        return g;
}

/* ---- matching ---------------------------------------------------------------------- */

/* Room for one match: the live set, a work set and the masks of the bytes met so far. */
struct glob_scratch {
        size_t words;
        uint64_t *live, *next, *masks; /* masks: 256 x words */
};

static int scratch_fit(struct glob_scratch *s, size_t words)
{
        if (s->words >= words)
                return 0;
        uint64_t *m = realloc(s->live, (2 + 256) * words * sizeof(uint64_t));
        if (!m)
                return -ENOMEM;
        s->live = m;
        s->next = m + words;
        s->masks = m + 2 * words;
        s->words = words;
        return 0;
}

/*
 * x plus every position reached from its positions without consuming: a live
 * position on a run of skippable ones carries through the run to the first position
 * after it, one addition per word (adding a run's live bits to the run clears the
 * bits above the lowest and sets the one past its end).
 */
static void closure(const struct glob *g, uint64_t *x)
{
        unsigned carry = 0;
        for (size_t w = 0; w < g->words; w++) {
                uint64_t a = g->skip[w], b = x[w] & a, sum;
                unsigned c1 = __builtin_add_overflow(a, b, &sum);
                unsigned c2 = __builtin_add_overflow(sum, (uint64_t)carry, &sum);
                carry = c1 | c2;
                x[w] |= sum ^ a;
        }
}

/* Which positions consume byte c and move on. */
static const uint64_t *mask_of(const struct glob *g, struct glob_scratch *s, bool *have, unsigned char c)
{
        uint64_t *m = s->masks + (size_t)c * g->words;
        if (have[c])
                return m;
        have[c] = true;
        const uint64_t *any = c == '/' ? g->body : g->one;
        memcpy(m, any, g->words * sizeof(uint64_t));
        for (size_t i = g->lit_at[c]; i < g->lit_at[c + 1]; i++)
                set_bit(m, g->lit_pos[i]);
        for (size_t i = 0; i < g->nclasses; i++)
                if ((g->classes[i].set[c / 64] >> (c % 64)) & 1)
                        set_bit(m, g->classes[i].pos);
        return m;
}

static bool glob_match(const struct glob *g, struct glob_scratch *s, const char *path)
{
        bool have[256] = { false };
        size_t W = g->words;
        uint64_t *live = s->live, *next = s->next;
        memset(live, 0, W * sizeof(uint64_t));
        live[0] = 1;
        closure(g, live);
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                const uint64_t *m = mask_of(g, s, have, *p);
                const uint64_t *stay = *p == '/' ? g->dstar : NULL;
                uint64_t carry = 0, any = 0;
                for (size_t w = 0; w < W; w++) {
                        uint64_t moved = live[w] & m[w];
                        uint64_t stays = live[w] & (stay ? stay[w] : (g->star[w] | g->dstar[w]));
                        next[w] = (moved << 1) | carry | stays;
                        carry = moved >> 63;
                }
                closure(g, next);
                for (size_t w = 0; w < W; w++) {
                        next[w] |= live[w] & g->body[w]; /* "(.*\/)?" waits on, never skipped past */
                        any |= next[w];
                }
                uint64_t *tmp = live;
                live = next;
                next = tmp;
                if (!any)
                        return false;
        }
        return get_bit(live, g->n);
}

bool app_backup_glob(const char *pattern, const char *path)
{
        struct glob *g = glob_compile(pattern);
        struct glob_scratch s = { 0 };
        bool m = g && scratch_fit(&s, g->words) == 0 && glob_match(g, &s, path);
        free(s.live);
        glob_free(g);
        return m;
}

/* ---- the rules ---------------------------------------------------------------------- */

struct rule {
        struct glob *glob;
        bool negate;
        bool dir_only;
        bool anchored;  /* matched against the whole path, else against the last component */
};

struct app_backup_ignore {
        struct rule *rules;
        size_t n;
        struct glob_scratch *scratch; /* one walk uses a set at a time */
};

void app_backup_ignore_free(struct app_backup_ignore *ig)
{
        if (!ig)
                return;
        for (size_t i = 0; i < ig->n; i++)
                glob_free(ig->rules[i].glob);
        free(ig->rules);
        if (ig->scratch)
                free(ig->scratch->live);
        free(ig->scratch);
        free(ig);
}

int app_backup_ignore_new(char *const *patterns, struct app_backup_ignore **ret, struct na_error *err)
{
        size_t n = 0;
        while (patterns && patterns[n])
                n++;
        struct app_backup_ignore *ig = calloc(1, sizeof(*ig));
        if (!ig || !(ig->rules = calloc(n + 1, sizeof(*ig->rules))) || !(ig->scratch = calloc(1, sizeof(*ig->scratch)))) {
                if (ig)
                        free(ig->rules);
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
                _cleanup_free_ char *glob = strndup(p, len);
                if (glob) {
                        if (strchr(glob, '/'))
                                r.anchored = true;
                        r.glob = glob_compile(glob);
                }
                if (!r.glob || scratch_fit(ig->scratch, r.glob->words) < 0) {
                        glob_free(r.glob);
                        app_backup_ignore_free(ig);
                        return na_error_sys(err, ENOMEM, "ignore patterns");
                }
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
                if (glob_match(r->glob, ig->scratch, r->anchored ? rel : base))
                        return !r->negate;
        }
        return false;
}
