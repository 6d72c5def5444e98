/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the tar archives the agent reads from outside: the input is
 * one archive (plain, gzip or zstd), applied as an image layer (app-layer.c:
 * app_layer_apply, what a registry's layer blob goes through) and extracted as an
 * app backup being restored or imported (app-backup-extract.c: app_backup_extract),
 * each into a fresh directory of this process that is removed afterwards. Contracts:
 * no crash, leak or hang; a result and its error agree; nothing is ever created
 * beside the extraction directory (an entry that escaped it would be found there).
 * As root, owners are applied too (CI); otherwise their failures are refusals.
 * Built as a libFuzzer target by fuzz/CMakeLists.txt (scripts/fuzz.sh).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drivers/app/backup/app-backup-parts.h"
#include "drivers/app/image/app-image.h"
#include "volume/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long layers_ok, layers_refused, backups_ok, backups_refused;

#define CHECK(cond, ...)                                                           \
        do {                                                                       \
                if (!(cond)) {                                                     \
                        fprintf(stderr, "fuzz-tar: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                              \
                        fputc('\n', stderr);                                       \
                        abort();                                                   \
                }                                                                  \
        } while (0)

/* On tmpfs when there is one: a disk makes each run wait for the file system. */
static char outer[64];
static int outer_fd = -1, archive_fd = -1;

static void outer_remove(void)
{
        struct na_error err = NA_ERROR_INIT;
        char *slash = strrchr(outer, '/');
        *slash = '\0';
        int parent = open(outer, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        app_fs_rm_rf(parent, slash + 1, &err);
        na_error_clear(&err);
        close(parent);
}

static void init(void)
{
        if (outer_fd >= 0)
                return;
        snprintf(outer, sizeof(outer), "%s/na-fuzz-tar-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        CHECK(mkdtemp(outer), "mkdtemp: %s", strerror(errno));
        atexit(outer_remove);
        outer_fd = open(outer, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        archive_fd = memfd_create("fuzz-tar", MFD_CLOEXEC);
        CHECK(outer_fd >= 0 && archive_fd >= 0, "%s", strerror(errno));
}

/* Nothing but the extraction directory name beside it. */
static void check_outer(const char *name)
{
        int fd = openat(outer_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fdopendir(fd);
        CHECK(d, "opendir");
        for (struct dirent *e; (e = readdir(d));)
                CHECK(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, name),
                      "%s escaped the extraction directory", e->d_name);
        closedir(d);
}

static int fresh_dir(const char *name)
{
        CHECK(mkdirat(outer_fd, name, 0700) == 0, "mkdir %s: %s", name, strerror(errno));
        int fd = openat(outer_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0, "open %s", name);
        CHECK(lseek(archive_fd, 0, SEEK_SET) == 0, "lseek");
        return fd;
}

static void remove_dir(const char *name)
{
        struct na_error err = NA_ERROR_INIT;
        int r = app_fs_rm_rf(outer_fd, name, &err);
        CHECK(r >= 0, "remove %s: %s", name, err.message);
        check_outer("");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        init();
        CHECK(ftruncate(archive_fd, 0) == 0 && pwrite(archive_fd, data, size, 0) == (ssize_t)size, "memfd");

        struct na_error err = NA_ERROR_INIT;
        int dir = fresh_dir("layer");
        struct app_layer_opts opts = { 0 };
        int r = app_layer_apply(dir, archive_fd, &opts, &err);
        CHECK((r == 0) == !na_error_is_set(&err), "layer: result %d and error disagree", r);
        r == 0 ? layers_ok++ : layers_refused++;
        na_error_clear(&err);
        close(dir);
        check_outer("layer");
        remove_dir("layer");

        dir = fresh_dir("backup");
        r = app_backup_extract(archive_fd, dir, 100000, 65536, NULL, "app fuzz: backup fuzz", &err);
        CHECK((r == 0) == !na_error_is_set(&err), "backup: result %d and error disagree", r);
        r == 0 ? backups_ok++ : backups_refused++;
        na_error_clear(&err);
        close(dir);
        check_outer("backup");
        remove_dir("backup");
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "layers: %lu applied, %lu refused; backups: %lu extracted, %lu refused\n", layers_ok,
                layers_refused, backups_ok, backups_refused);
        return !layers_ok || !layers_refused || !backups_ok || !backups_refused;
}
