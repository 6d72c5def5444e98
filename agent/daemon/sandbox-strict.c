/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The strict sandbox: an allow-list fitted to the agent itself (sandbox = strict).
 * The programs the agent starts are not under it: the exec helper (common/spawnd.h),
 * forked before the filter, starts them. The list was found by running the test suite
 * with NA_SANDBOX_LOG=1 (the filter in log mode: every call not listed appears in the
 * kernel log as an audit line, type=1326, with its number) and by strace -f -c of the
 * daemon; each group says who needs it.
 *
 * A call not on the list kills the process in debug builds (NDEBUG unset), leaving the
 * kernel's audit line with the call's number, so a missing entry is found at once in
 * tests; it fails with EPERM in release builds, where a missed rare path should fail one
 * job, not stop the node.
 *
 * clone, kill, socket, ioctl, unshare and setns are allowed only with the arguments the
 * agent passes (checked[], found with strace -f of the suite and grep); clone3 answers
 * ENOSYS. Still allowed whole: mount, umount2 and the new mount API (their arguments
 * that matter are paths and structures in memory, which a filter cannot read), prctl,
 * tgkill and the file calls.
 */
#include "agent/daemon/sandbox.h"

#include <errno.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/ioctl.h>

#include "common/macro.h"

static const char *const allowed[] = {
        /* memory, threads, time, signals (glibc, the loop, the worker pool) */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mlock", "munlock", "mincore", "membarrier",
        "futex", "futex_waitv", "get_robust_list", "set_robust_list", "rseq", "set_tid_address",
        "exit", "exit_group", "gettid", "getpid", "getppid", "tgkill", "tkill", /* clone, clone3, kill: below */
        "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler",
        "sched_get_priority_min", "sched_get_priority_max", "sched_setscheduler", "getpriority", "setpriority",
        "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "rt_sigpending", "rt_sigqueueinfo",
        "sigaltstack", "restart_syscall", "alarm", "pause", "getrandom", "getrlimit", "setrlimit", "prlimit64",
        "getrusage", "times", "sysinfo", "uname", "arch_prctl", "prctl", "capget",
        "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "getpgrp", "getpgid",
        "setpgid", "getsid", "setsid", "umask",
        /* files and directories (state, journal, metrics history, images, cgroups, /proc) */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
        "open", "openat", "openat2", "close", "close_range", "creat", "lseek", "fstat", "stat", "lstat",
        "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink",
        "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink",
        "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod",
        "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown", "truncate", "ftruncate", "fallocate",
        "fsync", "fdatasync", "sync_file_range", "syncfs", "flock", "fcntl", "dup", "dup2", "dup3", "pipe",
        "pipe2", /* ioctl: below */ "utimensat", "futimesat", "utime", "utimes", "copy_file_range", "sendfile", "splice",
        "tee", "fadvise64", "readahead", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr",
        "fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
        "mknod", "mknodat", "memfd_create",
        /* event loop (epoll, timerfd, signalfd, eventfd, inotify), waiting */
        "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll",
        "ppoll", "select", "pselect6", "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd",
        "signalfd4", "eventfd", "eventfd2", "inotify_init", "inotify_init1", "inotify_add_watch",
        "inotify_rm_watch", "wait4", "waitid", "pidfd_open", "pidfd_send_signal",
        /* sockets (controller over HTTPS, control socket, Prometheus, libvirt, netlink, monitors) */
        /* socket: below */ "socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername",
        "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
        "shutdown",
        /* the app driver: mounts, namespaces, loop devices, cgroups */
        "mount", "umount2", "open_tree", "move_mount", "mount_setattr", "fsopen", "fsconfig", "fsmount",
        "fspick", /* unshare, setns: below */
        /* Not here: execve and execveat (the agent itself never runs a program: the exec
         * helper does), ptrace, identity changes (setuid and the like, capset), chroot,
         * pivot_root, host names, and everything the deny-list refuses. */
        /* libseccomp (the filter itself), io accounting */
        "seccomp", "ioprio_get", "ioprio_set",
#ifdef __SANITIZE_ADDRESS__
        "ptrace", /* LeakSanitizer stops the threads with it at exit */
#endif
};

/*
 * Allowed only with these arguments (one row, one rule; rows of the same call are
 * alternatives). An int argument is compared on its low 32 bits, as the kernel reads it.
 */
#define NS_FLAGS                                                                                                 \
        ((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                    CLONE_NEWNET))
