/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ISO 9660 (ECMA-119) with Rock Ridge and Joliet, only as much as a NoCloud seed
 * needs: one root directory of a few files. Sector (logical block) size 2048.
 *
 * Layout, in sectors:
 *    0-15  system area, zeros (left as a hole)
 *      16  primary volume descriptor (ISO 9660 names, 8.3 upper case)
 *      17  supplementary volume descriptor: Joliet, UCS-2 level 3 ("%/E")
 *      18  volume descriptor set terminator
 *   19-20  path table of the primary tree, little- then big-endian
 *   21-22  path table of the Joliet tree, little- then big-endian
 *      23  root directory of the primary tree, with Rock Ridge entries (SUSP)
 *      24  root directory of the Joliet tree
 *      25  SUSP continuation area holding the Rock Ridge "ER" entry
 *     26-  the files' bytes, each from a new sector; both trees point at them
 *
 * Rock Ridge: the root's "." record carries SP (SUSP in use), CE (where the ER
 * entry that names RRIP_1991A lies: it is too long for a 255-byte record) and PX;
 * every other record PX (mode 0444 files, 0555 directories, owner 0, as
 * `genisoimage -r` gives them) and files NM (the exact name). Linux prefers Rock
 * Ridge when the ER entry is there; Joliet readers get the same names (without a
 * ";1" version, as genisoimage and xorriso write them).
 */
#include "drivers/vm/vm-seed-iso.h"

#include "common/fileio.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SECTOR 2048u

enum {
        S_PVD = 16,
        S_SVD = 17,
        S_TERM = 18,
        S_PT_L = 19,
        S_PT_M = 20,
        S_JPT_L = 21,
        S_JPT_M = 22,
        S_ROOT = 23,
        S_JROOT = 24,
        S_CONT = 25,
        S_FILES = 26,
        S_META = S_FILES - S_PVD, /* sectors 16..25 are built in memory and written at once */
};

#define MAX_FILES 8
#define PATH_TABLE_SIZE 10 /* one entry: the root (identifier length 1, padded to even) */

/* ---- byte order helpers: ISO 9660 stores most numbers both little- and big-endian ---- */

static void le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void le32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void be32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * (3 - i))); }
static void both16(uint8_t *p, uint16_t v) { le16(p, v); be16(p + 2, v); }
static void both32(uint8_t *p, uint32_t v) { le32(p, v); be32(p + 4, v); }

/* A string field: ASCII, or UCS-2 big-endian for Joliet, padded with spaces. */
static void put_str(uint8_t *p, size_t field, const char *s, bool ucs2)
{
        size_t n = strlen(s);
        for (size_t i = 0, c = 0; i < field; c++) {
                uint8_t ch = c < n ? (uint8_t)s[c] : ' ';
                if (ucs2) {
                        p[i++] = 0;
                        if (i < field)
                                p[i++] = ch;
                } else
                        p[i++] = ch;
        }
}

/* ---- dates ---- */

/* Volume descriptor date: "YYYYMMDDHHMMSScc" and the offset from UTC in 15-minute units. */
static void date17(uint8_t p[17], const struct tm *tm)
{
        char buf[17];
        if (!tm) {
                memset(p, '0', 16);
                p[16] = 0;
                return;
        }
        snprintf(buf, sizeof(buf), "%04d%02d%02d%02d%02d%02d00", (tm->tm_year + 1900) % 10000, tm->tm_mon + 1,
                 tm->tm_mday, tm->tm_hour, tm->tm_min, tm->tm_sec);
        memcpy(p, buf, 16);
        p[16] = 0;
}

/* Directory record date: years since 1900, month, day, hour, minute, second, UTC offset. */
static void date7(uint8_t p[7], const struct tm *tm)
{
        p[0] = (uint8_t)tm->tm_year;
        p[1] = (uint8_t)(tm->tm_mon + 1);
        p[2] = (uint8_t)tm->tm_mday;
        p[3] = (uint8_t)tm->tm_hour;
        p[4] = (uint8_t)tm->tm_min;
        p[5] = (uint8_t)tm->tm_sec;
        p[6] = 0;
}

/* ---- directory records ---- */

struct rec {
        uint32_t extent, size;
        bool dir;
        const uint8_t *id; /* file identifier bytes; "\0" is ".", "\1" is ".." */
        size_t id_len;
        const uint8_t *su; /* system use area (SUSP entries); may be NULL */
        size_t su_len;
        const uint8_t *date;
};

static size_t rec_len(const struct rec *r)
{
        size_t n = 33 + r->id_len + (r->id_len % 2 == 0); /* a pad byte keeps the system use area even */
        n += r->su_len;
        return n + (n % 2);
}

