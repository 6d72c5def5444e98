/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What a metrics tick costs, beside one scrape of prometheus-node-exporter in the
 * same run.
 *
 *  1. A fixture host on tmpfs: /proc (stat, meminfo, diskstats, pressure copied from
 *     this host; net/dev with one tap per server), /sys/class/net (a directory of
 *     attributes per interface, as the kernel shows them), and a pure cgroup
 *     v2 tree with one libvirt machine scope per server (cpu.stat, memory.current,
 *     memory.stat, memory.max, io.stat as a 6.1 kernel writes them).
 *  2. --guests servers tracked (found by libvirt domain name): the first tick (scan
 *     and open) and then the median of --ticks ticks, wall and CPU time; of each
 *     tick, the time it spent writing history (a twelfth of the targets a tick).
 *     Beside each tick, in the same loop (which goes first alternates), its peer:
 *     the bare reads of the same files (bare-reads.h: opened once, pread, nothing
 *     parsed or stored), the least a tick can cost on them.
 *  3. prometheus-node-exporter started on a loopback port, one warm-up scrape, then
 *     --ticks scrapes (plain HTTP GET) alternating with the ticks, stopped: this
 *     host's node-exporter as installed (the target's reference), and a second
 *     one reading the fixture node's /proc and /sys (the node the ticks measure,
 *     with its taps), for comparison.
 *  4. Apps tracked up to --targets in all; a tick; the process's memory: RSS, PSS
 *     (/proc/self/smaps_rollup) and RssFile side by side, after the ticks and again
 *     after one query per tier of every target over its whole ring (what the
 *     history costs once the rings have wrapped and are read).
 *
 *  With --real-cgroups N (root), before step 4: the tick and its bare reads on N
 *     empty cgroups of this host's own cgroupfs and its /proc (real-cgroups.h).
 *
 * History files go to --state (default /var/tmp), preallocated as in production.
 * Ticks run back to back; with --writeback the history files are written back to
 * disk (syncfs, untimed) before each tick, as the kernel's flusher does between
 * production ticks 10 s apart.
 * Targets: tick <= 1.2 x the bare reads and <= 0.01 x one node-exporter scrape of the
 * fixture node (issue 15); tick <= 0.2 x this host's scrape, RssAnon <= 8 MB with
 * 2,000 targets (issue 14).
 * It prints figures and never fails on them (no timed assertions); it fails only when
 * it cannot run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bare-reads.h"
#include "real-cgroups.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/names.h"
#include "common/timeutil.h"
#include "metrics/history.h"
#include "metrics/metrics.h"

#define EXPORTER "/usr/bin/prometheus-node-exporter"

static unsigned opt_guests = 1000, opt_targets = 2000, opt_ticks = 20;
static bool opt_exporter = true;
static bool opt_writeback; /* --writeback: write the history files back to disk before each tick, untimed */
static unsigned opt_profile; /* --profile N: N more ticks on unchanged files, for perf record */
/* --warmup N: ticks (counters moving) before the measured ones, so that every target's history is flushing at its
 * steady rate (a target writes its closed buckets every HISTORY_FLUSH_BUCKETS ticks) rather than all starting at once */
static unsigned opt_warmup = 2 * HISTORY_FLUSH_BUCKETS;
static unsigned opt_real;    /* --real-cgroups N: also N real cgroups of this host beside their bare reads */
static const char *opt_tmp = "/dev/shm", *opt_state = "/var/tmp";

