/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The seccomp profile of every app container, as the OCI linux.seccomp object that
 * crun loads (through libseccomp) just before it execs the app.
 *
 * Choice: a DENY-LIST (defaultAction SCMP_ACT_ALLOW), not Docker's allow-list. An
 * allow-list of ~350 names has to follow every kernel and libc (a missing new syscall
 * breaks apps in ways that are hard to see), and it could not be written and tested
 * well in the time this had; the deny-list covers what the allow-list's absences
 * mostly exist for. Every denied call fails with EPERM, as under Docker:
 *   - kernel and system state: kexec_load, kexec_file_load, init_module, finit_module,
 *     delete_module, create_module, query_module, get_kernel_syms, reboot, swapon,
 *     swapoff, acct, syslog, settimeofday, clock_settime, clock_adjtime, adjtimex,
 *     stime, quotactl, quotactl_fd, lookup_dcookie, nfsservctl, uselib, _sysctl,
 *     ustat, sysfs, vhangup, iopl, ioperm, vm86, vm86old;
 *   - mounts and namespaces: mount, umount, umount2, pivot_root, move_mount,
 *     open_tree, fsopen, fsmount, fsconfig, fspick, mount_setattr, setns, unshare
 *     and clone with any CLONE_NEW* flag (0x7e020000), clone3 (fails with ENOSYS so
 *     libc falls back to clone, whose flags can be checked);
 *   - kernel attack surface and other processes: bpf, perf_event_open,
 *     userfaultfd, keyctl, add_key, request_key, open_by_handle_at,
 *     name_to_handle_at, ptrace, process_vm_readv, process_vm_writev, kcmp,
 *     pidfd_getfd, fanotify_init, io_uring_setup/enter/register (Docker's default
 *     profile blocks them too since 2023: a large attack surface; libuv and others
 *     fall back to epoll);
 *   - personality with anything but Docker's values 0, 8 (PER_LINUX32), 0x20000
 *     (UNAME26), 0x20008 and 0xffffffff (query). libseccomp cannot compare one
 *     argument twice in a rule, so this is 60 single-comparison masked rules.
 * Architectures: the native one and its compat ABIs (x86_64: x86, x32; aarch64: arm),
 * so a 32-bit program meets the same list; a call of any other ABI kills the process
 * (libseccomp's bad-architecture action).
 */
#pragma once

#include <jansson.h>

#include "common/error.h"

/* The linux.seccomp object (a new reference). */
int app_seccomp_profile(json_t **ret, struct na_error *err);
