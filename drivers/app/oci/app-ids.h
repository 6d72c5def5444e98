/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-app subordinate id ranges for the user namespace of each container.
 *
 * App n gets host uids and gids base + slot * 65536 .. + 65535, container 0..65535
 * mapping onto them, so no two apps (and no app and the host) share an id. The base
 * is configured; APP_IDS_DEFAULT_BASE (1,000,000,000) sits far above the ids a
 * distribution hands out (login users end at 60,000, systemd's dynamic users at
 * 65,519) and leaves (2^32 - 1 - base) / 65536 slots (50,277 with the default). It
 * lies inside the pool systemd-nspawn --private-users=pick draws from (524,288 to
 * 1,879,048,191): do not run such nspawn containers on an app node.
 *
 * Slots live in <storage_dir>/app-ids.json ({"slots": {"<app id>": slot}}), replaced
 * atomically under an flock on <storage_dir>/app-ids.lock, so two processes never
 * hand out the same slot. The lowest free slot is taken first; allocating for an app
 * that has one returns the same slot (idempotent); freeing a slot that is not held
 * is not an error.
 *
 *      struct app_ids ids;
 *      r = app_ids_allocate("/var/lib/nodeagent/apps", APP_IDS_DEFAULT_BASE, app_id, &ids, &err);
 *      ... in.uid_base = ids.uid_base; in.id_count = ids.count;
 *      r = app_ids_free("/var/lib/nodeagent/apps", app_id, &err);   (at app.delete)
 */
#pragma once

#include <stdint.h>

#include "common/error.h"

#define APP_IDS_DEFAULT_BASE 1000000000u
#define APP_IDS_RANGE 65536u
#define APP_IDS_FILE "app-ids.json"

struct app_ids {
        uint32_t slot;
        uint32_t uid_base; /* = gid base: the same numbers serve both */
        uint32_t count;    /* APP_IDS_RANGE */
};

/* The app's range, allocating the lowest free slot when it has none. */
int app_ids_allocate(const char *storage_dir, uint32_t base, const char *app_id, struct app_ids *ret,
                     struct na_error *err);
/* The app's range; -ENOENT (err not set) when it has none. */
int app_ids_lookup(const char *storage_dir, uint32_t base, const char *app_id, struct app_ids *ret,
                   struct na_error *err);
/* Give the app's slot back (0 when it had none). */
int app_ids_free(const char *storage_dir, const char *app_id, struct na_error *err);