/* Append the record at *off of the directory sector dir; false when it does not fit. */
static bool put_rec(uint8_t *dir, size_t *off, const struct rec *r)
{
        size_t n = rec_len(r);
        if (n > 255 || *off + n > SECTOR)
                return false;
        uint8_t *p = dir + *off;
        p[0] = (uint8_t)n;
        p[1] = 0; /* extended attribute record length */
        both32(p + 2, r->extent);
        both32(p + 10, r->size);
        memcpy(p + 18, r->date, 7);
        p[25] = r->dir ? 0x02 : 0x00; /* flags: directory */
        both16(p + 28, 1);             /* volume sequence number */
        p[32] = (uint8_t)r->id_len;
        memcpy(p + 33, r->id, r->id_len);
        if (r->su_len)
                memcpy(p + 33 + r->id_len + (r->id_len % 2 == 0), r->su, r->su_len);
        *off += n;
        return true;
}

/* ---- SUSP / Rock Ridge entries: two signature bytes, length, version ---- */

static size_t susp_head(uint8_t *p, const char sig[2], size_t len)
{
        p[0] = (uint8_t)sig[0];
        p[1] = (uint8_t)sig[1];
        p[2] = (uint8_t)len;
        p[3] = 1;
        return len;
}

/* PX: POSIX mode, links, owner and group (36 bytes: RRIP 1.10 has no inode number). */
static size_t su_px(uint8_t *p, uint32_t mode, uint32_t nlink)
{
        susp_head(p, "PX", 36);
        both32(p + 4, mode);
        both32(p + 12, nlink);
        both32(p + 20, 0);
        both32(p + 28, 0);
        return 36;
}

static const char er_id[] = "RRIP_1991A";
static const char er_des[] = "THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
static const char er_src[] = "PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN "
                             "PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";

/* ER: which extension the SUSP entries belong to (Rock Ridge, RRIP 1.10). */
static size_t su_er(uint8_t *p)
{
        size_t li = strlen(er_id), ld = strlen(er_des), ls = strlen(er_src);
        size_t n = susp_head(p, "ER", 8 + li + ld + ls);
        p[4] = (uint8_t)li;
        p[5] = (uint8_t)ld;
        p[6] = (uint8_t)ls;
        p[7] = 1; /* extension version */
        memcpy(p + 8, er_id, li);
        memcpy(p + 8 + li, er_des, ld);
        memcpy(p + 8 + li + ld, er_src, ls);
        return n;
}

/* ---- names ---- */

static bool name_valid(const char *s, size_t max, bool dot_dash)
{
        size_t n = strlen(s);
        if (n < 1 || n > max)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                      (dot_dash && (c == '-' || c == '.'))))
                        return false;
        }
        return true;
}

/* The level 1 ISO 9660 name: "NAME8.EXT;1", upper case, other characters as '_'. */
static size_t iso_name(const char *name, char out[16])
{
        const char *dot = strrchr(name, '.');
        size_t base_len = dot ? (size_t)(dot - name) : strlen(name);
        size_t n = 0;
        for (size_t i = 0; i < base_len && i < 8; i++)
                out[n++] = name[i];
        out[n++] = '.';
        for (size_t i = 0; dot && dot[1 + i] && i < 3; i++)
                out[n++] = dot[1 + i];
        for (size_t i = 0; i < n; i++) {
                char c = out[i];
                if (c >= 'a' && c <= 'z')
                        out[i] = (char)(c - 'a' + 'A');
                else if (!((c >= '0' && c <= '9') || c == '.'))
                        out[i] = '_';
        }
        memcpy(out + n, ";1", 3);
        return n + 2;
}

/* ECMA-119 9.3 order: by name, then extension, the shorter padded with spaces. */
static int name_cmp(const char *a, const char *b)
{
        const char *da = strrchr(a, '.'), *db = strrchr(b, '.');
        size_t la = da ? (size_t)(da - a) : strlen(a), lb = db ? (size_t)(db - b) : strlen(b);
        for (size_t i = 0; i < la || i < lb; i++) {
                unsigned char x = i < la ? (unsigned char)a[i] : ' ', y = i < lb ? (unsigned char)b[i] : ' ';
                if (x != y)
                        return x < y ? -1 : 1;
        }
        const char *ea = da ? da + 1 : "", *eb = db ? db + 1 : "";
        size_t ma = strcspn(ea, ";"), mb = strcspn(eb, ";");
        for (size_t i = 0; i < ma || i < mb; i++) {
                unsigned char x = i < ma ? (unsigned char)ea[i] : ' ', y = i < mb ? (unsigned char)eb[i] : ' ';
                if (x != y)
                        return x < y ? -1 : 1;
        }
        return 0;
}

