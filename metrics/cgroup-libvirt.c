/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libvirt's machine cgroups. libvirt (src/hypervisor/domain_driver.c,
 * src/util/virsystemd.c, src/util/vircgroup.c) names a running domain's cgroup
 * after its machine name "qemu-<domain id>-<sanitized name>": with systemd the
 * scope machine.slice/machine-<systemd-escaped machine name>.scope, without it
 * machine/<machine name>.libvirt-qemu. The domain id changes at every start, so a
 * lookup scans the two partitions once and matches the part after the id.
 */
#include "metrics/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MACHINE_NAME_MAX 64

static bool ascii_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int metrics_libvirt_machine_name(const char *driver, int id, const char *name, char *buf, size_t len)
{
        int n = snprintf(buf, len, "%s-%d-", driver, id);
        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        size_t o = (size_t)n;
        bool skip = true;
        for (const char *p = name; *p; p++) {
                if (o >= MACHINE_NAME_MAX)
                        break;
                char c = *p;
                if (c == '.' || c == '-') {
                        if (skip)
                                continue;
                        skip = true;
                } else if (ascii_alnum(c)) {
                        skip = false;
                } else {
                        continue; /* dropped; does not end a run of '-'/'.' */
                }
                if (o + 1 >= len)
                        return -ENAMETOOLONG;
                buf[o++] = c;
        }
        while (o > 0 && (buf[o - 1] == '-' || buf[o - 1] == '.'))
                o--;
        buf[o] = '\0';
        return 0;
}

int metrics_systemd_escape(const char *s, char *buf, size_t len)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (const char *p = s; *p; p++) {
                unsigned char c = (unsigned char)*p;
                bool plain = ascii_alnum((char)c) || c == ':' || c == '_' || (c == '.' && p != s);
                if (c == '/') {
                        if (o + 1 >= len)
                                return -ENAMETOOLONG;
                        buf[o++] = '-';
                } else if (plain) {
                        if (o + 1 >= len)
                                return -ENAMETOOLONG;
                        buf[o++] = (char)c;
                } else {
                        if (o + 4 >= len)
                                return -ENAMETOOLONG;
                        buf[o++] = '\\';
                        buf[o++] = 'x';
                        buf[o++] = hex[c >> 4];
                        buf[o++] = hex[c & 15];
                }
        }
        if (o >= len)
                return -ENAMETOOLONG;
        buf[o] = '\0';
        return 0;
}

/* ---- the index ---- */

struct mi_entry {
        char *key;  /* "<driver>\n<escaped rest>" */
        int id;     /* domain id; -1 for the legacy names without one */
        char *rel;  /* relative cgroup path */
};

struct machine_index {
        struct mi_entry *e;
        size_t n, cap;
};

void machine_index_free(struct machine_index *ix)
{
        if (!ix)
                return;
        for (size_t i = 0; i < ix->n; i++) {
                free(ix->e[i].key);
                free(ix->e[i].rel);
        }
        free(ix->e);
        free(ix);
}

size_t machine_index_size(const struct machine_index *ix)
{
        return ix ? ix->n : 0;
}

static int mi_add(struct machine_index *ix, const char *driver, size_t driver_len, const char *rest_escaped,
                  int id, const char *partition, const char *dname)
{
        if (ix->n == ix->cap) {
                size_t cap = ix->cap ? ix->cap * 2 : 64;
                struct mi_entry *e = realloc(ix->e, cap * sizeof(*e));
                if (!e)
                        return -ENOMEM;
                ix->e = e;
                ix->cap = cap;
        }
        struct mi_entry *e = &ix->e[ix->n];
        if (asprintf(&e->key, "%.*s\n%s", (int)driver_len, driver, rest_escaped) < 0)
                return -ENOMEM;
        if (asprintf(&e->rel, "%s/%s", partition, dname) < 0) {
                free(e->key);
                return -ENOMEM;
        }
        e->id = id;
        ix->n++;
        return 0;
}

