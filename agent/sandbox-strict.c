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
 */
#include "agent/sandbox.h"

#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"

static const char *const allowed[] = {
        /* memory, threads, time, signals (glibc, the loop, the worker pool) */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mlock", "munlock", "mincore", "membarrier",
        "futex", "futex_waitv", "get_robust_list", "set_robust_list", "rseq", "set_tid_address", "clone",
        "clone3", "exit", "exit_group", "gettid", "getpid", "getppid", "tgkill", "tkill", "kill",
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
        "pipe2", "ioctl", "utimensat", "futimesat", "utime", "utimes", "copy_file_range", "sendfile", "splice",
        "tee", "fadvise64", "readahead", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr",
        "fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
        "mknod", "mknodat", "memfd_create",
        /* event loop (epoll, timerfd, signalfd, eventfd, inotify), waiting */
        "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll",
        "ppoll", "select", "pselect6", "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd",
        "signalfd4", "eventfd", "eventfd2", "inotify_init", "inotify_init1", "inotify_add_watch",
        "inotify_rm_watch", "wait4", "waitid", "pidfd_open", "pidfd_send_signal",
        /* sockets (controller over HTTPS, control socket, Prometheus, libvirt, netlink, monitors) */
        "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername",
        "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
        "shutdown",
        /* the app driver: mounts, namespaces, loop devices, cgroups */
        "mount", "umount2", "open_tree", "move_mount", "mount_setattr", "fsopen", "fsconfig", "fsmount",
        "fspick", "unshare", "setns",
        /* Not here: execve and execveat (the agent itself never runs a program: the exec
         * helper does), ptrace, identity changes (setuid and the like, capset), chroot,
         * pivot_root, host names, and everything the deny-list refuses. */
        /* libseccomp (the filter itself), io accounting */
        "seccomp", "ioprio_get", "ioprio_set",
#ifdef __SANITIZE_ADDRESS__
        "ptrace", /* LeakSanitizer stops the threads with it at exit */
#endif
};

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
        r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0)
                return na_error_sys(err, -r, "seccomp: load the allow-list");
        return 0;
}
