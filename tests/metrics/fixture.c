/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what, const char *path)
{
        fprintf(stderr, "fixture: %s %s: %s\n", what, path, strerror(errno));
        abort();
}

char *fx_mkdtemp(const char *tag)
{
        const char *tmp = getenv("TMPDIR");
        char *path;
        if (asprintf(&path, "%s/na-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag) < 0 || !mkdtemp(path))
                die("mkdtemp", tag);
        return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

void fx_remove(const char *dir)
{
        if (dir)
                nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdir_parents(char *path)
{
        for (char *p = path + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                                die("mkdir", path);
                        *p = '/';
                }
}

void fx_mkdir(const char *dir, const char *rel)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s/", dir, rel);
        mkdir_parents(path);
}

void fx_rmdir_tree(const char *dir, const char *rel)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        fx_remove(path);
}

void fx_write(const char *dir, const char *rel, const char *fmt, ...)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        mkdir_parents(path);
        char *text;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (n < 0)
                die("format", path);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, (size_t)n) != n)
                die("write", path);
        close(fd);
        free(text);
}

void fx_write_node(const char *root, const struct fx_node *n)
{
        char *cpus = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&cpus, &len);
        for (unsigned i = 0; i < n->cpus; i++)
                fprintf(f, "cpu%u %llu 0 0 %llu 0 0 0 0 0 0\n", i, (unsigned long long)(n->busy / n->cpus),
                        (unsigned long long)(n->idle / n->cpus));
        fclose(f);
        fx_write(root, "proc/stat",
                 "cpu  %llu 0 0 %llu 0 0 0 0 0 0\n%sintr 12345 0 0\nctxt 999\nbtime 1700000000\n",
                 (unsigned long long)n->busy, (unsigned long long)n->idle, cpus);
        free(cpus);
        fx_write(root, "proc/meminfo",
                 "MemTotal:       %llu kB\nMemFree:          1000 kB\nMemAvailable:   %llu kB\nBuffers:   0 kB\n",
                 (unsigned long long)n->mem_total_kb, (unsigned long long)n->mem_avail_kb);
        fx_write(root, "proc/diskstats",
                 "   7       0 loop0 50 0 4000 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                 "   8       0 sda 10 0 %llu 5 20 0 %llu 9 0 10 14 0 0 0 0 0 0\n"
                 "   8       1 sda1 10 0 %llu 5 20 0 %llu 9 0 10 14 0 0 0 0 0 0\n"
                 " 253       0 dm-0 10 0 777 5 20 0 888 9 0 10 14 0 0 0 0 0 0\n",
                 (unsigned long long)n->sda_read_sectors, (unsigned long long)n->sda_write_sectors,
                 (unsigned long long)n->sda_read_sectors, (unsigned long long)n->sda_write_sectors);
        fx_write(root, "proc/pressure/cpu",
                 "some avg10=1.50 avg60=0.75 avg300=0.25 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
        fx_write(root, "proc/pressure/memory",
                 "some avg10=0.00 avg60=0.00 avg300=0.00 total=10\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n");
        fx_mkdir(root, "sys/class/net/eth0/device");
        fx_mkdir(root, "sys/class/net/lo");
        fx_write_netdev(root, n, NULL, NULL, NULL, 0);
}

void fx_write_netdev(const char *root, const struct fx_node *n, const char *const *names, const uint64_t *rx,
                     const uint64_t *tx, unsigned count)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        fputs("Inter-|   Receive                                                |  Transmit\n"
              " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo "
              "colls carrier compressed\n",
              f);
        fprintf(f, "    lo:  5000 10 0 0 0 0 0 0  5000 10 0 0 0 0 0 0\n");
        fprintf(f, "  eth0: %llu 100 0 0 0 0 0 0 %llu 100 0 0 0 0 0 0\n", (unsigned long long)n->eth_rx,
                (unsigned long long)n->eth_tx);
        for (unsigned i = 0; i < count; i++)
                fprintf(f, "%s: %llu 7 0 0 0 0 0 0 %llu 7 0 0 0 0 0 0\n", names[i], (unsigned long long)rx[i],
                        (unsigned long long)tx[i]);
        fclose(f);
        fx_write(root, "proc/net/dev", "%s", text);
        free(text);
}

void fx_cg2(const char *cgroot, const char *rel, uint64_t usage_usec, uint64_t mem_current, uint64_t inactive_file,
            const char *mem_max, uint64_t rbytes, uint64_t wbytes)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/cpu.stat", rel);
        fx_write(cgroot, p, "usage_usec %llu\nuser_usec 1\nsystem_usec 2\nnr_periods 0\n",
                 (unsigned long long)usage_usec);
        snprintf(p, sizeof(p), "%s/memory.current", rel);
        fx_write(cgroot, p, "%llu\n", (unsigned long long)mem_current);
        snprintf(p, sizeof(p), "%s/memory.stat", rel);
        fx_write(cgroot, p, "anon 100\nfile 200\nkernel 0\nactive_file 5\ninactive_file %llu\nslab 0\n",
                 (unsigned long long)inactive_file);
        snprintf(p, sizeof(p), "%s/memory.max", rel);
        fx_write(cgroot, p, "%s\n", mem_max);
        snprintf(p, sizeof(p), "%s/io.stat", rel);
        /* the bytes split over two devices (the sum is what counts), one with keys after the six of io.stat */
        fx_write(cgroot, p, "8:0 rbytes=%llu wbytes=%llu rios=1 wios=2 dbytes=999 dios=1\n253:0 rbytes=%llu wbytes=%llu "
                            "rios=0 wios=0 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=7\n",
                 (unsigned long long)(rbytes / 2), (unsigned long long)(wbytes / 2),
                 (unsigned long long)(rbytes - rbytes / 2), (unsigned long long)(wbytes - wbytes / 2));
}

void fx_cg1(const char *cgroot, const char *rel, uint64_t usage_ns, uint64_t mem_usage, uint64_t inactive_file,
            uint64_t limit, uint64_t rbytes, uint64_t wbytes)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "cpuacct/%s/cpuacct.usage", rel);
        fx_write(cgroot, p, "%llu\n", (unsigned long long)usage_ns);
        snprintf(p, sizeof(p), "memory/%s/memory.usage_in_bytes", rel);
        fx_write(cgroot, p, "%llu\n", (unsigned long long)mem_usage);
        snprintf(p, sizeof(p), "memory/%s/memory.stat", rel);
        fx_write(cgroot, p, "cache 0\nrss 0\ninactive_file 1\ntotal_cache 5\ntotal_inactive_file %llu\n",
                 (unsigned long long)inactive_file);
        snprintf(p, sizeof(p), "memory/%s/memory.limit_in_bytes", rel);
        fx_write(cgroot, p, "%llu\n", (unsigned long long)limit);
        snprintf(p, sizeof(p), "blkio/%s/blkio.throttle.io_service_bytes_recursive", rel);
        fx_write(cgroot, p,
                 "8:0 Read %llu\n8:0 Write %llu\n8:0 Sync 0\n8:0 Async 0\n8:0 Discard 0\n8:0 Total %llu\nTotal %llu\n",
                 (unsigned long long)rbytes, (unsigned long long)wbytes, (unsigned long long)(rbytes + wbytes),
                 (unsigned long long)(rbytes + wbytes));
}
