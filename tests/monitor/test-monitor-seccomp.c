/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-monitor's hand-written seccomp program (monitor/monitor-seccomp.c), loaded
 * by the kernel in a forked child per case (a filter cannot be undone): what the
 * monitor's loop does passes (pipes, a file, epoll, waiting, mmap without PROT_EXEC,
 * kill of the delete helper, tgkill of itself); what it never does is refused with
 * the chosen action (EPERM, or SIGSYS for the kill action, or only logged); another
 * ABI (i386 through int 0x80, x32 numbers) kills whatever the action; /proc says the
 * process is filtered. No root needed: no_new_privs is set first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monitor/monitor-seccomp.h"

#define EPERM_ACTION (SECCOMP_RET_ERRNO | EPERM)

enum step { ALLOWED, REFUSED, STATUS, I386, X32 };

/* 0 when every check held; else the number of the first that did not. */
static int child(pid_t helper, uint32_t action, enum step step)
{
        int p[2]; /* made before, as the monitor makes its pipes: pipe2 is not on the list */
        if (pipe2(p, O_CLOEXEC) < 0)
                return 101;
        char why[256];
        if (mon_seccomp_apply(helper, action, why, sizeof(why)) < 0) {
                fprintf(stderr, "%s\n", why);
                return 100;
        }
        switch (step) {
        case ALLOWED: {
                char c = 0;
                if (write(p[1], "x", 1) != 1 || read(p[0], &c, 1) != 1 || c != 'x')
                        return 1;
                if (pipe2(p, O_CLOEXEC) == 0 || errno != EPERM)
                        return 7;
                int ep = epoll_create1(EPOLL_CLOEXEC); /* not on the list: the monitor makes it before */
                if (ep >= 0 || errno != EPERM)
                        return 2;
                void *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (mem == MAP_FAILED || munmap(mem, 4096) < 0)
                        return 3;
                if (kill(helper, 0) < 0)
                        return 4;
                if (syscall(SYS_tgkill, getpid(), gettid(), 0) < 0)
                        return 5;
                int status;
                if (waitpid(-1, &status, WNOHANG) < 0 && errno != ECHILD) /* it has no child: wait4 ran */
                        return 6;
                return 0;
        }
        case REFUSED: {
                /* Each is one the monitor never makes after its start. */
                if (socket(AF_UNIX, SOCK_STREAM, 0) >= 0 || errno != EPERM)
                        return 11;
                if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED ||
                    errno != EPERM)
                        return 12;
                if (kill(1, 0) == 0 || errno != EPERM) /* only the delete helper */
                        return 13;
                if (kill(-1, 0) == 0 || errno != EPERM)
                        return 14;
                if (syscall(SYS_tgkill, 1, 1, 0) == 0 || errno != EPERM) /* only itself */
                        return 15;
                char *const argv[] = { (char *)"/bin/true", NULL };
                execve(argv[0], argv, NULL);
                if (errno != EPERM)
                        return 16;
                if (fork() >= 0 || errno != EPERM) /* clone */
                        return 17;
                return 0;
        }
        case STATUS: {
                /* openat and read are allowed: the status file says how the process is filtered. */
                int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
                char buf[4096];
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                if (n <= 0)
                        return 21;
                buf[n] = '\0';
                if (!strstr(buf, "\nSeccomp:\t2\n"))
                        return 22;
                if (!strstr(buf, "\nNoNewPrivs:\t1\n"))
                        return 23;
                return 0;
        }
        case I386:
#if defined(__x86_64__)
        {
                long ret, nr = 20; /* getpid on i386: allowed by number, refused by ABI */
                __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr) : "memory");
                (void)ret;
        }
#endif
                return 31;
        case X32:
#if defined(__x86_64__)
                syscall(0x40000000L | SYS_getpid); /* __X32_SYSCALL_BIT */
#endif
                return 41;
        }
        return 99;
}

/* The child's exit code, or minus the signal that ended it. */
static int run(uint32_t action, enum step step)
{
        pid_t helper = fork(); /* stands for the delete helper: something kill() may name */
        assert_true(helper >= 0);
        if (helper == 0) {
                pause();
                _exit(0);
        }
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) /* exit_group directly: before _exit, which is noreturn, ASan calls sigaltstack (not on the list) */
                for (;;)
                        syscall(SYS_exit_group, child(helper, action, step));
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        kill(helper, SIGKILL);
        waitpid(helper, NULL, 0);
        return WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

static void test_loop_calls_pass(void **state)
{
        (void)state;
        assert_int_equal(run(EPERM_ACTION, ALLOWED), 0);
}

static void test_other_calls_refused(void **state)
{
        (void)state;
        assert_int_equal(run(EPERM_ACTION, REFUSED), 0);
        assert_int_equal(run(SECCOMP_RET_KILL_PROCESS, REFUSED), -SIGSYS); /* debug builds: killed at the first */
}

static void test_log_action_lets_through(void **state)
{
        (void)state;
        /* --seccomp log: the socket call passes (and leaves an audit line). */
        assert_int_not_equal(run(SECCOMP_RET_LOG, REFUSED), 0);
}

static void test_filtered_in_proc(void **state)
{
        (void)state;
        assert_int_equal(run(EPERM_ACTION, STATUS), 0);
}

static void test_other_abis_killed(void **state)
{
        (void)state;
#if defined(__x86_64__)
        assert_int_equal(run(EPERM_ACTION, I386), -SIGSYS);
        assert_int_equal(run(EPERM_ACTION, X32), -SIGSYS);
#else
        skip();
#endif
}

static void test_program_fits(void **state)
{
        (void)state;
        struct sock_filter prog[MON_SECCOMP_MAX_INSNS];
        int n = mon_seccomp_build(prog, MON_SECCOMP_MAX_INSNS, getpid(), getpid() + 1, EPERM_ACTION);
        assert_true(n > 10 && n <= MON_SECCOMP_MAX_INSNS);
        print_message("monitor filter: %d BPF instructions\n", n);
        assert_int_equal(mon_seccomp_build(prog, 8, getpid(), 0, EPERM_ACTION), -ENOSPC);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_loop_calls_pass),        cmocka_unit_test(test_other_calls_refused),
                cmocka_unit_test(test_log_action_lets_through), cmocka_unit_test(test_filtered_in_proc),
                cmocka_unit_test(test_other_abis_killed),       cmocka_unit_test(test_program_fits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
