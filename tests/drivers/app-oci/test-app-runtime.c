/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The app runtime for real: crun (/usr/bin/crun) and this kernel run a busybox
 * container on an overlay root (app-rootfs) with a 20 MB loop-mounted volume
 * (app-volume), from a config made by app-oci-spec, in a user namespace from
 * app-ids. Each case starts the container through a test-only launcher (fork; in the
 * child app_crun_private_ns() when app_crun_needs_private_ns(); exec `crun --root R
 * --cgroup-manager=cgroupfs run [--detach] --bundle B ID`) and proves:
 *   (a) root inside is uid_base outside (the volume file's owner, /proc/<pid>/status);
 *   (b) the memory limit OOM-kills a 64 MB dd under 32 MB (oom_kill counted);
 *   (c) the pids limit makes fork fail;
 *   (d) writing past the volume quota fails with ENOSPC, earlier data intact; the
 *       volume grows (online, or offline where CAP_SYS_RESOURCE is withheld, as in
 *       the development sandbox); volumes attach and detach in parallel; a root layer on a volume
 *       of its own bounds writes to / too;
 *   (e) /proc/sys is read-only inside;
 *   (f) seccomp denies unshare(CLONE_NEWUSER), which works without the profile; the
 *       process has Docker's capabilities minus NET_RAW, no new privileges, its
 *       NOFILE, cpu and memory limits in its cgroup, and an allowed personality;
 *   (g) crun state/kill/delete from the normal mount namespace (the test's own, a copy
 *       of the host's with the hybrid layout intact, not the launcher's), -ENOENT
 *       after.
 * Everything (containers, mounts, loop devices, cgroups, directories) is removed in
 * the group teardown, also after a failure. Exits 77 only without root or crun.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/unit.h"
#include "drivers/app/oci/app-crun.h"
#include "drivers/app/oci/app-ids.h"
#include "drivers/app/oci/app-oci-spec.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-volume.h"
#include "rt-fixture.h"

/* (a) root inside is uid_base outside; the root is an overlay whose writes land in upper. */
static void test_user_namespace(void **state)
{
        struct run r = sh("id -u; id -g; echo data > /home/container/owned; echo up > /written-by-app; "
                          "echo x > /etc/by-app; cat /proc/self/uid_map; ls -ln /home/container; "
                          "echo image-owner=$(stat -c %u:%g /bin/busybox); "
                          "echo volume-owner=$(stat -c %u:%g /home/container/lost+found)",
                          NULL, NULL);
        assert_int_equal(r.status, 0);
        assert_true(strncmp(r.out, "0\n0\n", 4) == 0);
        char want[64];
        snprintf(want, sizeof(want), "%u", F.ids.uid_base);
        expect(&r, want); /* uid_map: 0 <base> 65536 */
        expect(&r, "image-owner=0:0"); /* the idmapped image layer: root's files are root's */
        expect(&r, "volume-owner=0:0");
        assert_null(strstr(r.out, "can't create"));
        free(r.out);

        char p[8192];
        struct stat st;
        snprintf(p, sizeof(p), "%s/owned", F.volume);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, F.ids.uid_base);
        assert_int_equal(st.st_gid, F.ids.uid_base);
        snprintf(p, sizeof(p), "%s/upper/written-by-app", F.app);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, F.ids.uid_base);
        snprintf(p, sizeof(p), "%s/written-by-app", F.lower);
        assert_int_equal(stat(p, &st), -1); /* the image is never written */

        bool mounted = false;
        struct na_error err = NA_ERROR_INIT;
        must(app_rootfs_is_mounted(F.app, &mounted, &err), &err, "rootfs mounted");
        assert_true(mounted);
}

static void mem32(struct app_oci_input *in)
{
        in->memory_mb = 32;
}

/* (b) dd's 64 MiB buffer under a 32 MiB limit: killed by the OOM killer, counted. */
static void test_memory_limit(void **state)
{
        struct run r = sh("dd if=/dev/zero of=/dev/null bs=64M count=1; echo dd-exit=$?; "
                          "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null; "
                          "true",
                          mem32, NULL);
        assert_int_equal(r.status, 0);
        expect(&r, "dd-exit=137"); /* SIGKILL */
        const char *k = strstr(r.out, "oom_kill ");
        assert_non_null(k);
        assert_true(atoi(k + 9) >= 1);
        free(r.out);

        /* The same dd with room to spare succeeds: it is the limit, not dd. */
        r = sh("dd if=/dev/zero of=/dev/null bs=64M count=1; echo dd-exit=$?", NULL, NULL);
        expect(&r, "dd-exit=0");
        free(r.out);
}

