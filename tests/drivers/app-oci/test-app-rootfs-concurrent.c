/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Roots of several apps mounted at once (jobs of different apps run in parallel):
 * each app_rootfs_mount makes a user namespace for its id map in a forked child. The
 * children once waited for an end of file that the other children, forked meanwhile
 * with copies of every pipe, held off forever: two concurrent deploys or starts hung.
 * Here four threads mount and remove roots at the same time; an alarm turns a hang
 * into a failure.
 *
 * A fifth thread forks, every 0.2 ms, children that live 20 ms without exec'ing, as
 * the agent's spawns of crun do for a moment: each holds a copy of every file open at
 * its fork, and an unmount under one failed with EBUSY (seen in CI: "unmount
 * .../lower: Device or resource busy"). Unmounts now wait that moment out, and the
 * id-map child shares the table of files instead of copying it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "drivers/app/oci/app-rootfs.h"

#define THREADS 4
#define ROUNDS 15

static char base[64];
static volatile int done;

static void *spawner(void *arg)
{
        (void)arg;
        while (!done) {
                if (fork() == 0) {
                        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
                        _exit(0);
                }
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000 }, NULL);
        }
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        return NULL;
}

static void *worker(void *arg)
{
        long n = (long)arg;
        char lower[128], app[128];
        snprintf(lower, sizeof(lower), "%s/image", base);
        snprintf(app, sizeof(app), "%s/app%ld", base, n);
        for (int i = 0; i < ROUNDS; i++) {
                struct na_error err = NA_ERROR_INIT;
                if (mkdir(app, 0711) < 0 && errno != EEXIST)
                        return (void *)"mkdir";
                if (app_rootfs_mount(lower, app, 1000000000u + (uid_t)n * 65536u, 1000000000u + (gid_t)n * 65536u,
                                     &err) < 0) {
                        fprintf(stderr, "thread %ld: %s\n", n, err.message);
                        na_error_clear(&err);
                        return (void *)"mount";
                }
                if (app_rootfs_remove(app, &err) < 0) {
                        fprintf(stderr, "thread %ld: %s\n", n, err.message);
                        na_error_clear(&err);
                        return (void *)"remove";
                }
        }
        return NULL;
}

static void test_concurrent_roots(void **state)
{
        (void)state;
        alarm(120);
        pthread_t t[THREADS], sp;
        assert_int_equal(pthread_create(&sp, NULL, spawner, NULL), 0);
        for (long i = 0; i < THREADS; i++)
                assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)i), 0);
        for (int i = 0; i < THREADS; i++) {
                void *res;
                pthread_join(t[i], &res);
                if (res)
                        fail_msg("thread %d failed at %s", i, (const char *)res);
        }
        done = 1;
        pthread_join(sp, NULL);
        alarm(0);
}

int main(void)
{
        if (geteuid() != 0)
                return 77;
        snprintf(base, sizeof(base), "/tmp/na-rootfs-XXXXXX");
        if (!mkdtemp(base))
                return 1;
        chmod(base, 0711);
        char path[128];
        snprintf(path, sizeof(path), "%s/image", base);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/image/file", base);
        FILE *f = fopen(path, "w");
        if (f) {
                fputs("x\n", f);
                fclose(f);
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_concurrent_roots),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "%s/image/file", base);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/image", base);
        rmdir(cmd);
        for (int i = 0; i < THREADS; i++) {
                snprintf(cmd, sizeof(cmd), "%s/app%d", base, i);
                rmdir(cmd);
        }
        rmdir(base);
        return r;
}
