/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Which kinds a draining node refuses (agent/jobs/job-drain.h): the creation kinds. */
#include "agent/jobs/job-drain.h"

#include <string.h>

static const char *const creation_kinds[] = { "vps.create", "app.deploy" };

bool job_drain_refuses(const char *kind)
{
        for (size_t i = 0; i < sizeof(creation_kinds) / sizeof(creation_kinds[0]); i++)
                if (kind && strcmp(kind, creation_kinds[i]) == 0)
                        return true;
        return false;
}