static void pids16(struct app_oci_input *in)
{
        in->pids = 16;
}

/* (c) 40 background sleeps under pids=16: fork fails. */
static void test_pids_limit(void **state)
{
        /* ash gives up on a failed fork, so the loop runs in a subshell; builtins only after it. */
        struct run r = sh("(i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done); echo started; "
                          "read m < /sys/fs/cgroup/pids/pids.max || read m < /sys/fs/cgroup/pids.max; echo max=$m",
                          pids16, NULL);
        expect(&r, "started");
        expect(&r, "max=16");
        assert_true(strstr(r.out, "can't fork") || strstr(r.out, "Resource temporarily unavailable"));
        free(r.out);
}

static bool has_cap(int cap)
{
        char *s = unit_slurp("/proc/self/status", NULL);
        const char *e = s ? strstr(s, "\nCapEff:") : NULL;
        unsigned long long v = e ? strtoull(e + 8, NULL, 16) : 0;
        free(s);
        return (v >> cap) & 1;
}

/* (d) the quota: ENOSPC past it, earlier data intact; usage as df; online grow. */
static void test_volume_quota(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_volume_usage u0, u1, u2;
        must(app_volume_usage(F.volume, &u0, &err), &err, "usage");
        print_message("volume: size %llu MB, used %llu MB, avail %llu MB\n", (unsigned long long)u0.size_mb,
                      (unsigned long long)u0.used_mb, (unsigned long long)u0.avail_mb);
        assert_true(u0.size_mb >= VOLUME_MB - 1 && u0.size_mb <= VOLUME_MB + 2);
        assert_true(u0.avail_mb >= VOLUME_MB - 2);

        struct run r = sh("dd if=/dev/urandom of=/home/container/keep bs=1M count=2 2>/dev/null && "
                          "sha256sum /home/container/keep; "
                          "dd if=/dev/zero of=/home/container/fill bs=1M count=64; echo dd-exit=$?; sync; "
                          "sha256sum /home/container/keep",
                          NULL, NULL);
        assert_int_equal(r.status, 0);
        expect(&r, "No space left on device");
        assert_null(strstr(r.out, "dd-exit=0"));
        /* The two checksums of keep agree. */
        const char *a = strstr(r.out, "/home/container/keep");
        const char *b = a ? strstr(a + 1, "/home/container/keep") : NULL;
        assert_non_null(b);
        assert_true(a - r.out >= 66);
        const char *line2 = b - 66; /* "<64 hex>  /home..." */
        assert_memory_equal(a - 66, line2, 64);
        free(r.out);

        must(app_volume_usage(F.volume, &u1, &err), &err, "usage");
        assert_true(u1.avail_mb == 0);
        assert_true(u1.used_mb >= u0.size_mb - 1);

        /* Grow online to 40 MB: room again, keep intact. */
        char keep[8192], fill[8192];
        snprintf(keep, sizeof(keep), "%s/keep", F.volume);
        snprintf(fill, sizeof(fill), "%s/fill", F.volume);
        size_t klen = 0;
        char *before = unit_slurp(keep, &klen);
        assert_int_equal(klen, 2 << 20);
        if (app_volume_grow(F.image, F.volume, 40, &err) < 0) {
                /* Online resize needs CAP_SYS_RESOURCE, which a sandbox may withhold: then offline. */
                print_message("online grow: %s\n", err.message);
                assert_false(has_cap(24 /* CAP_SYS_RESOURCE */));
                na_error_clear(&err);
                must(app_volume_umount(F.volume, &err), &err, "umount for grow");
                must(app_volume_grow(F.image, F.volume, 40, &err), &err, "grow offline");
                must(app_volume_mount(F.image, F.volume, &err), &err, "mount after grow");
        }
        must(app_volume_usage(F.volume, &u2, &err), &err, "usage");
        print_message("grown: size %llu MB, avail %llu MB\n", (unsigned long long)u2.size_mb,
                      (unsigned long long)u2.avail_mb);
        assert_true(u2.size_mb >= 39 && u2.avail_mb >= 15);
        char *after = unit_slurp(keep, NULL);
        assert_memory_equal(before, after, klen);
        free(before);
        free(after);
        assert_int_equal(unlink(fill), 0);
        /* Shrinking is refused. */
        assert_true(app_volume_grow(F.image, F.volume, 30, &err) < 0);
        na_error_clear(&err);
}