/* Indices of names[] in name_cmp order (insertion sort: a handful of names). */
static void sort_order(char *const *names, size_t n, size_t *order)
{
        for (size_t i = 0; i < n; i++) {
                size_t j = i;
                for (; j > 0 && name_cmp(names[order[j - 1]], names[i]) > 0; j--)
                        order[j] = order[j - 1];
                order[j] = i;
        }
}

/* ---- volume descriptors and path tables ---- */

static void put_volume_descriptor(uint8_t *p, bool joliet, const char *volid, uint32_t volume_sectors,
                                  const struct tm *tm, const uint8_t date[7])
{
        p[0] = joliet ? 2 : 1; /* primary or supplementary */
        memcpy(p + 1, "CD001", 5);
        p[6] = 1;
        put_str(p + 8, 32, "", joliet);        /* system identifier */
        put_str(p + 40, 32, volid, joliet);    /* volume identifier: the label */
        both32(p + 80, volume_sectors);
        if (joliet)
                memcpy(p + 88, "%/E", 3); /* escape sequence: UCS-2 level 3 */
        both16(p + 120, 1);               /* volume set size */
        both16(p + 124, 1);               /* volume sequence number */
        both16(p + 128, SECTOR);          /* logical block size */
        both32(p + 132, PATH_TABLE_SIZE);
        le32(p + 140, joliet ? S_JPT_L : S_PT_L);
        be32(p + 148, joliet ? S_JPT_M : S_PT_M);
        size_t off = 0;
        struct rec root = { .extent = joliet ? S_JROOT : S_ROOT, .size = SECTOR, .dir = true,
                            .id = (const uint8_t *)"", .id_len = 1, .date = date };
        put_rec(p + 156, &off, &root); /* 34 bytes at 156..189 */
        put_str(p + 190, 128, "", joliet);           /* volume set */
        put_str(p + 318, 128, "", joliet);           /* publisher */
        put_str(p + 446, 128, "", joliet);           /* data preparer */
        put_str(p + 574, 128, "NODEAGENT", joliet);  /* application */
        put_str(p + 702, 37 * 3, "", joliet);        /* copyright, abstract, bibliographic files */
        date17(p + 813, tm);                         /* created */
        date17(p + 830, tm);                         /* modified */
        date17(p + 847, NULL);                       /* expires: never */
        date17(p + 864, tm);                         /* effective */
        p[881] = 1;                                  /* file structure version */
}

static void put_path_tables(uint8_t *le, uint8_t *be, uint32_t root)
{
        le[0] = be[0] = 1; /* identifier length (the root's is one zero byte) */
        le32(le + 2, root);
        be32(be + 2, root);
        le16(le + 6, 1); /* parent directory number: the root is its own parent */
        be16(be + 6, 1);
}

/* ---- the image ---- */

int vm_iso_write(int fd, const char *volume_id, const struct vm_iso_file *files, size_t n_files, time_t when,
                 struct na_error *err)
{
        if (!volume_id || !name_valid(volume_id, VM_ISO_VOLID_MAX, false))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "ISO image: bad volume label '%s'",
                                    volume_id ? volume_id : "");
        if (n_files > MAX_FILES)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "ISO image: %zu files, at most %d", n_files,
                                    MAX_FILES);
        char iso[MAX_FILES][16]; /* "NAME8.EXT;1" and its NUL: 15 */
        size_t iso_len[MAX_FILES];
        uint32_t extent[MAX_FILES];
        uint32_t next = S_FILES;
        for (size_t i = 0; i < n_files; i++) {
                if (!files[i].name || !name_valid(files[i].name, VM_ISO_NAME_MAX, true))
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "ISO image: bad file name '%s'",
                                            files[i].name ? files[i].name : "");
                if (files[i].len > UINT32_MAX - SECTOR)
                        return na_error_set(err, EFBIG, NA_E_INTERNAL, "ISO image: file %s is too large",
                                            files[i].name);
                iso_len[i] = iso_name(files[i].name, iso[i]);
                for (size_t j = 0; j < i; j++)
                        if (streq(files[i].name, files[j].name) || streq(iso[i], iso[j]))
                                return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                                    "ISO image: file name %s is not unique (as %s)", files[i].name,
                                                    iso[i]);
                extent[i] = next;
                uint64_t end = (uint64_t)next + (files[i].len + SECTOR - 1) / SECTOR;
                if (end > UINT32_MAX)
                        return na_error_set(err, EFBIG, NA_E_INTERNAL, "ISO image: too large at %s", files[i].name);
                next = (uint32_t)end;
        }
        uint32_t volume_sectors = next;

        struct tm tm;
        if (!gmtime_r(&when, &tm))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "ISO image: bad time %lld", (long long)when);
        uint8_t date[7];
        date7(date, &tm);

        _cleanup_free_ uint8_t *meta = calloc(S_META, SECTOR);
        if (!meta)
                return na_error_sys(err, ENOMEM, "ISO image");