/* "<digits><sep>" at s: the number and what follows, or NULL. */
static const char *parse_id(const char *s, const char *sep, int *id)
{
        long v = 0;
        const char *p = s;
        while (*p >= '0' && *p <= '9' && p - s < 9)
                v = v * 10 + (*p++ - '0');
        if (p == s || strncmp(p, sep, strlen(sep)) != 0)
                return NULL;
        *id = (int)v;
        return p + strlen(sep);
}

/* machine.slice/machine-<E>.scope, E = escaped "<driver>-<id>-<name>" or legacy "<driver>-<name>". */
static int scan_scope(struct machine_index *ix, const char *dname)
{
        size_t len = strlen(dname);
        if (len <= 14 || strncmp(dname, "machine-", 8) != 0 || !streq(dname + len - 6, ".scope"))
                return 0;
        char inner[NAME_MAX + 1];
        snprintf(inner, sizeof(inner), "%.*s", (int)(len - 14), dname + 8);
        char *sep = strstr(inner, "\\x2d");
        if (!sep || sep == inner)
                return 0;
        size_t drv_len = (size_t)(sep - inner);
        const char *after = sep + 4;
        int id;
        const char *rest = parse_id(after, "\\x2d", &id);
        int r = 0;
        if (rest && *rest)
                r = mi_add(ix, inner, drv_len, rest, id, "machine.slice", dname);
        if (r == 0 && *after)
                r = mi_add(ix, inner, drv_len, after, -1, "machine.slice", dname);
        return r;
}

/* machine/[_]<driver>-<id>-<name>.libvirt-<driver> or legacy [_]<name>.libvirt-<driver>. */
static int scan_partition(struct machine_index *ix, const char *dname)
{
        const char *suffix = strstr(dname, ".libvirt-");
        if (!suffix || suffix == dname)
                return 0;
        const char *driver = suffix + strlen(".libvirt-");
        size_t drv_len = strlen(driver);
        if (drv_len == 0)
                return 0;
        char base[NAME_MAX + 1], esc[4 * NAME_MAX + 1];
        const char *b = dname[0] == '_' ? dname + 1 : dname;
        snprintf(base, sizeof(base), "%.*s", (int)(suffix - b), b);

        int r = 0;
        if (strncmp(base, driver, drv_len) == 0 && base[drv_len] == '-') {
                int id;
                const char *rest = parse_id(base + drv_len + 1, "-", &id);
                if (rest && *rest && metrics_systemd_escape(rest, esc, sizeof(esc)) == 0)
                        r = mi_add(ix, driver, drv_len, esc, id, "machine", dname);
        }
        if (r == 0 && metrics_systemd_escape(base, esc, sizeof(esc)) == 0)
                r = mi_add(ix, driver, drv_len, esc, -1, "machine", dname);
        return r;
}

static int mi_cmp(const void *a, const void *b)
{
        const struct mi_entry *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        if (c)
                return c;
        return (x->id < y->id) - (x->id > y->id); /* highest id first */
}

static int scan_dir(struct machine_index *ix, const char *hier, const char *partition,
                    int (*scan)(struct machine_index *, const char *), struct na_error *err)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", hier, partition) >= (int)sizeof(path))
                return 0;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 0; /* no such partition on this host */
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return na_error_sys(err, errno, "cgroups: %s", path);
        }
        struct dirent *de;
        int r = 0;
        while (r == 0 && (de = readdir(d)))
                if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
                        r = scan(ix, de->d_name);
        closedir(d);
        if (r < 0)
                return na_error_sys(err, -r, "cgroups: %s", path);
        return 0;
}

