/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libarchive loaded on first use: the stubs (drivers/app/app-archive-dl.h). */
#include "drivers/app/app-archive-dl.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define LIBARCHIVE "libarchive.so.13"

/* Every function naapp calls, in one list: X(return type, name, (parameters), (arguments)). */
#define ARCHIVE_FUNCTIONS(X)                                                                                          \
        X(time_t, archive_entry_atime, (struct archive_entry * e), (e))                                            \
        X(int, archive_entry_atime_is_set, (struct archive_entry * e), (e))                                        \
        X(long, archive_entry_atime_nsec, (struct archive_entry * e), (e))                                         \
        X(struct archive_entry *, archive_entry_clear, (struct archive_entry * e), (e))                            \
        X(__LA_MODE_T, archive_entry_filetype, (struct archive_entry * e), (e))                                    \
        X(la_int64_t, archive_entry_gid, (struct archive_entry * e), (e))                                          \
        X(const char *, archive_entry_hardlink, (struct archive_entry * e), (e))                                   \
        X(const char *, archive_entry_hardlink_utf8, (struct archive_entry * e), (e))                              \
        X(time_t, archive_entry_mtime, (struct archive_entry * e), (e))                                            \
        X(long, archive_entry_mtime_nsec, (struct archive_entry * e), (e))                                         \
        X(const char *, archive_entry_pathname, (struct archive_entry * e), (e))                                   \
        X(const char *, archive_entry_pathname_utf8, (struct archive_entry * e), (e))                              \
        X(__LA_MODE_T, archive_entry_perm, (struct archive_entry * e), (e))                                        \
        X(la_int64_t, archive_entry_size, (struct archive_entry * e), (e))                                         \
        X(int, archive_entry_size_is_set, (struct archive_entry * e), (e))                                         \
        X(const char *, archive_entry_symlink, (struct archive_entry * e), (e))                                    \
        X(const char *, archive_entry_symlink_utf8, (struct archive_entry * e), (e))                               \
        X(la_int64_t, archive_entry_uid, (struct archive_entry * e), (e))                                          \
        X(int, archive_errno, (struct archive * a), (a))                                                           \
        X(const char *, archive_error_string, (struct archive * a), (a))                                           \
        X(la_int64_t, archive_filter_bytes, (struct archive * a, int n), (a, n))                                   \
        X(int, archive_read_data_block, (struct archive * a, const void **b, size_t *s, la_int64_t *o),            \
          (a, b, s, o))                                                                                            \
        X(int, archive_read_free, (struct archive * a), (a))                                                       \
        X(int, archive_read_next_header, (struct archive * a, struct archive_entry * *e), (a, e))                  \
        X(int, archive_read_open,                                                                                  \
          (struct archive * a, void *d, archive_open_callback *o, archive_read_callback *r,                       \
           archive_close_callback *c),                                                                             \
          (a, d, o, r, c))                                                                                         \
        X(int, archive_read_open_fd, (struct archive * a, int fd, size_t n), (a, fd, n))                           \
        X(int, archive_read_support_filter_gzip, (struct archive * a), (a))                                        \
        X(int, archive_read_support_filter_zstd, (struct archive * a), (a))                                        \
        X(int, archive_read_support_format_empty, (struct archive * a), (a))                                       \
        X(int, archive_read_support_format_tar, (struct archive * a), (a))                                         \
        X(int, archive_write_add_filter_zstd, (struct archive * a), (a))                                           \
        X(int, archive_write_close, (struct archive * a), (a))                                                     \
        X(int, archive_write_fail, (struct archive * a), (a))                                                      \
        X(la_ssize_t, archive_write_data, (struct archive * a, const void *b, size_t n), (a, b, n))                \
        X(int, archive_write_free, (struct archive * a), (a))                                                      \
        X(int, archive_write_header, (struct archive * a, struct archive_entry * e), (a, e))                      \
        X(int, archive_write_open2,                                                                                \
          (struct archive * a, void *d, archive_open_callback *o, archive_write_callback *w,                      \
           archive_close_callback *c, archive_free_callback *f),                                                   \
          (a, d, o, w, c, f))                                                                                      \
        X(int, archive_write_set_bytes_in_last_block, (struct archive * a, int n), (a, n))                         \
        X(int, archive_write_set_bytes_per_block, (struct archive * a, int n), (a, n))                             \
        X(int, archive_write_set_filter_option,                                                                    \
          (struct archive * a, const char *m, const char *o, const char *v), (a, m, o, v))                        \
        X(int, archive_write_set_format_pax_restricted, (struct archive * a), (a))