/* (e) /proc/sys is read-only (the hostname of the container's own UTS namespace included). */
static void test_proc_sys_readonly(void **state)
{
        struct run r = sh("echo other > /proc/sys/kernel/hostname; echo write-exit=$?; cat /proc/sys/kernel/hostname",
                          NULL, NULL);
        expect(&r, "Read-only file system");
        expect(&r, "write-exit=1");
        expect(&r, "\nrt\n");
        free(r.out);
}

static void half_core(struct app_oci_input *in)
{
        in->cpu_cores = 0.5;
        in->memory_mb = 96;
}

/* What the process gets: capabilities, no new privileges, NOFILE, cgroup limits, personality. */
static void test_process(void **state)
{
        struct run r = sh("grep -E '^(Cap|NoNewPrivs)' /proc/self/status; echo nofile=$(ulimit -n); "
                          "cd /sys/fs/cgroup; for f in cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us cpu.max "
                          "memory/memory.limit_in_bytes memory/memory.memsw.limit_in_bytes memory.max "
                          "memory.swap.max; do [ -e $f ] && echo $f=$(cat $f); done; "
                          "echo arch=$(linux32 uname -m); true",
                          half_core, NULL);
        assert_int_equal(r.status, 0);
        /* Docker's default set without CAP_NET_RAW (bit 13): 0xa80425fb - 0x2000. */
        expect(&r, "CapEff:\t00000000a80405fb");
        expect(&r, "CapBnd:\t00000000a80405fb");
        expect(&r, "CapPrm:\t00000000a80405fb");
        expect(&r, "CapInh:\t0000000000000000");
        expect(&r, "CapAmb:\t0000000000000000");
        expect(&r, "NoNewPrivs:\t1");
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        char want[64];
        snprintf(want, sizeof(want), "nofile=%llu",
                 (unsigned long long)(rl.rlim_max < APP_OCI_NOFILE ? rl.rlim_max : APP_OCI_NOFILE));
        expect(&r, want);
        if (strstr(r.out, "cpu.max="))
                expect(&r, "cpu.max=50000 100000");
        else {
                expect(&r, "cpu/cpu.cfs_quota_us=50000");
                expect(&r, "cpu/cpu.cfs_period_us=100000");
        }
        if (strstr(r.out, "memory.max="))
                expect(&r, "memory.max=100663296");
        else {
                expect(&r, "memory/memory.limit_in_bytes=100663296");
                if (strstr(r.out, "memsw"))
                        expect(&r, "memory/memory.memsw.limit_in_bytes=100663296");
        }
        expect(&r, "arch=i686"); /* personality(PER_LINUX32) is one of the allowed values */
        free(r.out);
}

static void drop_seccomp(json_t *cfg)
{
        json_object_del(json_object_get(cfg, "linux"), "seccomp");
}

/* (f) seccomp: unshare(CLONE_NEWUSER) fails with the profile, works without it. */
static void test_seccomp(void **state)
{
        struct run r = sh("grep Seccomp: /proc/self/status; unshare -U id -u; echo unshare-exit=$?", NULL, NULL);
        expect(&r, "Seccomp:\t2");
        expect(&r, "Operation not permitted");
        assert_null(strstr(r.out, "unshare-exit=0"));
        free(r.out);

        r = sh("grep Seccomp: /proc/self/status; unshare -U id -u; echo unshare-exit=$?", NULL, drop_seccomp);
        expect(&r, "Seccomp:\t0");
        expect(&r, "unshare-exit=0");
        free(r.out);
}

static int host_uid_of(pid_t pid)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
        char *s = unit_slurp(p, NULL);
        const char *u = s ? strstr(s, "\nUid:") : NULL;
        int uid = u ? atoi(u + 5) : -1;
        free(s);
        return uid;
}

