/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The transfer client's pure helpers (transfer/transfer-internal.h): no I/O. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "transfer/transfer-internal.h"

unsigned transfer_backoff_ms(unsigned first_ms, unsigned n)
{
        uint64_t ms = first_ms;
        for (unsigned i = 1; i < n && ms < TRANSFER_BACKOFF_MAX_MS; i++)
                ms *= 2;
        return ms > TRANSFER_BACKOFF_MAX_MS ? TRANSFER_BACKOFF_MAX_MS : (unsigned)ms;
}

bool transfer_curl_retryable(CURLcode code)
{
        switch (code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return true;
        default:
                return false;
        }
}

bool transfer_status_retryable(long status)
{
        return status >= 500 || status == 408 || status == 429;
}

static bool parse_u64(const char **p, uint64_t *ret)
{
        const char *s = *p;
        if (!isdigit((unsigned char)*s))
                return false;
        uint64_t v = 0;
        for (; isdigit((unsigned char)*s); s++) {
                unsigned d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *p = s;
        *ret = v;
        return true;
}

bool transfer_parse_content_range(const char *value, uint64_t *ret_start, uint64_t *ret_end, uint64_t *ret_total)
{
        const char *p = value;
        while (*p == ' ' || *p == '\t')
                p++;
        if (strncasecmp(p, "bytes", 5) != 0)
                return false;
        p += 5;
        while (*p == ' ')
                p++;
        uint64_t a, b, total = 0;
        if (!parse_u64(&p, &a) || *p++ != '-' || !parse_u64(&p, &b) || *p++ != '/' || b < a)
                return false;
        if (*p == '*')
                p++;
        else if (!parse_u64(&p, &total) || total <= b)
                return false;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                p++;
        if (*p)
                return false;
        *ret_start = a;
        *ret_end = b;
        *ret_total = total;
        return true;
}

uint64_t transfer_parts_needed(uint64_t size, uint64_t part_size)
{
        if (size == 0 || part_size == 0)
                return 1;
        return size / part_size + (size % part_size != 0);
}

bool transfer_clean_etag(const char *value, size_t len, char out[128])
{
        while (len > 0 && (*value == ' ' || *value == '\t'))
                value++, len--;
        while (len > 0 && strchr(" \t\r\n", value[len - 1]))
                len--;
        size_t n = 0;
        for (size_t i = 0; i < len && n < 127; i++) {
                unsigned char c = (unsigned char)value[i];
                if (c >= 0x20 && c < 0x7f)
                        out[n++] = (char)c;
        }
        out[n] = '\0';
        return n > 0;
}

void transfer_scrub(char *msg, const char *url)
{
        const char *q = url ? strchr(url, '?') : NULL;
        if (!q || !q[1])
                return;
        size_t qlen = strlen(q);
        char *hit;
        while ((hit = strstr(msg, q)))
                memmove(hit, hit + qlen, strlen(hit + qlen) + 1);
        /* A message cut short may hold the start of the query only: drop what follows a '?'. */
        char *cut = strchr(msg, '?');
        if (cut && strstr(url, cut))
                *cut = '\0';
}
