/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The files a metrics tick reads, opened once and read with pread, nothing else (see bare-reads.h). */
#include "bare-reads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct bare_file {
        int fd;
        unsigned every, phase;
        bool to_eof;
};

struct bare_reads {
        struct bare_file *f;
        size_t n, cap;
        double per_round;
        char buf[65536];
};

static void fail(const char *what, const char *path)
{
        fprintf(stderr, "bench-metrics: bare reads: %s %s: %s\n", what, path, strerror(errno));
        exit(1);
}

struct bare_reads *bare_reads_new(void)
{
        struct bare_reads *b = calloc(1, sizeof(*b));
        if (!b)
                fail("allocate", "");
        return b;
}

void bare_reads_add(struct bare_reads *b, const char *path, unsigned every, unsigned phase, bool to_eof)
{
        if (b->n == b->cap) {
                b->cap = b->cap ? b->cap * 2 : 1024;
                b->f = realloc(b->f, b->cap * sizeof(*b->f));
                if (!b->f)
                        fail("allocate", path);
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOATIME);
        if (fd < 0 && errno == EPERM)
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                fail("open", path);
        every = every ? every : 1;
        b->f[b->n++] = (struct bare_file){ .fd = fd, .every = every, .phase = phase % every, .to_eof = to_eof };
        b->per_round += 1.0 / every;
}

void bare_reads_add_node(struct bare_reads *b, const char *proc_root)
{
        /* as the node sources read them: stat, diskstats and net/dev to the end, the others with one pread */
        static const struct {
                const char *name;
                bool to_eof;
        } files[] = { { "stat", true },           { "meminfo", false },         { "diskstats", true },
                      { "net/dev", true },        { "pressure/cpu", false },    { "pressure/memory", false },
                      { "pressure/io", false } };
        char p[4200];
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", proc_root, files[i].name);
                if (access(p, R_OK) == 0)
                        bare_reads_add(b, p, 1, 0, files[i].to_eof);
        }
}

size_t bare_reads_round(struct bare_reads *b, unsigned k)
{
        size_t total = 0;
        for (size_t i = 0; i < b->n; i++) {
                const struct bare_file *f = &b->f[i];
                if ((k + f->phase) % f->every != 0)
                        continue;
                off_t off = 0;
                ssize_t r;
                do {
                        r = pread(f->fd, b->buf, sizeof(b->buf) - 1, f->to_eof ? off : 0);
                        if (r < 0)
                                fail("read", "");
                        off += r;
                } while (f->to_eof && r > 0);
                total += (size_t)off;
        }
        return total;
}

size_t bare_reads_files(const struct bare_reads *b)
{
        return b->n;
}

double bare_reads_per_round(const struct bare_reads *b)
{
        return b->per_round;
}

void bare_reads_free(struct bare_reads *b)
{
        if (!b)
                return;
        for (size_t i = 0; i < b->n; i++)
                close(b->f[i].fd);
        free(b->f);
        free(b);
}
