/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Name resolution inside an app: files, not a resolver. Each app has a directory
 * <apps_dir>/<id>/net holding `hosts` (itself and every member of its group, by
 * hostname) and `resolv.conf`, bind-mounted read-only at /run/nodeagent in the
 * container, and the container's /etc/hosts and /etc/resolv.conf are symbolic
 * links into it. The files are replaced by rename, so a reader sees the old or the
 * new file whole; a bind mount of the directory (not of the file, whose inode the
 * mount would pin) shows the new file at once: a group change needs no restart.
 * Why files: every libc and busybox reads /etc/hosts; a resolver would be one more
 * daemon per node to keep alive, and names only change on join and leave.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fileio.h"
#include "drivers/app/net/app-net-internal.h"

#define PUBLIC_RESOLVER "1.1.1.1"

char *app_net_hosts_render(const struct app_net_host_entry *self, const struct app_net_host_entry *others, size_t n)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        fputs("# Written by nodeagent: this app and the apps of its group. Changes are overwritten.\n"
              "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
              f);
        char a[16];
        app_net_addr_str(self->addr, a);
        fprintf(f, "%s\t%s\n", a, self->hostname);
        for (size_t i = 0; i < n; i++) {
                app_net_addr_str(others[i].addr, a);
                fprintf(f, "%s\t%s\n", a, others[i].hostname);
        }
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

static bool loopback(const char *addr)
{
        return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

char *app_net_resolv_render(const char *host_text, const char *resolver)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        fputs("# Written by nodeagent. Changes are overwritten.\n", f);
        int n = 0;
        for (const char *p = host_text ? host_text : ""; *p && n < 3;) {
                const char *eol = strchr(p, '\n');
                size_t l = eol ? (size_t)(eol - p) : strlen(p);
                char line[256], addr[64];
                if (l < sizeof(line)) {
                        memcpy(line, p, l);
                        line[l] = '\0';
                        if (sscanf(line, " nameserver %63s", addr) == 1 && !loopback(addr)) {
                                fprintf(f, "nameserver %s\n", addr);
                                n++;
                        }
                }
                p += l + (eol ? 1 : 0);
        }
        if (n == 0)
                fprintf(f, "nameserver %s\n", resolver && *resolver ? resolver : PUBLIC_RESOLVER);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

int app_net_write_file(const char *dir, const char *name, const char *text, mode_t mode, struct na_error *err)
{
        char tmp[4200], path[4200];
        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return na_error_sys(err, errno, "write %s", tmp);
        int r = na_write_all(fd, text, strlen(text), tmp, err);
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = na_error_sys(err, errno, "chmod %s", tmp);
        if (r >= 0 && rename(tmp, path) < 0)
                r = na_error_sys(err, errno, "rename %s", path);
        if (r < 0)
                unlink(tmp);
        return r;
}

/* One link in the root's /etc, resolved beneath the root (the root is the app's: hostile). */
static int link_one(int etc, const char *name, uint32_t uid, struct na_error *err)
{
        char want[128], have[128];
        snprintf(want, sizeof(want), APP_NET_DIR_IN_CONTAINER "/%s", name);
        ssize_t n = readlinkat(etc, name, have, sizeof(have) - 1);
        if (n >= 0) {
                have[n] = '\0';
                if (strcmp(have, want) == 0)
                        return 0;
        }
        if (unlinkat(etc, name, 0) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "/etc/%s of the app's root: remove", name);
        if (symlinkat(want, etc, name) < 0)
                return na_error_sys(err, errno, "/etc/%s of the app's root: link", name);
        if (fchownat(etc, name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                return na_error_sys(err, errno, "/etc/%s of the app's root: chown", name);
        return 0;
}

int app_net_root_links(const char *rootfs, uint32_t uid, struct na_error *err)
{
        _cleanup_close_ int root = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return na_error_sys(err, errno, "open %s", rootfs);
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        int etc = (int)syscall(SYS_openat2, root, "etc", &how, sizeof(how));
        if (etc < 0 && errno == ENOENT) {
                if (mkdirat(root, "etc", 0755) < 0 && errno != EEXIST)
                        return na_error_sys(err, errno, "/etc of the app's root: create");
                if (fchownat(root, "etc", uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        return na_error_sys(err, errno, "/etc of the app's root: chown");
                etc = (int)syscall(SYS_openat2, root, "etc", &how, sizeof(how));
        }
        if (etc < 0)
                return na_error_sys(err, errno, "/etc of the app's root: open");
        int r = link_one(etc, "hosts", uid, err);
        if (r >= 0)
                r = link_one(etc, "resolv.conf", uid, err);
        close(etc);
        return r;
}
