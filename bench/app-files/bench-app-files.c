/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * app.files.read_text of 512 KB (issue 11, item 8): the driver-level read the job runs
 * (volume/volume.h: text check, openat2 beneath the volume's root, read, UTF-8
 * check of the whole answer) beside its peer in the same run, the bare
 * open(2) + read(2) + close(2) of the same file with no check at all: what is left is
 * the path layer's and the UTF-8 check's cost. Prints p50 and p99 of both.
 *
 *   bench-app-files [--rounds N] [--kb K]      (defaults 2000 rounds, 512 KB)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "volume/volume.h"

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n)
{
        qsort(t, (size_t)n, sizeof(*t), cmp);
        printf("%-44s p50 %8.1f us   p99 %8.1f us\n", what, t[n / 2], t[n * 99 / 100]);
}

int main(int argc, char **argv)
{
        int rounds = 2000, kb = 512;
        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "--rounds"))
                        rounds = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--kb"))
                        kb = atoi(argv[i + 1]);
        }
        if (rounds < 10 || kb < 1 || kb > 512)
                return fprintf(stderr, "usage: %s [--rounds N>=10] [--kb 1..512]\n", argv[0]), 2;
        char dir[] = "/tmp/na-bench-files-XXXXXX";
        if (!mkdtemp(dir))
                return perror("mkdtemp"), 1;
        char path[128];
        snprintf(path, sizeof(path), "%s/config", dir);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/config/server.log", dir);
        size_t len = (size_t)kb * 1024;
        char *text = malloc(len);
        for (size_t i = 0; i < len; i++) /* mostly ASCII with a two-byte character now and then */
                text[i] = (i % 61 == 60) ? '\n' : (char)('a' + i % 26);
        for (size_t i = 100; i + 1 < len; i += 997) {
                text[i] = (char)0xc3;
                text[i + 1] = (char)0xa9;
        }
        FILE *f = fopen(path, "w");
        if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0)
                return perror(path), 1;
        struct na_error err = NA_ERROR_INIT;
        struct app_fs *fs;
        if (app_fs_open(dir, getuid(), getgid(), &fs, &err) < 0)
                return fprintf(stderr, "%s\n", err.message), 1;
        double *a = calloc((size_t)rounds, sizeof(double)), *b = calloc((size_t)rounds, sizeof(double));
        char *buf = malloc(len + 1);
        for (int i = 0; i < rounds; i++) {
                double t0 = now_us();
                struct app_fs_text t = { 0 };
                if (app_fs_read_text(fs, "/config/server.log", 0, (uint32_t)len, &t, &err) < 0 || t.binary ||
                    t.bytes != len)
                        return fprintf(stderr, "read_text: %s\n", err.message[0] ? err.message : "binary"), 1;
                app_fs_text_clear(&t);
                a[i] = now_us() - t0;
                t0 = now_us();
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                size_t got = 0;
                for (ssize_t n; fd >= 0 && got < len && (n = read(fd, buf + got, len - got)) > 0;)
                        got += (size_t)n;
                if (fd >= 0)
                        close(fd);
                b[i] = now_us() - t0;
                if (got != len)
                        return fprintf(stderr, "peer read %zu of %zu\n", got, len), 1;
        }
        printf("read_text of %d KB, %d rounds (warm page cache)\n", kb, rounds);
        report("app_fs_read_text (the job's read)", a, rounds);
        report("peer: open + read + close, no checks", b, rounds);
        app_fs_close(fs);
        unlink(path);
        snprintf(path, sizeof(path), "%s/config", dir);
        rmdir(path);
        rmdir(dir);
        free(a);
        free(b);
        free(buf);
        free(text);
        return 0;
}
