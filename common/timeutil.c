/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/timeutil.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

uint64_t na_now_mono_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * NA_USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t na_now_real_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * NA_MSEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000000;
}

char *na_format_time_ms(uint64_t epoch_ms, char *buf, size_t len)
{
        time_t secs = (time_t)(epoch_ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(epoch_ms % 1000));
        return buf;
}

static bool digits(const char *s, int n, int *out)
{
        int v = 0;
        for (int i = 0; i < n; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return false;
                v = v * 10 + (s[i] - '0');
        }
        *out = v;
        return true;
}

static int days_in_month(int y, int m)
{
        static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        return m == 2 && leap ? 29 : days[m - 1];
}

static int64_t days_from_civil(int y, int m, int d)
{
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

bool na_parse_time_ms(const char *s, int64_t *ret_ms)
{
        int Y, M, D, h, m, sec, ms = 0;
        if (!s || strlen(s) < 20)
                return false;
        if (!digits(s, 4, &Y) || s[4] != '-' || !digits(s + 5, 2, &M) || s[7] != '-' || !digits(s + 8, 2, &D) ||
            (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &m) ||
            s[16] != ':' || !digits(s + 17, 2, &sec))
                return false;
        if (M < 1 || M > 12 || D < 1 || D > days_in_month(Y, M) || h > 23 || m > 59 || sec > 60)
                return false;
        const char *p = s + 19;
        if (*p == '.') {
                p++;
                int n = 0, scale = 100;
                while (isdigit((unsigned char)*p)) {
                        if (n < 3) {
                                ms += (*p - '0') * scale;
                                scale /= 10;
                        }
                        n++;
                        p++;
                }
                if (n == 0)
                        return false;
        }
        int offset_min = 0;
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                int oh, om;
                if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 || om > 59)
                        return false;
                offset_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
                p += 6;
        } else
                return false;
        if (*p)
                return false;
        int64_t days = days_from_civil(Y, M, D);
        int64_t t = ((days * 24 + h) * 60 + m) * 60 + (sec > 59 ? 59 : sec) - (int64_t)offset_min * 60;
        *ret_ms = t * 1000 + ms;
        return true;
}

long long na_now_mono_ms(void)
{
        return (long long)(na_now_mono_us() / 1000);
}
