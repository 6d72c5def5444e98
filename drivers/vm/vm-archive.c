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

int vm_archive_compress(const char *src, const char *dst, struct na_progress_meter *meter, char sha256[65],
                        uint64_t *ret_size, struct na_error *err)
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

int vm_archive_decompress(const char *src, const char *dst, const char *expected_sha256,
                          struct na_progress_meter *meter, struct na_error *err)
{
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return na_error_sys(err, errno, "open %s", src);
        meter_start(meter, in);
        _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                return na_error_sys(err, errno, "create %s", dst);
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
                        int r = na_write_all(out, obuf, ob.pos, dst, err);
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
        if (fsync(out) < 0)
                return na_error_sys(err, errno, "fsync %s", dst);
        return 0;
}
