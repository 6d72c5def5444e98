/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Units of the app runtime without a kernel: the OCI config's key fields (golden
 * values), its refusals, the seccomp profile, names and paths, crun's state JSON and
 * the cgroup layout from mountinfo fixtures (v1, v2, hybrid, none); whether a path is
 * a mount (app_mount_is) on this machine's own mounts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <linux/magic.h>
#include <sys/resource.h>

#include "common/unit.h"
#include "drivers/app/oci/app-crun.h"
#include "drivers/app/oci/app-mountinfo.h"
#include "drivers/app/oci/app-names.h"
#include "drivers/app/oci/app-oci-spec.h"
#include "drivers/app/oci/app-seccomp.h"

static char *const argv_ok[] = { (char *)"/bin/server", (char *)"--port", (char *)"25565", NULL };
static char *const env_ok[] = { (char *)"EULA=true", (char *)"MEMORY=1G", NULL };

static struct app_oci_input input(void)
{
        return (struct app_oci_input){
                .id = "app-1",
                .hostname = "mc1",
                .argv = argv_ok,
                .env = env_ok,
                .rootfs = "/var/lib/nodeagent/apps/app-1/rootfs",
                .volume_src = "/var/lib/nodeagent/apps/app-1/volume",
                .uid_base = 1000065536,
                .id_count = 65536,
                .cpu_cores = 1.5,
                .memory_mb = 2048,
                .cgroup_path = "/nodeagent/app-1",
        };
}

static json_t *config(const struct app_oci_input *in)
{
        struct na_error err = NA_ERROR_INIT;
        json_t *cfg = NULL;
        int r = app_oci_config(in, &cfg, &err);
        if (r < 0)
                fail_msg("app_oci_config: %s", err.message);
        na_error_clear(&err);
        return cfg;
}

static json_t *at(json_t *doc, const char *path)
{
        /* "a.b.2.c": object keys and array indexes. */
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", path);
        json_t *cur = doc;
        for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
                cur = json_is_array(cur) ? json_array_get(cur, strtoul(k, NULL, 10)) : json_object_get(cur, k);
        return cur;
}

static const char *str(json_t *doc, const char *path)
{
        return json_string_value(at(doc, path));
}

static json_int_t num(json_t *doc, const char *path)
{
        json_t *v = at(doc, path);
        assert_true(json_is_integer(v));
        return json_integer_value(v);
}

static bool array_has(json_t *a, const char *s)
{
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v) if (json_is_string(v) && streq(json_string_value(v), s)) return true;
        return false;
}

static json_t *mount_at(json_t *cfg, const char *dst)
{
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(cfg, "mounts"), i, m) if (streq(str(m, "destination"), dst)) return m;
        return NULL;
}

/* The image's user (app-user.h) inside the namespace, with its supplementary groups. */
static void test_config_user(void **state)
{
        (void)state;
        static const uint32_t groups[] = { 103, 29 };
        struct app_oci_input in = input();
        in.uid = 101, in.gid = 104, in.groups = groups, in.n_groups = 2;
        json_t *cfg = config(&in);
        assert_int_equal(num(cfg, "process.user.uid"), 101);
        assert_int_equal(num(cfg, "process.user.gid"), 104);
        assert_int_equal(num(cfg, "process.user.additionalGids.0"), 103);
        assert_int_equal(num(cfg, "process.user.additionalGids.1"), 29);
        json_decref(cfg);
        in = input();
        cfg = config(&in);
        assert_null(at(cfg, "process.user.additionalGids")); /* root, no groups: none written */
        json_decref(cfg);
}

