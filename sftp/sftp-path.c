/* SPDX-License-Identifier: GPL-2.0-or-later */
/* SFTP path text to a volume path (sftp-path.h). */
#include "sftp/sftp-path.h"

#include <errno.h>
#include <string.h>

int sftp_path_normalize(const char *in, size_t len, char *out, size_t out_size)
{
        if (out_size < 2)
                return -ENAMETOOLONG;
        if (memchr(in, '\0', len))
                return -EINVAL;
        size_t o = 0;
        out[o++] = '/';
        out[o] = '\0';
        for (size_t i = 0; i < len;) {
                while (i < len && in[i] == '/')
                        i++;
                size_t s = i;
                while (i < len && in[i] != '/')
                        i++;
                size_t n = i - s;
                if (n == 0 || (n == 1 && in[s] == '.'))
                        continue;
                if (n == 2 && in[s] == '.' && in[s + 1] == '.') {
                        /* pop one component, never above "/" */
                        while (o > 1 && out[o - 1] != '/')
                                o--;
                        if (o > 1)
                                o--;
                        out[o] = '\0';
                        continue;
                }
                if (o + (o > 1) + n + 1 > out_size)
                        return -ENAMETOOLONG;
                if (o > 1)
                        out[o++] = '/';
                memcpy(out + o, in + s, n);
                o += n;
                out[o] = '\0';
        }
        return 0;
}
