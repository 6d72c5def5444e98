/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/link/hostinfo.h"

#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include "common/fileio.h"

int hostinfo_read(struct host_facts *h, struct na_error *err)
{
        memset(h, 0, sizeof(*h));
        struct utsname u;
        if (uname(&u) < 0)
                return na_error_sys(err, errno, "uname");
        snprintf(h->hostname, sizeof(h->hostname), "%s", u.nodename);
        snprintf(h->kernel, sizeof(h->kernel), "%s", u.release);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        h->cpus = n > 0 ? n : 1;
        struct sysinfo si;
        if (sysinfo(&si) == 0)
                h->memory_mb = (int64_t)((uint64_t)si.totalram * si.mem_unit / (1024 * 1024));

        /* The cgroup layout is metrics/' to detect (the one detector): the daemon fills it in. */
        snprintf(h->cgroup, sizeof(h->cgroup), "unknown");

        _cleanup_free_ char *boot = NULL;
        struct na_error ignore = NA_ERROR_INIT;
        if (na_read_file("/proc/sys/kernel/random/boot_id", 64, &boot, NULL, &ignore) == 0) {
                boot[strcspn(boot, "\n")] = '\0';
                snprintf(h->boot_id, sizeof(h->boot_id), "%s", boot);
        }
        na_error_clear(&ignore);
        return 0;
}

void hostinfo_to_proto(const struct host_facts *h, struct proto_host *out)
{
        out->hostname = h->hostname;
        out->kernel = h->kernel;
        out->cpus = h->cpus;
        out->memory_mb = h->memory_mb;
        out->cgroup = h->cgroup;
}
