/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Fault injection for test builds (common/fault.h). */
#include "common/fault.h"

#ifdef NA_TEST_HOOKS
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAULT_SITES_MAX 16

struct fault_site {
        char name[48];
        long count;        /* "=N": failures left */
        long every;        /* "%K": fail every K-th hit */
        atomic_long hits;
        atomic_long left;
};

static struct fault_site sites[FAULT_SITES_MAX];
static size_t nsites;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void parse(void)
{
        const char *spec = getenv("NA_FAULTS");
        if (!spec)
                return;
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", spec);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok && nsites < FAULT_SITES_MAX; tok = strtok_r(NULL, ",", &save)) {
                char *op = strpbrk(tok, "=%");
                if (!op)
                        continue;
                struct fault_site *s = &sites[nsites];
                char kind = *op;
                *op = '\0';
                snprintf(s->name, sizeof(s->name), "%s", tok);
                long v = strtol(op + 1, NULL, 10);
                if (v <= 0)
                        continue;
                if (kind == '=')
                        atomic_store(&s->left, v);
                else
                        s->every = v;
                nsites++;
        }
}

bool na_fault_hit(const char *site)
{
        pthread_once(&once, parse);
        for (size_t i = 0; i < nsites; i++) {
                struct fault_site *s = &sites[i];
                if (strcmp(s->name, site) != 0)
                        continue;
                long hit = atomic_fetch_add(&s->hits, 1) + 1;
                if (s->every)
                        return hit % s->every == 0;
                long left = atomic_load(&s->left);
                while (left > 0)
                        if (atomic_compare_exchange_weak(&s->left, &left, left - 1))
                                return true;
                return false;
        }
        return false;
}
#endif