int machine_index_build(const char *hierarchy_dir, struct machine_index **ret, struct na_error *err)
{
        _cleanup_(machine_index_freep) struct machine_index *ix = calloc(1, sizeof(*ix));
        if (!ix)
                return na_error_sys(err, ENOMEM, "cgroups: machine index");
        int r = scan_dir(ix, hierarchy_dir, "machine.slice", scan_scope, err);
        if (r < 0)
                return r;
        r = scan_dir(ix, hierarchy_dir, "machine", scan_partition, err);
        if (r < 0)
                return r;
        if (ix->n)
                qsort(ix->e, ix->n, sizeof(*ix->e), mi_cmp);
        *ret = TAKE_PTR(ix);
        return 0;
}

/* The first entry with key (the highest id, entries being sorted so), or NULL. */
static const struct mi_entry *mi_lookup(const struct machine_index *ix, const char *key, bool legacy)
{
        size_t lo = 0, hi = ix->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(ix->e[mid].key, key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < ix->n && streq(ix->e[i].key, key); i++)
                if ((ix->e[i].id < 0) == legacy)
                        return &ix->e[i];
        return NULL;
}

const char *machine_index_find(const struct machine_index *ix, const char *driver, const char *domain)
{
        char machine[MACHINE_NAME_MAX + 64], esc[4 * (MACHINE_NAME_MAX + 64)], key[sizeof(esc) + 64];
        if (!ix || ix->n == 0)
                return NULL;

        /* The name part as libvirt sanitizes it, without truncation (id 0 has the shortest prefix). */
        if (metrics_libvirt_machine_name(driver, 0, domain, machine, sizeof(machine)) < 0)
                return NULL;
        size_t prefix = strlen(driver) + 3; /* "<driver>-0-" */
        if (metrics_systemd_escape(machine + (strlen(machine) >= prefix ? prefix : strlen(machine)), esc,
                                   sizeof(esc)) < 0)
                return NULL;
        snprintf(key, sizeof(key), "%s\n%s", driver, esc);
        const struct mi_entry *e = mi_lookup(ix, key, false);

        /* Long names are cut at 64 bytes of machine name, which depends on the id: try each. */
        if (!e && strlen(machine) >= MACHINE_NAME_MAX - 9) {
                size_t dlen = strlen(driver);
                for (size_t i = 0; i < ix->n && !e; i++) {
                        const struct mi_entry *c = &ix->e[i];
                        if (c->id < 0 || strncmp(c->key, driver, dlen) != 0 || c->key[dlen] != '\n')
                                continue;
                        char m2[MACHINE_NAME_MAX + 64], e2[sizeof(esc)];
                        int n = snprintf(m2, sizeof(m2), "%s-%d-", driver, c->id);
                        if (metrics_libvirt_machine_name(driver, c->id, domain, m2, sizeof(m2)) < 0 ||
                            strlen(m2) < (size_t)n || metrics_systemd_escape(m2 + n, e2, sizeof(e2)) < 0)
                                continue;
                        if (streq(c->key + dlen + 1, e2)) {
                                /* the highest id with this key comes first in the sorted index */
                                e = mi_lookup(ix, c->key, false);
                        }
                }
        }
        if (e)
                return e->rel;

        /* Legacy names carry the domain name itself. */
        if (metrics_systemd_escape(domain, esc, sizeof(esc)) < 0)
                return NULL;
        snprintf(key, sizeof(key), "%s\n%s", driver, esc);
        e = mi_lookup(ix, key, true);
        return e ? e->rel : NULL;
}

int metrics_libvirt_find_cgroup(const char *hierarchy_dir, const char *driver, const char *domain, char **ret,
                                struct na_error *err)
{
        _cleanup_(machine_index_freep) struct machine_index *ix = NULL;
        int r = machine_index_build(hierarchy_dir, &ix, err);
        if (r < 0)
                return r;
        const char *rel = machine_index_find(ix, driver, domain);
        if (!rel)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "domain %s: no machine cgroup under %s", domain,
                                    hierarchy_dir);
        *ret = strdup(rel);
        if (!*ret)
                return na_error_sys(err, ENOMEM, "domain %s", domain);
        return 0;
}
