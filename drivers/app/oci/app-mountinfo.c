/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A mountinfo reader (see app-mountinfo.h). */
#include "drivers/app/oci/app-mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#define MOUNTINFO_READ_BUF (64 * 1024)

/* Undo mountinfo's octal escapes (\040 for a space, \011, \012, \134) in place. */
static void unescape(char *s)
{
        char *w = s;
        for (char *r = s; *r; r++) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
                    r[3] <= '7') {
                        *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                        r += 3;
                } else
                        *w++ = *r;
        }
        *w = '\0';
}

/* id parent major:minor root point options [optional fields...] - fstype source super-options */
static bool parse_line(char *line, struct app_mount *m)
{
        char *save = NULL;
        int field = 0, after_dash = -1;
        *m = (struct app_mount){ 0 };
        for (char *tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), field++) {
                if (field == 4)
                        m->point = tok;
                else if (field > 5 && after_dash < 0 && streq(tok, "-"))
                        after_dash = 0;
                else if (after_dash >= 0) {
                        if (after_dash == 0)
                                m->fstype = tok;
                        else if (after_dash == 1)
                                m->source = tok;
                        else if (after_dash == 2)
                                m->options = tok;
                        after_dash++;
                }
        }
        if (!m->point || !m->fstype)
                return false;
        unescape((char *)m->point);
        if (m->source)
                unescape((char *)m->source);
        return true;
}

int app_mountinfo_foreach(const char *mountinfo, int (*fn)(const struct app_mount *m, void *userdata),
                          void *userdata, struct na_error *err)
{
        _cleanup_fclose_ FILE *f = fopen(mountinfo, "re");
        if (!f)
                return na_error_sys(err, errno, "open %s", mountinfo);
        /* stdio's default buffer reads the file 1 KB a system call; a node with 1,000 apps
         * has a mountinfo of about 4,000 lines (600 KB), read at each start. */
        (void)setvbuf(f, NULL, _IOFBF, MOUNTINFO_READ_BUF);
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        errno = 0;
        while (getline(&line, &cap, f) > 0) {
                struct app_mount m;
                if (!parse_line(line, &m))
                        continue;
                int r = fn(&m, userdata);
                if (r != 0)
                        return r < 0 ? r : 0;
                errno = 0;
        }
        if (ferror(f))
                return na_error_sys(err, errno ? errno : EIO, "read %s", mountinfo);
        return 0;
}

struct find_ctx {
        const char *point;
        bool found;
        char *fstype, *source;
};

static int find_one(const struct app_mount *m, void *userdata)
{
        struct find_ctx *c = userdata;
        if (!streq(m->point, c->point))
                return 0;
        free(c->fstype);
        free(c->source);
        c->fstype = strdup(m->fstype);
        c->source = strdup(m->source ? m->source : "");
        c->found = true;
        return (c->fstype && c->source) ? 0 : -ENOMEM;
}

int app_mountinfo_find(const char *mountinfo, const char *point, char **ret_fstype, char **ret_source,
                       struct na_error *err)
{
        struct find_ctx c = { .point = point };
        int r = app_mountinfo_foreach(mountinfo, find_one, &c, err);
        if (r == -ENOMEM && !na_error_is_set(err))
                na_error_sys(err, ENOMEM, "read %s", mountinfo);
        if (r < 0 || !c.found) {
                free(c.fstype);
                free(c.source);
                return r < 0 ? r : -ENOENT;
        }
        if (ret_fstype)
                *ret_fstype = c.fstype;
        else
                free(c.fstype);
        if (ret_source)
                *ret_source = c.source;
        else
                free(c.source);
        return 0;
}

int app_mount_is(const char *point, const char *fstype, long fs_magic, bool *ret, struct na_error *err)
{
        struct statx stx;
        if (statx(AT_FDCWD, point, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &stx) < 0) {
                if (errno == ENOENT || errno == ENOTDIR) {
                        *ret = false; /* nothing is mounted where nothing is (a backup's snapshot, at each open) */
                        return 0;
                }
        } else if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) {
                struct statfs sf;
                if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
                        *ret = false;
                        return 0;
                }
                if (!fstype) {
                        *ret = true;
                        return 0;
                }
                if (statfs(point, &sf) == 0) {
                        *ret = sf.f_type == fs_magic;
                        return 0;
                }
        }
        /* A kernel without STATX_ATTR_MOUNT_ROOT (before 5.8), or statx or statfs refused: the file says. */
        _cleanup_free_ char *found = NULL;
        int r = app_mountinfo_find("/proc/self/mountinfo", point, &found, NULL, err);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret = r == 0 && (!fstype || streq(found, fstype));
        return 0;
}

int app_umount(const char *point, int flags)
{
        for (int i = 0;; i++) {
                if (umount2(point, flags | UMOUNT_NOFOLLOW) == 0 || errno == EINVAL)
                        return 0;
                if (errno != EBUSY || i == 50)
                        return -errno;
                nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
        }
}
