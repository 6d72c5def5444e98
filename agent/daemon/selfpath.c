/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Paths relative to the running executable (agent/daemon/selfpath.h). */
#include "agent/daemon/selfpath.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int agent_beside_exe(const char *reldir, const char *name, char *buf, size_t len, struct na_error *err)
{
        char exe[PATH_MAX];
        ssize_t r = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (r < 0)
                return na_error_sys(err, errno, "%s: /proc/self/exe", name);
        exe[r] = '\0';
        char *slash = strrchr(exe, '/');
        if (!slash)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "%s: /proc/self/exe is %s", name, exe);
        *slash = '\0';
        char dir[PATH_MAX + 64];
        if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", exe, reldir) >= sizeof(dir))
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s: %s/%s: path too long", name, exe, reldir);
        char real[PATH_MAX];
        const char *d = realpath(dir, real) ? real : dir; /* a missing one is named as it is */
        if ((size_t)snprintf(buf, len, "%s/%s", d, name) >= len)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "%s: %s: path too long", name, d);
        return 0;
}
