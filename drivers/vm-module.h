/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A VM driver built as a module: the contract between nodeagentd and
 * nodeagent-vm-<name>.so (drivers/vm/vm-libvirt-module.c is the libvirt one, the loader
 * agent/daemon/vm-module-load.c the daemon's side). The daemon links no hypervisor library:
 * it dlopen()s the module only when [vm] driver = <name>, so a node without servers
 * never maps libvirt and the 18 libraries it brings (bench/soak/README.md).
 *
 * The module exports one symbol, VM_MODULE_ENTRY, a function returning a pointer to
 * a static struct vm_module. Its first member, abi, stays first in every version: the
 * loader reads it before anything else and refuses the module unless it equals its
 * own VM_MODULE_ABI (the version, the build's hooks and sanitizer flavour, and a hash
 * of the headers shared across the boundary: common/, proto/, drivers/vm*.h). The
 * module calls the daemon's own common/ and proto/ functions (one na_spawn, with the
 * exec helper's state, for both); the daemon exports exactly those
 * (drivers/CMakeLists.txt makes the list from the module's undefined symbols).
 *
 * Where: <dir of nodeagentd>/VM_MODULE_RELDIR/nodeagent-vm-<name>.so, a path relative
 * to the daemon fixed at build time (the package: /usr/sbin/nodeagentd ->
 * /usr/lib/nodeagent/; the build tree: build/agent/nodeagentd -> build/lib/nodeagent/).
 * VM_MODULE_ABI and VM_MODULE_RELDIR come from the generated vm-module-abi.h.
 */
#pragma once

#include "drivers/vm.h"
#include "vm-module-abi.h" /* generated: VM_MODULE_ABI, VM_MODULE_RELDIR */

#define VM_MODULE_ENTRY "nodeagent_vm_module"

struct vm_module {
        const char *abi;               /* first, always: VM_MODULE_ABI of the build that made it */
        const struct vm_driver *driver;
};

typedef const struct vm_module *(*vm_module_entry_fn)(void);
