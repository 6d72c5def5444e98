/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The app's overlay root (see app-rootfs.h). */
#include "drivers/app/oci/app-rootfs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fileio.h"
#include "drivers/app/image/app-image.h"
#include "drivers/app/oci/app-mountinfo.h"
#include "drivers/app/oci/app-names.h"
#include "volume/volume.h"


static int check_dir(const char *what, const char *p, struct na_error *err)
{
        if (!app_path_clean(p) || streq(p, "/") || strpbrk(p, ",:\\"))
                return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                    "rootfs: %s must be a clean absolute path without ',' ':' '\\'", what);
        return 0;
}

char *app_rootfs_path(const char *app_dir)
{
        return na_strdupf("%s/rootfs", app_dir);
}

/* mkdir name under dir_fd (when missing) and give it to uid:gid with mode; never follows a link. */
static int make_dir(int dir_fd, const char *app_dir, const char *name, mode_t mode, uid_t uid, gid_t gid,
                    struct na_error *err)
{
        if (mkdirat(dir_fd, name, mode) < 0 && errno != EEXIST)
                return na_error_sys(err, errno, "rootfs: mkdir %s/%s", app_dir, name);
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "rootfs: open %s/%s", app_dir, name);
        if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
                return na_error_sys(err, errno, "rootfs: chown %s/%s", app_dir, name);
        return 0;
}

/*
 * A user namespace mapping 0..count-1 onto uid.. and gid..: a child is cloned into a
 * new one, we write its maps, keep an fd to the namespace and kill the child. The
 * namespace lives on as long as the fd (and the idmapped mount made with it).
 *
 * The child shares our table of files (CLONE_FILES) instead of copying it: a copy
 * held a reference to every file open in the agent at that moment, among them other
 * threads' mounts (an open_tree fd, a file in an app's volume), whose unmount then
 * failed with EBUSY while the child lived. It dies with the thread that made it, so
 * that an agent killed meanwhile leaves none behind (they held a test's output pipe
 * open forever).
 */
static int idmap_userns(uid_t uid, gid_t gid, uint32_t count, int *ret_fd, struct na_error *err)
{
        pid_t parent = getpid();
        /* A raw clone without a new stack: the child runs on a copy of ours, as after
         * fork, and makes only system calls. */
        long pid = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | CLONE_FILES | SIGCHLD), NULL, NULL, NULL,
                           NULL);
        if (pid == 0) {
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(1);
                for (;;)
                        pause();
        }
        if (pid < 0)
                return na_error_sys(err, errno, "rootfs: cannot make a user namespace for the id map");
        int r = 0;
        for (int i = 0; r == 0 && i < 2; i++) {
                char path[64], map[64];
                snprintf(path, sizeof(path), "/proc/%ld/%s", pid, i == 0 ? "uid_map" : "gid_map");
                int n = snprintf(map, sizeof(map), "0 %u %u\n", i == 0 ? (unsigned)uid : (unsigned)gid, count);
                _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd < 0 || write(fd, map, (size_t)n) != n)
                        r = na_error_sys(err, errno, "rootfs: write %s", path);
        }
        if (r == 0) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%ld/ns/user", pid);
                *ret_fd = open(path, O_RDONLY | O_CLOEXEC);
                if (*ret_fd < 0)
                        r = na_error_sys(err, errno, "rootfs: open %s", path);
        }
        kill((pid_t)pid, SIGKILL); /* the namespace lives on in *ret_fd */
        while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return r;
}

/*
 * <app_dir>/lower: the image root as the app sees it, an idmapped bind mount (host
 * id n shows as uid_base + n, for n below count), read-only.
 */
