/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/daemon/sandbox.h"

#include <errno.h>
#include <seccomp.h>
#include <stdint.h>

#include "common/macro.h"

/* Each refused with EPERM; a comment says why nothing of ours needs it. */
static const char *const denied[] = {
        "kexec_load", "kexec_file_load",       /* replacing the kernel */
        "init_module", "finit_module", "delete_module", /* kernel modules */
        "reboot",                                /* the node's power is not ours */
        "swapon", "swapoff",                     /* memory layout of the host */
        "acct",                                  /* process accounting */
        "iopl", "ioperm",                        /* raw port I/O */
        "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", /* the clock belongs to chrony */
        "open_by_handle_at",                     /* escapes mount namespaces */
        "perf_event_open",                       /* kernel introspection */
#ifndef __SANITIZE_ADDRESS__
        "ptrace", /* LeakSanitizer stops the threads with it at exit: allowed in sanitizer builds only */
#endif
        "process_vm_readv", "process_vm_writev", /* other processes' memory */
        "userfaultfd",                           /* a common exploit primitive */
        "lookup_dcookie", "uselib", "nfsservctl", "_sysctl", "vhangup", "syslog",
        "quotactl", "name_to_handle_at", "kcmp",
};

int sandbox_apply(struct na_error *err)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "seccomp: init");
        /* Every thread already started (workers, journal writers, driver threads) gets it too. */
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r < 0) {
                seccomp_release(ctx);
                return na_error_sys(err, -r, "seccomp: synchronise threads");
        }
        /* Apps (containers) inherit this filter: it must know their ABIs too, or a 32-bit
         * program in an app is killed at its first system call (the default for an
         * architecture a filter does not list). On x86-64: i386 and x32 as well. */
#if defined(__x86_64__)
        const uint32_t arches[] = { SCMP_ARCH_X86, SCMP_ARCH_X32 };
        for (size_t i = 0; i < ARRAY_SIZE(arches); i++) {
                r = seccomp_arch_add(ctx, arches[i]);
                if (r < 0 && r != -EEXIST) {
                        seccomp_release(ctx);
                        return na_error_sys(err, -r, "seccomp: add an architecture");
                }
        }
#endif
        for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
                int nr = seccomp_syscall_resolve_name(denied[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                if (r < 0) {
                        seccomp_release(ctx);
                        return na_error_sys(err, -r, "seccomp: deny %s", denied[i]);
                }
        }
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0)
                return na_error_sys(err, -r, "seccomp: load filter");
        return 0;
}
