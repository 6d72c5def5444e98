/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The default deny-list seccomp profile of app containers (see app-seccomp.h). */
#include "drivers/app/oci/app-seccomp.h"

#include <errno.h>
#include <stdint.h>

#include "common/json-cleanup.h"

static const char *const denied[] = {
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
        "query_module", "get_kernel_syms", "reboot", "swapon", "swapoff", "acct", "syslog", "settimeofday",
        "clock_settime", "clock_adjtime", "adjtimex", "stime", "quotactl", "quotactl_fd", "lookup_dcookie",
        "nfsservctl", "uselib", "_sysctl", "ustat", "sysfs", "vhangup", "iopl", "ioperm", "vm86", "vm86old",
        "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig",
        "fspick", "mount_setattr", "setns", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
        "request_key", "open_by_handle_at", "name_to_handle_at", "ptrace", "process_vm_readv",
        "process_vm_writev", "kcmp", "pidfd_getfd", "fanotify_init", "io_uring_setup", "io_uring_enter",
        "io_uring_register",
};

/* CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET. */
static const uint64_t ns_flags[] = { 0x00020000, 0x02000000, 0x04000000, 0x08000000,
                                     0x10000000, 0x20000000, 0x40000000 };

#define PERSONALITY_OK_BITS 0x00020008u /* UNAME26 | PER_LINUX32 */
#define BIT31 0x80000000u

static json_t *rule(const char *name, int errno_ret, json_t *args)
{
        json_t *r = json_pack("{s:[s], s:s, s:i}", "names", name, "action", "SCMP_ACT_ERRNO", "errnoRet", errno_ret);
        if (r && args && json_object_set_new(r, "args", args) < 0) {
                json_decref(r);
                return NULL;
        }
        if (!r)
                json_decref(args);
        return r;
}

/* (arg0 & mask) == value: one comparison, as OCI writes it (value = mask, valueTwo = datum). */
static json_t *masked(uint64_t mask, uint64_t value)
{
        return json_pack("[{s:i, s:I, s:I, s:s}]", "index", 0, "value", (json_int_t)mask, "valueTwo",
                         (json_int_t)value, "op", "SCMP_CMP_MASKED_EQ");
}

static int add(json_t *list, json_t *r)
{
        return r ? json_array_append_new(list, r) : -1;
}

int app_seccomp_profile(json_t **ret, struct na_error *err)
{
        _cleanup_json_ json_t *names = json_array();
        _cleanup_json_ json_t *syscalls = json_array();
        if (!names || !syscalls)
                return na_error_sys(err, ENOMEM, "seccomp profile");
        int r = 0;
        for (size_t i = 0; i < ARRAY_SIZE(denied) && r == 0; i++)
                r = json_array_append_new(names, json_string(denied[i]));
        json_t *all = json_pack("{s:O, s:s, s:i}", "names", names, "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM);
        r |= add(syscalls, all);
        r |= add(syscalls, rule("clone3", ENOSYS, NULL));
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                r |= add(syscalls, rule("clone", EPERM, masked(ns_flags[i], ns_flags[i])));
                r |= add(syscalls, rule("unshare", EPERM, masked(ns_flags[i], ns_flags[i])));
        }
        /*
         * personality(v) is allowed for v in {0, 8, 0x20000, 0x20008, 0xffffffff} (the
         * kernel reads the low 32 bits). Every other v either has bit 31 clear and a bit
         * outside 0x20008 set, or has bit 31 set and some bit below it clear.
         */
        for (unsigned b = 0; b < 31; b++) {
                uint64_t bit = 1ull << b;
                if (!(bit & PERSONALITY_OK_BITS))
                        r |= add(syscalls, rule("personality", EPERM, masked(BIT31 | bit, bit)));
                r |= add(syscalls, rule("personality", EPERM, masked(BIT31 | bit, BIT31)));
        }
        if (r != 0)
                return na_error_sys(err, ENOMEM, "seccomp profile");

#if defined(__x86_64__)
        json_t *arch = json_pack("[s,s,s]", "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32");
#elif defined(__aarch64__)
        json_t *arch = json_pack("[s,s]", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM");
#else
#error "app-seccomp: name this architecture's seccomp ABIs"
#endif
        json_t *doc = json_pack("{s:s, s:o, s:O}", "defaultAction", "SCMP_ACT_ALLOW", "architectures", arch,
                                "syscalls", syscalls);
        if (!doc)
                return na_error_sys(err, ENOMEM, "seccomp profile");
        *ret = doc;
        return 0;
}
