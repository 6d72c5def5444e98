/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Every job kind this agent knows, gathered from the modules' lists. */
#include <stdlib.h>
#include <string.h>

#include "agent/jobs/jobs.h"

extern job_kind_list node_job_kinds;
extern job_kind_list vps_job_kinds;
extern job_kind_list metrics_job_kinds;
extern job_kind_list fw_job_kinds;
extern job_kind_list app_job_kinds;
extern job_kind_list app_files_job_kinds;
extern job_kind_list app_backup_job_kinds;
extern job_kind_list app_sftp_job_kinds;
extern job_kind_list app_net_job_kinds;
extern job_kind_list console_job_kinds;

static const struct job_kind *const *const lists[] = {
        node_job_kinds,
        vps_job_kinds,
        metrics_job_kinds,
        fw_job_kinds,
        app_job_kinds,
        app_files_job_kinds,
        app_backup_job_kinds,
        app_sftp_job_kinds,
        app_net_job_kinds,
        console_job_kinds,
};

#ifdef NA_TEST_HOOKS
/*
 * The test kinds (agent/kinds/kind-test.c) are compiled only into test builds
 * (-DNA_TEST_HOOKS=ON), and offered there only with NODEAGENT_TEST_KINDS=1. The
 * packaged build has no test kinds at all: they answer UNSUPPORTED_JOB like any
 * unknown kind, whatever the environment says.
 */
extern job_kind_list test_job_kinds;

static const struct job_kind *const *test_kinds(void)
{
        const char *v = getenv("NODEAGENT_TEST_KINDS");
        return v && streq(v, "1") ? test_job_kinds : NULL;
}
#else
static const struct job_kind *const *test_kinds(void)
{
        return NULL;
}
#endif

#define FOREACH_KIND(k)                                                                          \
        for (size_t _l = 0; _l <= ARRAY_SIZE(lists); _l++)                                       \
                for (const struct job_kind *const *k = _l < ARRAY_SIZE(lists) ? lists[_l] : test_kinds(); \
                     k && *k; k++)

const struct job_kind *job_kind_find(const char *name)
{
        FOREACH_KIND(k)
        if (streq((*k)->name, name))
                return *k;
        return NULL;
}

json_t *job_kinds_json(void)
{
        json_t *a = json_array();
        FOREACH_KIND(k)
        json_array_append_new(a, json_string((*k)->name));
        return a;
}
