/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The app's user from its image's /etc/passwd and /etc/group (app-user.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "drivers/app/oci/app-user.h"

#define DB_MAX (4u << 20)

/* <root>/etc/<name>, resolved as inside the container; *ret NULL when it is missing. */
static int read_db(int root_fd, const char *name, char **ret, struct na_error *err)
{
        char path[32];
        snprintf(path, sizeof(path), "etc/%s", name);
        struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        *ret = NULL;
        if (fd < 0)
                return errno == ENOENT ? 0 : na_error_sys(err, errno, "the image's /%s", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return na_error_sys(err, errno, "the image's /%s", path);
        if (!S_ISREG(st.st_mode) || st.st_size > DB_MAX)
                return na_error_set(err, EINVAL, NA_E_DRIVER, "the image's /%s is not a regular file of at most 4 MiB",
                                    path);
        char *buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return na_error_sys(err, ENOMEM, "the image's /%s", path);
        size_t n = 0;
        while (n < (size_t)st.st_size) {
                ssize_t k = read(fd, buf + n, (size_t)st.st_size - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t)k;
        }
        buf[n] = '\0';
        *ret = buf;
        return 0;
}

/* A number 0..65535 of digits only; -1 otherwise. */
static long id_number(const char *s, size_t n)
{
        if (n == 0 || n > 5)
                return -1;
        long v = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v <= (long)APP_USER_ID_MAX ? v : -1;
}

/*
 * The line of db whose field key_field equals key (by name: field 0; by id: field 2),
 * split into at most 4 fields (the last one holds the rest of the line). false when none.
 */
struct entry {
        const char *f[4];
        size_t len[4];
};
static bool find_entry(const char *db, const char *key, size_t key_len, int key_field, struct entry *out)
{
        for (const char *line = db; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t ll = end ? (size_t)(end - line) : strlen(line);
                struct entry e = { 0 };
                const char *p = line;
                int k = 0;
                for (; k < 4; k++) {
                        size_t rest = ll - (size_t)(p - line);
                        const char *colon = k < 3 ? memchr(p, ':', rest) : NULL;
                        e.f[k] = p;
                        e.len[k] = colon ? (size_t)(colon - p) : rest;
                        if (!colon) {
                                k++;
                                break;
                        }
                        p = colon + 1;
                }
                if (k >= 3 && line[0] != '#' && e.len[key_field] == key_len &&
                    memcmp(e.f[key_field], key, key_len) == 0) {
                        *out = e;
                        return true;
                }
                line = end ? end + 1 : NULL;
        }
        return false;
}

/* The id of field 2 of an entry, checked to be in the mapped range; -1 otherwise. */
static long entry_id(const struct entry *e)
{
        return id_number(e->f[2], e->len[2]);
}

/* Every group listing name among its members (field 3 of group), less primary. */
static void supplementary(const char *group, const char *name, size_t name_len, uint32_t primary,
                          struct app_user *u)
{
        for (const char *line = group; line && *line && u->n_groups < APP_USER_GROUPS_MAX;) {
                const char *end = strchr(line, '\n');
                size_t ll = end ? (size_t)(end - line) : strlen(line);
                /* name:pw:gid:members */
                const char *c1 = memchr(line, ':', ll);
                const char *c2 = c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line)) : NULL;
                const char *c3 = c2 ? memchr(c2 + 1, ':', ll - (size_t)(c2 + 1 - line)) : NULL;
                long gid = c3 ? id_number(c2 + 1, (size_t)(c3 - c2 - 1)) : -1;
                if (gid >= 0 && (uint32_t)gid != primary) {
                        const char *m = c3 + 1, *stop = line + ll;
                        while (m < stop) {
                                const char *comma = memchr(m, ',', (size_t)(stop - m));
                                size_t ml = comma ? (size_t)(comma - m) : (size_t)(stop - m);
                                if (ml == name_len && memcmp(m, name, name_len) == 0) {
                                        bool have = false;
                                        for (size_t i = 0; i < u->n_groups; i++)
                                                have |= u->groups[i] == (uint32_t)gid;
                                        if (!have)
                                                u->groups[u->n_groups++] = (uint32_t)gid;
                                        break;
                                }
                                m += ml + 1;
                        }
                }
                line = end ? end + 1 : NULL;
        }
}