#define LOW32 0xffffffffull
#ifndef SOCK_TYPE_MASK
#define SOCK_TYPE_MASK 0xf /* the kernel's: the type without SOCK_NONBLOCK and SOCK_CLOEXEC */
#endif
static const struct checked {
        const char *name;
        unsigned arg;
        enum scmp_compare op;
        uint64_t a, b;
        /* a second comparison on another argument, when arg2 > 0: (args[arg2] & mask2) == value2 */
        unsigned arg2;
        uint64_t mask2, value2;
} checked[] = {
        /* threads and fork: no new namespace (glibc falls back to clone when clone3 says ENOSYS) */
        { "clone", 0, SCMP_CMP_MASKED_EQ, NS_FLAGS, 0 },
        /* ...but for the id-map child of drivers/app/oci/app-rootfs.c, exactly this */
        { "clone", 0, SCMP_CMP_EQ, CLONE_NEWUSER | CLONE_FILES | SIGCHLD, 0 },
        /* kill: one process, never -1 (every process) nor a process group; pid 0 (our own group) passes */
        { "kill", 0, SCMP_CMP_MASKED_EQ, 0xffffffff80000000ull, 0 },
        /* sockets: the control socket, libvirt, monitors and the exec helper (unix, any
         * type); the controller, Prometheus and DNS (inet, inet6: stream or datagram, never
         * raw); nftables and links (netlink: route and netfilter only) */
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_UNIX },
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_INET, 1, SOCK_TYPE_MASK, SOCK_STREAM },
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_INET, 1, SOCK_TYPE_MASK, SOCK_DGRAM },
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_INET6, 1, SOCK_TYPE_MASK, SOCK_STREAM },
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_INET6, 1, SOCK_TYPE_MASK, SOCK_DGRAM },
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK, 2, LOW32, NETLINK_ROUTE },
        { "socket", 0, SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK, 2, LOW32, NETLINK_NETFILTER },
        /* namespaces: only network ones (an app's network namespace, drivers/app/net/app-net-ns.c,
         * and nftables inside it, nft/nft-netlink.c) */
        { "unshare", 0, SCMP_CMP_EQ, CLONE_NEWNET, 0 },
        { "setns", 1, SCMP_CMP_MASKED_EQ, LOW32, CLONE_NEWNET },
        /* ioctl: the requests the agent makes */
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, TCGETS },    /* consoles: raw mode of a pty; libc's isatty */
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, TCSETS },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_CTL_GET_FREE }, /* app volumes (app-volume.c) */
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_CONFIGURE },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_SET_FD },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_CLR_FD },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_SET_STATUS64 },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_GET_STATUS64 },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, LOOP_SET_CAPACITY },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, FIFREEZE }, /* app backups (app-backup-snapshot.c) */
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, FITHAW },
        { "ioctl", 1, SCMP_CMP_MASKED_EQ, LOW32, FICLONE },
};

static int add_checked(scmp_filter_ctx ctx, struct na_error *err)
{
        for (size_t i = 0; i < ARRAY_SIZE(checked); i++) {
                const struct checked *c = &checked[i];
                int nr = seccomp_syscall_resolve_name(c->name);
                if (nr == __NR_SCMP_ERROR || nr < 0)
                        continue;
                struct scmp_arg_cmp cmp[2] = {
                        { .arg = c->arg, .op = c->op, .datum_a = c->a, .datum_b = c->b },
                        { .arg = c->arg2, .op = SCMP_CMP_MASKED_EQ, .datum_a = c->mask2, .datum_b = c->value2 },
                };
                int r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, c->arg2 > 0 ? 2 : 1, cmp);
                if (r < 0)
                        return na_error_sys(err, -r, "seccomp: allow %s with argument %u checked", c->name, c->arg);
        }
        /* clone3's flags are in memory, out of a filter's reach: ENOSYS sends glibc to clone. */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return na_error_sys(err, -r, "seccomp: clone3 answers ENOSYS");
        return 0;
}

int sandbox_apply_strict(struct na_error *err)
{
        uint32_t deny = SCMP_ACT_ERRNO(EPERM);
#ifndef NDEBUG
        deny = SCMP_ACT_KILL_PROCESS;
#endif
        const char *log = getenv("NA_SANDBOX_LOG");
        if (log && strcmp(log, "1") == 0)
                deny = SCMP_ACT_LOG; /* finding the list: allow, and log what is missing */
        scmp_filter_ctx ctx = seccomp_init(deny);
        if (!ctx)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "seccomp: init");
        /* Threads already started get it too. Only the native ABI: what runs other ABIs
         * (a 32-bit program in a container) is started by the exec helper, unfiltered. */
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r == 0) /* a call of another ABI from the agent is an exploit: never one thread only */
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r == 0 && deny == SCMP_ACT_LOG)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
        if (r < 0) {
                seccomp_release(ctx);
                return na_error_sys(err, -r, "seccomp: set the filter's attributes");
        }
        for (size_t i = 0; i < ARRAY_SIZE(allowed); i++) {
                int nr = seccomp_syscall_resolve_name(allowed[i]);
                if (nr == __NR_SCMP_ERROR || nr < 0)
                        continue; /* not on this architecture */
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0) {
                        seccomp_release(ctx);
                        return na_error_sys(err, -r, "seccomp: allow %s", allowed[i]);
                }
        }
        r = add_checked(ctx, err);
        if (r < 0) {
                seccomp_release(ctx);
                return r;
        }
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0)
                return na_error_sys(err, -r, "seccomp: load the allow-list");
        return 0;
}
