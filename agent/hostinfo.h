/* Facts about the node for hello and node.status. */
#pragma once

#include <stdint.h>

#include "common/error.h"
#include "proto/wire.h"

struct host_facts {
        char hostname[256];
        char kernel[128];
        int64_t cpus;
        int64_t memory_mb;
        char cgroup[8]; /* "v2", "v1" or "hybrid" */
        char boot_id[40];
};

/* sys_root is normally "/sys" (settable for tests). */
int hostinfo_read(struct host_facts *h, const char *sys_root, struct na_error *err);
void hostinfo_to_proto(const struct host_facts *h, struct proto_host *out);