#define SEC(s) (meta + (size_t)((s) - S_PVD) * SECTOR)
        put_volume_descriptor(SEC(S_PVD), false, volume_id, volume_sectors, &tm, date);
        put_volume_descriptor(SEC(S_SVD), true, volume_id, volume_sectors, &tm, date);
        SEC(S_TERM)[0] = 255;
        memcpy(SEC(S_TERM) + 1, "CD001", 5);
        SEC(S_TERM)[6] = 1;
        put_path_tables(SEC(S_PT_L), SEC(S_PT_M), S_ROOT);
        put_path_tables(SEC(S_JPT_L), SEC(S_JPT_M), S_JROOT);
        size_t er_len = su_er(SEC(S_CONT));

        /* The primary tree with Rock Ridge. "." first carries SP, then CE to the ER entry. */
        uint8_t su[255];
        size_t n = 0;
        n += susp_head(su, "SP", 7);
        su[4] = 0xBE; /* check bytes */
        su[5] = 0xEF;
        su[6] = 0; /* bytes skipped at the start of each system use area */
        uint8_t *ce = su + n; /* CE: block, offset and length of the continuation area */
        n += susp_head(ce, "CE", 28);
        both32(ce + 4, S_CONT);
        both32(ce + 12, 0);
        both32(ce + 20, (uint32_t)er_len);
        n += su_px(su + n, 0040555, 2);
        size_t off = 0;
        bool fits = true;
        struct rec r = { .extent = S_ROOT, .size = SECTOR, .dir = true, .id = (const uint8_t *)"\0", .id_len = 1,
                         .su = su, .su_len = n, .date = date };
        fits &= put_rec(SEC(S_ROOT), &off, &r);
        r.id = (const uint8_t *)"\1";
        r.su_len = su_px(su, 0040555, 2);
        fits &= put_rec(SEC(S_ROOT), &off, &r);
        char *iso_names[MAX_FILES], *names[MAX_FILES];
        size_t order[MAX_FILES];
        for (size_t i = 0; i < n_files; i++) {
                iso_names[i] = iso[i];
                names[i] = (char *)files[i].name;
        }
        sort_order(iso_names, n_files, order);
        for (size_t k = 0; k < n_files; k++) {
                size_t i = order[k], len = strlen(files[i].name);
                n = su_px(su, 0100444, 1);
                uint8_t *nm = su + n; /* NM: the name as it is, flags 0 */
                n += susp_head(nm, "NM", 5 + len);
                nm[4] = 0;
                memcpy(nm + 5, files[i].name, len);
                struct rec f = { .extent = extent[i], .size = (uint32_t)files[i].len, .id = (const uint8_t *)iso[i],
                                 .id_len = iso_len[i], .su = su, .su_len = n, .date = date };
                fits &= put_rec(SEC(S_ROOT), &off, &f);
        }

        /* The Joliet tree: the same files under UCS-2 big-endian names. */
        off = 0;
        struct rec j = { .extent = S_JROOT, .size = SECTOR, .dir = true, .id = (const uint8_t *)"\0", .id_len = 1,
                         .date = date };
        fits &= put_rec(SEC(S_JROOT), &off, &j);
        j.id = (const uint8_t *)"\1";
        fits &= put_rec(SEC(S_JROOT), &off, &j);
        sort_order(names, n_files, order);
        for (size_t k = 0; k < n_files; k++) {
                size_t i = order[k], len = strlen(files[i].name);
                uint8_t ucs2[2 * VM_ISO_NAME_MAX];
                put_str(ucs2, 2 * len, files[i].name, true);
                struct rec f = { .extent = extent[i], .size = (uint32_t)files[i].len, .id = ucs2, .id_len = 2 * len,
                                 .date = date };
                fits &= put_rec(SEC(S_JROOT), &off, &f);
        }
#undef SEC
        if (!fits)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "ISO image: the names do not fit in one directory sector");

        if (ftruncate(fd, 0) < 0)
                return na_error_sys(err, errno, "write ISO image: truncate");
        int r2 = na_pwrite_all(fd, meta, (size_t)S_META * SECTOR, (off_t)S_PVD * SECTOR, "ISO image", err);
        for (size_t i = 0; r2 == 0 && i < n_files; i++)
                r2 = na_pwrite_all(fd, files[i].data, files[i].len, (off_t)extent[i] * SECTOR, "ISO image", err);
        if (r2 < 0)
                return r2;
        /* The system area stays a hole; the last file's sector is padded with zeros. */
        if (ftruncate(fd, (off_t)volume_sectors * SECTOR) < 0)
                return na_error_sys(err, errno, "write ISO image: truncate");
        return 0;
}
