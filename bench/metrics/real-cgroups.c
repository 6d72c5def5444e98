/* SPDX-License-Identifier: GPL-2.0-or-later */
/* N empty cgroups of this host, a collector over them and the bare reads of the same files (see real-cgroups.h). */
#include "real-cgroups.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics/cgroup.h"

#define APP_UUID "%08x-0000-4000-8000-00000000c600"

struct real_cgroups {
        unsigned n;
        char parent[64];
        struct metrics_cgroups cg;
        struct metrics *m;
        struct bare_reads *bare;
};

/* The hierarchy directories that serve a resource, each once (pure v2 serves all three from one). */
static size_t dirs_of(const struct metrics_cgroups *cg, const char *dirs[CG__RES])
{
        size_t n = 0;
        for (int r = 0; r < CG__RES; r++) {
                bool seen = false;
                for (size_t i = 0; i < n; i++)
                        seen |= cg->res[r].dir && strcmp(dirs[i], cg->res[r].dir) == 0;
                if (cg->res[r].dir && !seen)
                        dirs[n++] = cg->res[r].dir;
        }
        return n;
}

static void remove_cgroups(struct real_cgroups *rc, unsigned made)
{
        const char *dirs[CG__RES];
        size_t nd = dirs_of(&rc->cg, dirs);
        char p[PATH_MAX];
        for (size_t d = 0; d < nd; d++) {
                for (unsigned i = 0; i < made; i++) {
                        snprintf(p, sizeof(p), "%s/%s/app-%u", dirs[d], rc->parent, i);
                        rmdir(p);
                }
                snprintf(p, sizeof(p), "%s/%s", dirs[d], rc->parent);
                rmdir(p);
        }
}

void real_cgroups_close(struct real_cgroups *rc)
{
        if (!rc)
                return;
        metrics_close(rc->m);
        bare_reads_free(rc->bare);
        remove_cgroups(rc, rc->n);
        metrics_cgroups_clear(&rc->cg);
        free(rc);
}

/* The files read for resource r (what source-cgroup-*.c read at a tick). */
static const char *file_of(const struct metrics_cgroups *cg, int r)
{
        bool v1 = cg->res[r].ver == CG_V1;
        switch (r) {
        case CG_CPU:
                return v1 ? "cpuacct.usage" : "cpu.stat";
        case CG_MEMORY:
                return v1 ? "memory.usage_in_bytes" : "memory.current";
        default:
                return cg->io_file;
        }
}

static void add_bare_files(struct real_cgroups *rc)
{
        char p[PATH_MAX];
        rc->bare = bare_reads_new();
        bare_reads_add_node(rc->bare, "/proc");
        for (unsigned i = 0; i < rc->n; i++) {
                for (int r = 0; r < CG__RES; r++) {
                        if (!rc->cg.res[r].dir)
                                continue;
                        snprintf(p, sizeof(p), "%s/%s/app-%u/%s", rc->cg.res[r].dir, rc->parent, i, file_of(&rc->cg, r));
                        bare_reads_add(rc->bare, p, 1, 0, false);
                }
                if (rc->cg.res[CG_MEMORY].dir) {
                        snprintf(p, sizeof(p), "%s/%s/app-%u/memory.stat", rc->cg.res[CG_MEMORY].dir, rc->parent, i);
                        bare_reads_add(rc->bare, p, 6, i + 1, false);
                }
        }
}

struct real_cgroups *real_cgroups_open(unsigned n, const char *state_dir)
{
        if (geteuid() != 0) {
                printf("real cgroups: not root, not compared\n");
                return NULL;
        }
        struct real_cgroups *rc = calloc(1, sizeof(*rc));
        struct na_error err = NA_ERROR_INIT;
        if (!rc || metrics_cgroups_detect("/sys/fs/cgroup", &rc->cg, &err) < 0) {
                printf("real cgroups: %s, not compared\n", err.message[0] ? err.message : "out of memory");
                free(rc);
                return NULL;
        }
        rc->n = n;
        snprintf(rc->parent, sizeof(rc->parent), "na-bench-metrics-%d", (int)getpid());
        const char *dirs[CG__RES];
        size_t nd = dirs_of(&rc->cg, dirs);
        char p[PATH_MAX];
        for (size_t d = 0; d < nd; d++) {
                snprintf(p, sizeof(p), "%s/%s", dirs[d], rc->parent);
                if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                        printf("real cgroups: mkdir %s: %s, not compared\n", p, strerror(errno));
                        rc->n = 0;
                        real_cgroups_close(rc);
                        return NULL;
                }
                for (unsigned i = 0; i < n; i++) {
                        snprintf(p, sizeof(p), "%s/%s/app-%u", dirs[d], rc->parent, i);
                        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                                printf("real cgroups: mkdir %s: %s, not compared\n", p, strerror(errno));
                                real_cgroups_close(rc);
                                return NULL;
                        }
                }
        }
        struct metrics_options o = { .state_dir = state_dir };
        if (metrics_open(&o, &rc->m, &err) < 0) {
                printf("real cgroups: %s, not compared\n", err.message);
                real_cgroups_close(rc);
                return NULL;
        }
        for (unsigned i = 0; i < n; i++) {
                char id[40], cgroup[128];
                snprintf(id, sizeof(id), APP_UUID, i);
                snprintf(cgroup, sizeof(cgroup), "%s/app-%u", rc->parent, i);
                struct metrics_target_spec s = { .kind = METRICS_APP, .id = id, .cgroup = cgroup, .vcpus = 1,
                                                 .memory_limit_bytes = 1ULL << 30 };
                if (metrics_track(rc->m, &s, &err) < 0) {
                        printf("real cgroups: %s, not compared\n", err.message);
                        real_cgroups_close(rc);
                        return NULL;
                }
        }
        add_bare_files(rc);
        return rc;
}

struct metrics *real_cgroups_metrics(struct real_cgroups *rc)
{
        return rc->m;
}

struct bare_reads *real_cgroups_bare(struct real_cgroups *rc)
{
        return rc->bare;
}

const char *real_cgroups_mode(const struct real_cgroups *rc)
{
        return rc->cg.mode;
}
