/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Issue 20, attack 4: the backup ignore matcher against patterns that made the old
 * recursive glob backtrack for years. The landed matcher is kept here as the oracle:
 * the new one (drivers/app/backup/app-backup-ignore.c) must answer exactly as it did on every
 * pattern and path of a random table, and answer the hostile ones in microseconds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drivers/app/backup/app-backup-parts.h"

/* ---- the landed matcher (exponential on "**" chains), the oracle ---- */
/* [...] at p against c: 1 match, 0 no match, -1 not a class (no closing "]"). *len: bytes of the class. */
static int oracle_class_match(const char *p, char c, size_t *len)
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
static bool oracle_at(const char *start, const char *p, const char *s)
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
                                                if (oracle_at(start, q, t))
                                                        return true;
                                        goto mismatch;
                                }
                                for (const char *t = s;; t++) {
                                        if (oracle_at(start, q, t))
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
                        int m = *s ? oracle_class_match(p, *s, &len) : 0;
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


static bool oracle(const char *pattern, const char *path)
{
        return oracle_at(pattern, pattern, path);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Random patterns and paths over a small alphabet rich in the matcher's syntax. */
static void test_same_answers(void **state)
{
        (void)state;
        static const char pat_alpha[] = "ab/*?[]!^-\\.";
        static const char path_alpha[] = "ab/.-[]*\\";
        unsigned seed = 20;
        unsigned long n = 0, hits = 0;
        for (int i = 0; i < 400000; i++) {
                char p[10], s[12];
                int pl = rand_r(&seed) % 9, sl = rand_r(&seed) % 11;
                for (int k = 0; k < pl; k++)
                        p[k] = pat_alpha[rand_r(&seed) % (sizeof(pat_alpha) - 1)];
                for (int k = 0; k < sl; k++)
                        s[k] = path_alpha[rand_r(&seed) % (sizeof(path_alpha) - 1)];
                p[pl] = s[sl] = '\0';
                bool want = oracle(p, s), got = app_backup_glob(p, s);
                if (want != got)
                        fail_msg("glob '%s' against '%s': the landed matcher says %d, the new one %d", p, s, want, got);
                n++;
                hits += want;
        }
        printf("%lu patterns and paths, %lu matches, answers identical\n", n, hits);
        assert_true(hits > 1000);
}

/* The attack of the issue, and its big brothers: each answered at once. */
static void test_hostile_patterns(void **state)
{
        (void)state;
        char name[256], longpath[4097], pat[4097];
        memset(name, 'a', 255);
        name[255] = '\0';
        memset(longpath, 'a', 4096);
        for (int i = 255; i < 4096; i += 256)
                longpath[i] = '/';
        longpath[4096] = '\0';
        /* "**a" 1365 times then "b": the old matcher recursed 1365 deep over every position. */
        size_t k = 0;
        while (k + 3 < 4095) {
                memcpy(pat + k, "**a", 3);
                k += 3;
        }
        pat[k++] = 'b';
        pat[k] = '\0';
        struct { const char *p, *s; bool m; } t[] = {
                { "**a**a**a**a**a**b", name, false },
                { "**a**a**a**a**a**a", name, true },
                { "*a*a*a*a*a*a*a*a*b", name, false },
                { "**/**/**/**/**/**/**/b", longpath, false },
                { pat, name, false },
                { pat, longpath, false },
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                double t0 = now_s();
                bool m = app_backup_glob(t[i].p, t[i].s);
                double dt = now_s() - t0;
                printf("pattern %zu (%zu bytes) against %zu bytes: %s in %.6f s\n", i, strlen(t[i].p), strlen(t[i].s),
                       m ? "match" : "no match", dt);
                assert_int_equal(m, t[i].m);
                assert_true(dt < 0.5);
        }
        /* The same through a rule set, as the archive writer asks it. */
        char *pats[] = { (char *)"**a**a**a**a**a**b", pat, NULL };
        struct app_backup_ignore *ig = NULL;
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_backup_ignore_new(pats, &ig, &err), 0);
        double t0 = now_s();
        for (int i = 0; i < 100; i++)
                assert_false(app_backup_ignored(ig, longpath, false));
        printf("100 lookups of a 4096-byte path against both: %.3f s\n", now_s() - t0);
        assert_true(now_s() - t0 < 5);
        app_backup_ignore_free(ig);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_same_answers),
                cmocka_unit_test(test_hostile_patterns),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