static int mount_idmapped_lower(const char *lower, const char *app_dir, int dir_fd, uid_t uid, gid_t gid,
                                struct na_error *err)
{
        int r = make_dir(dir_fd, app_dir, "lower", 0755, 0, 0, err);
        if (r < 0)
                return r;
        _cleanup_close_ int ns = -1;
        if ((r = idmap_userns(uid, gid, APP_ROOTFS_ID_COUNT, &ns, err)) < 0)
                return r;
        _cleanup_close_ int tree = open_tree(AT_FDCWD, lower, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (tree < 0)
                return na_error_sys(err, errno, "rootfs: clone %s", lower);
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                               MOUNT_ATTR_NODEV,
                                   .userns_fd = (uint64_t)ns };
        if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
                return na_error_sys(err, errno, "rootfs: id-map %s (needs Linux 5.12 and a file system that "
                                                "supports idmapped mounts)", lower);
        if (move_mount(tree, "", dir_fd, "lower", MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return na_error_sys(err, errno, "rootfs: mount %s at %s/lower", lower, app_dir);
        return 0;
}

/* Unmount app_dir/name when a file system is mounted there (of fstype, magic fs_magic; NULL: any). */
static int umount_if(const char *app_dir, const char *name, const char *fstype, long fs_magic, struct na_error *err)
{
        _cleanup_free_ char *path = na_strdupf("%s/%s", app_dir, name);
        if (!path)
                return na_error_sys(err, ENOMEM, "rootfs");
        bool mounted = false;
        int r = app_mount_is(path, fstype, fs_magic, &mounted, err);
        if (r < 0)
                return na_error_prefix(err, "rootfs %s", path);
        if (!mounted)
                return 0;
        if ((r = app_umount(path, 0)) < 0)
                return na_error_sys(err, -r, "rootfs: unmount %s", path);
        return 0;
}

int app_rootfs_is_mounted(const char *app_dir, bool *ret, struct na_error *err)
{
        int r = check_dir("app directory", app_dir, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *merged = app_rootfs_path(app_dir);
        if (!merged)
                return na_error_sys(err, ENOMEM, "rootfs");
        r = app_mount_is(merged, "overlay", OVERLAYFS_SUPER_MAGIC, ret, err);
        return r < 0 ? na_error_prefix(err, "rootfs %s", merged) : 0;
}

int app_rootfs_mount_at(const char *lower, const char *app_dir, const char *layer_dir, uid_t uid, gid_t gid,
                        struct na_error *err)
{
        int r = check_dir("image root", lower, err);
        if (r < 0 || (r = check_dir("app directory", app_dir, err)) < 0 ||
            (r = check_dir("layer directory", layer_dir, err)) < 0)
                return r;
        bool mounted;
        if ((r = app_rootfs_is_mounted(app_dir, &mounted, err)) < 0)
                return r;
        if (mounted)
                return na_error_set(err, EBUSY, NA_E_INTERNAL, "rootfs %s/rootfs: already mounted", app_dir);
        struct stat st;
        if (stat(lower, &st) < 0 || !S_ISDIR(st.st_mode))
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "rootfs: image root %s is not a directory", lower);
        _cleanup_close_ int dfd = open(app_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return na_error_sys(err, errno, "rootfs: open %s", app_dir);
        _cleanup_close_ int lfd = open(layer_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (lfd < 0)
                return na_error_sys(err, errno, "rootfs: open %s", layer_dir);
        if ((r = make_dir(lfd, layer_dir, "upper", 0755, uid, gid, err)) < 0 ||
            (r = make_dir(lfd, layer_dir, "work", 0700, 0, 0, err)) < 0 ||
            (r = make_dir(dfd, app_dir, "rootfs", 0755, 0, 0, err)) < 0)
                return r;
        /* A lower left mounted by an earlier attempt is replaced. */
        if ((r = umount_if(app_dir, "lower", NULL, 0, err)) < 0 ||
            (r = mount_idmapped_lower(lower, app_dir, dfd, uid, gid, err)) < 0)
                return r;
        _cleanup_free_ char *opts = na_strdupf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", app_dir,
                                               layer_dir, layer_dir);
        _cleanup_free_ char *merged = app_rootfs_path(app_dir);
        if (!opts || !merged)
                r = na_error_sys(err, ENOMEM, "rootfs");
        else if (strlen(opts) >= 4000)
                r = na_error_set(err, ENAMETOOLONG, NA_E_INTERNAL, "rootfs %s: paths too long", merged);
        else if (mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                r = na_error_sys(err, errno, "rootfs: mount overlay at %s", merged);
        if (r < 0) {
                struct na_error e = NA_ERROR_INIT;
                umount_if(app_dir, "lower", NULL, 0, &e);
                na_error_clear(&e);
        }
        return r;
}

int app_rootfs_mount(const char *lower, const char *app_dir, uid_t uid, gid_t gid, struct na_error *err)
{
        return app_rootfs_mount_at(lower, app_dir, app_dir, uid, gid, err);
}

int app_rootfs_umount(const char *app_dir, struct na_error *err)
{
        int r = check_dir("app directory", app_dir, err);
        if (r < 0 || (r = umount_if(app_dir, "rootfs", "overlay", OVERLAYFS_SUPER_MAGIC, err)) < 0)
                return r;
        return umount_if(app_dir, "lower", NULL, 0, err);
}

/* rm -rf each of names under dir (missing ones are fine). */
static int remove_parts(const char *dir, const char *const *names, size_t n, struct na_error *err)
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "rootfs: open %s", dir);
        }
        for (size_t i = 0; i < n; i++)
                if (app_fs_rm_rf(fd, names[i], err) < 0)
                        return na_error_prefix(err, "rootfs %s", dir);
        return 0;
}

int app_rootfs_remove_at(const char *app_dir, const char *layer_dir, struct na_error *err)
{
        int r = check_dir("layer directory", layer_dir, err);
        if (r < 0 || (r = app_rootfs_umount(app_dir, err)) < 0)
                return r;
        bool mounted;
        if ((r = app_rootfs_is_mounted(app_dir, &mounted, err)) < 0)
                return r;
        if (mounted) /* stacked mounts: never remove through one */
                return na_error_set(err, EBUSY, NA_E_INTERNAL, "rootfs %s/rootfs: still mounted", app_dir);
        _cleanup_free_ char *lower = na_strdupf("%s/lower", app_dir);
        if (!lower)
                return na_error_sys(err, ENOMEM, "rootfs");
        if ((r = app_mount_is(lower, NULL, 0, &mounted, err)) < 0)
                return r;
        if (mounted)
                return na_error_set(err, EBUSY, NA_E_INTERNAL, "rootfs %s: still mounted", lower);
        static const char *const layer[] = { "upper", "work" }, *const mine[] = { "rootfs", "lower" };
        if ((r = remove_parts(layer_dir, layer, ARRAY_SIZE(layer), err)) < 0)
                return r;
        return remove_parts(app_dir, mine, ARRAY_SIZE(mine), err);
}

int app_rootfs_remove(const char *app_dir, struct na_error *err)
{
        return app_rootfs_remove_at(app_dir, app_dir, err);
}