/* (g) state, kill and delete from the normal mount namespace after a detached run. */
static void test_state_kill_delete(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_crun c = { .crun = CRUN, .root = F.crun_root };
        char *const argv[] = { (char *)"/bin/sleep", (char *)"300", NULL };
        struct app_oci_input in = base_input(new_id(), argv);
        struct run r = launch(&in, true, NULL);
        assert_int_equal(r.status, 0);
        free(r.out);

        struct app_crun_state st;
        must(app_crun_state(&c, in.id, &st, &err), &err, "state");
        assert_int_equal(st.status, APP_CRUN_RUNNING);
        assert_true(st.pid > 1);
        assert_int_equal(host_uid_of(st.pid), (int)F.ids.uid_base);

        must(app_crun_kill(&c, in.id, SIGKILL, &err), &err, "kill");
        for (int i = 0; i < 100; i++) {
                must(app_crun_state(&c, in.id, &st, &err), &err, "state");
                if (st.status == APP_CRUN_STOPPED)
                        break;
                sleep_ms(50);
        }
        assert_int_equal(st.status, APP_CRUN_STOPPED);
        assert_int_equal(st.pid, 0);
        must(app_crun_delete(&c, in.id, &err), &err, "delete");
        assert_int_equal(app_crun_state(&c, in.id, &st, &err), -ENOENT);
        assert_false(na_error_is_set(&err));
        assert_int_equal(app_crun_kill(&c, in.id, SIGTERM, &err), -ENOENT);
        assert_int_equal(app_crun_delete(&c, in.id, &err), -ENOENT);
        assert_false(na_error_is_set(&err));
        assert_int_equal(app_crun_state(&c, "never-made", &st, &err), -ENOENT);

        /* delete --force of a running one. */
        in = base_input(new_id(), argv);
        r = launch(&in, true, NULL);
        assert_int_equal(r.status, 0);
        free(r.out);
        must(app_crun_state(&c, in.id, &st, &err), &err, "state");
        pid_t pid = st.pid;
        must(app_crun_delete(&c, in.id, &err), &err, "delete --force");
        assert_int_equal(app_crun_state(&c, in.id, &st, &err), -ENOENT);
        for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
                sleep_ms(20);
        assert_int_equal(host_uid_of(pid), -1);
}

/* The loop device of our image, from sysfs; -1 when none. */
static int loop_of_image(void)
{
        DIR *d = opendir("/sys/block");
        int found = -1;
        for (struct dirent *e; d && (e = readdir(d));) {
                if (strncmp(e->d_name, "loop", 4) != 0)
                        continue;
                char p[512];
                snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", e->d_name);
                char *b = unit_slurp(p, NULL);
                if (b && strncmp(b, F.image, strlen(F.image)) == 0 && b[strlen(F.image)] == '\n')
                        found = atoi(e->d_name + 4);
                free(b);
        }
        if (d)
                closedir(d);
        return found;
}

/* Diagnostics: the processes whose mount namespace still has /dev/loop<n> mounted. */
static void who_holds(int loop)
{
        char dev[32];
        snprintf(dev, sizeof(dev), " /dev/loop%d ", loop);
        DIR *d = opendir("/proc");
        for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] < '1' || e->d_name[0] > '9')
                        continue;
                char p[300];
                snprintf(p, sizeof(p), "/proc/%s/mountinfo", e->d_name);
                char *m = unit_slurp(p, NULL);
                if (m && strstr(m, dev)) {
                        snprintf(p, sizeof(p), "/proc/%s/cmdline", e->d_name);
                        char *c = unit_slurp(p, NULL);
                        print_error("loop%d still mounted in pid %s (%s)\n", loop, e->d_name, c ? c : "?");
                        free(c);
                }
                free(m);
        }
        if (d)
                closedir(d);
}

