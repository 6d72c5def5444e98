/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Small helpers of the VM driver: progress, child processes, checksums, ids, files. */
#include "drivers/vm/vm-util.h"

#include <ctype.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/fileio.h"
#include "common/uuid.h"

int vm_id_normalize(const char *id, char buf[PROTO_VPS_ID_LEN + 1], struct na_error *err)
{
        if (!na_uuid_valid(id))
                return na_error_set(err, EINVAL, NA_E_VPS_NOT_FOUND, "vps %.40s: not a server id (a UUID)",
                                    id ? id : "(null)");
        for (size_t i = 0; i <= PROTO_VPS_ID_LEN; i++)
                buf[i] = (char)tolower((unsigned char)id[i]);
        return 0;
}

void vm_mac_from_id(const char *id, char mac[18])
{
        unsigned char d[32];
        unsigned int n = 0;
        char lower[PROTO_VPS_ID_LEN + 1] = "";
        for (size_t i = 0; i < PROTO_VPS_ID_LEN && id[i]; i++)
                lower[i] = (char)tolower((unsigned char)id[i]);
        EVP_Digest(lower, strlen(lower), d, &n, EVP_sha256(), NULL);
        snprintf(mac, 18, "52:54:00:%02x:%02x:%02x", d[0], d[1], d[2]);
}

int vm_image_virtual_size(const char *path, const char *format, uint64_t *ret, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "open image %s", path);
        if (streq(format, "qcow2")) {
                unsigned char h[32];
                if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, "QFI\xfb", 4) != 0)
                        return na_error_set(err, EINVAL, NA_E_DRIVER, "image %s: not a qcow2 file", path);
                uint64_t size = 0;
                for (int i = 24; i < 32; i++)
                        size = (size << 8) | h[i];
                *ret = size;
                return 0;
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "stat image %s", path);
        *ret = (uint64_t)st.st_size;
        return 0;
}