static void die(const char *fmt, ...) _printf_(1, 2);
static void die(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("bench-metrics: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

static double now_s(clockid_t c)
{
        struct timespec ts;
        clock_gettime(c, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
        qsort(v, n, sizeof(*v), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- fixture ---- */

static void mkdirs(const char *path)
{
        struct na_error err = NA_ERROR_INIT;
        if (na_mkdir_p(path, 0755, &err) < 0)
                die("%s", err.message);
}

static void put(const char *path, const char *text, size_t len)
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
                *slash = '\0';
                mkdirs(dir);
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len)
                die("write %s: %s", path, strerror(errno));
        close(fd);
}

static void putf(const char *path, const char *fmt, ...) _printf_(2, 3);
static void putf(const char *path, const char *fmt, ...)
{
        char *text;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (n < 0)
                die("out of memory");
        put(path, text, (size_t)n);
        free(text);
}

static void copy_proc(const char *src, const char *dst, const char *fallback)
{
        char *data = NULL;
        size_t len = 0;
        struct na_error err = NA_ERROR_INIT;
        if (na_read_file(src, 1 << 22, &data, &len, &err) < 0) {
                na_error_clear(&err);
                put(dst, fallback, strlen(fallback));
                return;
        }
        put(dst, data, len);
        free(data);
}

static void uuid_of(unsigned i, bool app, char *buf)
{
        snprintf(buf, 37, "%08x-%04x-4%03x-8%03x-%012x", i, app ? 0xa99u : 0x5e5u, i & 0xfff, (i >> 12) & 0xfff, i);
}

static const char *memory_stat =
        "anon 524288000\nfile 104857600\nkernel 8388608\nkernel_stack 262144\npagetables 2097152\n"
        "sec_pagetables 0\npercpu 4096\nsock 0\nvmalloc 0\nshmem 0\nzswap 0\nzswapped 0\nfile_mapped 8388608\n"
        "file_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\nfile_thp 0\nshmem_thp 0\n"
        "inactive_anon 524288000\nactive_anon 4096\ninactive_file 52428800\nactive_file 52428800\n"
        "unevictable 0\nslab_reclaimable 1048576\nslab_unreclaimable 2097152\nslab 3145728\n"
        "workingset_refault_anon 0\nworkingset_refault_file 12\nworkingset_activate_anon 0\n"
        "workingset_activate_file 3\nworkingset_restore_anon 0\nworkingset_restore_file 0\n"
        "workingset_nodereclaim 0\npgscan 0\npgsteal 0\npgscan_kswapd 0\npgscan_direct 0\n"
        "pgsteal_kswapd 0\npgsteal_direct 0\npgfault 123456\npgmajfault 12\npgrefill 0\npgactivate 7\n"
        "pgdeactivate 0\npglazyfree 0\npglazyfreed 0\nzswpin 0\nzswpout 0\nthp_fault_alloc 0\n"
        "thp_collapse_alloc 0\n";

static void write_cgroup(const char *dir, unsigned i, unsigned tick)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/cpu.stat", dir);
        putf(p,
             "usage_usec %u\nuser_usec %u\nsystem_usec %u\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"
             "nr_bursts 0\nburst_usec 0\n",
             1000000u + i * 1000u + tick * 500000u, 900000u, 100000u);
        snprintf(p, sizeof(p), "%s/memory.current", dir);
        putf(p, "%u\n", 629145600u + i);
        snprintf(p, sizeof(p), "%s/memory.stat", dir);
        put(p, memory_stat, strlen(memory_stat));
        snprintf(p, sizeof(p), "%s/memory.max", dir);
        putf(p, "max\n");
        snprintf(p, sizeof(p), "%s/io.stat", dir);
        putf(p,
             "253:0 rbytes=%u wbytes=%u rios=100 wios=200 dbytes=0 dios=0\n"
             "8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
             1048576u * (1 + tick), 2097152u * (1 + tick));
}

static void scope_dir(const char *cg, unsigned i, char *buf, size_t len)
{
        char id[40], esc[128];
        uuid_of(i, false, id);
        /* systemd escaping of "qemu-<n>-vps-<uuid>": every '-' is \x2d */
        size_t o = 0;
        for (const char *s = id; *s && o + 5 < sizeof(esc); s++) {
                if (*s == '-') {
                        memcpy(esc + o, "\\x2d", 4);
                        o += 4;
                } else {
                        esc[o++] = *s;
                }
        }
        esc[o] = '\0';
        snprintf(buf, len, "%s/machine.slice/machine-qemu\\x2d%u\\x2dvps\\x2d%s.scope", cg, i + 1, esc);
}

static void app_dir(const char *cg, unsigned i, char *buf, size_t len)
{
        char id[40];
        uuid_of(i, true, id);
        snprintf(buf, len, "%s/system.slice/crun-%s.scope", cg, id);
}

static void write_netdev(const char *root, unsigned guests, unsigned tick)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/proc/net/dev", root);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        fputs("Inter-|   Receive                                                |  Transmit\n"
              " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo "
              "colls carrier compressed\n"
              "    lo: 123456789  654321    0    0    0     0          0         0 123456789  654321    0    0    0  "
              "   0       0          0\n",
              f);
        fprintf(f,
                "  eth0: %llu 99999999    0    0    0     0          0      1234 %llu 88888888    0    0    0     0  "
                "     0          0\n",
                900000000000ULL + tick * 12500000ULL, 800000000000ULL + tick * 6250000ULL);
        for (unsigned i = 0; i < guests; i++) {
                char id[40], ifname[NA_IFNAME_LEN];
                uuid_of(i, false, id);
                na_vps_ifname(id, ifname);
                fprintf(f,
                        "%s: %10llu %8u    0    0    0     0          0         0 %10llu %8u    0    0    0     0  "
                        "     0          0\n",
                        ifname, 1000000ULL + i + tick * 10000ULL, 1000 + i, 2000000ULL + i + tick * 20000ULL,
                        2000 + i);
        }
        fclose(f);
        put(path, text, len);
        free(text);
}

