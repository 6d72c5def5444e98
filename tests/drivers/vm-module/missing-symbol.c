/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A VM driver module that calls what no nodeagentd exports, as a module of another
 * build may (tests/drivers/vm-module): dlopen(RTLD_NOW) refuses it before its entry runs. */
#include <stddef.h>

void na_function_of_another_build(void);

struct other_module {
        const char *abi;
        const void *driver;
};

__attribute__((visibility("default"))) const struct other_module *nodeagent_vm_module(void);

const struct other_module *nodeagent_vm_module(void)
{
        na_function_of_another_build();
        return NULL;
}
