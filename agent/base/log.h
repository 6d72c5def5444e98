/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's log: one line per event on stderr, with the journald priority
 * prefix ("<3>" .. "<7>") and job=/target= fields where they apply. Only agent/
 * logs; libraries return errors.
 */
#pragma once

#include "common/macro.h"

enum log_level { LOG_LEVEL_ERROR = 3, LOG_LEVEL_WARN = 4, LOG_LEVEL_INFO = 6, LOG_LEVEL_DEBUG = 7 };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* "error", "warn", "info", "debug" -> level; returns -1 for anything else. */
int log_level_from_string(const char *s);
const char *log_level_to_string(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...) _printf_(2, 3);
/* The same, with " job=<id> target=<type>/<id>" appended (either may be NULL). */
void log_job(enum log_level level, const char *job_id, const char *target, const char *fmt, ...) _printf_(4, 5);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)
