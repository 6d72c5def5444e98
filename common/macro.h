/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Ownership and small helpers shared by every module (after systemd's alloc-util.h). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_ __attribute__((warn_unused_result))

/*
 * gcc -fanalyzer (NA_ANALYZER=ON) false positives, silenced for the lines between
 * NA_ANALYZER_FP(warning) and NA_ANALYZER_FP_END only, each use with a comment saying
 * why the finding is false. The analyzer reports a leak where the last reference goes
 * (often a return or the closing brace), so the pair brackets that line. Most are
 * GCC 12's known blind spots: a pointer stored into an element of a heap array that
 * the caller owns and frees, and variables released by __attribute__((cleanup)).
 * Nothing for other compilers.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define NA_PRAGMA_(x) _Pragma(#x)
#define NA_ANALYZER_FP(warning) _Pragma("GCC diagnostic push") NA_PRAGMA_(GCC diagnostic ignored warning)
#define NA_ANALYZER_FP_END _Pragma("GCC diagnostic pop")
#else
#define NA_ANALYZER_FP(warning)
#define NA_ANALYZER_FP_END
#endif

static inline bool streq(const char *a, const char *b) { return strcmp(a, b) == 0; }
static inline bool streq_ptr(const char *a, const char *b)
{
        return (a && b) ? strcmp(a, b) == 0 : a == b;
}

/* Hand ownership on: returns the value and leaves the variable empty. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _tp_ = (p);    \
                (p) = NULL;                  \
                _tp_;                        \
        })
#define TAKE_FD(fd)                          \
        ({                                   \
                int _tf_ = (fd);             \
                (fd) = -1;                   \
                _tf_;                        \
        })

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Declare a NULL-safe pointer destructor for use with _cleanup_(). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)            \
        static inline void func##p(type *p)                \
        {                                                  \
                if (*p)                                    \
                        func(*p);                          \
        }

/* Retry a syscall interrupted by a signal. */
#define RETRY_EINTR(expr)                                  \
        ({                                                 \
                __typeof__(expr) _r_;                      \
                do                                         \
                        _r_ = (expr);                      \
                while (_r_ < 0 && errno == EINTR);         \
                _r_;                                       \
        })