static int missing(struct na_error *err, const char *what, const char *name, size_t n, const char *db)
{
        return na_error_set(err, ENOENT, NA_E_VALIDATION, "no %s '%.*s' in the image's /etc/%s", what, (int)n, name,
                            db);
}

int app_user_resolve_text(const char *passwd, const char *group, const char *spec, struct app_user *ret,
                          struct na_error *err)
{
        struct app_user u = { 0 };
        if (!spec || !*spec) {
                *ret = u;
                return 0;
        }
        const char *colon = strchr(spec, ':');
        size_t ul = colon ? (size_t)(colon - spec) : strlen(spec);
        const char *gspec = colon ? colon + 1 : NULL;
        if (ul == 0 || (gspec && !*gspec))
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "user '%s': an empty user or group", spec);
        struct entry pw;
        const char *name = NULL;
        size_t name_len = 0;
        long uid = id_number(spec, ul);
        bool numeric = uid >= 0 || strspn(spec, "0123456789") == ul;
        if (numeric) {
                if (uid < 0)
                        return na_error_set(err, ERANGE, NA_E_VALIDATION,
                                            "user '%s': ids must lie between 0 and 65535", spec);
                char key[8];
                int kl = snprintf(key, sizeof(key), "%ld", uid);
                if (passwd && find_entry(passwd, key, (size_t)kl, 2, &pw)) {
                        name = pw.f[0];
                        name_len = pw.len[0];
                        long g = id_number(pw.f[3], strcspn(pw.f[3], ":\n"));
                        u.gid = g >= 0 ? (uint32_t)g : 0;
                }
        } else {
                if (!passwd || !find_entry(passwd, spec, ul, 0, &pw))
                        return missing(err, "user", spec, ul, "passwd");
                uid = entry_id(&pw);
                long g = id_number(pw.f[3], strcspn(pw.f[3], ":\n"));
                if (uid < 0 || g < 0)
                        return na_error_set(err, ERANGE, NA_E_VALIDATION,
                                            "user '%.*s': its ids in the image's /etc/passwd are not between 0 and "
                                            "65535",
                                            (int)ul, spec);
                u.gid = (uint32_t)g;
                name = spec;
                name_len = ul;
        }
        u.uid = (uint32_t)uid;
        if (gspec) {
                size_t gl = strlen(gspec);
                long gid = id_number(gspec, gl);
                if (gid < 0 && strspn(gspec, "0123456789") == gl)
                        return na_error_set(err, ERANGE, NA_E_VALIDATION,
                                            "user '%s': ids must lie between 0 and 65535", spec);
                if (gid < 0) {
                        struct entry gr;
                        if (!group || !find_entry(group, gspec, gl, 0, &gr))
                                return missing(err, "group", gspec, gl, "group");
                        if ((gid = entry_id(&gr)) < 0)
                                return na_error_set(err, ERANGE, NA_E_VALIDATION,
                                                    "group '%s': its id in the image's /etc/group is not between 0 "
                                                    "and 65535",
                                                    gspec);
                }
                u.gid = (uint32_t)gid;
        }
        if (name && group)
                supplementary(group, name, name_len, u.gid, &u);
        *ret = u;
        return 0;
}

int app_user_resolve(const char *root, const char *spec, struct app_user *ret, struct na_error *err)
{
        if (!spec || !*spec) {
                *ret = (struct app_user){ 0 };
                return 0;
        }
        _cleanup_close_ int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return na_error_sys(err, errno, "open %s", root);
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        int r = read_db(root_fd, "passwd", &passwd, err);
        if (r >= 0)
                r = read_db(root_fd, "group", &group, err);
        if (r >= 0)
                r = app_user_resolve_text(passwd, group, spec, ret, err);
        return r;
}
