/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reading procfs and cgroupfs files cheaply: cached descriptors, pread at offset 0. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics-internal.h"

static void done_with(struct metrics *m, int *fd)
{
        if (!m->cache_fds || *fd >= m->fd_limit) {
                close(*fd);
                *fd = -1;
        }
}

static int open_ro(int *fd, const char *path)
{
        if (*fd >= 0)
                return 0;
        /* No atime updates (tmpfs fixtures and any filesystem that keeps them); not allowed on others' files. */
        *fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOATIME);
        if (*fd < 0 && errno == EPERM)
                *fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        return *fd < 0 ? -errno : 0;
}

ssize_t mfile_read(struct metrics *m, int *fd, const char *path, char *buf, size_t len)
{
        int r = open_ro(fd, path);
        if (r < 0)
                return r;
        ssize_t n = RETRY_EINTR(pread(*fd, buf, len - 1, 0));
        if (n < 0) {
                int e = errno;
                close(*fd);
                *fd = -1;
                return -e;
        }
        buf[n] = '\0';
        done_with(m, fd);
        return n;
}

ssize_t mfile_read_big(struct metrics *m, int *fd, const char *path, char **data)
{
        int r = open_ro(fd, path);
        if (r < 0)
                return r;
        size_t off = 0;
        for (;;) {
                if (m->big_cap - off < 4097) {
                        size_t cap = m->big_cap ? m->big_cap * 2 : 65536;
                        char *b = realloc(m->big, cap);
                        if (!b) {
                                close(*fd);
                                *fd = -1;
                                return -ENOMEM;
                        }
                        m->big = b;
                        m->big_cap = cap;
                }
                ssize_t n = RETRY_EINTR(pread(*fd, m->big + off, m->big_cap - off - 1, (off_t)off));
                if (n < 0) {
                        int e = errno;
                        close(*fd);
                        *fd = -1;
                        return -e;
                }
                if (n == 0)
                        break;
                off += (size_t)n;
        }
        m->big[off] = '\0';
        *data = m->big;
        done_with(m, fd);
        return (ssize_t)off;
}

/* <proc_root>/<name> into path when node file f is not open (only then is the path needed). */
static int node_path(const struct metrics *m, enum mnodefile f, const char *name, char *path, size_t len)
{
        path[0] = '\0';
        if (m->node_fd[f] < 0 && snprintf(path, len, "%s/%s", m->proc_root, name) >= (int)len)
                return -ENAMETOOLONG;
        return 0;
}

ssize_t mnode_read(struct metrics *m, enum mnodefile f, const char *name, char *buf, size_t len)
{
        char path[PATH_MAX];
        int r = node_path(m, f, name, path, sizeof(path));
        return r < 0 ? r : mfile_read(m, &m->node_fd[f], path, buf, len);
}

ssize_t mnode_read_big(struct metrics *m, enum mnodefile f, const char *name, char **data)
{
        char path[PATH_MAX];
        int r = node_path(m, f, name, path, sizeof(path));
        return r < 0 ? r : mfile_read_big(m, &m->node_fd[f], path, data);
}

ssize_t mcgroup_read(struct metrics *m, struct mtarget *t, enum cg_res r, enum mfile f, const char *name, char *buf,
                     size_t len)
{
        const char *dir = m->cg.res[r].dir;
        if (!dir || !t->cgroup)
                return -ENOENT;
        char path[PATH_MAX]; /* formatted only to open: not even cleared at a tick */
        path[0] = '\0';
        if (t->fd[f] < 0 &&
            snprintf(path, sizeof(path), "%s/%s/%s", dir, t->cgroup, name) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        ssize_t n = mfile_read(m, &t->fd[f], path, buf, len);
        if (n == -ENODEV) {
                t->lost |= 1u << r; /* a removed cgroup's open files answer ENODEV */
        } else if (n == -ENOENT) {
                char d[PATH_MAX];
                if (snprintf(d, sizeof(d), "%s/%s", dir, t->cgroup) < (int)sizeof(d) && access(d, F_OK) < 0 &&
                    errno == ENOENT)
                        t->lost |= 1u << r;
        }
        return n;
}

static const enum cg_res file_res[MF__COUNT] = {
        [MF_CPU] = CG_CPU, [MF_MEM_CURRENT] = CG_MEMORY, [MF_MEM_STAT] = CG_MEMORY,
        [MF_MEM_LIMIT] = CG_MEMORY, [MF_IO] = CG_IO,
};

void mtarget_close_res_files(struct mtarget *t, unsigned mask)
{
        for (int f = 0; f < MF__COUNT; f++)
                if ((mask & (1u << file_res[f])) && t->fd[f] >= 0) {
                        close(t->fd[f]);
                        t->fd[f] = -1;
                }
}

void mtarget_close_files(struct mtarget *t)
{
        for (int f = 0; f < MF__COUNT; f++)
                if (t->fd[f] >= 0) {
                        close(t->fd[f]);
                        t->fd[f] = -1;
                }
}

bool mparse_u64(const char **p, uint64_t *v)
{
        const char *s = *p;
        while (*s == ' ' || *s == '\t')
                s++;
        if (*s < '0' || *s > '9')
                return false;
        uint64_t x = 0;
        const char *start = s;
        while ((unsigned)(*s - '0') < 10)
                x = x * 10 + (unsigned)(*s++ - '0');
        if (s - start > 19) {
                /* 19 digits always fit; a longer number is parsed again, checking every digit */
                x = 0;
                for (s = start; *s >= '0' && *s <= '9'; s++) {
                        unsigned d = (unsigned)(*s - '0');
                        if (x > (UINT64_MAX - d) / 10)
                                return false;
                        x = x * 10 + d;
                }
        }
        *v = x;
        *p = s;
        return true;
}

bool mfind_u64(const char *buf, const char *key, uint64_t *v)
{
        size_t klen = strlen(key);
        for (const char *line = buf; line && *line;) {
                if (strncmp(line, key, klen) == 0 && (line[klen] == ' ' || line[klen] == '\t')) {
                        const char *p = line + klen;
                        return mparse_u64(&p, v);
                }
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        return false;
}
