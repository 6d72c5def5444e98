/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define NA_USEC_PER_SEC 1000000ULL
#define NA_MSEC_PER_SEC 1000ULL

uint64_t na_now_mono_us(void);     /* CLOCK_MONOTONIC in microseconds */
long long na_now_mono_ms(void);    /* CLOCK_MONOTONIC in milliseconds (deadlines of na_wait_fd) */
uint64_t na_now_real_ms(void);     /* CLOCK_REALTIME in milliseconds since the epoch */

/* RFC 3339 UTC with milliseconds: "2026-11-21T10:00:03.123Z" (buf of at least 32). */
char *na_format_time_ms(uint64_t epoch_ms, char *buf, size_t len);
/* Parse RFC 3339 date-time ("Z" or an offset; fraction optional) to epoch milliseconds. */
bool na_parse_time_ms(const char *s, int64_t *ret_ms);
