/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Loading a VM driver module (agent/daemon/vm-module-load.h, drivers/vm-module.h). */
#include "agent/daemon/vm-module-load.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/daemon/selfpath.h"
#include "drivers/vm-module.h"

int vm_module_path(const char *name, char *buf, size_t len, struct na_error *err)
{
        size_t n = strlen(name);
        if (n == 0 || n > 32 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vm driver name '%s': not a module name", name);
        char file[64];
        snprintf(file, sizeof(file), "nodeagent-vm-%s.so", name);
        int r = agent_beside_exe(VM_MODULE_RELDIR, file, buf, len, err);
        if (r < 0)
                return na_error_prefix(err, "vm module");
        return 0;
}

/* Owned by root or by us, a regular file or directory as wanted, writable by no one else. */
static int check_owner(const char *path, const char *module, bool dir, struct na_error *err)
{
        struct stat st;
        if (stat(path, &st) < 0)
                return errno == ENOENT && !dir
                               ? na_error_set(err, ENOENT, NA_E_INTERNAL,
                                              "vm module %s: no such file (the nodeagent package installs it "
                                              "there)",
                                              module)
                               : na_error_sys(err, errno, "vm module %s: %s", module, path);
        if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vm module %s: %s is not a %s", module, path,
                                    dir ? "directory" : "regular file");
        if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)))
                return na_error_set(err, EPERM, NA_E_INTERNAL,
                                    "vm module %s: refused: %s is owned by uid %u with mode %04o (it must belong to "
                                    "root or to the agent's user and be writable by no one else)",
                                    module, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return 0;
}

static int load(const char *name, const struct vm_driver **ret, struct na_error *err)
{
        char path[PATH_MAX + 128];
        int r = vm_module_path(name, path, sizeof(path), err);
        if (r < 0)
                return r;
        char dir[sizeof(path)];
        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = '\0';
        r = check_owner(dir, path, true, err);
        if (r >= 0)
                r = check_owner(path, path, false, err);
        if (r < 0)
                return r;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *why = dlerror();
                /* A module of another build may call what this daemon does not export. */
                bool other = why && strstr(why, "undefined symbol");
                return na_error_set(err, ENOEXEC, NA_E_INTERNAL, "vm module %s: cannot load: %s%s", path,
                                    why ? why : "unknown error",
                                    other ? " (a module of another build? this nodeagentd is ABI " VM_MODULE_ABI ")"
                                          : "");
        }
        vm_module_entry_fn entry;
        *(void **)&entry = dlsym(h, VM_MODULE_ENTRY);
        const struct vm_module *m = entry ? entry() : NULL;
        if (!m || !m->abi) {
                dlclose(h);
                return na_error_set(err, ENOEXEC, NA_E_INTERNAL, "vm module %s: not a nodeagent VM module (no %s)",
                                    path, VM_MODULE_ENTRY);
        }
        if (!streq(m->abi, VM_MODULE_ABI)) {
                char theirs[128];
                snprintf(theirs, sizeof(theirs), "%s", m->abi);
                dlclose(h);
                return na_error_set(err, ENOEXEC, NA_E_INTERNAL,
                                    "vm module %s: refused: built for another nodeagent (module ABI %s, nodeagentd "
                                    "ABI %s): install the module of this build",
                                    path, theirs, VM_MODULE_ABI);
        }
        if (!m->driver || !m->driver->name || !streq(m->driver->name, name)) {
                dlclose(h);
                return na_error_set(err, ENOEXEC, NA_E_INTERNAL, "vm module %s: its driver is not '%s'", path, name);
        }
        *ret = m->driver; /* h stays open for the life of the process */
        return 0;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
        char name[33];
        const struct vm_driver *driver;
} loaded;

int vm_module_load(const char *name, const struct vm_driver **ret, struct na_error *err)
{
        pthread_mutex_lock(&lock);
        int r = 0;
        if (loaded.driver && streq(loaded.name, name))
                *ret = loaded.driver;
        else if (loaded.driver)
                r = na_error_set(err, EBUSY, NA_E_INTERNAL, "vm module %s: the %s module is loaded already", name,
                                 loaded.name);
        else if ((r = load(name, ret, err)) >= 0) {
                snprintf(loaded.name, sizeof(loaded.name), "%s", name);
                loaded.driver = *ret;
        }
        pthread_mutex_unlock(&lock);
        return r;
}
