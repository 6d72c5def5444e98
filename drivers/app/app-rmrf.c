/* rm -rf beneath a directory fd that never follows a symbolic link and holds one directory fd at a time. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "drivers/app/app-image.h"

struct name_stack {
        char **names;
        size_t n, cap;
};

static void name_stack_free(struct name_stack *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->names[i]);
        free(s->names);
}

static int name_stack_push(struct name_stack *s, const char *name)
{
        if (s->n == s->cap) {
                size_t ncap = s->cap ? s->cap * 2 : 16;
                char **nn = realloc(s->names, ncap * sizeof(char *));
                if (!nn)
                        return -ENOMEM;
                s->names = nn;
                s->cap = ncap;
        }
        if (!(s->names[s->n] = strdup(name)))
                return -ENOMEM;
        s->n++;
        return 0;
}

/*
 * Remove the entries of cur that are not non-empty directories; return 1 with
 * *ret_sub set to the name of a non-empty subdirectory to descend into, 0 when cur is
 * empty now, or -errno.
 */
static int clear_level(int cur, char **ret_sub)
{
        int dfd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        DIR *d = fdopendir(dfd);
        if (!d) {
                int e = errno;
                close(dfd);
                return -e;
        }
        int r = 0;
        for (struct dirent *e; (errno = 0, e = readdir(d));) {
                if (streq(e->d_name, ".") || streq(e->d_name, ".."))
                        continue;
                bool is_dir = e->d_type == DT_DIR;
                if (e->d_type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(cur, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                if (errno == ENOENT)
                                        continue;
                                r = -errno;
                                break;
                        }
                        is_dir = S_ISDIR(st.st_mode);
                }
                if (!is_dir) {
                        if (unlinkat(cur, e->d_name, 0) < 0 && errno != ENOENT) {
                                r = -errno;
                                break;
                        }
                        continue;
                }
                if (unlinkat(cur, e->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        continue;
                if (errno != ENOTEMPTY && errno != EEXIST) {
                        r = -errno;
                        break;
                }
                if (!(*ret_sub = strdup(e->d_name)))
                        r = -ENOMEM;
                else
                        r = 1;
                break;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

int app_rm_rf_at(int dir_fd, const char *name, struct na_error *err)
{
        struct stat st;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return na_error_sys(err, errno, "remove %s: stat", name);
        }
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
                        return na_error_sys(err, errno, "remove %s", name);
                return 0;
        }
        _cleanup_close_ int cur = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cur < 0)
                return na_error_sys(err, errno, "remove %s: open", name);
        _cleanup_(name_stack_free) struct name_stack stack = {0};
        for (;;) {
                _cleanup_free_ char *sub = NULL;
                int r = clear_level(cur, &sub);
                if (r < 0)
                        return na_error_sys(err, -r, "remove %s", name);
                if (r > 0) {
                        int nfd = openat(cur, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (nfd < 0)
                                return na_error_sys(err, errno, "remove %s: open %s", name, sub);
                        if (name_stack_push(&stack, sub) < 0) {
                                close(nfd);
                                return na_error_sys(err, ENOMEM, "remove %s", name);
                        }
                        close(cur);
                        cur = nfd;
                        continue;
                }
                if (stack.n == 0)
                        break;
                /* cur is empty: go back up (a private tree: ".." is its parent) and remove it. */
                int pfd = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (pfd < 0)
                        return na_error_sys(err, errno, "remove %s: open ..", name);
                close(cur);
                cur = pfd;
                char *child = stack.names[--stack.n];
                int rr = unlinkat(cur, child, AT_REMOVEDIR);
                int e = errno;
                free(child);
                if (rr < 0 && e != ENOENT)
                        return na_error_sys(err, e, "remove %s: rmdir", name);
        }
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return na_error_sys(err, errno, "remove %s: rmdir", name);
        return 0;
}
