/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-monitor's own seccomp allow-list, loaded once crun has started the
 * container (monitor.c): the loop only reads and writes pipes, sockets and the ring,
 * waits for children and records the exit. Written by hand as a classic BPF program
 * (<linux/filter.h>), since the monitor links nothing but libc. Anything not listed
 * gets the refused action; a call of another ABI (i386, x32) kills the process.
 * Arguments checked: kill only of the delete helper's pid, tgkill only of the
 * monitor itself (abort), mmap never with PROT_EXEC.
 *
 * Use: mon_seccomp_apply(helper_pid, mon_seccomp_refused_default(), errbuf, len)
 * in the single-threaded monitor, after the last program it starts itself; it sets
 * no_new_privs first. Children forked later inherit the filter: the monitor's later
 * `crun delete` runs in a helper forked before it (monitor-run.c).
 * mon_seccomp_build() only fills the program (for tests).
 */
#pragma once

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MON_SECCOMP_MAX_INSNS 256

/* What a refused call gets: EPERM in release builds, the process killed (SIGSYS, an
 * audit line in the kernel log) in debug builds so that tests find a missing entry;
 * logged only (SECCOMP_RET_LOG) under the sanitizers, whose runtime makes calls of its
 * own (LeakSanitizer's clone and ptrace at exit). */
uint32_t mon_seccomp_refused_default(void);

/* The program into prog[0..max-1]; its length, or -ENOSPC, or -EOPNOTSUPP on an
 * architecture it does not know. self: the monitor's pid; helper: the one pid kill()
 * may name (0: none). */
int mon_seccomp_build(struct sock_filter *prog, size_t max, pid_t self, pid_t helper, uint32_t refused);

/* PR_SET_NO_NEW_PRIVS, then the filter; 0, or a negative errno with the reason in errbuf. */
int mon_seccomp_apply(pid_t helper, uint32_t refused, char *errbuf, size_t errlen);
