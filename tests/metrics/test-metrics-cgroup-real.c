/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A real cgroup on this host (v1 cpuacct, v2 or hybrid, as detected): an idle cgroup
 * shows 0 % CPU, a busy process moved into it makes its CPU rise; removing the
 * cgroup skips its values (its open files answer ENODEV) and a cgroup created again
 * under the same path starts a new baseline. Exits 77 only when not root or when no
 * cgroup file system is mounted at all; as root on a host with one, detection must
 * find a CPU controller and the test's cgroups must be created, or the test fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "fixture.h"
#include "metrics/cgroup.h"
#include "metrics/metrics.h"

#define APP "12345678-1234-4234-8234-123456789abc"


static struct metrics_cgroups cg;
static char name[64];
static char cpu_dir[4096], mem_dir[4096];
static char self_exe[4096];
static char *state_dir;

static void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int write_str(const char *dir, const char *file, const char *text)
{
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int e = errno;
        close(fd);
        return n == (ssize_t)strlen(text) ? 0 : -e;
}

/* The cgroup's CPU time in ns, read directly. */
static uint64_t usage_ns(void)
{
        char path[4200], buf[4096];
        bool v1 = cg.res[CG_CPU].ver == CG_V1;
        snprintf(path, sizeof(path), "%s/%s", cpu_dir, v1 ? "cpuacct.usage" : "cpu.stat");
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        unsigned long long v = 0;
        if (v1)
                sscanf(buf, "%llu", &v);
        else if (sscanf(buf, "usage_usec %llu", &v) == 1)
                v *= 1000;
        return v;
}

static bool make_cgroups(void)
{
        if (mkdir(cpu_dir, 0755) < 0)
                return false;
        if (mem_dir[0] && mkdir(mem_dir, 0755) < 0)
                mem_dir[0] = '\0';
        return true;
}

/* rmdir is refused (EBUSY) for a moment after the last task was reaped: retry. */
static bool remove_one(const char *dir)
{
        for (int i = 0; i < 200; i++) {
                if (rmdir(dir) == 0 || errno == ENOENT)
                        return true;
                if (errno != EBUSY)
                        return false;
                struct timespec ts = { .tv_nsec = 10 * 1000000L };
                nanosleep(&ts, NULL);
        }
        return false;
}

static bool remove_cgroups(void)
{
        bool ok = remove_one(cpu_dir);
        if (mem_dir[0])
                ok &= remove_one(mem_dir);
        return ok;
}

/* Whether any cgroup file system (v1 or v2) is mounted, from /proc/self/mounts. */
static bool cgroupfs_mounted(void)
{
        FILE *f = fopen("/proc/self/mounts", "re");
        if (!f)
                return false;
        char line[4096];
        bool found = false;
        while (!found && fgets(line, sizeof(line), f)) {
                char dev[256], dir[2048], type[64];
                found = sscanf(line, "%255s %2047s %63s", dev, dir, type) == 3 &&
                        (streq(type, "cgroup") || streq(type, "cgroup2"));
        }
        fclose(f);
        return found;
}

static int group_setup(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        if (geteuid() != 0 || !cgroupfs_mounted()) {
                fprintf(stderr, "skip: %s\n", geteuid() != 0 ? "needs root" : "no cgroup file system is mounted");
                exit(77);
        }
        /* Root with a cgroupfs: from here on, anything missing is a failure, not a skip. */
        if (metrics_cgroups_detect("/sys/fs/cgroup", &cg, &err) < 0) {
                fprintf(stderr, "cgroup detection failed on a host with a cgroup file system: %s\n", err.message);
                na_error_clear(&err);
                return -1;
        }
        if (!cg.res[CG_CPU].dir) {
                fprintf(stderr, "cgroup detection found no CPU accounting hierarchy under /sys/fs/cgroup\n");
                return -1;
        }
        snprintf(name, sizeof(name), "nodeagent-test-%d", (int)getpid());
        snprintf(cpu_dir, sizeof(cpu_dir), "%s/%s", cg.res[CG_CPU].dir, name);
        if (cg.res[CG_MEMORY].dir && !streq(cg.res[CG_MEMORY].dir, cg.res[CG_CPU].dir))
                snprintf(mem_dir, sizeof(mem_dir), "%s/%s", cg.res[CG_MEMORY].dir, name);
        if (!make_cgroups()) {
                fprintf(stderr, "as root, cannot create the cgroup %s: %s\n", cpu_dir, strerror(errno));
                return -1;
        }
        ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
        assert_true(n > 0);
        self_exe[n] = '\0';
        state_dir = fx_mkdtemp("cgreal");
        return 0;
}

static int group_teardown(void **state)
{
        remove_cgroups();
        metrics_cgroups_clear(&cg);
        fx_remove(state_dir);
        free(state_dir);
        return 0;
}

