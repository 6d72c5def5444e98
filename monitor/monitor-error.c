/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * struct na_error (common/error.h) for nodeagent-monitor, which links no jansson:
 * the same set/sys/prefix semantics as common/error.c for the calls the output ring
 * and the monitor make, without details (the monitor never attaches any, so there is
 * nothing to json_decref). common/error.c is not compiled into the monitor.
 */
#include "common/error.h"

#include <stdio.h>
#include <string.h>

int na_error_code_status(const char *code)
{
        return code && streq(code, NA_E_VALIDATION) ? 422 : 500;
}

void na_error_clear(struct na_error *e)
{
        if (e)
                memset(e, 0, sizeof(*e));
}

bool na_error_is_set(const struct na_error *e)
{
        return e && e->code != NULL;
}

int na_error_setv(struct na_error *e, int errnum, const char *code, const char *fmt, va_list ap)
{
        if (errnum <= 0)
                errnum = EIO;
        if (!e)
                return -errnum;
        na_error_clear(e);
        e->errnum = errnum;
        e->code = code ? code : NA_E_INTERNAL;
        e->http_status = na_error_code_status(e->code);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        return -errnum;
}

int na_error_set(struct na_error *e, int errnum, const char *code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = na_error_setv(e, errnum, code, fmt, ap);
        va_end(ap);
        return r;
}

int na_error_sys(struct na_error *e, int errnum, const char *fmt, ...)
{
        char what[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return na_error_set(e, errnum, NA_E_INTERNAL, "%s: %s", what, strerror(errnum > 0 ? errnum : EIO));
}

int na_error_prefix(struct na_error *e, const char *fmt, ...)
{
        if (!e)
                return -EIO;
        if (!na_error_is_set(e))
                return -(e->errnum ? e->errnum : EIO);
        char outer[256], joined[sizeof(e->message)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(outer, sizeof(outer), fmt, ap);
        va_end(ap);
        snprintf(joined, sizeof(joined), "%s: %s", outer, e->message);
        memcpy(e->message, joined, sizeof(joined));
        return -e->errnum;
}