static void test_config_golden(void **state)
{
        struct app_oci_input in = input();
        json_t *cfg = config(&in);
        assert_string_equal(str(cfg, "ociVersion"), "1.0.2");
        assert_string_equal(str(cfg, "hostname"), "mc1");
        assert_string_equal(str(cfg, "root.path"), "/var/lib/nodeagent/apps/app-1/rootfs");
        assert_true(json_is_false(at(cfg, "root.readonly")));

        /* process */
        assert_true(json_is_false(at(cfg, "process.terminal")));
        assert_true(json_is_true(at(cfg, "process.noNewPrivileges")));
        assert_int_equal(num(cfg, "process.user.uid"), 0);
        assert_int_equal(json_array_size(at(cfg, "process.args")), 3);
        assert_string_equal(str(cfg, "process.args.0"), "/bin/server");
        assert_string_equal(str(cfg, "process.args.2"), "25565");
        assert_string_equal(str(cfg, "process.cwd"), "/");
        json_t *env = at(cfg, "process.env");
        assert_true(array_has(env, "EULA=true"));
        assert_true(array_has(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
        assert_string_equal(str(cfg, "process.rlimits.0.type"), "RLIMIT_NOFILE");
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        assert_int_equal(num(cfg, "process.rlimits.0.hard"), rl.rlim_max < 65536 ? (json_int_t)rl.rlim_max : 65536);
        static const char *const sets[] = { "bounding", "effective", "permitted" };
        for (size_t i = 0; i < 3; i++) {
                char p[64];
                snprintf(p, sizeof(p), "process.capabilities.%s", sets[i]);
                json_t *c = at(cfg, p);
                assert_int_equal(json_array_size(c), 13);
                assert_true(array_has(c, "CAP_NET_BIND_SERVICE"));
                assert_true(array_has(c, "CAP_CHOWN"));
                assert_false(array_has(c, "CAP_NET_RAW"));
                assert_false(array_has(c, "CAP_SYS_ADMIN"));
        }
        assert_int_equal(json_array_size(at(cfg, "process.capabilities.inheritable")), 0);
        assert_int_equal(json_array_size(at(cfg, "process.capabilities.ambient")), 0);

        /* user namespace and the rest */
        assert_int_equal(num(cfg, "linux.uidMappings.0.containerID"), 0);
        assert_int_equal(num(cfg, "linux.uidMappings.0.hostID"), 1000065536);
        assert_int_equal(num(cfg, "linux.uidMappings.0.size"), 65536);
        assert_int_equal(num(cfg, "linux.gidMappings.0.hostID"), 1000065536);
        json_t *ns = at(cfg, "linux.namespaces");
        assert_int_equal(json_array_size(ns), 7);
        static const char *const kinds[] = { "pid", "ipc", "uts", "mount", "cgroup", "user", "network" };
        for (size_t i = 0; i < 7; i++) {
                assert_string_equal(json_string_value(json_object_get(json_array_get(ns, i), "type")), kinds[i]);
                assert_null(json_object_get(json_array_get(ns, i), "path"));
        }

        /* resources */
        assert_int_equal(num(cfg, "linux.resources.memory.limit"), 2048ll << 20);
        assert_int_equal(num(cfg, "linux.resources.memory.swap"), 2048ll << 20);
        assert_int_equal(num(cfg, "linux.resources.pids.limit"), 512);
        assert_int_equal(num(cfg, "linux.resources.cpu.quota"), 150000);
        assert_int_equal(num(cfg, "linux.resources.cpu.period"), 100000);
        assert_true(json_is_false(at(cfg, "linux.resources.devices.0.allow")));
        assert_string_equal(str(cfg, "linux.cgroupsPath"), "/nodeagent/app-1");

        /* paths */
        assert_true(array_has(at(cfg, "linux.readonlyPaths"), "/proc/sys"));
        assert_true(array_has(at(cfg, "linux.readonlyPaths"), "/proc/sysrq-trigger"));
        assert_true(array_has(at(cfg, "linux.maskedPaths"), "/proc/kcore"));
        assert_true(array_has(at(cfg, "linux.maskedPaths"), "/proc/keys"));
        assert_true(array_has(at(cfg, "linux.maskedPaths"), "/sys/firmware"));

        /* mounts */
        json_t *vol = mount_at(cfg, "/home/container");
        assert_non_null(vol);
        assert_string_equal(str(vol, "type"), "bind");
        assert_string_equal(str(vol, "source"), "/var/lib/nodeagent/apps/app-1/volume");
        assert_true(array_has(json_object_get(vol, "options"), "rbind"));
        assert_true(array_has(json_object_get(vol, "options"), "nosuid"));
        assert_true(array_has(json_object_get(vol, "options"), "nodev"));
        assert_string_equal(str(mount_at(cfg, "/dev"), "type"), "tmpfs");
        assert_string_equal(str(mount_at(cfg, "/proc"), "type"), "proc");
        assert_non_null(mount_at(cfg, "/dev/pts"));
        assert_non_null(mount_at(cfg, "/dev/shm"));
        assert_true(array_has(json_object_get(mount_at(cfg, "/sys"), "options"), "ro"));
        assert_true(array_has(json_object_get(mount_at(cfg, "/sys/fs/cgroup"), "options"), "ro"));
        assert_null(mount_at(cfg, "/tmp"));

        /* seccomp */
        assert_string_equal(str(cfg, "linux.seccomp.defaultAction"), "SCMP_ACT_ALLOW");
        json_decref(cfg);
}

static void test_config_options(void **state)
{
        struct app_oci_input in = input();
        char *const env_path[] = { (char *)"PATH=/opt/bin", NULL };
        in.env = env_path;
        in.cwd = "/home/container";
        in.volume_dst = "/data";
        in.pids = 16;
        in.cpu_cores = 0.005; /* below the kernel's 1 ms minimum */
        in.netns_path = "/run/netns/app-1";
        json_t *cfg = config(&in);
        assert_int_equal(json_array_size(at(cfg, "process.env")), 1);
        assert_string_equal(str(cfg, "process.env.0"), "PATH=/opt/bin");
        assert_string_equal(str(cfg, "process.cwd"), "/home/container");
        assert_non_null(mount_at(cfg, "/data"));
        assert_null(mount_at(cfg, "/home/container"));
        assert_int_equal(num(cfg, "linux.resources.pids.limit"), 16);
        assert_int_equal(num(cfg, "linux.resources.cpu.quota"), 1000);
        assert_string_equal(str(cfg, "linux.namespaces.6.type"), "network");
        assert_string_equal(str(cfg, "linux.namespaces.6.path"), "/run/netns/app-1");
        json_decref(cfg);

        in = input();
        in.env = NULL;
        in.volume_src = NULL;
        cfg = config(&in);
        assert_int_equal(json_array_size(at(cfg, "process.env")), 1);
        assert_null(mount_at(cfg, "/home/container"));
        json_decref(cfg);
}

static void refused(struct app_oci_input in, const char *why)
{
        struct na_error err = NA_ERROR_INIT;
        json_t *cfg = NULL;
        int r = app_oci_config(&in, &cfg, &err);
        if (r != -EINVAL)
                fail_msg("%s: accepted (r=%d)", why, r);
        assert_null(cfg);
        assert_true(na_error_is_set(&err));
        na_error_clear(&err);
}

static void test_config_refusals(void **state)
{
        struct app_oci_input in;
        char *const empty[] = { NULL };
        char *const blank[] = { (char *)"", NULL };
        char *const bad_env[] = { (char *)"=x", NULL };
        char *const no_eq[] = { (char *)"NAME", NULL };
        char *const not_utf8[] = { (char *)"/bin/\xff", NULL };

        in = input(), in.id = "../x", refused(in, "id");
        in = input(), in.id = "", refused(in, "empty id");
        in = input(), in.hostname = "a b", refused(in, "hostname");
        in = input(), in.argv = empty, refused(in, "empty argv");
        in = input(), in.argv = blank, refused(in, "blank argv[0]");
        in = input(), in.argv = NULL, refused(in, "NULL argv");
        in = input(), in.argv = not_utf8, refused(in, "argv not UTF-8");
        in = input(), in.env = bad_env, refused(in, "env without name");
        in = input(), in.env = no_eq, refused(in, "env without =");
        in = input(), in.cwd = "relative", refused(in, "cwd");
        in = input(), in.rootfs = "/", refused(in, "rootfs /");
        in = input(), in.rootfs = "/a/../b", refused(in, "rootfs ..");
        in = input(), in.volume_src = "rel", refused(in, "volume src");
        in = input(), in.volume_dst = "/proc/x", refused(in, "volume in /proc");
        in = input(), in.volume_dst = "/", refused(in, "volume at /");
        in = input(), in.volume_dst = "/a//b", refused(in, "volume //");
        in = input(), in.uid_base = 0, refused(in, "host root mapped");
        in = input(), in.uid = 65536, refused(in, "a user past the mapped ids");
        static const uint32_t far_groups[] = { 29, 70000 };
        in = input(), in.groups = far_groups, in.n_groups = 2, refused(in, "a group past the mapped ids");
        in = input(), in.id_count = 0, refused(in, "no ids");
        in = input(), in.uid_base = UINT32_MAX - 10, refused(in, "ids past the end");
        in = input(), in.cpu_cores = 0, refused(in, "no cpu");
        in = input(), in.cpu_cores = -1, refused(in, "negative cpu");
        in = input(), in.cpu_cores = 1.0 / 0.0, refused(in, "infinite cpu");
        in = input(), in.memory_mb = 0, refused(in, "no memory");
        in = input(), in.pids = 1 << 30, refused(in, "pids");
        in = input(), in.cgroup_path = "nodeagent/x", refused(in, "relative cgroup");
        in = input(), in.cgroup_path = "/nodeagent/../x", refused(in, "cgroup ..");
        in = input(), in.netns_path = "netns", refused(in, "netns");

        /* /processes is not /proc */
        in = input(), in.volume_dst = "/processes";
        json_decref(config(&in));
}

static json_t *rules_for(json_t *profile, const char *name)
{
        json_t *out = json_array();
        size_t i;
        json_t *rule;
        json_array_foreach(json_object_get(profile, "syscalls"), i, rule) if (array_has(json_object_get(rule, "names"),
                                                                                           name))
                json_array_append(out, rule);
        return out;
}

/* Evaluate the personality rules for v as the kernel filter would (any matching rule denies). */
static bool personality_denied(json_t *rules, uint64_t v)
{
        size_t i;
        json_t *rule;
        json_array_foreach(rules, i, rule) {
                json_t *arg = json_array_get(json_object_get(rule, "args"), 0);
                assert_string_equal(str(arg, "op"), "SCMP_CMP_MASKED_EQ");
                uint64_t mask = (uint64_t)json_integer_value(json_object_get(arg, "value"));
                uint64_t want = (uint64_t)json_integer_value(json_object_get(arg, "valueTwo"));
                if ((v & mask) == want)
                        return true;
        }
        return false;
}

static void test_seccomp(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        json_t *p = NULL;
        assert_int_equal(app_seccomp_profile(&p, &err), 0);
        assert_string_equal(str(p, "defaultAction"), "SCMP_ACT_ALLOW");
#ifdef __x86_64__
        assert_true(array_has(json_object_get(p, "architectures"), "SCMP_ARCH_X86_64"));
        assert_true(array_has(json_object_get(p, "architectures"), "SCMP_ARCH_X86"));
#endif
        static const char *const must[] = { "kexec_load", "init_module", "finit_module", "bpf", "perf_event_open",
                                            "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root",
                                            "move_mount", "open_tree", "fsopen", "fsmount", "swapon", "swapoff",
                                            "reboot", "setns", "userfaultfd", "open_by_handle_at", "ptrace",
                                            "process_vm_readv", "process_vm_writev", "iopl", "ioperm", "acct",
                                            "settimeofday", "clock_settime", "adjtimex", "quotactl",
                                            "lookup_dcookie", "syslog", "io_uring_setup" };
        for (size_t i = 0; i < ARRAY_SIZE(must); i++) {
                json_t *r = rules_for(p, must[i]);
                if (json_array_size(r) != 1)
                        fail_msg("%s: %zu rules", must[i], json_array_size(r));
                json_t *rule = json_array_get(r, 0);
                assert_string_equal(str(rule, "action"), "SCMP_ACT_ERRNO");
                assert_int_equal(num(rule, "errnoRet"), EPERM);
                assert_null(json_object_get(rule, "args"));
                json_decref(r);
        }
        /* Ordinary calls are not named at all. */
        static const char *const ordinary[] = { "read", "write", "openat", "clone", "execve", "mmap", "futex" };
        for (size_t i = 0; i < ARRAY_SIZE(ordinary); i++) {
                json_t *r = rules_for(p, ordinary[i]);
                size_t n = json_array_size(r);
                json_decref(r);
                if (streq(ordinary[i], "clone"))
                        assert_int_equal(n, 7); /* only with CLONE_NEW* flags */
                else
                        assert_int_equal(n, 0);
        }
        json_t *c3 = rules_for(p, "clone3");
        assert_int_equal(num(json_array_get(c3, 0), "errnoRet"), ENOSYS);
        json_decref(c3);
        json_t *un = rules_for(p, "unshare");
        assert_int_equal(json_array_size(un), 7);
        bool newuser = false;
        size_t i;
        json_t *rule;
        json_array_foreach(un, i, rule) if (num(rule, "args.0.value") == 0x10000000 &&
                                            num(rule, "args.0.valueTwo") == 0x10000000) newuser = true;
        assert_true(newuser);
        json_decref(un);

        json_t *pers = rules_for(p, "personality");
        assert_int_equal(json_array_size(pers), 60);
        static const uint64_t allowed[] = { 0, 8, 0x20000, 0x20008, 0xffffffff };
        for (size_t k = 0; k < ARRAY_SIZE(allowed); k++)
                assert_false(personality_denied(pers, allowed[k]));
        static const uint64_t denied[] = { 0x0400000 /* READ_IMPLIES_EXEC */, 0x0100000, 0x0200000, 1, 0x80000000,
                                           0xfffffffe, 0x7fffffff, 0x20009, 0x40000 };
        for (size_t k = 0; k < ARRAY_SIZE(denied); k++)
                if (!personality_denied(pers, denied[k]))
                        fail_msg("personality 0x%llx allowed", (unsigned long long)denied[k]);
        for (uint64_t v = 0; v < 0x100000; v += 13)
                assert_true(personality_denied(pers, v) == !(v == 0 || v == 8 || v == 0x20000 || v == 0x20008));
        json_decref(pers);
        json_decref(p);
}

static void test_names(void **state)
{
        assert_true(app_name_valid("app-1"));
        assert_true(app_name_valid("6f1c2a3b-0000-4000-8000-000000000000"));
        assert_false(app_name_valid(".."));
        assert_false(app_name_valid("-rf"));
        assert_false(app_name_valid("a/b"));
        assert_false(app_name_valid(""));
        assert_false(app_name_valid(NULL));
        assert_false(app_name_valid("a234567890123456789012345678901234567890123456789012345678901234x"));
        assert_true(app_path_clean("/"));
        assert_true(app_path_clean("/a/b.c/..d"));
        assert_false(app_path_clean("/a/"));
        assert_false(app_path_clean("/a/.."));
        assert_false(app_path_clean("/a/./b"));
        assert_false(app_path_clean("//a"));
        assert_false(app_path_clean("a"));
        assert_false(app_path_clean("/a\nb"));
}

static void test_crun_state_parse(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        struct app_crun_state st;
        assert_int_equal(app_crun_state_parse("{\"ociVersion\":\"1.0.0\",\"id\":\"x\",\"pid\":23823,"
                                              "\"status\":\"running\",\"bundle\":\"/b\"}",
                                              &st, &err),
                         0);
        assert_int_equal(st.status, APP_CRUN_RUNNING);
        assert_int_equal(st.pid, 23823);
        assert_int_equal(app_crun_state_parse("{\"pid\":0,\"status\":\"stopped\"}", &st, &err), 0);
        assert_int_equal(st.status, APP_CRUN_STOPPED);
        assert_int_equal(st.pid, 0);
        assert_int_equal(app_crun_state_parse("{\"pid\":7,\"status\":\"created\"}", &st, &err), 0);
        assert_int_equal(st.status, APP_CRUN_CREATED);
        assert_true(app_crun_state_parse("{\"pid\":7,\"status\":\"weird\"}", &st, &err) < 0);
        na_error_clear(&err);
        assert_true(app_crun_state_parse("{\"status\":\"running\"}", &st, &err) < 0);
        na_error_clear(&err);
        assert_true(app_crun_state_parse("not json", &st, &err) < 0);
        na_error_clear(&err);
        assert_string_equal(app_crun_status_name(APP_CRUN_PAUSED), "paused");
}

static const char hybrid[] =
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:5 - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char v1[] = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                         "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
static const char v2[] = "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
                         "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
                         "rw,nsdelegate,memory_recursiveprot\n";
static const char none[] = "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
                           "23 27 0:22 / /sys/fs/cgroupx rw - cgroup2 cgroup2 rw\n";
/* A space in the root path is escaped as \040 in mountinfo. */
static const char escaped[] = "30 23 0:26 / /x\\040y rw - tmpfs tmpfs rw\n"
                              "41 30 0:38 / /x\\040y/unified rw - cgroup2 cgroup2 rw\n";

static int layout_of(const char *text, const char *root, enum app_cgroup_layout *l)
{
        char *dir = unit_tmpdir("app-layout");
        char *path = unit_write_str(dir, "mountinfo", text, 0644);
        struct na_error err = NA_ERROR_INIT;
        int r = app_cgroup_layout_at(path, root, l, &err);
        na_error_clear(&err);
        free(path);
        unit_rmrf_free(dir);
        return r;
}

/* app_mount_is: statx and statfs (or mountinfo) on mounts every Linux has. */
static void test_mount_is(void **state)
{
        struct na_error err = NA_ERROR_INIT;
        bool m = true;
        assert_int_equal(app_mount_is("/proc", "proc", PROC_SUPER_MAGIC, &m, &err), 0);
        assert_true(m);
        assert_int_equal(app_mount_is("/proc", NULL, 0, &m, &err), 0);
        assert_true(m);
        assert_int_equal(app_mount_is("/proc", "ext4", EXT4_SUPER_MAGIC, &m, &err), 0);
        assert_false(m); /* a mount, of another type */
        assert_int_equal(app_mount_is("/proc/self", NULL, 0, &m, &err), 0);
        assert_false(m); /* a symlink, not a mount */
        char *dir = unit_tmpdir("app-mount-is");
        assert_int_equal(app_mount_is(dir, NULL, 0, &m, &err), 0);
        assert_false(m); /* a plain directory */
        char missing[4200];
        snprintf(missing, sizeof(missing), "%s/missing/deeper", dir);
        m = true;
        assert_int_equal(app_mount_is(missing, NULL, 0, &m, &err), 0);
        assert_false(m); /* nothing is mounted where nothing is: no error */
        unit_rmrf_free(dir);
        na_error_clear(&err);
}

static void test_cgroup_layout(void **state)
{
        enum app_cgroup_layout l;
        assert_int_equal(layout_of(hybrid, "/sys/fs/cgroup", &l), 0);
        assert_int_equal(l, APP_CGROUP_HYBRID);
        assert_string_equal(app_cgroup_layout_name(l), "hybrid");
        assert_int_equal(layout_of(v1, "/sys/fs/cgroup/", &l), 0);
        assert_int_equal(l, APP_CGROUP_V1);
        assert_int_equal(layout_of(v2, "/sys/fs/cgroup", &l), 0);
        assert_int_equal(l, APP_CGROUP_V2);
        assert_int_equal(layout_of(none, "/sys/fs/cgroup", &l), -ENOENT);
        assert_int_equal(layout_of(escaped, "/x y", &l), 0);
        assert_int_equal(l, APP_CGROUP_HYBRID);
        /* This host, whatever it is, has some layout. */
        struct na_error err = NA_ERROR_INIT;
        assert_int_equal(app_cgroup_layout(&l, &err), 0);
        assert_int_equal(app_crun_needs_private_ns(), l == APP_CGROUP_HYBRID);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_config_golden),    cmocka_unit_test(test_config_options),
                cmocka_unit_test(test_config_refusals),  cmocka_unit_test(test_seccomp),
                cmocka_unit_test(test_config_user),
                cmocka_unit_test(test_names),            cmocka_unit_test(test_crun_state_parse),
                cmocka_unit_test(test_cgroup_layout),    cmocka_unit_test(test_mount_is),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
