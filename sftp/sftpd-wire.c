/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The SFTP v3 wire format of nodeagent-sftpd (sftpd-wire.h). */
#include "sftp/sftpd-wire.h"

#include <stdlib.h>
#include <string.h>

#include "sftp/sftp-path.h"

uint32_t rd_u32(struct rd *r)
{
        if (r->left < 4) {
                r->bad = true;
                return 0;
        }
        uint32_t v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
        r->p += 4;
        r->left -= 4;
        return v;
}

uint64_t rd_u64(struct rd *r)
{
        uint64_t hi = rd_u32(r);
        return hi << 32 | rd_u32(r);
}

const unsigned char *rd_str(struct rd *r, uint32_t *len)
{
        *len = rd_u32(r);
        if (r->bad || *len > r->left) {
                r->bad = true;
                *len = 0;
                return NULL;
        }
        const unsigned char *s = r->p;
        r->p += *len;
        r->left -= *len;
        return s;
}

/* A path argument, normalized: false when malformed (then the request is a bad message or no such file). */
bool rd_path(struct rd *r, char *out, size_t out_size)
{
        uint32_t n;
        const unsigned char *s = rd_str(r, &n);
        return !r->bad && sftp_path_normalize((const char *)s, n, out, out_size) == 0;
}

void rd_attrs(struct rd *r, struct attrs *a)
{
        memset(a, 0, sizeof(*a));
        a->flags = rd_u32(r);
        if (a->flags & ATTR_SIZE)
                a->size = rd_u64(r);
        if (a->flags & ATTR_UIDGID) {
                rd_u32(r);
                rd_u32(r);
        }
        if (a->flags & ATTR_PERMISSIONS)
                a->perm = rd_u32(r);
        if (a->flags & ATTR_ACMODTIME) {
                a->atime = rd_u32(r);
                a->mtime = rd_u32(r);
        }
        if (a->flags & ATTR_EXTENDED) {
                uint32_t n = rd_u32(r), l;
                for (uint32_t i = 0; i < n && !r->bad; i++) {
                        rd_str(r, &l);
                        rd_str(r, &l);
                }
        }
}

/* Writing replies. */
bool buf_grow(struct buf *b, size_t more)
{
        if (b->len + more <= b->cap)
                return true;
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + more)
                cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p)
                return false;
        b->p = p;
        b->cap = cap;
        return true;
}

void put_u32(struct buf *b, uint32_t v)
{
        if (!buf_grow(b, 4))
                return;
        unsigned char *p = b->p + b->len;
        p[0] = (unsigned char)(v >> 24);
        p[1] = (unsigned char)(v >> 16);
        p[2] = (unsigned char)(v >> 8);
        p[3] = (unsigned char)v;
        b->len += 4;
}

void put_u64(struct buf *b, uint64_t v)
{
        put_u32(b, (uint32_t)(v >> 32));
        put_u32(b, (uint32_t)v);
}

void put_str(struct buf *b, const void *s, size_t n)
{
        put_u32(b, (uint32_t)n);
        if (n && buf_grow(b, n)) {
                memcpy(b->p + b->len, s, n);
                b->len += n;
        }
}

void put_cstr(struct buf *b, const char *s)
{
        put_str(b, s, strlen(s));
}

/* Start a packet: the length is filled by pkt_end(). */
size_t pkt_begin(struct buf *b, unsigned char type, uint32_t id)
{
        size_t at = b->len;
        put_u32(b, 0);
        if (buf_grow(b, 1))
                b->p[b->len++] = type;
        put_u32(b, id);
        return at;
}

void pkt_end(struct buf *b, size_t at)
{
        uint32_t n = (uint32_t)(b->len - at - 4);
        b->p[at] = (unsigned char)(n >> 24);
        b->p[at + 1] = (unsigned char)(n >> 16);
        b->p[at + 2] = (unsigned char)(n >> 8);
        b->p[at + 3] = (unsigned char)n;
}
