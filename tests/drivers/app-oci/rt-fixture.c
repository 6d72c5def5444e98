/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The fixture and launcher of test-app-runtime (see rt-fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/unit.h"
#include "drivers/app/oci/app-crun.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-volume.h"
#include "rt-fixture.h"

struct fixture F;

void die_errno(const char *what)
{
        fail_msg("%s: %s", what, strerror(errno));
}

void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

void must(int r, struct na_error *err, const char *what)
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

int group_setup(void **state)
{
        if (geteuid() != 0 || access(CRUN, X_OK) != 0) {
                print_message("skipped: needs root and %s\n", CRUN);
                exit(77);
        }
        /*
         * Our own mount namespace: every mount the cases make stays out of the mount
         * namespaces other processes create meanwhile (a qemu started by another test
         * would otherwise keep a copy of our volume, and its loop device, alive), and
         * dies with this process even when it is killed.
         */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die_errno("private mount namespace");
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

int group_teardown(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_crun c = { .crun = CRUN, .root = F.crun_root };
        for (int i = 0; i < F.n_used; i++) {
                app_crun_delete(&c, F.used_ids[i], &err);
                na_error_clear(&err);
        }
        /* What the cases make besides the fixture, in case one failed half-way. */
        char a[4200], b[4200], c2[4300];
        snprintf(a, sizeof(a), "%s/app3", F.base);
        snprintf(b, sizeof(b), "%s/app3/layer", F.base);
        app_rootfs_remove_at(a, b, &err);
        na_error_clear(&err);
        snprintf(a, sizeof(a), "%s/app2", F.base);
        app_rootfs_remove(a, &err);
        na_error_clear(&err);
        static const char *const vols[] = { "layer", "second", "par-0", "par-1", "par-2", "par-3", "par-4", "par-5" };
        for (size_t i = 0; i < ARRAY_SIZE(vols); i++) {
                snprintf(a, sizeof(a), "%s/%s.img", F.base, vols[i]);
                if (streq(vols[i], "layer"))
                        snprintf(c2, sizeof(c2), "%s/app3/layer", F.base);
                else
                        snprintf(c2, sizeof(c2), "%s/%s", F.base, vols[i]);
                app_volume_remove(a, c2, &err);
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
struct app_oci_input base_input(const char *id, char *const *argv)
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

char *new_id(void)
{
        assert_true(F.n_used < (int)ARRAY_SIZE(F.used_ids));
        char *id = F.used_ids[F.n_used++];
        snprintf(id, 64, "na-rt-%d-%d", (int)getpid(), F.next++);
        return id;
}


/*
 * The test-only launcher: write config.json (modify, when given, edits it first),
 * then run crun in the foreground (or --detach) with stdout and stderr to a file.
 */
struct run launch(struct app_oci_input *in, bool detach, void (*modify)(json_t *cfg))
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

struct run sh(const char *script, void (*tune)(struct app_oci_input *in), void (*modify)(json_t *cfg))
{
        char *const argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)script, NULL };
        struct app_oci_input in = base_input(new_id(), argv);
        if (tune)
                tune(&in);
        return launch(&in, false, modify);
}

void expect(const struct run *r, const char *text)
{
        if (!strstr(r->out, text))
                fail_msg("output lacks \"%s\"", text);
}
