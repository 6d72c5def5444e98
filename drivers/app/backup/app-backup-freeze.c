/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Freezing an app's cgroup for a consistent backup (drivers/app/backup/app-backup-parts.h). On a
 * unified host (cgroup.controllers at /sys/fs/cgroup) it is cgroup v2's
 * <cgroup>/cgroup.freeze, waited for through cgroup.events ("frozen 1"); on a v1 or
 * hybrid host (this development host: crun puts the app in every v1 hierarchy) the
 * freezer hierarchy's <cgroup>/freezer.state, waited for until it reads FROZEN.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "drivers/app/backup/app-backup-parts.h"

#define CGROOT "/sys/fs/cgroup"
#define WAIT_MS 10000

static bool unified(void)
{
        return access(CGROOT "/cgroup.controllers", F_OK) == 0;
}

static int write_str(const char *path, const char *v, struct na_error *err)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? na_error_set(err, ENOENT, NA_E_INTERNAL, "%s: no such cgroup file", path)
                                       : na_error_sys(err, errno, "open %s", path);
        if (write(fd, v, strlen(v)) < 0)
                return na_error_sys(err, errno, "write %s to %s", v, path);
        return 0;
}

static bool file_has(const char *path, const char *what)
{
        char buf[512];
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        return strstr(buf, what) != NULL;
}

static int wait_for(const char *path, const char *what, struct na_error *err)
{
        for (int ms = 0; ms < WAIT_MS; ms += 2) {
                if (file_has(path, what))
                        return 0;
                nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
        }
        return na_error_set(err, ETIMEDOUT, NA_E_DRIVER, "%s: not \"%s\" after %d s", path, what, WAIT_MS / 1000);
}

int app_backup_freeze(const char *cgroup_rel, struct na_error *err)
{
        char p[512], ev[512];
        int r;
        if (unified()) {
                snprintf(p, sizeof(p), CGROOT "/%s/cgroup.freeze", cgroup_rel);
                snprintf(ev, sizeof(ev), CGROOT "/%s/cgroup.events", cgroup_rel);
                if ((r = write_str(p, "1", err)) < 0)
                        return r;
                return wait_for(ev, "frozen 1", err);
        }
        snprintf(p, sizeof(p), CGROOT "/freezer/%s/freezer.state", cgroup_rel);
        if ((r = write_str(p, "FROZEN", err)) < 0)
                return r;
        return wait_for(p, "FROZEN", err);
}

int app_backup_thaw(const char *cgroup_rel, struct na_error *err)
{
        char p[512];
        if (unified()) {
                snprintf(p, sizeof(p), CGROOT "/%s/cgroup.freeze", cgroup_rel);
                return write_str(p, "0", err);
        }
        snprintf(p, sizeof(p), CGROOT "/freezer/%s/freezer.state", cgroup_rel);
        return write_str(p, "THAWED", err);
}
