/* SPDX-License-Identifier: GPL-2.0-or-later */
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
        char cgroup[8]; /* "v2", "v1", "hybrid", "none" (from metrics/), "unknown" until then */
        char boot_id[40];
};

int hostinfo_read(struct host_facts *h, struct na_error *err);
void hostinfo_to_proto(const struct host_facts *h, struct proto_host *out);
