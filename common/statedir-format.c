/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The state directory's format file: parse, check, write when missing (statedir-format.h). */
#include "common/statedir-format.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"

int na_statedir_format_parse(const char *text, size_t len, unsigned *ret_version, struct na_error *err)
{
        static const char magic[] = NA_STATEDIR_FORMAT_MAGIC " ";
        const size_t mlen = sizeof(magic) - 1;

        if (len == 0)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "empty");
        if (text[len - 1] == '\n')
                len--;
        if (memchr(text, '\n', len))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "more than one line");
        if (memchr(text, '\0', len))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "holds a NUL byte");
        if (len < mlen || memcmp(text, magic, mlen) != 0)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "does not start with '%s'", magic);
        const char *p = text + mlen, *end = text + len;
        if (p == end)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "no version after '%s'", magic);
        if (*p == '0')
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "version 0 or with a leading zero");
        if (end - p > 9)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "version longer than 9 digits");
        unsigned v = 0;
        for (; p < end; p++) {
                if (*p < '0' || *p > '9')
                        return na_error_set(err, EBADMSG, NA_E_INTERNAL, "version is not a decimal number");
                v = v * 10 + (unsigned)(*p - '0');
        }
        *ret_version = v;
        return 0;
}

/* "format 1" or "formats 1 to 2": what this version knows. */
static const char *known_formats(char *buf, size_t len)
{
        if (NA_STATEDIR_FORMAT_MIN == NA_STATEDIR_FORMAT)
                snprintf(buf, len, "format %u", NA_STATEDIR_FORMAT);
        else
                snprintf(buf, len, "formats %u to %u", NA_STATEDIR_FORMAT_MIN, NA_STATEDIR_FORMAT);
        return buf;
}

static int write_current(const char *dir, const char *path, struct na_error *err)
{
        char text[NA_STATEDIR_FORMAT_MAX_BYTES];
        int n = snprintf(text, sizeof(text), "%s %u\n", NA_STATEDIR_FORMAT_MAGIC, NA_STATEDIR_FORMAT);
        int r = na_atomic_write(path, text, (size_t)n, 0640, err);
        if (r < 0)
                return na_error_prefix(err, "state directory %s: write its format", dir);
        return 0;
}

int na_statedir_format_check(const char *dir, unsigned *ret_version, struct na_error *err)
{
        char path[4096], known[64];
        if ((size_t)snprintf(path, sizeof(path), "%s/" NA_STATEDIR_FORMAT_FILE, dir) >= sizeof(path))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "state directory %s: path too long", dir);

        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct na_error rerr = NA_ERROR_INIT;
        int r = na_read_file(path, NA_STATEDIR_FORMAT_MAX_BYTES, &text, &len, &rerr);
        if (r == -ENOENT) {
                /* Fresh, or made before the file existed: both are format 1's layout. */
                na_error_clear(&rerr);
                r = write_current(dir, path, err);
                if (r < 0)
                        return r;
                if (ret_version)
                        *ret_version = NA_STATEDIR_FORMAT;
                return 0;
        }
        if (r == -EFBIG) {
                na_error_clear(&rerr);
                return na_error_set(err, EPROTONOSUPPORT, NA_E_INTERNAL,
                                    "state directory %s: %s is garbled (larger than %d bytes), not one line '%s N'; "
                                    "this nodeagent knows %s: restore the directory (or the file) from a backup",
                                    dir, path, NA_STATEDIR_FORMAT_MAX_BYTES, NA_STATEDIR_FORMAT_MAGIC,
                                    known_formats(known, sizeof(known)));
        }
        if (r < 0) {
                na_error_move(err, &rerr);
                return na_error_prefix(err, "state directory %s: read its format", dir);
        }

        unsigned v = 0;
        r = na_statedir_format_parse(text, len, &v, &rerr);
        if (r < 0) {
                char reason[sizeof(rerr.message)];
                snprintf(reason, sizeof(reason), "%s", rerr.message);
                na_error_clear(&rerr);
                return na_error_set(err, EPROTONOSUPPORT, NA_E_INTERNAL,
                                    "state directory %s: %s is garbled (%s), not one line '%s N'; this nodeagent "
                                    "knows %s: restore the directory (or the file) from a backup",
                                    dir, path, reason, NA_STATEDIR_FORMAT_MAGIC, known_formats(known, sizeof(known)));
        }
        if (ret_version)
                *ret_version = v;
        if (v > NA_STATEDIR_FORMAT)
                return na_error_set(err, EPROTONOSUPPORT, NA_E_INTERNAL,
                                    "state directory %s was written by a newer nodeagent (format %u, in %s); this one "
                                    "knows %s: upgrade the package, or restore a backup of the directory made with "
                                    "this version",
                                    dir, v, path, known_formats(known, sizeof(known)));
        if (v < NA_STATEDIR_FORMAT_MIN)
                return na_error_set(err, EPROTONOSUPPORT, NA_E_INTERNAL,
                                    "state directory %s was written by an older nodeagent (format %u, in %s); this one "
                                    "knows %s: upgrade through a release that reads format %u first",
                                    dir, v, path, known_formats(known, sizeof(known)), v);
        return 0;
}
