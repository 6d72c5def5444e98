/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A VM driver module "of another build" for tests/drivers/vm-module: the entry nodeagentd
 * looks for (drivers/vm-module.h), returning an ABI string no build has. */
#include <stddef.h>

struct other_module {
        const char *abi;
        const void *driver;
};

__attribute__((visibility("default"))) const struct other_module *nodeagent_vm_module(void);

const struct other_module *nodeagent_vm_module(void)
{
        static const struct other_module m = { .abi = "0.0.1/release/0123456789abcdef", .driver = NULL };
        return &m;
}
