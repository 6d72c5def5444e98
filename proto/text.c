/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Bytes as JSON text, invalid UTF-8 replaced by U+FFFD. */
#include "proto/text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t proto_utf8_seq(const unsigned char *p, size_t left)
{
        if (left == 0)
                return 0;
        if (p[0] < 0x80)
                return 1;
        size_t n;
        uint32_t cp;
        if ((p[0] & 0xe0) == 0xc0) {
                n = 2;
                cp = p[0] & 0x1f;
        } else if ((p[0] & 0xf0) == 0xe0) {
                n = 3;
                cp = p[0] & 0x0f;
        } else if ((p[0] & 0xf8) == 0xf0) {
                n = 4;
                cp = p[0] & 0x07;
        } else
                return 0;
        if (n > left)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        /* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

json_t *proto_text_json(const char *s, size_t len)
{
        if (!s || len == 0)
                return json_string("");
        if (len > (SIZE_MAX - 1) / 3)
                return NULL;
        char *buf = malloc(len * 3 + 1);
        if (!buf)
                return NULL;
        size_t o = 0;
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t n = p[i] ? proto_utf8_seq(p + i, len - i) : 0;
                if (n == 0) {
                        memcpy(buf + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                } else {
                        memcpy(buf + o, p + i, n);
                        o += n;
                        i += n;
                }
        }
        json_t *j = json_stringn(buf, o);
        free(buf);
        return j;
}
