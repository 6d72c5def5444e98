/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Backup archives: zstd streams with the sha256 of the compressed bytes. */
#include "common/fileio.h"
#include "drivers/vm/vm-util.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

DEFINE_TRIVIAL_CLEANUP_FUNC(ZSTD_CCtx *, ZSTD_freeCCtx)
DEFINE_TRIVIAL_CLEANUP_FUNC(ZSTD_DCtx *, ZSTD_freeDCtx)
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

#define CHECK_EVERY (64u << 20) /* checkpoint every 64 MiB */


static ssize_t read_some(int fd, void *buf, size_t len)
{
        ssize_t n;
        do
                n = read(fd, buf, len);
        while (n < 0 && errno == EINTR);
        return n;
}

/* The meter's total: the size of the file read. */
static void meter_start(struct na_progress_meter *meter, int fd)
{
        struct stat st;
        if (meter)
                na_progress_meter_total(meter, fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0);
}

#define SKIPPABLE_MAGIC 0x184D2A50u /* the first of zstd's 16 skippable frame magics: ours */

static void le32(unsigned char *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int vm_archive_meta(int fd, char **ret, struct na_error *err)
{
        *ret = NULL;
        unsigned char head[8];
        ssize_t n = pread(fd, head, sizeof(head), 0);
        if (n < 0)
                return na_error_sys(err, errno, "read the archive's head");
        if (n < (ssize_t)sizeof(head) || get_le32(head) != SKIPPABLE_MAGIC)
                return 0;
        uint32_t len = get_le32(head + 4);
        if (len > VM_ARCHIVE_META_MAX)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "the archive's record is %u bytes (at most %u)", len,
                                    VM_ARCHIVE_META_MAX);
        _cleanup_free_ char *text = malloc((size_t)len + 1);
        if (!text)
                return na_error_sys(err, ENOMEM, "the archive's record");
        n = pread(fd, text, len, sizeof(head));
        if (n < 0)
                return na_error_sys(err, errno, "read the archive's record");
        if ((uint32_t)n != len || memchr(text, 0, len))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "the archive's record is cut short or not text");
        text[len] = 0;
        *ret = TAKE_PTR(text);
        return 0;
}

int vm_archive_compress(const char *src, const char *dst, const char *meta, struct na_progress_meter *meter,
                        char sha256[65], uint64_t *ret_size, struct na_error *err)
{
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return na_error_sys(err, errno, "open %s", src);
        meter_start(meter, in);
        _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                return na_error_sys(err, errno, "create %s", dst);
        _cleanup_(ZSTD_freeCCtxp) ZSTD_CCtx *cctx = ZSTD_createCCtx();
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!cctx || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                return na_error_sys(err, ENOMEM, "compress %s", src);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);

        size_t in_cap = ZSTD_CStreamInSize(), out_cap = ZSTD_CStreamOutSize();
        _cleanup_free_ char *ibuf = malloc(in_cap);
        _cleanup_free_ char *obuf = malloc(out_cap);
        if (!ibuf || !obuf)
                return na_error_sys(err, ENOMEM, "compress %s", src);
        uint64_t total = 0, since = 0, read_bytes = 0;
        if (meta) {
                size_t len = strlen(meta);
                if (len > VM_ARCHIVE_META_MAX)
                        return na_error_set(err, E2BIG, NA_E_INTERNAL, "compress %s: record too long", src);
                unsigned char head[8];
                le32(head, SKIPPABLE_MAGIC);
                le32(head + 4, (uint32_t)len);
                int r = na_write_all(out, head, sizeof(head), dst, err);
                if (r < 0 || (r = na_write_all(out, meta, len, dst, err)) < 0)
                        return r;
                EVP_DigestUpdate(md, head, sizeof(head));
                EVP_DigestUpdate(md, meta, len);
                total += sizeof(head) + len;
        }
        for (;;) {
                ssize_t n = read_some(in, ibuf, in_cap);
                if (n < 0)
                        return na_error_sys(err, errno, "read %s", src);
                bool last = n == 0;
                ZSTD_inBuffer ib = { ibuf, (size_t)n, 0 };
                bool finished;
                do {
                        ZSTD_outBuffer ob = { obuf, out_cap, 0 };
                        size_t left = ZSTD_compressStream2(cctx, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
                        if (ZSTD_isError(left))
                                return na_error_set(err, EIO, NA_E_INTERNAL, "compress %s: %s", src,
                                                    ZSTD_getErrorName(left));
                        if (ob.pos > 0) {
                                int r = na_write_all(out, obuf, ob.pos, dst, err);
                                if (r < 0)
                                        return r;
                                EVP_DigestUpdate(md, obuf, ob.pos);
                                total += ob.pos;
                        }
                        finished = last ? left == 0 : ib.pos == ib.size;
                } while (!finished);
                if (last)
                        break;
                since += (uint64_t)n;
                read_bytes += (uint64_t)n;
                na_progress_meter_set(meter, read_bytes);
                if (since >= CHECK_EVERY) {
                        since = 0;
                        int r = na_progress_checkpoint(na_progress_meter_progress(meter), err);
                        if (r < 0)
                                return r;
                }
        }
        if (fsync(out) < 0)
                return na_error_sys(err, errno, "fsync %s", dst);
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(md, d, &dl);
        na_sha256_hex(d, sha256);
        *ret_size = total;
        return 0;
}