/* Volume life cycle: unmount detaches the loop device, mount again keeps data, probe. */
static void test_volume_cycle(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        bool mounted = false;
        must(app_volume_is_mounted(F.volume, &mounted, &err), &err, "is_mounted");
        assert_true(mounted);
        assert_true(loop_of_image() >= 0);
        assert_int_equal(app_volume_mount(F.image, F.volume, &err), -EBUSY);
        na_error_clear(&err);

        must(app_volume_umount(F.volume, &err), &err, "umount");
        must(app_volume_is_mounted(F.volume, &mounted, &err), &err, "is_mounted");
        assert_false(mounted);
        int loop = 0;
        for (int i = 0; i < 100 && (loop = loop_of_image()) >= 0; i++)
                sleep_ms(20);
        if (loop >= 0)
                who_holds(loop);
        assert_int_equal(loop, -1); /* autoclear */
        must(app_volume_umount(F.volume, &err), &err, "umount again");
        struct app_volume_usage u;
        assert_int_equal(app_volume_usage(F.volume, &u, &err), -ENOENT);
        na_error_clear(&err);

        must(app_volume_mount(F.image, F.volume, &err), &err, "mount again");
        char p[8192];
        snprintf(p, sizeof(p), "%s/keep", F.volume);
        assert_int_equal(unit_file_size(p), 2 << 20);

        /* The image must not exist yet for create. */
        assert_true(app_volume_create(F.image, VOLUME_MB, 1, 1, &err) < 0);
        na_error_clear(&err);
        assert_true(app_volume_create(F.image, 1, 1, 1, &err) < 0); /* below the minimum */
        na_error_clear(&err);

        /* Project quota: detected, refused with the loop image named. */
        struct app_volume_support s;
        must(app_volume_probe(F.base, &s, &err), &err, "probe");
        print_message("storage: %s, project quota %s (%s)\n", s.fstype, s.project_quota ? "yes" : "no", s.why);
        assert_int_equal(app_volume_require_project_quota(F.base, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.message, "loop-mounted ext4 image"));
        na_error_clear(&err);

        /* A second volume, removed while mounted: image gone, nothing mounted. */
        char img2[4200], dir2[4200];
        snprintf(img2, sizeof(img2), "%s/second.img", F.base);
        snprintf(dir2, sizeof(dir2), "%s/second", F.base);
        must(app_volume_create(img2, 8, F.ids.uid_base, F.ids.uid_base, &err), &err, "create second");
        must(app_volume_mount(img2, dir2, &err), &err, "mount second");
        struct stat st;
        assert_int_equal(stat(dir2, &st), 0);
        assert_int_equal(st.st_uid, F.ids.uid_base); /* root_owner */
        must(app_volume_remove(img2, dir2, &err), &err, "remove second");
        assert_int_equal(access(img2, F_OK), -1);
        assert_int_equal(access(dir2, F_OK), -1);
        must(app_volume_remove(img2, dir2, &err), &err, "remove again");
}

/* Six processes attach and detach volumes at once: loop devices taken between
 * LOOP_CTL_GET_FREE and LOOP_CONFIGURE are retried, every mount gets its own. */