/* Functions without a result. */
#define ARCHIVE_VOID_FUNCTIONS(X)                                                                                     \
        X(archive_entry_free, (struct archive_entry * e), (e))                                                     \
        X(archive_entry_set_gid, (struct archive_entry * e, la_int64_t v), (e, v))                                \
        X(archive_entry_set_mode, (struct archive_entry * e, __LA_MODE_T v), (e, v))                              \
        X(archive_entry_set_mtime, (struct archive_entry * e, time_t t, long ns), (e, t, ns))                     \
        X(archive_entry_set_pathname, (struct archive_entry * e, const char *v), (e, v))                          \
        X(archive_entry_set_size, (struct archive_entry * e, la_int64_t v), (e, v))                               \
        X(archive_entry_set_symlink, (struct archive_entry * e, const char *v), (e, v))                           \
        X(archive_entry_set_uid, (struct archive_entry * e, la_int64_t v), (e, v))                                \
        X(archive_entry_sparse_add_entry, (struct archive_entry * e, la_int64_t o, la_int64_t n), (e, o, n))

/* The constructors: the only calls that may come before libarchive is loaded. */
#define ARCHIVE_CONSTRUCTORS(X)                                                                                       \
        X(struct archive *, archive_read_new)                                                                      \
        X(struct archive *, archive_write_new)                                                                     \
        X(struct archive_entry *, archive_entry_new)

#define POINTER(ret, name, ...) static __typeof__(name) *p_##name;
#define VOID_POINTER(name, ...) static __typeof__(name) *p_##name;
#define CTOR_POINTER(ret, name) static __typeof__(name) *p_##name;
ARCHIVE_FUNCTIONS(POINTER)
ARCHIVE_VOID_FUNCTIONS(VOID_POINTER)
ARCHIVE_CONSTRUCTORS(CTOR_POINTER)
static void (*p_archive_set_error)(struct archive *, int, const char *, ...);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[400];
static bool loaded;

static void load(void)
{
        void *h = dlopen(LIBARCHIVE, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *why = dlerror();
                snprintf(load_error, sizeof(load_error), "%s", why ? why : LIBARCHIVE ": cannot be loaded");
                return;
        }
        bool ok = true;
#define RESOLVE(name)                                                                                                 \
        do {                                                                                                          \
                *(void **)&p_##name = dlsym(h, #name);                                                                \
                if (!p_##name && ok) {                                                                                \
                        snprintf(load_error, sizeof(load_error), "%s has no %s", LIBARCHIVE, #name);                  \
                        ok = false;                                                                                   \
                }                                                                                                     \
        } while (0)
#define RESOLVE_F(ret, name, ...) RESOLVE(name);
#define RESOLVE_V(name, ...) RESOLVE(name);
#define RESOLVE_C(ret, name) RESOLVE(name);
        ARCHIVE_FUNCTIONS(RESOLVE_F)
        ARCHIVE_VOID_FUNCTIONS(RESOLVE_V)
        ARCHIVE_CONSTRUCTORS(RESOLVE_C)
        RESOLVE(archive_set_error);
        if (!ok) {
                dlclose(h);
                return;
        }
        loaded = true; /* h stays open for the life of the process */
}

/* Any call but a constructor's has an object a constructor made: libarchive is there. */
static void need(const char *name)
{
        pthread_once(&once, load);
        if (!loaded) {
                fprintf(stderr, "%s called without libarchive loaded: %s\n", name, load_error);
                abort();
        }
}

#define STUB(ret, name, params, args)                                                                                 \
        ret name params                                                                                               \
        {                                                                                                             \
                need(#name);                                                                                          \
                return p_##name args;                                                                                 \
        }
#define VOID_STUB(name, params, args)                                                                                 \
        void name params                                                                                              \
        {                                                                                                             \
                need(#name);                                                                                          \
                p_##name args;                                                                                        \
        }
#define CTOR_STUB(ret, name)                                                                                          \
        ret name(void)                                                                                                \
        {                                                                                                             \
                pthread_once(&once, load);                                                                            \
                return loaded ? p_##name() : NULL;                                                                    \
        }
ARCHIVE_FUNCTIONS(STUB)
ARCHIVE_VOID_FUNCTIONS(VOID_STUB)
ARCHIVE_CONSTRUCTORS(CTOR_STUB)

void archive_set_error(struct archive *a, int errnum, const char *fmt, ...)
{
        need("archive_set_error");
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        p_archive_set_error(a, errnum, "%s", msg);
}

int app_archive_failed(struct na_error *err, const char *what)
{
        pthread_once(&once, load);
        if (!loaded)
                return na_error_set(err, ELIBACC, NA_E_INTERNAL, "%s: libarchive: %s", what, load_error);
        return na_error_sys(err, ENOMEM, "%s", what);
}