/* /sys/class/net/<if>/ as the kernel shows a tap device (what node-exporter's netclass reads). */
static void write_sysfs_netdev(const char *root, const char *ifname, unsigned index, bool physical)
{
        static const char *const attrs[][2] = {
                { "addr_assign_type", "3" }, { "addr_len", "6" }, { "broadcast", "ff:ff:ff:ff:ff:ff" },
                { "carrier", "1" }, { "carrier_changes", "2" }, { "carrier_down_count", "1" },
                { "carrier_up_count", "1" }, { "dev_id", "0x0" }, { "dev_port", "0" }, { "dormant", "0" },
                { "flags", "0x1103" }, { "ifalias", "" }, { "link_mode", "0" }, { "mtu", "1500" },
                { "name_assign_type", "3" }, { "netdev_group", "0" }, { "operstate", "up" }, { "speed", "10" },
                { "tx_queue_len", "1000" }, { "type", "1" }, { "proto_down", "0" },
        };
        char dir[PATH_MAX], p[PATH_MAX + 64];
        snprintf(dir, sizeof(dir), "%s/sys/class/net/%s", root, ifname);
        for (size_t i = 0; i < ARRAY_SIZE(attrs); i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, attrs[i][0]);
                putf(p, "%s\n", attrs[i][1]);
        }
        snprintf(p, sizeof(p), "%s/address", dir);
        putf(p, "fe:54:00:%02x:%02x:%02x\n", (index >> 16) & 255, (index >> 8) & 255, index & 255);
        snprintf(p, sizeof(p), "%s/ifindex", dir);
        putf(p, "%u\n", index + 10);
        snprintf(p, sizeof(p), "%s/iflink", dir);
        putf(p, "%u\n", index + 10);
        if (physical) {
                snprintf(p, sizeof(p), "%s/device", dir);
                mkdirs(p);
        }
}

static void build_fixture(const char *root, unsigned guests, unsigned apps)
{
        char p[PATH_MAX], cg[PATH_MAX];
        static const char *const proc_files[] = { "stat", "meminfo", "diskstats", "pressure/cpu", "pressure/memory",
                                                  "pressure/io", NULL };
        for (size_t i = 0; proc_files[i]; i++) {
                char src[PATH_MAX];
                snprintf(src, sizeof(src), "/proc/%s", proc_files[i]);
                snprintf(p, sizeof(p), "%s/proc/%s", root, proc_files[i]);
                copy_proc(src, p,
                          strncmp(proc_files[i], "pressure", 8) == 0
                                  ? "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                                    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                                  : "");
        }
        write_netdev(root, guests, 0);
        write_sysfs_netdev(root, "eth0", 0, true);
        write_sysfs_netdev(root, "lo", 1, false);
        for (unsigned i = 0; i < guests; i++) {
                char id[40], ifname[NA_IFNAME_LEN];
                uuid_of(i, false, id);
                na_vps_ifname(id, ifname);
                write_sysfs_netdev(root, ifname, i + 2, false);
        }

        snprintf(cg, sizeof(cg), "%s/cgroup", root);
        snprintf(p, sizeof(p), "%s/cgroup.controllers", cg);
        putf(p, "cpuset cpu io memory hugetlb pids rdma misc\n");
        snprintf(p, sizeof(p), "%s/cpu.stat", cg);
        putf(p, "usage_usec 1\nuser_usec 1\nsystem_usec 0\n");
        for (unsigned i = 0; i < guests; i++) {
                scope_dir(cg, i, p, sizeof(p));
                write_cgroup(p, i, 0);
        }
        for (unsigned i = 0; i < apps; i++) {
                app_dir(cg, i, p, sizeof(p));
                write_cgroup(p, i, 0);
        }
}

/* The next tick's counters: every server's cpu.stat and io.stat, and net/dev. */
static void advance_fixture(const char *root, unsigned guests, unsigned tick)
{
        char cg[PATH_MAX], p[PATH_MAX];
        snprintf(cg, sizeof(cg), "%s/cgroup", root);
        for (unsigned i = 0; i < guests; i++) {
                scope_dir(cg, i, p, sizeof(p));
                write_cgroup(p, i, tick);
        }
        write_netdev(root, guests, tick);
}

/*
 * The peer of a tick: the files it reads, opened once, pread, not parsed. Per server
 * cpu.stat, memory.current and io.stat (the limit is configured, so memory.max is not
 * read) and memory.stat in one round of MEMORY_STAT_EVERY (6) as the tick reads it;
 * the node's stat, meminfo, diskstats, net/dev and pressure files.
 */
static struct bare_reads *bare_open(const char *root, unsigned guests)
{
        static const char *const guest_files[] = { "cpu.stat", "memory.current", "io.stat" };
        struct bare_reads *b = bare_reads_new();
        char p[PATH_MAX + 32], dir[PATH_MAX], cg[PATH_MAX];
        snprintf(p, sizeof(p), "%s/proc", root);
        bare_reads_add_node(b, p);
        snprintf(cg, sizeof(cg), "%s/cgroup", root);
        for (unsigned i = 0; i < guests; i++) {
                scope_dir(cg, i, dir, sizeof(dir));
                for (size_t f = 0; f < ARRAY_SIZE(guest_files); f++) {
                        snprintf(p, sizeof(p), "%s/%s", dir, guest_files[f]);
                        bare_reads_add(b, p, 1, 0, false);
                }
                snprintf(p, sizeof(p), "%s/memory.stat", dir);
                bare_reads_add(b, p, 6, i + 1, false);
        }
        return b;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int rm_tree(const char *path)
{
        return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* ---- node-exporter ---- */

static int free_port(void)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(a);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(s, (struct sockaddr *)&a, &l) < 0)
                die("no free port: %s", strerror(errno));
        close(s);
        return ntohs(a.sin_port);
}

/* One GET /metrics; returns the body size, or -1. */
static long scrape(int port)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
                if (s >= 0)
                        close(s);
                return -1;
        }
        static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        if (write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
                close(s);
                return -1;
        }
        char buf[65536];
        long total = 0;
        bool ok = false;
        ssize_t n;
        while ((n = read(s, buf, sizeof(buf))) > 0) {
                if (total == 0 && n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0)
                        ok = true;
                total += n;
        }
        close(s);
        return ok ? total : -1;
}

