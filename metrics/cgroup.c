/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "metrics/cgroup.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool file_exists(const char *dir, const char *name)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
                return false;
        return access(path, F_OK) == 0;
}

/* Whether the space-separated list in dir/cgroup.controllers holds ctrl. */
static bool controllers_has(const char *dir, const char *ctrl)
{
        char path[PATH_MAX], buf[512];
        if (snprintf(path, sizeof(path), "%s/cgroup.controllers", dir) >= (int)sizeof(path))
                return false;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = RETRY_EINTR(read(fd, buf, sizeof(buf) - 1));
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        char *save = NULL;
        for (char *tok = strtok_r(buf, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
                if (streq(tok, ctrl))
                        return true;
        return false;
}

/* The first of root/<names...> that holds probe. */
static char *v1_dir(const char *root, const char *const *names, const char *probe)
{
        char dir[PATH_MAX];
        for (size_t i = 0; names[i]; i++) {
                if (snprintf(dir, sizeof(dir), "%s/%s", root, names[i]) >= (int)sizeof(dir))
                        continue;
                if (file_exists(dir, probe))
                        return strdup(dir);
        }
        return NULL;
}

void metrics_cgroups_clear(struct metrics_cgroups *cg)
{
        if (!cg)
                return;
        free(cg->root);
        free(cg->v2_dir);
        for (int r = 0; r < CG__RES; r++)
                free(cg->res[r].dir);
        memset(cg, 0, sizeof(*cg));
}

static int set_res(struct metrics_cgroups *cg, enum cg_res r, enum cg_version ver, const char *dir)
{
        cg->res[r].dir = strdup(dir);
        if (!cg->res[r].dir)
                return -ENOMEM;
        cg->res[r].ver = ver;
        return 0;
}

int metrics_cgroups_detect(const char *root, struct metrics_cgroups *cg, struct na_error *err)
{
        static const char *const cpu_names[] = { "cpuacct", "cpu,cpuacct", "cpuacct,cpu", NULL };
        static const char *const mem_names[] = { "memory", NULL };
        static const char *const io_names[] = { "blkio", NULL };
        char path[PATH_MAX];
        bool any_v1 = false;

        memset(cg, 0, sizeof(*cg));
        cg->root = strdup(root);
        if (!cg->root)
                return na_error_sys(err, ENOMEM, "cgroups");

        if (file_exists(root, "cgroup.controllers")) {
                cg->v2_dir = strdup(root);
        } else {
                cg->res[CG_CPU].dir = v1_dir(root, cpu_names, "cpuacct.usage");
                cg->res[CG_MEMORY].dir = v1_dir(root, mem_names, "memory.usage_in_bytes");
                cg->io_file = "blkio.throttle.io_service_bytes_recursive";
                cg->res[CG_IO].dir = v1_dir(root, io_names, cg->io_file);
                if (!cg->res[CG_IO].dir) {
                        cg->io_file = "blkio.throttle.io_service_bytes";
                        cg->res[CG_IO].dir = v1_dir(root, io_names, cg->io_file);
                }
                for (int r = 0; r < CG__RES; r++)
                        if (cg->res[r].dir) {
                                cg->res[r].ver = CG_V1;
                                any_v1 = true;
                        }
                snprintf(path, sizeof(path), "%s/unified", root);
                if (file_exists(path, "cgroup.controllers"))
                        cg->v2_dir = strdup(path);
        }

        if (cg->v2_dir) {
                int r = 0;
                if (!cg->res[CG_CPU].dir && file_exists(cg->v2_dir, "cpu.stat"))
                        r = set_res(cg, CG_CPU, CG_V2, cg->v2_dir);
                if (r == 0 && !cg->res[CG_MEMORY].dir && controllers_has(cg->v2_dir, "memory"))
                        r = set_res(cg, CG_MEMORY, CG_V2, cg->v2_dir);
                if (r == 0 && !cg->res[CG_IO].dir && controllers_has(cg->v2_dir, "io")) {
                        r = set_res(cg, CG_IO, CG_V2, cg->v2_dir);
                        cg->io_file = "io.stat";
                }
                if (r < 0) {
                        metrics_cgroups_clear(cg);
                        return na_error_sys(err, ENOMEM, "cgroups");
                }
        }

        if (!any_v1 && !cg->v2_dir) {
                metrics_cgroups_clear(cg);
                return na_error_set(err, ENOENT, NA_E_INTERNAL,
                                    "cgroups: no cgroup hierarchy under %s (neither cgroup.controllers nor "
                                    "v1 controllers)",
                                    root);
        }
        cg->mode = any_v1 ? (cg->v2_dir ? "hybrid" : "v1") : "v2";
        return 0;
}

int metrics_cgroup_path_normalize(const char *path, char **ret, struct na_error *err)
{
        size_t len = strlen(path);
        if (len > 1024)
                return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "cgroup path is longer than 1024 bytes");
        _cleanup_free_ char *out = malloc(len + 1);
        if (!out)
                return na_error_sys(err, ENOMEM, "cgroup path");
        size_t o = 0;
        const char *p = path;
        while (*p) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                            "cgroup path %s: '.' and '..' components are not allowed", path);
                if (n > NAME_MAX)
                        return na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL,
                                            "cgroup path %s: a component is longer than %d bytes", path, NAME_MAX);
                if (o)
                        out[o++] = '/';
                memcpy(out + o, p, n);
                o += n;
                p = end;
        }
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}
