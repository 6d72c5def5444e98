/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sandbox = strict, the calls allowed only with some arguments (agent/daemon/sandbox-strict.c):
 * threads and fork still work (clone3 answers ENOSYS, glibc falls back to clone), a
 * clone, unshare or setns of a namespace kind the agent never makes is refused, as are
 * kill of -1 or of a process group, a socket of another family (AF_PACKET), a raw inet
 * socket, a netlink socket of another protocol (uevents) and an ioctl request the
 * agent never makes; what the agent does use passes. Refused means
 * EPERM in release builds and the process killed by SIGSYS in debug builds, so each
 * case runs alone in a forked child (a filter cannot be undone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/daemon/sandbox.h"

#ifdef NDEBUG
#define REFUSED 0 /* the child saw EPERM */
#else
#define REFUSED (-SIGSYS)
#endif

enum step {
        THREAD_AND_FORK,
        CLONE3_ENOSYS,
        CLONE_NEWUTS_REFUSED,
        KILL_ONE_PASSES,
        KILL_ALL_REFUSED,
        KILL_GROUP_REFUSED,
        SOCKETS_PASS,
        SOCKET_PACKET_REFUSED,
        SOCKET_RAW_INET_REFUSED,
        SOCKET_NETLINK_UEVENT_REFUSED,
        IOCTL_TCGETS_PASSES,
        IOCTL_FIONREAD_REFUSED,
        UNSHARE_UTS_REFUSED,
        SETNS_ANY_REFUSED,
        SETNS_NET_PASSES,
};

static void *thread_main(void *arg) { return arg; }

/* 0: the step did what it should (for a refused call: failed with EPERM). */
static int step_run(enum step s)
{
        switch (s) {
        case THREAD_AND_FORK: {
                pthread_t t;
                void *ret = NULL;
                if (pthread_create(&t, NULL, thread_main, (void *)1) != 0 || pthread_join(t, &ret) != 0 || ret != (void *)1)
                        return 1;
                pid_t pid = fork();
                if (pid == 0)
                        _exit(7);
                int st = 0;
                return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 2;
        }
        case CLONE3_ENOSYS:
                return syscall(SYS_clone3, NULL, 0) == -1 && errno == ENOSYS ? 0 : 3;
        case CLONE_NEWUTS_REFUSED: {
                long pid = syscall(SYS_clone, (unsigned long)(CLONE_NEWUTS | SIGCHLD), NULL, NULL, NULL, NULL);
                if (pid == 0)
                        _exit(0);
                return pid == -1 && errno == EPERM ? 0 : 4;
        }
        case KILL_ONE_PASSES:
                return kill(getpid(), 0) == 0 ? 0 : 5;
        case KILL_ALL_REFUSED:
                return kill(-1, 0) == -1 && errno == EPERM ? 0 : 6;
        case KILL_GROUP_REFUSED:
                return kill(-getpgrp(), 0) == -1 && errno == EPERM ? 0 : 7;
        case SOCKETS_PASS: {
                static const int kinds[][3] = {
                        { AF_UNIX, SOCK_SEQPACKET, 0 },   { AF_INET, SOCK_STREAM, 0 },
                        { AF_INET, SOCK_DGRAM, 0 },       { AF_INET6, SOCK_STREAM, 0 },
                        { AF_INET6, SOCK_DGRAM, 0 },      { AF_NETLINK, SOCK_RAW, NETLINK_ROUTE },
                        { AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER },
                };
                for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                        int fd = socket(kinds[i][0], kinds[i][1] | SOCK_CLOEXEC | SOCK_NONBLOCK, kinds[i][2]);
                        if (fd < 0 && errno == EPERM)
                                return 8; /* another error (no IPv6 here) is not the filter's */
                        if (fd >= 0)
                                close(fd);
                }
                return 0;
        }
        case SOCKET_PACKET_REFUSED:
                return socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0) == -1 && errno == EPERM ? 0 : 9;
        case SOCKET_RAW_INET_REFUSED:
                return socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP) == -1 && errno == EPERM ? 0 : 18;
        case SOCKET_NETLINK_UEVENT_REFUSED:
                return socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT) == -1 && errno == EPERM
                               ? 0
                               : 19;
        case IOCTL_TCGETS_PASSES: {
                int p[2];
                char buf[64];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return 10;
                /* isatty(): the kernel answers (ENOTTY on a pipe), not the filter. */
                return ioctl(p[0], TCGETS, buf) == -1 && errno == ENOTTY ? 0 : 11;
        }
        case IOCTL_FIONREAD_REFUSED: {
                int p[2], n = 0;
                if (pipe2(p, O_CLOEXEC) < 0)
                        return 12;
                return ioctl(p[0], FIONREAD, &n) == -1 && errno == EPERM ? 0 : 13;
        }
        case UNSHARE_UTS_REFUSED:
                return unshare(CLONE_NEWUTS) == -1 && errno == EPERM ? 0 : 14;
        case SETNS_ANY_REFUSED:
        case SETNS_NET_PASSES: {
                int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return 15;
                if (s == SETNS_ANY_REFUSED)
                        return setns(fd, 0) == -1 && errno == EPERM ? 0 : 16;
                /* joining our own network namespace: allowed by the filter; root may, others get EPERM from the kernel */
                return setns(fd, CLONE_NEWNET) == 0 || geteuid() != 0 ? 0 : 17;
        }
        }
        return 99;
}

/* The child's exit code, or minus the signal that ended it. */
static int run(enum step s)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct na_error err = NA_ERROR_INIT;
                if (sandbox_apply_strict(&err) < 0)
                        _exit(100);
                _exit(step_run(s));
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

static void test_threads_and_fork(void **state)
{
        (void)state;
        assert_int_equal(run(THREAD_AND_FORK), 0);
        assert_int_equal(run(CLONE3_ENOSYS), 0);
        assert_int_equal(run(CLONE_NEWUTS_REFUSED), REFUSED);
}

static void test_kill(void **state)
{
        (void)state;
        assert_int_equal(run(KILL_ONE_PASSES), 0);
        assert_int_equal(run(KILL_ALL_REFUSED), REFUSED);
        assert_int_equal(run(KILL_GROUP_REFUSED), REFUSED);
}

static void test_socket_families(void **state)
{
        (void)state;
        assert_int_equal(run(SOCKETS_PASS), 0);
        assert_int_equal(run(SOCKET_PACKET_REFUSED), REFUSED);
        assert_int_equal(run(SOCKET_RAW_INET_REFUSED), REFUSED);
        assert_int_equal(run(SOCKET_NETLINK_UEVENT_REFUSED), REFUSED);
}

static void test_ioctl_requests(void **state)
{
        (void)state;
        assert_int_equal(run(IOCTL_TCGETS_PASSES), 0);
        assert_int_equal(run(IOCTL_FIONREAD_REFUSED), REFUSED);
}

static void test_namespaces(void **state)
{
        (void)state;
        assert_int_equal(run(UNSHARE_UTS_REFUSED), REFUSED);
        assert_int_equal(run(SETNS_ANY_REFUSED), REFUSED);
        assert_int_equal(run(SETNS_NET_PASSES), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_threads_and_fork), cmocka_unit_test(test_kill),
                cmocka_unit_test(test_socket_families),  cmocka_unit_test(test_ioctl_requests),
                cmocka_unit_test(test_namespaces),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