/*
 * The stream does not decode: say whether the file differs from its recorded
 * checksum (hashing the rest of it) or is damaged in a way the checksum missed.
 */
static int damaged(int in, EVP_MD_CTX *md, char *buf, size_t cap, const char *src, const char *expected_sha256,
                   const char *why, struct na_error *err)
{
        ssize_t n;
        while ((n = read_some(in, buf, cap)) > 0)
                EVP_DigestUpdate(md, buf, (size_t)n);
        unsigned char d[32];
        unsigned int dl = 0;
        char hex[65];
        EVP_DigestFinal_ex(md, d, &dl);
        na_sha256_hex(d, hex);
        if (n == 0 && expected_sha256 && !streq(hex, expected_sha256))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "%s: sha256 %s does not match the recorded %s", src,
                                    hex, expected_sha256);
        return na_error_set(err, EBADMSG, NA_E_INTERNAL, "decompress %s: %s", src, why);
}

/* Decode in from its current offset into out (-1: nowhere), hashing what is read. */
static int decode(int in, int out, const char *src, const char *dst, const char *expected_sha256,
                  unsigned char *head, size_t head_len, char *ret_sha256, struct na_progress_meter *meter,
                  struct na_error *err)
{
        size_t head_got = 0;
        if (head)
                memset(head, 0, head_len);
        meter_start(meter, in);
        _cleanup_(ZSTD_freeDCtxp) ZSTD_DCtx *dctx = ZSTD_createDCtx();
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!dctx || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                return na_error_sys(err, ENOMEM, "decompress %s", src);
        size_t in_cap = ZSTD_DStreamInSize(), out_cap = ZSTD_DStreamOutSize();
        _cleanup_free_ char *ibuf = malloc(in_cap);
        _cleanup_free_ char *obuf = malloc(out_cap);
        if (!ibuf || !obuf)
                return na_error_sys(err, ENOMEM, "decompress %s", src);
        uint64_t since = 0, read_bytes = 0;
        size_t pending = 0; /* ZSTD_decompressStream's hint: 0 once a frame is complete */
        bool any = false;
        for (;;) {
                ssize_t n = read_some(in, ibuf, in_cap);
                if (n < 0)
                        return na_error_sys(err, errno, "read %s", src);
                if (n == 0)
                        break;
                any = true;
                EVP_DigestUpdate(md, ibuf, (size_t)n);
                ZSTD_inBuffer ib = { ibuf, (size_t)n, 0 };
                while (ib.pos < ib.size) {
                        ZSTD_outBuffer ob = { obuf, out_cap, 0 };
                        pending = ZSTD_decompressStream(dctx, &ob, &ib);
                        if (ZSTD_isError(pending))
                                return damaged(in, md, ibuf, in_cap, src, expected_sha256, ZSTD_getErrorName(pending),
                                               err);
                        if (head && head_got < head_len) {
                                size_t k = ob.pos < head_len - head_got ? ob.pos : head_len - head_got;
                                memcpy(head + head_got, obuf, k);
                                head_got += k;
                        }
                        int r = out >= 0 ? na_write_all(out, obuf, ob.pos, dst, err) : 0;
                        if (r < 0)
                                return r;
                }
                since += (uint64_t)n;
                read_bytes += (uint64_t)n;
                na_progress_meter_set(meter, read_bytes);
                if (since >= CHECK_EVERY) {
                        since = 0;
                        int r = na_progress_checkpoint(na_progress_meter_progress(meter), err);
                        if (r < 0)
                                return r;
                }
        }
        if (!any || pending != 0)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "decompress %s: truncated archive", src);
        unsigned char d[32];
        unsigned int dl = 0;
        char hex[65];
        EVP_DigestFinal_ex(md, d, &dl);
        na_sha256_hex(d, hex);
        if (expected_sha256 && !streq(hex, expected_sha256))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "%s: sha256 %s does not match the recorded %s", src,
                                    hex, expected_sha256);
        if (ret_sha256)
                memcpy(ret_sha256, hex, 65);
        if (out >= 0 && fsync(out) < 0)
                return na_error_sys(err, errno, "fsync %s", dst);
        return 0;
}

int vm_archive_decompress(const char *src, const char *dst, const char *expected_sha256,
                          struct na_progress_meter *meter, struct na_error *err)
{
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return na_error_sys(err, errno, "open %s", src);
        _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                return na_error_sys(err, errno, "create %s", dst);
        return decode(in, out, src, dst, expected_sha256, NULL, 0, NULL, meter, err);
}

int vm_archive_verify_fd(int fd, const char *what, const char *expected_sha256, unsigned char *head, size_t head_len,
                         char ret_sha256[65], struct na_progress_meter *meter, struct na_error *err)
{
        return decode(fd, -1, what, NULL, expected_sha256, head, head_len, ret_sha256, meter, err);
}
