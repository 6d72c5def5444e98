/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int current_level = LOG_LEVEL_INFO;

void log_set_level(enum log_level level)
{
        atomic_store(&current_level, (int)level);
}

enum log_level log_get_level(void)
{
        return (enum log_level)atomic_load(&current_level);
}

static const struct {
        const char *name;
        enum log_level level;
} names[] = {
        { "error", LOG_LEVEL_ERROR },
        { "warn", LOG_LEVEL_WARN },
        { "info", LOG_LEVEL_INFO },
        { "debug", LOG_LEVEL_DEBUG },
};

int log_level_from_string(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (streq(names[i].name, s))
                        return (int)names[i].level;
        return -1;
}

const char *log_level_to_string(enum log_level level)
{
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (names[i].level == level)
                        return names[i].name;
        return "info";
}

static void emit(enum log_level level, const char *job_id, const char *target, const char *fmt, va_list ap)
{
        if ((int)level > atomic_load(&current_level))
                return;
        char line[2048];
        int n = snprintf(line, sizeof(line), "<%d>", (int)level);
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        if (n < (int)sizeof(line) && job_id)
                n += snprintf(line + n, sizeof(line) - (size_t)n, " job=%s", job_id);
        if (n < (int)sizeof(line) && target)
                n += snprintf(line + n, sizeof(line) - (size_t)n, " target=%s", target);
        if (n >= (int)sizeof(line) - 1)
                n = (int)sizeof(line) - 2;
        /* One event, one line: newlines inside messages would split it. */
        for (int i = 0; i < n; i++)
                if (line[i] == '\n' || line[i] == '\r')
                        line[i] = ' ';
        line[n++] = '\n';
        (void)!write(STDERR_FILENO, line, (size_t)n);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        emit(level, NULL, NULL, fmt, ap);
        va_end(ap);
}

void log_job(enum log_level level, const char *job_id, const char *target, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        emit(level, job_id, target, fmt, ap);
        va_end(ap);
}
