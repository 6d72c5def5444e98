/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * DNS wire format for the verifier (RFC 1035 4.1): a query, and a strict parser of
 * the answer: every length checked against the message, compression pointers only
 * backwards (no loops) and at most 255 octets of name. No I/O; fuzzed.
 */
#include <string.h>

#include "routing/app-dns-internal.h"

static bool label_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool app_dns_name_normalize(const char *in, char out[256])
{
        if (!in)
                return false;
        size_t len = strlen(in);
        if (len && in[len - 1] == '.')
                len--;
        if (len == 0 || len > 253)
                return false;
        size_t label = 0;
        for (size_t i = 0; i < len; i++) {
                char c = in[i];
                if (c == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                } else if (!label_char(c) || ++label > 63) {
                        return false;
                }
                out[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        if (label == 0)
                return false;
        out[len] = '\0';
        return true;
}

int app_dns_build_query(uint16_t id, const char *name, uint16_t type, uint8_t *buf, size_t cap, size_t *ret_len)
{
        char n[256];
        if (!app_dns_name_normalize(name, n))
                return -EINVAL;
        size_t need = 12 + strlen(n) + 2 + 4;
        if (cap < need)
                return -ENOBUFS;
        memset(buf, 0, 12);
        buf[0] = (uint8_t)(id >> 8);
        buf[1] = (uint8_t)id;
        buf[2] = 0x01; /* RD */
        buf[5] = 1;    /* QDCOUNT */
        size_t off = 12;
        for (const char *p = n; *p;) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);
                buf[off++] = (uint8_t)l;
                memcpy(buf + off, p, l);
                off += l;
                p += l + (dot ? 1 : 0);
        }
        buf[off++] = 0;
        buf[off++] = (uint8_t)(type >> 8);
        buf[off++] = (uint8_t)type;
        buf[off++] = 0;
        buf[off++] = APP_DNS_C_IN;
        *ret_len = off;
        return 0;
}

/*
 * Read the name at *off into out (presentation form, lowercased, escaped); *off moves
 * past it (past the first pointer when compressed).
 */
static int read_name(const uint8_t *m, size_t len, size_t *off, char out[APP_DNS_NAME_MAX])
{
        size_t pos = *off, o = 0, wire = 0;
        bool jumped = false;
        size_t limit = pos; /* a pointer must point before the label that holds it */
        for (;;) {
                if (pos >= len)
                        return -EBADMSG;
                uint8_t l = m[pos];
                if ((l & 0xC0) == 0xC0) {
                        if (pos + 1 >= len)
                                return -EBADMSG;
                        size_t to = ((size_t)(l & 0x3F) << 8) | m[pos + 1];
                        if (to >= limit)
                                return -EBADMSG;
                        if (!jumped)
                                *off = pos + 2;
                        jumped = true;
                        limit = to;
                        pos = to;
                        continue;
                }
                if (l & 0xC0)
                        return -EBADMSG; /* 0x40/0x80: extended label types, not used */
                pos++;
                if (l == 0)
                        break;
                wire += (size_t)l + 1;
                if (wire > 255 || pos + l > len)
                        return -EBADMSG;
                if (o)
                        out[o++] = '.';
                for (size_t i = 0; i < l; i++) {
                        uint8_t c = m[pos + i];
                        if (c >= 'A' && c <= 'Z')
                                c = (uint8_t)(c - 'A' + 'a');
                        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
                                out[o++] = (char)c;
                        } else {
                                out[o++] = '\\';
                                out[o++] = (char)('0' + c / 100);
                                out[o++] = (char)('0' + c / 10 % 10);
                                out[o++] = (char)('0' + c % 10);
                        }
                }
                pos += l;
        }
        out[o] = '\0';
        if (!jumped)
                *off = pos;
        return 0;
}

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

int app_dns_parse(const uint8_t *m, size_t len, struct app_dns_msg *ret)
{
        if (len < 12)
                return -EBADMSG;
        memset(ret, 0, offsetof(struct app_dns_msg, answers));
        ret->id = get16(m);
        ret->qr = m[2] & 0x80;
        ret->tc = m[2] & 0x02;
        ret->rcode = m[3] & 0x0F;
        uint16_t qd = get16(m + 4), an = get16(m + 6);
        if (qd != 1)
                return -EBADMSG;
        size_t off = 12;
        if (read_name(m, len, &off, ret->qname) < 0 || off + 4 > len)
                return -EBADMSG;
        ret->qtype = get16(m + off);
        ret->qclass = get16(m + off + 2);
        off += 4;
        for (unsigned i = 0; i < an; i++) {
                struct app_dns_rr rr;
                if (read_name(m, len, &off, rr.name) < 0 || off + 10 > len)
                        return ret->tc ? 0 : -EBADMSG; /* a truncated answer may end anywhere */
                rr.type = get16(m + off);
                uint16_t class = get16(m + off + 2);
                rr.ttl = (uint32_t)get16(m + off + 4) << 16 | get16(m + off + 6);
                size_t rdlen = get16(m + off + 8);
                off += 10;
                if (off + rdlen > len)
                        return ret->tc ? 0 : -EBADMSG;
                size_t rd = off;
                off += rdlen;
                ret->n_answers_seen++;
                if (class != APP_DNS_C_IN)
                        continue;
                if (rr.type == APP_DNS_T_A) {
                        if (rdlen != 4)
                                return -EBADMSG;
                        memcpy(rr.addr, m + rd, 4);
                        rr.cname[0] = '\0';
                } else if (rr.type == APP_DNS_T_AAAA) {
                        if (rdlen != 16)
                                return -EBADMSG;
                        memcpy(rr.addr, m + rd, 16);
                        rr.cname[0] = '\0';
                } else if (rr.type == APP_DNS_T_CNAME) {
                        size_t p = rd;
                        /* The target lies within the record's data (its pointers may go back further). */
                        if (read_name(m, rd + rdlen, &p, rr.cname) < 0 || p != rd + rdlen)
                                return -EBADMSG;
                        memset(rr.addr, 0, sizeof(rr.addr));
                } else {
                        continue;
                }
                if (ret->n_answers < APP_DNS_MAX_RR)
                        ret->answers[ret->n_answers++] = rr;
        }
        return 0;
}
