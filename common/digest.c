/* SPDX-License-Identifier: GPL-2.0-or-later */
/* SHA-256 of files (OpenSSL's EVP interface). */
#include "common/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)

void na_sha256_hex(const unsigned char digest[32], char hex[65])
{
        static const char digits[] = "0123456789abcdef";
        for (int i = 0; i < 32; i++) {
                hex[2 * i] = digits[digest[i] >> 4];
                hex[2 * i + 1] = digits[digest[i] & 15];
        }
        hex[64] = '\0';
}

int na_sha256_file(const char *path, struct na_progress_meter *meter, char hex[65], struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open %s", path);
        struct stat st;
        if (meter)
                na_progress_meter_total(meter, fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0);
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "sha256 %s: cannot start a digest", path);
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        size_t cap = 1 << 20;
        _cleanup_free_ unsigned char *buf = malloc(cap);
        if (!buf)
                return na_error_sys(err, ENOMEM, "sha256 %s", path);
        uint64_t done = 0;
        for (;;) {
                ssize_t n = read(fd, buf, cap);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return na_error_sys(err, errno, "read %s", path);
                }
                if (n == 0)
                        break;
                EVP_DigestUpdate(ctx, buf, (size_t)n);
                done += (uint64_t)n;
                na_progress_meter_set(meter, done);
                if ((done & ((256u << 20) - 1)) < (uint64_t)n) { /* every 256 MiB */
                        int r = na_progress_checkpoint(na_progress_meter_progress(meter), err);
                        if (r < 0)
                                return r;
                }
        }
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(ctx, d, &dl);
        na_sha256_hex(d, hex);
        return 0;
}

int na_sha256_buf(const void *data, size_t len, char hex[65])
{
        unsigned char d[32];
        unsigned int dl = 0;
        if (EVP_Digest(data, len, d, &dl, EVP_sha256(), NULL) != 1)
                return -ENOMEM;
        na_sha256_hex(d, hex);
        return 0;
}