static void test_volume_parallel(void **state)
{
        pid_t pids[6];
        for (int p = 0; p < 6; p++) {
                pids[p] = fork();
                assert_true(pids[p] >= 0);
                if (pids[p] > 0)
                        continue;
                struct na_error err = NA_ERROR_INIT;
                char img[4200], dir[4200], f[8400];
                snprintf(img, sizeof(img), "%s/par-%d.img", F.base, p);
                snprintf(dir, sizeof(dir), "%s/par-%d", F.base, p);
                snprintf(f, sizeof(f), "%s/mine", dir);
                for (int round = 0; round < 3; round++) {
                        if (app_volume_create(img, 8, 1, 1, &err) < 0 || app_volume_mount(img, dir, &err) < 0) {
                                fprintf(stderr, "worker %d: %s\n", p, err.message);
                                app_volume_remove(img, dir, &err);
                                _exit(1);
                        }
                        int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                        bool ok = fd >= 0 && write(fd, &p, sizeof(p)) == (ssize_t)sizeof(p);
                        if (fd >= 0)
                                close(fd);
                        if (!ok || app_volume_remove(img, dir, &err) < 0) {
                                fprintf(stderr, "worker %d: %s\n", p, ok ? err.message : "write");
                                _exit(1);
                        }
                }
                _exit(0);
        }
        for (int p = 0; p < 6; p++) {
                int st = 0;
                assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
}

static char layer_rootfs[4200];

static void on_layer_root(struct app_oci_input *in)
{
        in->rootfs = layer_rootfs;
}

/* The app's root layer on a volume of its own: writes to / are bounded too. */
static void test_root_layer_quota(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        char app3[4200], layer[4200], img[4200];
        snprintf(app3, sizeof(app3), "%s/app3", F.base);
        snprintf(layer, sizeof(layer), "%s/app3/layer", F.base);
        snprintf(img, sizeof(img), "%s/layer.img", F.base);
        snprintf(layer_rootfs, sizeof(layer_rootfs), "%s/app3/rootfs", F.base);
        assert_int_equal(mkdir(app3, 0711), 0);
        must(app_volume_create(img, 8, F.ids.uid_base, F.ids.uid_base, &err), &err, "layer volume");
        must(app_volume_mount(img, layer, &err), &err, "layer mount");
        must(app_rootfs_mount_at(F.lower, app3, layer, F.ids.uid_base, F.ids.uid_base, &err), &err, "rootfs");

        struct run r = sh("echo small > /etc/small; dd if=/dev/zero of=/tmp/big bs=1M count=32; echo dd-exit=$?; "
                          "cat /etc/small",
                          on_layer_root, NULL);
        assert_int_equal(r.status, 0);
        expect(&r, "No space left on device");
        expect(&r, "\nsmall\n");
        free(r.out);
        char p[8400];
        snprintf(p, sizeof(p), "%s/upper/etc/small", layer);
        assert_int_equal(access(p, F_OK), 0);

        must(app_rootfs_remove_at(app3, layer, &err), &err, "rootfs remove");
        snprintf(p, sizeof(p), "%s/upper", layer);
        assert_int_equal(access(p, F_OK), -1);
        must(app_volume_remove(img, layer, &err), &err, "layer remove");
        assert_int_equal(rmdir(app3), 0);
}

/* Rootfs: unmount and remove take the app's layer away and leave the image alone. */
static void test_rootfs_cycle(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        char app2[4200], p[8400];
        snprintf(app2, sizeof(app2), "%s/app2", F.base);
        assert_int_equal(mkdir(app2, 0711), 0);
        must(app_rootfs_mount(F.lower, app2, F.ids.uid_base, F.ids.uid_base, &err), &err, "mount");
        assert_int_equal(app_rootfs_mount(F.lower, app2, F.ids.uid_base, F.ids.uid_base, &err), -EBUSY);
        na_error_clear(&err);
        snprintf(p, sizeof(p), "%s/rootfs/etc/new", app2);
        free(unit_write_str(NULL, p, "x", 0644));
        snprintf(p, sizeof(p), "%s/upper/etc/new", app2);
        assert_int_equal(access(p, F_OK), 0);
        must(app_rootfs_umount(app2, &err), &err, "umount");
        bool mounted = true;
        must(app_rootfs_is_mounted(app2, &mounted, &err), &err, "is_mounted");
        assert_false(mounted);
        must(app_rootfs_mount(F.lower, app2, F.ids.uid_base, F.ids.uid_base, &err), &err, "mount again");
        snprintf(p, sizeof(p), "%s/rootfs/etc/new", app2);
        assert_int_equal(access(p, F_OK), 0); /* the layer survives a remount */
        must(app_rootfs_remove(app2, &err), &err, "remove");
        snprintf(p, sizeof(p), "%s/upper", app2);
        assert_int_equal(access(p, F_OK), -1);
        snprintf(p, sizeof(p), "%s/bin/busybox", F.lower);
        assert_int_equal(access(p, X_OK), 0);
        assert_int_equal(app_rootfs_mount("/no/such/image", app2, 1, 1, &err), -ENOENT);
        na_error_clear(&err);
        assert_int_equal(app_rootfs_mount("/a,b", app2, 1, 1, &err), -EINVAL);
        na_error_clear(&err);
        rmdir(app2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_user_namespace),    cmocka_unit_test(test_memory_limit),
                cmocka_unit_test(test_pids_limit),        cmocka_unit_test(test_volume_quota),
                cmocka_unit_test(test_proc_sys_readonly), cmocka_unit_test(test_seccomp),
                cmocka_unit_test(test_process),           cmocka_unit_test(test_state_kill_delete),
                cmocka_unit_test(test_volume_cycle),      cmocka_unit_test(test_volume_parallel),
                cmocka_unit_test(test_root_layer_quota),
                cmocka_unit_test(test_rootfs_cycle),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
