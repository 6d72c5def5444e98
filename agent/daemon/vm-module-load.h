/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's side of drivers/vm-module.h: load the VM driver module of a name.
 *
 *   const struct vm_driver *drv;
 *   if (vm_module_load("libvirt", &drv, &err) < 0) { ... err.message names the file ... }
 *
 * Loads <dir of this executable>/VM_MODULE_RELDIR/nodeagent-vm-<name>.so with
 * RTLD_NOW | RTLD_LOCAL, once per process (a second call returns the same table); the
 * module stays loaded until exit. Before dlopen() the file and its directory must be
 * owned by root (or by the user running the agent) and writable by no one else; after,
 * the module's ABI must equal the daemon's (the same version, flavour and shared
 * headers). Call it before the seccomp filter. Every refusal names the file and why.
 */
#pragma once

#include <stddef.h>

#include "common/error.h"

struct vm_driver;

/* The module file of driver name into buf (no check that it exists). */
int vm_module_path(const char *name, char *buf, size_t len, struct na_error *err);
int vm_module_load(const char *name, const struct vm_driver **ret, struct na_error *err);