static double proc_cpu_s(pid_t pid)
{
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                return 0;
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

struct exporter {
        pid_t pid;
        int port;
        double cpu0;
        double warmup_ms;
        long bytes;
};

/*
 * Start node-exporter on a free loopback port and wait for its first (warm-up)
 * answer. With fixture, it reads the fixture node's /proc and /sys instead of this
 * host's (and /proc/net/dev instead of netlink), the node the ticks measure.
 */
static bool exporter_start(struct exporter *ex, const char *fixture)
{
        if (access(EXPORTER, X_OK) < 0) {
                printf("node-exporter: %s not found, not compared\n", EXPORTER);
                return false;
        }
        ex->port = free_port();
        char listen[64], procfs[PATH_MAX + 16], sysfs[PATH_MAX + 16];
        snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", ex->port);
        snprintf(procfs, sizeof(procfs), "--path.procfs=%s/proc", fixture ? fixture : "");
        snprintf(sysfs, sizeof(sysfs), "--path.sysfs=%s/sys", fixture ? fixture : "");
        char *argv[] = { (char *)EXPORTER, listen, procfs, sysfs, (char *)"--no-collector.netdev.netlink", NULL };
        if (!fixture)
                argv[2] = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        int r = posix_spawn(&ex->pid, EXPORTER, &fa, NULL, argv, NULL);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0) {
                printf("node-exporter: cannot start: %s\n", strerror(r));
                return false;
        }
        for (int i = 0; i < 200; i++) {
                struct timespec ts = { 0, 50000000 };
                nanosleep(&ts, NULL);
                double t0 = now_s(CLOCK_MONOTONIC);
                if ((ex->bytes = scrape(ex->port)) > 0) {
                        ex->warmup_ms = (now_s(CLOCK_MONOTONIC) - t0) * 1000;
                        ex->cpu0 = proc_cpu_s(ex->pid);
                        return true;
                }
        }
        printf("node-exporter: no answer on 127.0.0.1:%d\n", ex->port);
        kill(ex->pid, SIGTERM);
        while (waitpid(ex->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return false;
}

/* Its CPU time since the warm-up, in seconds; then stop it. */
static double exporter_stop(struct exporter *ex)
{
        double cpu = proc_cpu_s(ex->pid) - ex->cpu0;
        kill(ex->pid, SIGTERM);
        while (waitpid(ex->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return cpu;
}

/* ---- the collector ---- */

static long status_kb(const char *key)
{
        char *data = NULL;
        size_t len;
        struct na_error err = NA_ERROR_INIT;
        if (na_read_file("/proc/self/status", 1 << 16, &data, &len, &err) < 0) {
                na_error_clear(&err);
                return -1;
        }
        long v = -1;
        char *p = strstr(data, key);
        if (p)
                sscanf(p + strlen(key), " %ld", &v);
        free(data);
        return v;
}

/* A field of /proc/self/smaps_rollup (Rss:, Pss:, Pss_File: ...) in kB, or -1. */
static long rollup_kb(const char *key)
{
        char *data = NULL;
        size_t len;
        struct na_error err = NA_ERROR_INIT;
        if (na_read_file("/proc/self/smaps_rollup", 1 << 16, &data, &len, &err) < 0) {
                na_error_clear(&err);
                return -1;
        }
        long v = -1;
        for (char *p = data; p; p = strchr(p, '\n')) {
                p += *p == '\n';
                if (strncmp(p, key, strlen(key)) == 0) {
                        sscanf(p + strlen(key), " %ld", &v);
                        break;
                }
        }
        free(data);
        return v;
}

/* RSS, PSS and RssFile beside each other (what top, smem and the page cache see). */
static void print_memory(const char *when, unsigned targets)
{
        printf("memory %s, %u targets: RSS %.2f MB, PSS %.2f MB, RssFile %.2f MB, RssAnon %.2f MB (target <= 8 MB), "
               "Pss_File %.2f MB\n",
               when, targets, rollup_kb("Rss:") / 1024.0, rollup_kb("Pss:") / 1024.0, status_kb("RssFile:") / 1024.0,
               status_kb("RssAnon:") / 1024.0, rollup_kb("Pss_File:") / 1024.0);
}

/*
 * Read every target's whole history on every tier (one query each), as a client
 * asking for a month would: with rings that have wrapped, every byte of every file.
 */
static void read_all(struct metrics *m, unsigned guests, unsigned apps, uint64_t now_ms, double *ms, size_t *points)
{
        double t0 = now_s(CLOCK_MONOTONIC);
        *points = 0;
        for (unsigned i = 0; i < guests + apps; i++) {
                char id[40];
                uuid_of(i < guests ? i : i - guests, i >= guests, id);
                for (unsigned k = 0; k < PROTO_METRICS_TIERS; k++) {
                        const struct proto_metrics_tier *T = &proto_metrics_tiers[k];
                        struct proto_metrics_query q = { .now_ms = (int64_t)now_ms, .to_ms = (int64_t)now_ms,
                                                         .from_ms = (int64_t)now_ms - (int64_t)T->res_sec * T->slots * 1000,
                                                         .step_sec = T->res_sec, .tier = k };
                        struct proto_metrics_point *pts = NULL;
                        size_t n = 0;
                        struct na_error err = NA_ERROR_INIT;
                        if (metrics_series(m, i < guests ? METRICS_VPS : METRICS_APP, id, &q, &pts, &n, &err) < 0)
                                die("series: %s", err.message);
                        *points += n;
                        free(pts);
                }
        }
        *ms = (now_s(CLOCK_MONOTONIC) - t0) * 1000;
}

/*
 * What the kernel's flusher does every 30 s (vm.dirty_expire_centisecs) in
 * production, where ticks are 10 s apart: the history pages are written back and
 * clean, so a write into a mapping faults again (and a pwrite finds a clean page).
 */
static void writeback(const char *dir)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || syncfs(fd) < 0)
                die("syncfs %s: %s", dir, strerror(errno));
        close(fd);
}

static void tick(struct metrics *m, uint64_t at_ms, double *wall_ms, double *cpu_ms)
{
        struct na_error err = NA_ERROR_INIT;
        double w = now_s(CLOCK_MONOTONIC), c = now_s(CLOCK_PROCESS_CPUTIME_ID);
        if (metrics_collect(m, at_ms, &err) < 0)
                die("collect: %s", err.message);
        *wall_ms = (now_s(CLOCK_MONOTONIC) - w) * 1000;
        *cpu_ms = (now_s(CLOCK_PROCESS_CPUTIME_ID) - c) * 1000;
}

static void bare_round(struct bare_reads *b, unsigned k, double *wall_ms, double *cpu_ms)
{
        double w = now_s(CLOCK_MONOTONIC), c = now_s(CLOCK_PROCESS_CPUTIME_ID);
        bare_reads_round(b, k);
        *wall_ms = (now_s(CLOCK_MONOTONIC) - w) * 1000;
        *cpu_ms = (now_s(CLOCK_PROCESS_CPUTIME_ID) - c) * 1000;
}

/* The tick on this host's own cgroupfs and procfs beside the bare reads of the same files. */
static void compare_real(const char *state, unsigned n, unsigned ticks)
{
        char dir[PATH_MAX + 8];
        snprintf(dir, sizeof(dir), "%s/real", state);
        struct real_cgroups *rc = real_cgroups_open(n, dir);
        if (!rc)
                return;
        struct metrics *m = real_cgroups_metrics(rc);
        struct bare_reads *b = real_cgroups_bare(rc);
        double *w = calloc(ticks, sizeof(double)), *c = calloc(ticks, sizeof(double));
        double *bw = calloc(ticks, sizeof(double)), *bc = calloc(ticks, sizeof(double));
        uint64_t at = na_now_real_ms();
        double fw, fc;
        for (unsigned k = 0; k <= opt_warmup; k++)
                tick(m, at + 10000ULL * k, &fw, &fc);
        at += 10000ULL * opt_warmup;
        for (unsigned k = 0; k < ticks; k++) {
                if (k % 2)
                        bare_round(b, k, &bw[k], &bc[k]);
                tick(m, at + 10000ULL * (k + 1), &w[k], &c[k]);
                if (k % 2 == 0)
                        bare_round(b, k, &bw[k], &bc[k]);
        }
        double tw = median(w, ticks), tc = median(c, ticks), rw = median(bw, ticks), rcpu = median(bc, ticks);
        printf("real cgroups (this host, %s, %u empty cgroups as apps, its /proc): tick median of %u: %.3f ms wall, "
               "%.3f ms CPU; bare reads (%zu files, %.0f read a round): %.3f ms wall, %.3f ms CPU\n",
               real_cgroups_mode(rc), n, ticks, tw, tc, bare_reads_files(b), bare_reads_per_round(b), rw, rcpu);
        printf("ratio on real cgroups: tick / bare reads = %.2f wall, %.2f CPU (target <= 1.2)\n", tw / rw, tc / rcpu);
        real_cgroups_close(rc);
        free(w);
        free(c);
        free(bw);
        free(bc);
}

static void usage(void)
{
        fprintf(stderr, "usage: bench-metrics [--guests N] [--targets N] [--ticks N] [--no-exporter] [--writeback] [--profile N] "
                        "[--real-cgroups N] [--warmup N] "
                        "[--tmp DIR] [--state DIR]\n");
        exit(2);
}

int main(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--guests") && i + 1 < argc)
                        opt_guests = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--targets") && i + 1 < argc)
                        opt_targets = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--ticks") && i + 1 < argc)
                        opt_ticks = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--real-cgroups") && i + 1 < argc)
                        opt_real = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--warmup") && i + 1 < argc)
                        opt_warmup = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--profile") && i + 1 < argc)
                        opt_profile = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--writeback"))
                        opt_writeback = true;
                else if (streq(argv[i], "--no-exporter"))
                        opt_exporter = false;
                else if (streq(argv[i], "--tmp") && i + 1 < argc)
                        opt_tmp = argv[++i];
                else if (streq(argv[i], "--state") && i + 1 < argc)
                        opt_state = argv[++i];
                else
                        usage();
        }
        if (opt_ticks < 1)
                opt_ticks = 1;
        if (opt_targets < opt_guests)
                opt_targets = opt_guests;
        unsigned apps = opt_targets - opt_guests;

        /* As the daemon should: all the descriptors the hard limit allows. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }

        char root[PATH_MAX], state[PATH_MAX];
        snprintf(root, sizeof(root), "%s/na-bench-metrics-XXXXXX", opt_tmp);
        snprintf(state, sizeof(state), "%s/na-bench-metrics-state-XXXXXX", opt_state);
        if (!mkdtemp(root) || !mkdtemp(state))
                die("mkdtemp: %s", strerror(errno));

        double t = now_s(CLOCK_MONOTONIC);
        build_fixture(root, opt_guests, apps);
        printf("fixture: %u servers (v2 machine scopes), %u apps, /proc copied from this host, on %s (%.0f ms)\n",
               opt_guests, apps, opt_tmp, (now_s(CLOCK_MONOTONIC) - t) * 1000);

        char proc[PATH_MAX + 8], sys[PATH_MAX + 8], cg[PATH_MAX + 8];
        snprintf(proc, sizeof(proc), "%s/proc", root);
        snprintf(sys, sizeof(sys), "%s/sys", root);
        snprintf(cg, sizeof(cg), "%s/cgroup", root);
        struct metrics_options o = { .state_dir = state, .proc_root = proc, .sys_root = sys, .cgroup_root = cg };
        struct na_error err = NA_ERROR_INIT;
        struct metrics *m = NULL;
        if (metrics_open(&o, &m, &err) < 0)
                die("open: %s", err.message);

        t = now_s(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < opt_guests; i++) {
                char id[40];
                uuid_of(i, false, id);
                struct metrics_target_spec s = { .kind = METRICS_VPS, .id = id, .vcpus = 2,
                                                 .memory_limit_bytes = 2ULL << 30 };
                if (metrics_track(m, &s, &err) < 0)
                        die("track: %s", err.message);
        }
        printf("track: %u servers in %.1f ms (history files created in %s)\n", opt_guests,
               (now_s(CLOCK_MONOTONIC) - t) * 1000, opt_state);

        uint64_t at = na_now_real_ms();
        double first_wall, first_cpu;
        tick(m, at, &first_wall, &first_cpu);
        for (unsigned k = 0; k < opt_profile; k++) {
                double w, c;
                tick(m, at + 10000ULL * (k + 1), &w, &c);
        }
        at += 10000ULL * opt_profile;
        for (unsigned k = 0; k < opt_warmup; k++) {
                double w, c;
                advance_fixture(root, opt_guests, k + 1);
                tick(m, at + 10000ULL * (k + 1), &w, &c);
        }
        at += 10000ULL * opt_warmup;

        /* Ticks and scrapes alternate, so both see the machine in the same state. */
        struct exporter ex = { 0 }, exf = { 0 };
        bool exporter = opt_exporter && exporter_start(&ex, NULL);
        bool exporter_f = exporter && exporter_start(&exf, root);
        double *wall = calloc(opt_ticks, sizeof(double)), *cpu = calloc(opt_ticks, sizeof(double));
        double *swall = calloc(opt_ticks, sizeof(double)), *sfwall = calloc(opt_ticks, sizeof(double));
        double *bwall = calloc(opt_ticks, sizeof(double)), *bcpu = calloc(opt_ticks, sizeof(double));
        double *flush = calloc(opt_ticks, sizeof(double)), *rest = calloc(opt_ticks, sizeof(double));
        uint64_t writes = 0;
        struct bare_reads *bare = bare_open(root, opt_guests);
        for (unsigned k = 0; k < opt_ticks; k++) {
                advance_fixture(root, opt_guests, opt_warmup + k + 1);
                if (opt_writeback)
                        writeback(state);
                /* Which of the two reads the freshly written files first alternates. */
                if (k % 2)
                        bare_round(bare, k, &bwall[k], &bcpu[k]);
                struct metrics_stats s0, s1;
                metrics_stats(m, &s0);
                tick(m, at + 10000ULL * (k + 1), &wall[k], &cpu[k]);
                metrics_stats(m, &s1);
                flush[k] = (double)s1.last_flush_us / 1000;
                rest[k] = wall[k] - flush[k];
                writes += s1.history_writes - s0.history_writes;
                if (k % 2 == 0)
                        bare_round(bare, k, &bwall[k], &bcpu[k]);
                if (exporter) {
                        double a = now_s(CLOCK_MONOTONIC);
                        if ((ex.bytes = scrape(ex.port)) < 0)
                                die("node-exporter: scrape failed");
                        swall[k] = (now_s(CLOCK_MONOTONIC) - a) * 1000;
                }
                if (exporter_f) {
                        double a = now_s(CLOCK_MONOTONIC);
                        if ((exf.bytes = scrape(exf.port)) < 0)
                                die("node-exporter (fixture): scrape failed");
                        sfwall[k] = (now_s(CLOCK_MONOTONIC) - a) * 1000;
                }
        }
        double scrape_cpu_ms = exporter ? exporter_stop(&ex) * 1000 / opt_ticks : 0;
        double scrape_f_cpu_ms = exporter_f ? exporter_stop(&exf) * 1000 / opt_ticks : 0;
        at += 10000ULL * opt_ticks;

        struct metrics_stats st;
        metrics_stats(m, &st);
        double tick_wall = median(wall, opt_ticks), tick_cpu = median(cpu, opt_ticks);
        printf("tick: %u servers + node: first %.2f ms (lookup and open); after %u warm-up ticks, median of %u: %.3f "
               "ms wall, %.3f ms CPU (unresolved %u, skipped values %llu)\n",
               opt_guests, first_wall, opt_warmup, opt_ticks, tick_wall, tick_cpu, st.unresolved,
               (unsigned long long)st.values_skipped);
        double bare_wall = median(bwall, opt_ticks), bare_cpu = median(bcpu, opt_ticks);
        printf("bare reads (the peer: the files the tick reads, %zu open once, %.0f read a round, no parsing, no "
               "history): median of %u: %.3f ms wall, %.3f ms CPU\n",
               bare_reads_files(bare), bare_reads_per_round(bare), opt_ticks, bare_wall, bare_cpu);
        printf("ratio: tick / bare reads = %.2f wall, %.2f CPU (target <= 1.2)\n", tick_wall / bare_wall,
               tick_cpu / bare_cpu);
        printf("of the tick, writing history (the closed buckets of a twelfth of the targets, %.0f pwrite a tick): "
               "median %.3f ms wall; the rest (reads, parsing, rates, history in memory): median %.3f ms wall = %.2f x "
               "bare reads\n",
               (double)writes / opt_ticks, median(flush, opt_ticks), median(rest, opt_ticks),
               median(rest, opt_ticks) / bare_wall);
        bare_reads_free(bare);
        if (exporter) {
                double scrape_wall = median(swall, opt_ticks);
                printf("node-exporter (this host, as installed): one scrape (median of %u, %ld bytes): %.3f ms wall, "
                       "%.2f ms CPU (mean); warm-up %.3f ms\n",
                       opt_ticks, ex.bytes, scrape_wall, scrape_cpu_ms, ex.warmup_ms);
                printf("ratio: tick / scrape = %.3f wall, %.3f CPU (target <= 0.2)\n", tick_wall / scrape_wall,
                       scrape_cpu_ms > 0 ? tick_cpu / scrape_cpu_ms : 0.0);
        }
        if (exporter_f) {
                double scrape_wall = median(sfwall, opt_ticks);
                printf("node-exporter (the fixture node: its /proc and /sys, %u taps): one scrape (median of %u, %ld "
                       "bytes): %.3f ms wall, %.2f ms CPU (mean)\n",
                       opt_guests, opt_ticks, exf.bytes, scrape_wall, scrape_f_cpu_ms);
                printf("ratio on the same node: tick / scrape = %.4f wall, %.4f CPU (target <= 0.01)\n",
                       tick_wall / scrape_wall,
                       scrape_f_cpu_ms > 0 ? tick_cpu / scrape_f_cpu_ms : 0.0);
        }

        if (opt_real)
                compare_real(state, opt_real, opt_ticks);

        /* Up to --targets: the rest as apps with explicit cgroups. */
        for (unsigned i = 0; i < apps; i++) {
                char id[40], dir[PATH_MAX];
                uuid_of(i, true, id);
                app_dir("", i, dir, sizeof(dir));
                struct metrics_target_spec s = { .kind = METRICS_APP, .id = id, .cgroup = dir, .vcpus = 1 };
                if (metrics_track(m, &s, &err) < 0)
                        die("track: %s", err.message);
        }
        double w2 = 0, c2 = 0;
        for (unsigned k = 0; k < 3; k++)
                tick(m, at + 10000ULL * (k + 1), &w2, &c2);
        json_t *latest = metrics_latest_json(m);
        size_t reported = json_array_size(latest);
        json_decref(latest);
        char *text = NULL;
        size_t text_len = 0;
        FILE *out = open_memstream(&text, &text_len);
        metrics_prometheus_render(m, out, &err);
        fclose(out);
        free(text);
        metrics_stats(m, &st);
        printf("tick: %u targets + node: %.3f ms wall, %.3f ms CPU; report %zu samples, prometheus %zu bytes; "
               "history %u x 262144 bytes on disk\n",
               st.targets - 1, w2, c2, reported, text_len, st.targets);
        print_memory("after the ticks", st.targets - 1);
        double read_ms;
        size_t points;
        read_all(m, opt_guests, apps, at + 30000, &read_ms, &points);
        printf("query: every tier of every target over its whole ring: %.1f ms, %zu points\n", read_ms, points);
        print_memory("after reading every file whole (rings as if wrapped)", st.targets - 1);

        metrics_close(m);
        free(wall);
        free(cpu);
        free(swall);
        free(sfwall);
        free(bwall);
        free(bcpu);
        free(flush);
        free(rest);
        rm_tree(root);
        rm_tree(state);
        return 0;
}
