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
 *       volume grows online;
 *   (e) /proc/sys is read-only inside;
 *   (f) seccomp denies unshare(CLONE_NEWUSER), which works without the profile; the
 *       process has Docker's capabilities minus NET_RAW, no new privileges, its
 *       NOFILE, cpu and memory limits in its cgroup, and an allowed personality;
 *   (g) crun state/kill/delete from the normal mount namespace, -ENOENT after.
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
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/json-cleanup.h"
#include "common/unit.h"
#include "drivers/app/app-crun.h"
#include "drivers/app/app-ids.h"
#include "drivers/app/app-oci-spec.h"
#include "drivers/app/app-rootfs.h"
#include "drivers/app/app-volume.h"

#define CRUN "/usr/bin/crun"
#define BUSYBOX "/bin/busybox"
#define VOLUME_MB 20

struct fixture {
        char *base;        /* 0711 so the app's mapped root can reach its root and volume */
        char lower[4096];  /* the "image": a busybox root */
        char app[4096];    /* app dir: upper, work, rootfs */
        char rootfs[4096];
        char image[4096];  /* the volume's image */
        char volume[4096]; /* its mount point */
        char crun_root[4096];
        char bundle[4096];
        char cgroup_parent[128];
        struct app_ids ids;
        int next;
        char used_ids[16][64];
        int n_used;
};

static struct fixture F;

static void die_errno(const char *what)
{
        fail_msg("%s: %s", what, strerror(errno));
}

static void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void must(int r, struct na_error *err, const char *what)
{
        if (r < 0)
                fail_msg("%s: %s", what, err->message);
        na_error_clear(err);
}

static void make_busybox_root(const char *root)
{
        static const char *const dirs[] = { "bin", "proc", "sys", "dev", "etc", "tmp", "home", "root" };
        static const char *const applets[] = { "sh",   "echo", "cat", "dd",    "sleep",     "id",
                                               "ls",   "grep", "stat", "unshare", "sha256sum", "rm",
                                               "uname", "linux32" };
        char p[8192], q[8192];
        if (mkdir(root, 0755) < 0)
                die_errno(root);
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
                if (mkdir(p, streq(dirs[i], "tmp") ? 01777 : 0755) < 0 || chmod(p, streq(dirs[i], "tmp") ? 01777 : 0755) < 0)
                        die_errno(p);
        }
        snprintf(p, sizeof(p), "%s/bin/busybox", root);
        size_t len = 0;
        char *bin = unit_slurp(BUSYBOX, &len);
        if (!bin)
                die_errno(BUSYBOX);
        free(unit_write(NULL, p, bin, len, 0755));
        free(bin);
        for (size_t i = 0; i < ARRAY_SIZE(applets); i++) {
                snprintf(q, sizeof(q), "%s/bin/%s", root, applets[i]);
                if (symlink("busybox", q) < 0)
                        die_errno(q);
        }
        snprintf(p, sizeof(p), "%s/etc/passwd", root);
        free(unit_write_str(NULL, p, "root:x:0:0:root:/root:/bin/sh\n", 0644));
}

static int group_setup(void **state)
{
        if (geteuid() != 0 || access(CRUN, X_OK) != 0) {
                print_message("skipped: needs root and %s\n", CRUN);
                exit(77);
        }
        struct na_error err = NA_ERROR_INIT;
        F.base = unit_tmpdir("app-runtime");
        if (chmod(F.base, 0711) < 0)
                die_errno(F.base);
        snprintf(F.lower, sizeof(F.lower), "%s/image", F.base);
        snprintf(F.app, sizeof(F.app), "%s/app", F.base);
        snprintf(F.rootfs, sizeof(F.rootfs), "%s/app/rootfs", F.base);
        snprintf(F.image, sizeof(F.image), "%s/volume.img", F.base);
        snprintf(F.volume, sizeof(F.volume), "%s/app/volume", F.base);
        snprintf(F.crun_root, sizeof(F.crun_root), "%s/crun", F.base);
        snprintf(F.bundle, sizeof(F.bundle), "%s/app/bundle", F.base);
        snprintf(F.cgroup_parent, sizeof(F.cgroup_parent), "nodeagent-test-%d", (int)getpid());
        make_busybox_root(F.lower);
        if (mkdir(F.app, 0711) < 0 || mkdir(F.bundle, 0700) < 0 || mkdir(F.crun_root, 0700) < 0)
                die_errno(F.app);

        must(app_ids_allocate(F.base, APP_IDS_DEFAULT_BASE, "runtime-test", &F.ids, &err), &err, "ids");
        must(app_rootfs_mount(F.lower, F.app, F.ids.uid_base, F.ids.uid_base, &err), &err, "rootfs");
        must(app_volume_create(F.image, VOLUME_MB, F.ids.uid_base, F.ids.uid_base, &err), &err, "volume create");
        must(app_volume_mount(F.image, F.volume, &err), &err, "volume mount");
        return 0;
}

