/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The confinement of a connection's two halves (sftpd.h):
 *
 * - sftpd_confine_preauth, the monitor (root: it reads the root-only credentials file
 *   and opens the volume, never the network): a deny-list filter refusing what it
 *   never needs: exec, new sockets and connections, namespaces, mounts, ptrace and
 *   the kernel's own controls.
 * - sftpd_confine_net, the network half, once it is nobody in its own user and mount
 *   namespace with an empty root (sftpd-session.c): dies with the monitor, no new
 *   privileges, not dumpable, the session's allow-list plus the calls of the last
 *   change of ids.
 * - sftpd_confine, the network half logged in, with the volume's root fd: the app's
 *   mapped uid:gid for good (no supplementary groups, saved ids too, no capability),
 *   and the session's allow-list of what libssh's transport and the SFTP server over
 *   openat2 need. Anything else fails with EPERM: no exec, no new sockets, no mounts,
 *   no ptrace, no chown.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sftp/sftpd.h"

static const int allowed[] = {
        /* memory, signals, time, randomness, exit */
        SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect), SCMP_SYS(madvise),
        SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
        SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep), SCMP_SYS(gettimeofday), SCMP_SYS(nanosleep),
        SCMP_SYS(getrandom), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(futex), SCMP_SYS(getpid),
        SCMP_SYS(gettid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid),
        SCMP_SYS(sched_yield), SCMP_SYS(restart_syscall), SCMP_SYS(alarm),
        /* the connection and stderr */
        SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(recvfrom), SCMP_SYS(sendto),
        SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(select),
        SCMP_SYS(pselect6), SCMP_SYS(shutdown), SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getpeername),
        SCMP_SYS(getsockname),
        /* the volume, through openat2 beneath its root */
        SCMP_SYS(openat2), SCMP_SYS(close), SCMP_SYS(fcntl), SCMP_SYS(dup), SCMP_SYS(lseek), SCMP_SYS(pread64),
        SCMP_SYS(pwrite64), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(fstatfs),
        SCMP_SYS(getdents64), SCMP_SYS(mkdirat), SCMP_SYS(unlinkat), SCMP_SYS(renameat2), SCMP_SYS(readlinkat),
        SCMP_SYS(symlinkat), SCMP_SYS(fchmod), SCMP_SYS(ftruncate), SCMP_SYS(fallocate), SCMP_SYS(utimensat),
        SCMP_SYS(fsync), SCMP_SYS(fdatasync), SCMP_SYS(umask),
};

static const char *const preauth_denied[] = {
        "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "socket", "socketpair",
        "connect", "bind", "listen", "accept", "accept4", "mount", "umount2", "pivot_root", "chroot",
        "unshare", "setns", "open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load",
        "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "bpf",
        "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "mknod", "mknodat",
        "chown", "fchown", "lchown", "fchownat", "link", "linkat", "fsopen", "fsmount", "move_mount",
        "open_tree",
};

int sftpd_confine_preauth(char *why, size_t why_len)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx) {
                snprintf(why, why_len, "seccomp_init failed");
                return -ENOMEM;
        }
        int r = 0;
        for (size_t i = 0; i < sizeof(preauth_denied) / sizeof(preauth_denied[0]) && r == 0; i++) {
                int nr = seccomp_syscall_resolve_name(preauth_denied[i]);
                if (nr != __NR_SCMP_ERROR)
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        }
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0)
                snprintf(why, why_len, "seccomp: %s", strerror(-r));
        return r;
}

/* What the network half needs beyond the session's list until it is confined for good (sftpd_confine). */
static const int net_extra[] = {
        SCMP_SYS(setgroups), SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setuid), SCMP_SYS(capset),
        SCMP_SYS(capget), SCMP_SYS(prctl), SCMP_SYS(seccomp), SCMP_SYS(getppid),
};

static int load_allow_list(const int *extra, size_t n_extra)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        if (!ctx)
                return -ENOMEM;
        int r = 0;
        for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]) && r == 0; i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
        for (size_t i = 0; i < n_extra && r == 0; i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, extra[i], 0);
        /* ioctl: only FIONREAD (libssh asks how much the socket holds). */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_EQ, FIONREAD));
        /* openat: only relative to a directory descriptor (a non-negative int), never AT_FDCWD (-100). */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1, SCMP_A0(SCMP_CMP_LT, 0x80000000u));
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r;
}

/* The parent-death signal (cleared by every change of ids), and the parent still there. */
static int die_with_parent(char *why, size_t why_len)
{
        pid_t parent = getppid();
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent || parent == 1) {
                snprintf(why, why_len, "the parent is gone");
                return -ESRCH;
        }
        return 0;
}

int sftpd_confine_net(char *why, size_t why_len)
{
        int r = die_with_parent(why, why_len);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
                snprintf(why, why_len, "prctl: %s", strerror(errno));
                return -errno;
        }
        if ((r = load_allow_list(net_extra, sizeof(net_extra) / sizeof(net_extra[0]))) < 0)
                snprintf(why, why_len, "seccomp: %s", strerror(-r));
        return r;
}

int sftpd_confine(uint32_t uid, uint32_t gid, char *why, size_t why_len)
{
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
                snprintf(why, why_len, "drop to %u:%u: %s", uid, gid, strerror(errno));
                return -errno;
        }
        if (setuid(0) == 0 || getuid() != uid || geteuid() != uid) {
                snprintf(why, why_len, "drop to %u:%u did not hold", uid, gid);
                return -EPERM;
        }
        /*
         * Capabilities: none. In the network half's user namespace the change of ids
         * from nobody does not clear them by itself (they are that namespace's only).
         */
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[2] = { 0 };
        if (syscall(SYS_capset, &hdr, none) < 0) {
                snprintf(why, why_len, "capset: %s", strerror(errno));
                return -errno;
        }
        /* The change of ids cleared the parent-death signal: the session ends with its monitor. */
        int r = die_with_parent(why, why_len);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
                snprintf(why, why_len, "prctl: %s", strerror(errno));
                return -errno;
        }
        if ((r = load_allow_list(NULL, 0)) < 0) {
                snprintf(why, why_len, "seccomp: %s", strerror(-r));
                return r;
        }
        return 0;
}
