/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A running app's limits changed in place: app-cg-limits.h. */
#include "drivers/app/oci/app-cg-limits.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"

#define DEFAULT_ROOT "/sys/fs/cgroup"

static int path_of(char *buf, size_t len, const char *root, const char *ctrl, const char *rel, const char *file,
                   struct na_error *err)
{
        int n = ctrl ? snprintf(buf, len, "%s/%s/%s/%s", root, ctrl, rel, file)
                     : snprintf(buf, len, "%s/%s/%s", root, rel, file);
        if (n < 0 || (size_t)n >= len)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "cgroup %s: path too long", rel);
        return 0;
}

static int put(const char *root, const char *ctrl, const char *rel, const char *file, int64_t value, bool pair,
               int64_t second, struct na_error *err)
{
        char path[PATH_MAX], text[64];
        int r = path_of(path, sizeof(path), root, ctrl, rel, file, err);
        if (r < 0)
                return r;
        if (pair)
                snprintf(text, sizeof(text), "%" PRId64 " %" PRId64, value, second);
        else
                snprintf(text, sizeof(text), "%" PRId64, value);
        /* O_TRUNC as a shell's `echo N > file`: a cgroup file ignores it, a test's fixture needs it. */
        _cleanup_close_ int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return na_error_sys(err, errno, "cgroup: open %s", path);
        if (write(fd, text, strlen(text)) < 0)
                return na_error_sys(err, errno, "cgroup: write %s to %s", text, path);
        return 0;
}

/* The first number of a cgroup file; "max": 0. -ENOENT (err not set) when the file is not there. */
static int get(const char *root, const char *ctrl, const char *rel, const char *file, int64_t *ret, int64_t *second,
               struct na_error *err)
{
        char path[PATH_MAX], text[128];
        int r = path_of(path, sizeof(path), root, ctrl, rel, file, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
                return -ENOENT;
        if (fd < 0)
                return na_error_sys(err, errno, "cgroup: open %s", path);
        ssize_t n = read(fd, text, sizeof(text) - 1);
        if (n < 0)
                return na_error_sys(err, errno, "cgroup: read %s", path);
        text[n] = '\0';
        char *end = text;
        *ret = strncmp(text, "max", 3) == 0 ? (end = text + 3, 0) : strtoll(text, &end, 10);
        if (second)
                *second = strtoll(end, NULL, 10);
        return 0;
}

static int set_v1_memory(const char *root, const char *rel, int64_t bytes, struct na_error *err)
{
        int64_t cur = 0, memsw = 0;
        int r = get(root, "memory", rel, "memory.limit_in_bytes", &cur, NULL, err);
        if (r == -ENOENT)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "cgroup memory/%s: not there", rel);
        if (r < 0)
                return r;
        bool has_memsw = get(root, "memory", rel, "memory.memsw.limit_in_bytes", &memsw, NULL, err) == 0;
        if (na_error_is_set(err))
                return -EIO;
        if (!has_memsw)
                return put(root, "memory", rel, "memory.limit_in_bytes", bytes, false, 0, err);
        /* limit <= memsw at every instant. */
        if (bytes > cur) {
                r = put(root, "memory", rel, "memory.memsw.limit_in_bytes", bytes, false, 0, err);
                return r < 0 ? r : put(root, "memory", rel, "memory.limit_in_bytes", bytes, false, 0, err);
        }
        r = put(root, "memory", rel, "memory.limit_in_bytes", bytes, false, 0, err);
        return r < 0 ? r : put(root, "memory", rel, "memory.memsw.limit_in_bytes", bytes, false, 0, err);
}

int app_cg_limits_set(const char *root, enum app_cgroup_layout layout, const char *rel,
                      const struct app_cg_limits *l, struct na_error *err)
{
        root = root ? root : DEFAULT_ROOT;
        int r = 0;
        if (layout == APP_CGROUP_V2) {
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/%s", root, rel);
                if (access(dir, F_OK) < 0)
                        return na_error_set(err, ENOENT, NA_E_INTERNAL, "cgroup %s: not there", dir);
                if (l->cpu_quota_us)
                        r = put(root, NULL, rel, "cpu.max", l->cpu_quota_us, true, l->cpu_period_us, err);
                if (r >= 0 && l->memory_bytes)
                        r = put(root, NULL, rel, "memory.max", l->memory_bytes, false, 0, err);
                if (r >= 0 && l->pids)
                        r = put(root, NULL, rel, "pids.max", l->pids, false, 0, err);
                return r;
        }
        if (l->cpu_quota_us) {
                r = put(root, "cpu", rel, "cpu.cfs_period_us", l->cpu_period_us, false, 0, err);
                if (r >= 0)
                        r = put(root, "cpu", rel, "cpu.cfs_quota_us", l->cpu_quota_us, false, 0, err);
        }
        if (r >= 0 && l->memory_bytes)
                r = set_v1_memory(root, rel, l->memory_bytes, err);
        if (r >= 0 && l->pids)
                r = put(root, "pids", rel, "pids.max", l->pids, false, 0, err);
        return r;
}
