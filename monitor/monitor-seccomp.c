/* SPDX-License-Identifier: GPL-2.0-or-later */
/* nodeagent-monitor's seccomp allow-list as a hand-written BPF program (see monitor-seccomp.h). */
#include "monitor/monitor-seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define MON_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define MON_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#undef MON_AUDIT_ARCH /* the argument offsets below assume the low word first */
#endif

/* Allowed whole: what the loop (epoll, the container's pipes, the clients' socket, the
 * ring's files, the exit record, reaping) and libc's malloc and exit need, as strace -f
 * of the monitor's tests after its seccomp() call and the filter in log mode over the
 * app tests showed (the static glibc's calls: epoll_wait, poll, renameat, newfstatat;
 * the #else names stand in on architectures without them). */
static const int allowed[] = {
#define A(name) __NR_##name
        /* pipes, sockets, the ring (pread64: a rescan when another writer added lines) and
         * the state files (exit, container.pid, monitor.pid, monitor.sock) */
        A(read), A(write), A(pread64), A(pwritev), A(close), A(openat),
#ifdef __NR_fstat
        A(fstat),
#endif
#ifdef __NR_newfstatat
        A(newfstatat),
#endif
        A(fcntl), A(flock), A(ftruncate), A(fsync), A(unlinkat),
#ifdef __NR_renameat
        A(renameat),
#else
        A(renameat2),
#endif
        /* the loop, the clients of monitor.sock */
#ifdef __NR_epoll_wait
        A(epoll_wait),
#else
        A(epoll_pwait),
#endif
#ifdef __NR_poll
        A(poll),
#else
        A(ppoll),
#endif
        A(epoll_ctl), A(timerfd_settime), A(accept4), A(recvmsg), A(sendto), A(getsockopt),
        /* children (the container's init, orphans: the monitor is their subreaper; the delete helper) */
        A(wait4),
        /* time, memory (malloc: brk, munmap; mmap below), signals, abort(), exit */
        A(clock_gettime), A(brk), A(munmap), A(rt_sigreturn), A(rt_sigprocmask), A(rt_sigaction),
        A(restart_syscall), A(exit_group), A(getpid), A(gettid),
        A(futex), /* glibc's pthread_once wakes its waiters, even in a single thread */
#undef A
};

struct prog {
        struct sock_filter *insn;
        size_t len, max;
};

static void emit(struct prog *p, struct sock_filter f)
{
        if (p->len < p->max)
                p->insn[p->len] = f;
        p->len++; /* counted past max: the caller sees -ENOSPC */
}

#define STMT(code, k) ((struct sock_filter)BPF_STMT((code), (k)))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP((code), (k), (jt), (jf)))
#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8u * (i)))
#define ARG_HI(i) (ARG_LO(i) + 4u)

/* nr allowed when args[arg] is exactly the non-negative value (an int: the high word 0). */
static void emit_arg_eq(struct prog *p, int nr, unsigned arg, uint32_t value, uint32_t refused)
{
        emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 6));
        emit(p, STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
        emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, 3));
        emit(p, STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(arg)));
        emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1));
        emit(p, STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        emit(p, STMT(BPF_RET | BPF_K, refused));
}

uint32_t mon_seccomp_refused_default(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
        return SECCOMP_RET_LOG;
#elif defined(NDEBUG)
        return SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
#else
        return SECCOMP_RET_KILL_PROCESS;
#endif
}

int mon_seccomp_build(struct sock_filter *insn, size_t max, pid_t self, pid_t helper, uint32_t refused)
{
#ifndef MON_AUDIT_ARCH
        (void)insn, (void)max, (void)self, (void)helper, (void)refused;
        return -EOPNOTSUPP;
#else
        struct prog p = { .insn = insn, .max = max };
        /* Another ABI (i386 through int 0x80 on x86-64): numbers mean other calls, kill. */
        emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, arch)));
        emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, MON_AUDIT_ARCH, 1, 0));
        emit(&p, STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
        emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr)));
#if defined(__x86_64__)
        /* x32 calls carry AUDIT_ARCH_X86_64 too, with bit 30 set in the number: kill. */
        emit(&p, JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
        emit(&p, STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
        for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
                emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)allowed[i], 0, 1));
                emit(&p, STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        }
        /* mmap: never executable memory (nothing is loaded after start). */
        emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 4));
        emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)));
        emit(&p, JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 1, 0));
        emit(&p, STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        emit(&p, STMT(BPF_RET | BPF_K, refused));
        /* The argument checks load args into A: nr again before each. */
        emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr)));
        /* tgkill: the monitor itself only (abort(), raise()). */
        emit_arg_eq(&p, __NR_tgkill, 0, (uint32_t)self, refused);
        /* kill: the delete helper only, on its timeout (monitor-run.c). */
        if (helper > 0) {
                emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr)));
                emit_arg_eq(&p, __NR_kill, 0, (uint32_t)helper, refused);
        }
        emit(&p, STMT(BPF_RET | BPF_K, refused));
        return p.len > max ? -ENOSPC : (int)p.len;
#endif
}

int mon_seccomp_apply(pid_t helper, uint32_t refused, char *errbuf, size_t errlen)
{
        struct sock_filter insn[MON_SECCOMP_MAX_INSNS];
        int n = mon_seccomp_build(insn, MON_SECCOMP_MAX_INSNS, getpid(), helper, refused);
        if (n < 0) {
                snprintf(errbuf, errlen, "seccomp: %s", n == -EOPNOTSUPP ? "no filter for this architecture"
                                                                        : "the program is too long");
                return n;
        }
        struct sock_fprog prog = { .len = (unsigned short)n, .filter = insn };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                int e = errno;
                snprintf(errbuf, errlen, "seccomp: PR_SET_NO_NEW_PRIVS: %s", strerror(e));
                return -e;
        }
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
                int e = errno;
                snprintf(errbuf, errlen, "seccomp: load the monitor's filter: %s", strerror(e));
                return -e;
        }
        return 0;
}