static void rmdir_cgroups(void)
{
        /* crun delete removes each container's cgroup; the parent is ours to remove. */
        char p[4096];
        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s", F.cgroup_parent);
        rmdir(p);
        DIR *d = opendir("/sys/fs/cgroup");
        for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s", e->d_name, F.cgroup_parent);
                rmdir(p);
        }
        if (d)
                closedir(d);
}

static int group_teardown(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_crun c = { .crun = CRUN, .root = F.crun_root };
        for (int i = 0; i < F.n_used; i++) {
                app_crun_delete(&c, F.used_ids[i], &err);
                na_error_clear(&err);
        }
        if (app_rootfs_remove(F.app, &err) < 0)
                print_error("teardown: %s\n", err.message);
        na_error_clear(&err);
        if (app_volume_remove(F.image, F.volume, &err) < 0)
                print_error("teardown: %s\n", err.message);
        na_error_clear(&err);
        rmdir_cgroups();
        unit_rmrf_free(F.base);
        return 0;
}

/* The config of one run, with this case's command and limits. */
static struct app_oci_input base_input(const char *id, char *const *argv)
{
        return (struct app_oci_input){
                .id = id,
                .hostname = "rt",
                .argv = argv,
                .rootfs = F.rootfs,
                .volume_src = F.volume,
                .uid_base = F.ids.uid_base,
                .id_count = F.ids.count,
                .cpu_cores = 1,
                .memory_mb = 128,
                .pids = 64,
        };
}

static char *new_id(void)
{
        assert_true(F.n_used < (int)ARRAY_SIZE(F.used_ids));
        char *id = F.used_ids[F.n_used++];
        snprintf(id, 64, "na-rt-%d-%d", (int)getpid(), F.next++);
        return id;
}

struct run {
        int status; /* crun's exit status; -1 when killed */
        char *out;  /* its stdout and stderr, and the container's */
};

/*
 * The test-only launcher: write config.json (modify, when given, edits it first),
 * then run crun in the foreground (or --detach) with stdout and stderr to a file.
 */
static struct run launch(struct app_oci_input *in, bool detach, void (*modify)(json_t *cfg))
{
        struct na_error err = NA_ERROR_INIT;
        char cgroup[256];
        snprintf(cgroup, sizeof(cgroup), "/%s/%s", F.cgroup_parent, in->id);
        in->cgroup_path = cgroup;
        json_t *cfg = NULL;
        must(app_oci_config(in, &cfg, &err), &err, "config");
        if (modify)
                modify(cfg);
        must(app_oci_write(F.bundle, cfg, &err), &err, "write config");
        json_decref(cfg);

        char outpath[4200];
        snprintf(outpath, sizeof(outpath), "%s/out-%s.txt", F.base, in->id);
        int out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0)
                die_errno(outpath);
        bool private_ns = app_crun_needs_private_ns();
        char *argv[16];
        int n = 0;
        argv[n++] = (char *)CRUN;
        argv[n++] = (char *)"--root";
        argv[n++] = F.crun_root;
        argv[n++] = (char *)"--cgroup-manager=cgroupfs";
        argv[n++] = (char *)"run";
        if (detach)
                argv[n++] = (char *)"--detach";
        argv[n++] = (char *)"--bundle";
        argv[n++] = F.bundle;
        argv[n++] = (char *)in->id;
        argv[n] = NULL;
        pid_t pid = fork();
        if (pid < 0)
                die_errno("fork");
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
                        _exit(126);
                if (private_ns) {
                        int r = app_crun_private_ns(NULL);
                        if (r < 0) {
                                dprintf(2, "launcher: private mount namespace: %s\n", strerror(-r));
                                _exit(126);
                        }
                }
                char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
                execve(argv[0], argv, envp);
                _exit(127);
        }
        close(out);
        int st = 0;
        for (int waited = 0;; waited += 50) {
                pid_t w = waitpid(pid, &st, WNOHANG);
                if (w == pid)
                        break;
                if (waited > 120000) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &st, 0);
                        break;
                }
                sleep_ms(50);
        }
        struct run r = { .status = WIFEXITED(st) ? WEXITSTATUS(st) : -1, .out = unit_slurp(outpath, NULL) };
        if (!r.out)
                r.out = strdup("");
        print_message("[%s] exit %d:\n%s\n", in->id, r.status, r.out);
        return r;
}

static struct run sh(const char *script, void (*tune)(struct app_oci_input *in), void (*modify)(json_t *cfg))
{
        char *const argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)script, NULL };
        struct app_oci_input in = base_input(new_id(), argv);
        if (tune)
                tune(&in);
        return launch(&in, false, modify);
}

static void expect(const struct run *r, const char *text)
{
        if (!strstr(r->out, text))
                fail_msg("output lacks \"%s\"", text);
}

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
                cmocka_unit_test(test_rootfs_cycle),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
