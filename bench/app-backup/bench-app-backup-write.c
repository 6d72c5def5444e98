/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Drives the backup archive writer (drivers/app/backup/app-backup-write.c) over a directory
 * into a file, as app.backup.create does, and prints one JSON line: bytes archived,
 * seconds, the archive's size and sha256, and this process's peak RSS (VmHWM).
 *
 *   bench-app-backup-write DIR OUT [--extract-into EMPTYDIR]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drivers/app/backup/app-backup-parts.h"

static long vm_hwm_kb(void)
{
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        long kb = -1;
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "VmHWM:", 6) == 0)
                        kb = strtol(line + 6, NULL, 10);
        if (f)
                fclose(f);
        return kb;
}

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        if (argc != 3 && !(argc == 5 && strcmp(argv[3], "--extract-into") == 0)) {
                fprintf(stderr, "usage: %s DIR OUT [--extract-into EMPTYDIR]\n", argv[0]);
                return 2;
        }
        int dir = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
        int out = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (dir < 0 || out < 0) {
                perror("open");
                return 1;
        }
        struct na_error err = NA_ERROR_INIT;
        struct app_backup_write_opts o = { .id_base = 0, .id_count = 65536 };
        struct app_backup_written w;
        double t0 = now();
        if (app_backup_write(dir, out, &o, &w, &err) < 0 || fsync(out) < 0) {
                fprintf(stderr, "backup: %s\n", err.message);
                return 1;
        }
        double secs = now() - t0;
        printf("{\"bytesIn\": %llu, \"files\": %llu, \"seconds\": %.3f, \"sizeBytes\": %llu, \"sha256\": \"%s\", "
               "\"vmHwmKB\": %ld}\n",
               (unsigned long long)w.bytes_in, (unsigned long long)w.files, secs, (unsigned long long)w.size_bytes,
               w.sha256, vm_hwm_kb());
        if (argc == 5) {
                int dest = open(argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dest < 0 || app_backup_extract(out, dest, 0, 65536, NULL, "bench", &err) < 0) {
                        fprintf(stderr, "extract: %s\n", dest < 0 ? "open" : err.message);
                        return 1;
                }
        }
        return 0;
}
