/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The libvirt VM driver as a module (drivers/vm-module.h): its one exported symbol. */
#include "drivers/vm-module.h"

__attribute__((visibility("default"))) const struct vm_module *nodeagent_vm_module(void);

const struct vm_module *nodeagent_vm_module(void)
{
        static const struct vm_module m = { .abi = VM_MODULE_ABI, .driver = &vm_libvirt_driver };
        return &m;
}
