/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The OCI runtime config of one app container (see app-oci-spec.h). */
#include "drivers/app/oci/app-oci-spec.h"

#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "drivers/app/oci/app-names.h"
#include "drivers/app/oci/app-seccomp.h"

#define MAX_ARGS 4096
#define MAX_ENV 4096
#define MAX_MEMORY_MB (1ull << 32) /* 4 PiB: far beyond any host, still no overflow in bytes */
#define MAX_PIDS 4194304           /* the kernel's pid_max limit */
#define MAX_CPU_CORES 4096.0

/* Docker's default capability set without CAP_NET_RAW. */
static const char *const caps[] = {
        "CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",        "CAP_MKNOD",
        "CAP_SETGID", "CAP_SETUID",       "CAP_SETFCAP",          "CAP_SETPCAP",       "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT", "CAP_KILL",     "CAP_AUDIT_WRITE",
};

static const char *const masked_paths[] = {
        "/proc/acpi",         "/proc/asound",     "/proc/kcore",       "/proc/keys",
        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
        "/proc/scsi",         "/sys/firmware",    "/sys/devices/virtual/powercap",
};

static const char *const readonly_paths[] = {
        "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

/* path is dir or below it. */
static bool under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool valid_hostname(const char *h)
{
        size_t n = h ? strlen(h) : 0;
        if (n == 0 || n > 63 || h[0] == '-' || h[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(isalnum((unsigned char)h[i]) || h[i] == '-'))
                        return false;
        return true;
}

static int check(const struct app_oci_input *in, struct na_error *err)
{
#define BAD(...) na_error_set(err, EINVAL, NA_E_INTERNAL, __VA_ARGS__)
        if (!app_name_valid(in->id))
                return BAD("oci config: bad container id");
        if (!valid_hostname(in->hostname))
                return BAD("app %s: oci config: bad hostname", in->id);
        if (!in->argv || !in->argv[0] || !in->argv[0][0])
                return BAD("app %s: oci config: the command is empty", in->id);
        for (size_t i = 0; in->argv[i]; i++)
                if (i >= MAX_ARGS)
                        return BAD("app %s: oci config: more than %d arguments", in->id, MAX_ARGS);
        for (size_t i = 0; in->env && in->env[i]; i++) {
                const char *eq = strchr(in->env[i], '=');
                if (i >= MAX_ENV)
                        return BAD("app %s: oci config: more than %d environment entries", in->id, MAX_ENV);
                if (!eq || eq == in->env[i])
                        return BAD("app %s: oci config: environment entry %zu is not NAME=value", in->id, i);
        }
        if (in->cwd && !app_path_clean(in->cwd))
                return BAD("app %s: oci config: cwd must be a clean absolute path", in->id);
        if (!app_path_clean(in->rootfs) || streq(in->rootfs, "/"))
                return BAD("app %s: oci config: rootfs must be a clean absolute path other than /", in->id);
        if (in->volume_src) {
                const char *dst = in->volume_dst ? in->volume_dst : APP_OCI_DEFAULT_VOLUME_PATH;
                if (!app_path_clean(in->volume_src) || streq(in->volume_src, "/"))
                        return BAD("app %s: oci config: volume source must be a clean absolute path", in->id);
                if (!app_path_clean(dst) || streq(dst, "/") || under(dst, "/proc") || under(dst, "/sys") ||
                    under(dst, "/dev"))
                        return BAD("app %s: oci config: volume path must be a clean absolute path outside /, "
                                   "/proc, /sys and /dev", in->id);
        }
        if (in->uid_base == 0 || in->id_count == 0 || (uint64_t)in->uid_base + in->id_count - 1 >= UINT32_MAX)
                return BAD("app %s: oci config: the user namespace must map onto host ids above 0", in->id);
        if (in->uid >= in->id_count || in->gid >= in->id_count)
                return BAD("app %s: oci config: the user %u:%u lies outside the ids its user namespace maps", in->id,
                           in->uid, in->gid);
        for (size_t i = 0; i < in->n_groups; i++)
                if (in->groups[i] >= in->id_count)
                        return BAD("app %s: oci config: group %u lies outside the ids its user namespace maps", in->id,
                                   in->groups[i]);
        if (!(in->cpu_cores > 0.0) || !isfinite(in->cpu_cores) || in->cpu_cores > MAX_CPU_CORES)
                return BAD("app %s: oci config: cpu cores must be in (0, %g]", in->id, MAX_CPU_CORES);
        if (in->memory_mb == 0 || in->memory_mb > MAX_MEMORY_MB)
                return BAD("app %s: oci config: memory must be positive", in->id);
        if (in->pids > MAX_PIDS)
                return BAD("app %s: oci config: pids above %d", in->id, MAX_PIDS);
        if (!app_path_clean(in->cgroup_path) || streq(in->cgroup_path, "/"))
                return BAD("app %s: oci config: cgroup path must be a clean absolute path", in->id);
        if (in->net_dir && !app_path_clean(in->net_dir))
                return BAD("app %s: oci config: network directory must be a clean absolute path", in->id);
        if (in->netns_path && !app_path_clean(in->netns_path))
                return BAD("app %s: oci config: netns path must be a clean absolute path", in->id);
        return 0;
#undef BAD
}

/* A JSON array of strings; NULL when one is not UTF-8 (or out of memory). */
static json_t *strv(const char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; a && (n == SIZE_MAX ? v && v[i] : i < n); i++) {
                json_t *s = json_string(v[i]);
                if (!s || json_array_append_new(a, s) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

static json_t *mount_entry(const char *dst, const char *type, const char *src, json_t *options)
{
        return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src, "options",
                         options);
}

static json_t *mounts(const struct app_oci_input *in)
{
        const char *dst = in->volume_dst ? in->volume_dst : APP_OCI_DEFAULT_VOLUME_PATH;
        json_t *m = json_pack(
                "[o, o, o, o, o, o, o]",
                mount_entry("/proc", "proc", "proc", json_pack("[s,s,s]", "nosuid", "noexec", "nodev")),
                mount_entry("/dev", "tmpfs", "tmpfs",
                            json_pack("[s,s,s,s]", "nosuid", "strictatime", "mode=755", "size=65536k")),
                mount_entry("/dev/pts", "devpts", "devpts",
                            json_pack("[s,s,s,s,s,s]", "nosuid", "noexec", "newinstance", "ptmxmode=0666",
                                      "mode=0620", "gid=5")),
                mount_entry("/dev/shm", "tmpfs", "shm",
                            json_pack("[s,s,s,s,s]", "nosuid", "noexec", "nodev", "mode=1777", "size=65536k")),
                mount_entry("/dev/mqueue", "mqueue", "mqueue", json_pack("[s,s,s]", "nosuid", "noexec", "nodev")),
                mount_entry("/sys", "sysfs", "sysfs", json_pack("[s,s,s,s]", "nosuid", "noexec", "nodev", "ro")),
                mount_entry("/sys/fs/cgroup", "cgroup", "cgroup",
                            json_pack("[s,s,s,s,s]", "nosuid", "noexec", "nodev", "relatime", "ro")));
        if (m && in->net_dir) {
                json_t *v = json_pack("{s:s, s:s, s:s, s:[s,s,s,s,s]}", "destination", "/run/nodeagent", "type",
                                      "bind", "source", in->net_dir, "options", "bind", "ro", "nosuid", "nodev",
                                      "noexec");
                if (!v || json_array_append_new(m, v) < 0) {
                        json_decref(m);
                        return NULL;
                }
        }
        if (m && in->volume_src) {
                json_t *v = json_pack("{s:s, s:s, s:s, s:[s,s,s,s]}", "destination", dst, "type", "bind", "source",
                                      in->volume_src, "options", "rbind", "nosuid", "nodev", "rw");
                if (!v || json_array_append_new(m, v) < 0) {
                        json_decref(m);
                        return NULL;
                }
        }
        return m;
}

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The environment, with Docker's default PATH when the app sets none. */
static json_t *environment(const struct app_oci_input *in)
{
        json_t *env = strv((const char *const *)in->env, SIZE_MAX);
        for (size_t i = 0; in->env && in->env[i]; i++)
                if (strncmp(in->env[i], "PATH=", 5) == 0)
                        return env;
        if (env && json_array_insert_new(env, 0, json_string(DEFAULT_PATH)) < 0) {
                json_decref(env);
                return NULL;
        }
        return env;
}

/*
 * NOFILE 65536, or the hard limit we run under when that is lower: crun sets rlimits
 * inside the user namespace, where a hard limit can only go down.
 */
static json_int_t nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < APP_OCI_NOFILE)
                return (json_int_t)rl.rlim_max;
        return APP_OCI_NOFILE;
}

static json_t *process(const struct app_oci_input *in)
{
        json_int_t files = nofile();
        json_t *capset = strv(caps, ARRAY_SIZE(caps));
        json_t *c = json_pack("{s:O, s:O, s:o, s:[], s:[]}", "bounding", capset, "effective", capset, "permitted",
                              capset, "inheritable", "ambient");
        json_t *user = json_pack("{s:I, s:I}", "uid", (json_int_t)in->uid, "gid", (json_int_t)in->gid);
        if (user && in->n_groups) {
                json_t *g = json_array();
                for (size_t i = 0; g && i < in->n_groups; i++)
                        json_array_append_new(g, json_integer(in->groups[i]));
                json_object_set_new(user, "additionalGids", g);
        }
        return json_pack("{s:b, s:o, s:o, s:o, s:s, s:o, s:[{s:s, s:I, s:I}], s:b, s:i}", "terminal", 0,
                         "user", user, "args", strv((const char *const *)in->argv, SIZE_MAX), "env",
                         environment(in), "cwd", in->cwd ? in->cwd : "/",
                         "capabilities", c, "rlimits", "type", "RLIMIT_NOFILE", "hard", files, "soft", files,
                         "noNewPrivileges", 1, "oomScoreAdj", APP_OCI_OOM_SCORE_ADJ);
}

static json_t *namespaces(const struct app_oci_input *in)
{
        json_t *net = in->netns_path ? json_pack("{s:s, s:s}", "type", "network", "path", in->netns_path)
                                     : json_pack("{s:s}", "type", "network");
        return json_pack("[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}, {s:s}, o]", "type", "pid", "type", "ipc", "type", "uts",
                         "type", "mount", "type", "cgroup", "type", "user", net);
}

int64_t app_oci_cpu_quota(double cores)
{
        int64_t quota = (int64_t)(cores * APP_OCI_CPU_PERIOD + 0.5);
        return quota < 1000 ? 1000 : quota; /* the kernel's minimum quota is 1 ms */
}

/*
 * linux.resources.blockIO: throttles on the device behind the volume (the loop device
 * of the app's disk image), so one app cannot take the whole disk from its neighbours.
 * NULL when no limit is set or the device is not known.
 */
static json_t *block_io(const struct app_oci_input *in)
{
        if (!in->io_major && !in->io_minor)
                return NULL;
        static const char *const keys[] = { "throttleReadBpsDevice", "throttleWriteBpsDevice",
                                            "throttleReadIOPSDevice", "throttleWriteIOPSDevice" };
        const uint64_t rates[] = { in->io_read_bps, in->io_write_bps, in->io_read_iops, in->io_write_iops };
        json_t *io = NULL;
        for (size_t i = 0; i < 4; i++) {
                if (!rates[i])
                        continue;
                if (!io && !(io = json_object()))
                        return NULL;
                json_t *dev = json_pack("[{s:I, s:I, s:I}]", "major", (json_int_t)in->io_major, "minor",
                                        (json_int_t)in->io_minor, "rate", (json_int_t)rates[i]);
                if (!dev || json_object_set_new(io, keys[i], dev) < 0) {
                        json_decref(io);
                        return NULL;
                }
        }
        return io;
}

static json_t *resources(const struct app_oci_input *in)
{
        json_int_t bytes = (json_int_t)(in->memory_mb << 20);
        json_int_t quota = (json_int_t)app_oci_cpu_quota(in->cpu_cores);
        json_t *res = json_pack("{s:[{s:b, s:s}], s:{s:I, s:I}, s:{s:I}, s:{s:I, s:I}}", "devices", "allow", 0,
                                "access", "rwm", "memory", "limit", bytes, "swap", bytes, "pids", "limit",
                                (json_int_t)(in->pids > 0 ? in->pids : APP_OCI_DEFAULT_PIDS), "cpu", "quota", quota,
                                "period", (json_int_t)APP_OCI_CPU_PERIOD);
        json_t *io = block_io(in);
        if (res && io && json_object_set_new(res, "blockIO", io) < 0) {
                json_decref(res);
                return NULL;
        }
        return res;
}

int app_oci_config(const struct app_oci_input *in, json_t **ret, struct na_error *err)
{
        int r = check(in, err);
        if (r < 0)
                return r;
        json_t *seccomp = NULL;
        if ((r = app_seccomp_profile(&seccomp, err)) < 0)
                return na_error_prefix(err, "app %s", in->id);
        json_t *proc = process(in);
        if (!proc) {
                json_decref(seccomp);
                return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                    "app %s: oci config: command or environment not UTF-8 (or out of memory)", in->id);
        }
        _cleanup_json_ json_t *map = json_pack("[{s:i, s:I, s:I}]", "containerID", 0, "hostID",
                                               (json_int_t)in->uid_base, "size", (json_int_t)in->id_count);
        json_t *linux_ = json_pack("{s:o, s:O, s:O, s:o, s:s, s:o, s:o, s:o}", "namespaces", namespaces(in),
                                   "uidMappings", map, "gidMappings", map, "resources", resources(in), "cgroupsPath",
                                   in->cgroup_path, "seccomp", seccomp, "maskedPaths",
                                   strv(masked_paths, ARRAY_SIZE(masked_paths)), "readonlyPaths",
                                   strv(readonly_paths, ARRAY_SIZE(readonly_paths)));
        json_t *cfg = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process", proc,
                                "root", "path", in->rootfs, "readonly", 0, "hostname", in->hostname, "mounts",
                                mounts(in), "linux", linux_);
        if (!cfg)
                return na_error_sys(err, ENOMEM, "app %s: oci config", in->id);
        *ret = cfg;
        return 0;
}

int app_oci_write(const char *bundle_dir, json_t *cfg, struct na_error *err)
{
        _cleanup_free_ char *path = na_strdupf("%s/config.json", bundle_dir);
        _cleanup_free_ char *tmp = na_strdupf("%s/.config.json.%d", bundle_dir, (int)getpid());
        _cleanup_free_ char *text = json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!path || !tmp || !text)
                return na_error_sys(err, ENOMEM, "write %s/config.json", bundle_dir);
        /* Replaced whole (a temporary name, then rename) but not synced: the bundle is
         * written again before every start, so after a crash nothing depends on it, and
         * two fsyncs per start were a third of the agent's share of a start. */
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return na_error_sys(err, errno, "write %s", tmp);
        int r = na_write_all(fd, text, strlen(text), tmp, err);
        if (r >= 0 && rename(tmp, path) < 0)
                r = na_error_sys(err, errno, "rename %s", path);
        if (r < 0)
                unlink(tmp);
        return r;
}