static struct metrics *open_metrics(void)
{
        struct na_error err = NA_ERROR_INIT;
        struct metrics *m = NULL;
        struct metrics_options o = { .state_dir = state_dir, .interval_sec = 1 };
        if (metrics_open(&o, &m, &err) < 0)
                fail_msg("metrics_open: %s", err.message);
        struct metrics_target_spec s = { .kind = METRICS_APP, .id = APP, .cgroup = name, .vcpus = 1 };
        if (metrics_track(m, &s, &err) < 0)
                fail_msg("track: %s", err.message);
        return m;
}

static void tick(struct metrics *m)
{
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(metrics_collect(m, na_now_real_ms(), &err), 0);
}

static bool cpu_of(struct metrics *m, uint64_t at_least_ms, double *pct)
{
        struct proto_metrics_sample s;
        if (metrics_latest(m, METRICS_APP, APP, &s) < 0 || s.at_ms < at_least_ms ||
            !(s.valid & PROTO_M_BIT(PROTO_M_CPU_PERCENT)))
                return false;
        *pct = s.v[PROTO_M_CPU_PERCENT];
        return true;
}

static pid_t spawn_spinner(void)
{
        pid_t pid;
        char *argv[] = { self_exe, (char *)"--spin", NULL };
        assert_int_equal(posix_spawn(&pid, self_exe, NULL, NULL, argv, environ), 0);
        char buf[32];
        snprintf(buf, sizeof(buf), "%d\n", (int)pid);
        assert_int_equal(write_str(cpu_dir, "cgroup.procs", buf), 0);
        if (mem_dir[0])
                write_str(mem_dir, "cgroup.procs", buf);
        return pid;
}

static void stop(pid_t pid)
{
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

static void test_cpu_rises(void **state)
{
        struct metrics *m = open_metrics();
        double pct;

        /* idle: 0 % */
        tick(m);
        sleep_ms(200);
        uint64_t t = na_now_real_ms();
        tick(m);
        assert_true(cpu_of(m, t, &pct));
        assert_true(pct == 0.0);

        /* busy: wait for at least 0.5 s of CPU in the cgroup (at most 30 s), then look */
        pid_t pid = spawn_spinner();
        uint64_t start = usage_ns();
        for (int i = 0; i < 600 && usage_ns() - start < 500000000ULL; i++)
                sleep_ms(50);
        t = na_now_real_ms();
        tick(m);
        stop(pid);
        assert_true(usage_ns() - start >= 500000000ULL);
        assert_true(cpu_of(m, t, &pct));
        fprintf(stderr, "busy cgroup: cpuPercent %.2f\n", pct);
        assert_true(pct > 1.0);
        assert_true(pct <= 100.0);

        struct metrics_stats st;
        metrics_stats(m, &st);
        uint64_t skipped_before = st.values_skipped;

        /* the cgroup goes: its values are skipped (ENODEV through the open files), nothing else.
         * Sample times are aligned to the interval, so compare with the last sample's own time,
         * not with the wall clock. */
        struct proto_metrics_sample s;
        assert_int_equal(metrics_latest(m, METRICS_APP, APP, &s), 0);
        uint64_t last = s.at_ms;
        assert_true(remove_cgroups());
        sleep_ms(1100); /* the next tick falls in a later interval */
        t = na_now_real_ms();
        tick(m);
        assert_int_equal(metrics_latest(m, METRICS_APP, APP, &s), 0);
        if (s.at_ms != last) /* nothing measured for it this tick */
                fail_msg("measured after removal: valid bits 0x%x (cpu %.2f, mem %.1f MB)", (unsigned)s.valid,
                         s.v[PROTO_M_CPU_PERCENT], s.v[PROTO_M_MEMORY_USED_MB]);
        assert_int_equal(metrics_latest(m, METRICS_NODE, "node", &s), 0);
        assert_true(s.at_ms >= t); /* the node was */
        metrics_stats(m, &st);
        assert_true(st.values_skipped > skipped_before);
        tick(m);

        /* it comes back under the same path: a new baseline, then rates again */
        assert_true(make_cgroups());
        sleep_ms(10);
        t = na_now_real_ms();
        tick(m);
        assert_false(cpu_of(m, t, &pct));
        sleep_ms(100);
        t = na_now_real_ms();
        tick(m);
        assert_true(cpu_of(m, t, &pct));
        assert_true(pct < 50.0);

        /* the node's own figures are there */
        json_t *arr = metrics_latest_json(m);
        assert_true(json_array_size(arr) >= 1);
        json_t *node = json_array_get(arr, 0);
        assert_string_equal(json_string_value(json_object_get(node, "targetId")), "node");
        assert_non_null(json_object_get(node, "cpuPercent"));
        assert_non_null(json_object_get(node, "memoryUsedMB"));
        json_decref(arr);
        metrics_close(m);
}

int main(int argc, char **argv)
{
        if (argc > 1 && streq(argv[1], "--spin")) {
                volatile unsigned long x = 0;
                for (;;)
                        x++;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpu_rises),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
