/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one error type (after crun's libcrun_error_t): a failing function returns a
 * negative errno-style value and fills a struct na_error; callers add their own
 * context with na_error_prefix() ("outer: inner"). The job layer turns it into the
 * agent API's failure object in exactly one place (na_error_to_json).
 */
#pragma once

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>

#include "common/macro.h"

/* Codes of the public API (reference section 7) and of the agent API (3.4). */
#define NA_E_VALIDATION "VALIDATION_ERROR"
#define NA_E_INTERNAL "INTERNAL_ERROR"
#define NA_E_UNSUPPORTED_JOB "UNSUPPORTED_JOB"
#define NA_E_JOB_TIMEOUT "JOB_TIMEOUT"
#define NA_E_JOB_CANCELLED "JOB_CANCELLED"
#define NA_E_LEASE_LOST "LEASE_LOST"
#define NA_E_JOB_INTERRUPTED "JOB_INTERRUPTED"
#define NA_E_JOB_NOT_FOUND "JOB_NOT_FOUND"
#define NA_E_DRIVER "DRIVER_ERROR"
#define NA_E_INVALID_STATE "INVALID_STATE"
#define NA_E_VPS_NOT_FOUND "VPS_NOT_FOUND"
#define NA_E_APP_NOT_FOUND "APP_NOT_FOUND"
#define NA_E_SNAPSHOT_NOT_FOUND "SNAPSHOT_NOT_FOUND"
#define NA_E_BACKUP_NOT_FOUND "BACKUP_NOT_FOUND"
#define NA_E_FILE_NOT_FOUND "FILE_NOT_FOUND"
#define NA_E_FILE_ACCESS_DISABLED "FILE_ACCESS_DISABLED"
#define NA_E_SNAPSHOT_LIMIT "SNAPSHOT_LIMIT_REACHED"
#define NA_E_GUEST_AGENT "GUEST_AGENT_UNAVAILABLE"
#define NA_E_COMMAND_MANAGED "COMMAND_MANAGED"
#define NA_E_IMAGE_NOT_FOUND "IMAGE_NOT_FOUND"
#define NA_E_EXPOSURE_NOT_FOUND "EXPOSURE_NOT_FOUND"
#define NA_E_PORT_IN_USE "PORT_IN_USE"
#define NA_E_QUOTA_EXCEEDED "QUOTA_EXCEEDED"
#define NA_E_ROLLED_BACK "ROLLED_BACK"

struct na_error {
        int errnum;        /* positive errno value; 0 while no error is set */
        int http_status;   /* httpStatus of the agent API failure object */
        const char *code;  /* static string, one of NA_E_* */
        char message[512]; /* what failed and why, naming the object */
        json_t *details;   /* owned; NULL when there are none */
};

#define NA_ERROR_INIT {0}

/* HTTP status the agent API gives a code (500 for unknown codes). */
int na_error_code_status(const char *code);

/* Set the error (replacing any earlier one); returns -errnum (-EIO when errnum is 0). */
int na_error_set(struct na_error *e, int errnum, const char *code, const char *fmt, ...) _printf_(4, 5);
int na_error_setv(struct na_error *e, int errnum, const char *code, const char *fmt, va_list ap);

/* INTERNAL_ERROR from a failed system call: "<what>: <strerror(errnum)>". */
int na_error_sys(struct na_error *e, int errnum, const char *fmt, ...) _printf_(3, 4);

/* Prefix context to the message: "outer: inner". Returns -errnum of the error. */
int na_error_prefix(struct na_error *e, const char *fmt, ...) _printf_(2, 3);

/*
 * Validation errors in the reference's details shape: path "plan.cpuCores" or
 * "rules.3.port" adds the message to that field's own "_errors"; path NULL or ""
 * adds it to the payload's. Sets VALIDATION_ERROR and returns -EINVAL; call it once
 * per problem found, then fail when na_error_is_set().
 */
int na_error_field(struct na_error *e, const char *path, const char *fmt, ...) _printf_(3, 4);

/* Attach details.<key> = value (steals the reference to value). */
void na_error_detail(struct na_error *e, const char *key, json_t *value);

bool na_error_is_set(const struct na_error *e);
void na_error_clear(struct na_error *e);
/* Move src into dst (dst is cleared first); src ends clear. */
void na_error_move(struct na_error *dst, struct na_error *src);

/* The agent API failure object {httpStatus, code, error, details}. */
json_t *na_error_to_json(const struct na_error *e);

#define _cleanup_na_error_ _cleanup_(na_error_clear)
