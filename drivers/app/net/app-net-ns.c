/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Persistent network namespaces: a namespace made by a short-lived thread
 * (unshare(CLONE_NEWNET) changes only the calling thread's namespace) and kept
 * alive by a bind mount of its nsfs file at <netns_dir>/<app id>, as `ip netns`
 * does. The mount survives the agent; after a node reboot the file is there but
 * not a mount (statfs says it is not nsfs) and the namespace is made again.
 * Netlink inside it goes through a socket opened by a thread that setns()es into
 * it: a socket stays in the namespace it was made in.
 */
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "drivers/app/net/app-net-internal.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

static bool is_ns(const char *path)
{
        struct statfs sf;
        return statfs(path, &sf) == 0 && (unsigned long)sf.f_type == (unsigned long)NSFS_MAGIC;
}

struct ns_job {
        const char *path; /* setns into it; NULL: unshare a new one */
        int fd;           /* out: the new namespace */
        struct mnl_socket *sock; /* out: a rtnetlink socket inside */
        int errnum;
        const char *what;
};

static void *ns_thread(void *arg)
{
        struct ns_job *j = arg;
        if (!j->path) {
                if (unshare(CLONE_NEWNET) < 0) {
                        j->errnum = errno, j->what = "unshare";
                        return NULL;
                }
                j->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
                if (j->fd < 0)
                        j->errnum = errno, j->what = "open /proc/thread-self/ns/net";
                return NULL;
        }
        int fd = open(j->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                j->errnum = errno, j->what = "open";
                return NULL;
        }
        if (setns(fd, CLONE_NEWNET) < 0) {
                j->errnum = errno, j->what = "setns";
                close(fd);
                return NULL;
        }
        close(fd);
        j->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!j->sock || mnl_socket_bind(j->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
                j->errnum = errno ? errno : EIO, j->what = "netlink socket";
                if (j->sock)
                        mnl_socket_close(j->sock);
                j->sock = NULL;
        }
        return NULL; /* the thread ends: its namespace goes with it */
}

static int run(struct ns_job *j)
{
        pthread_t t;
        int r = pthread_create(&t, NULL, ns_thread, j);
        if (r)
                return -r;
        pthread_join(t, NULL);
        return j->errnum ? -j->errnum : 0;
}

int app_net_ns_ensure(const char *path, struct na_error *err)
{
        if (is_ns(path))
                return 0;
        int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return na_error_sys(err, errno, "network namespace %s: create", path);
        close(fd);
        struct ns_job j = { .fd = -1 };
        int r = run(&j);
        if (r < 0)
                return na_error_sys(err, -r, "network namespace %s: %s", path, j.what ? j.what : "thread");
        char src[64];
        snprintf(src, sizeof(src), "/proc/self/fd/%d", j.fd);
        r = mount(src, path, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
        close(j.fd);
        return r < 0 ? na_error_sys(err, -r, "network namespace %s: bind mount", path) : 0;
}

int app_net_ns_remove(const char *path, struct na_error *err)
{
        while (is_ns(path))
                if (umount2(path, MNT_DETACH) < 0)
                        return na_error_sys(err, errno, "network namespace %s: unmount", path);
        if (unlink(path) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "network namespace %s: remove", path);
        return 0;
}

int app_net_ns_rtnl(const char *path, struct mnl_socket **ret, struct na_error *err)
{
        struct ns_job j = { .path = path, .fd = -1 };
        int r = run(&j);
        if (r < 0)
                return na_error_sys(err, -r, "network namespace %s: %s", path, j.what ? j.what : "thread");
        *ret = j.sock;
        return 0;
}
