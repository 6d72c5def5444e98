/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A set of relative paths with flags, private to app-layer.c: what the layer being
 * applied has made (APP_PATH_MADE) and the directories above those
 * (APP_PATH_ABOVE_MADE), so whiteouts spare what the same layer adds.
 *
 *   struct app_pathset s = {0};
 *   app_pathset_mark(&s, "etc/passwd");   etc/passwd MADE, etc ABOVE_MADE
 *   app_pathset_get(&s, "etc") == APP_PATH_ABOVE_MADE
 *   app_pathset_free(&s);
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define APP_PATH_MADE 1u
#define APP_PATH_ABOVE_MADE 2u

struct app_pathset {
        char **keys;
        uint8_t *flags;
        size_t cap, n;
};

/* Mark path MADE and each of its parent directories ABOVE_MADE; -ENOMEM on failure. */
int app_pathset_mark(struct app_pathset *s, const char *path);
/* The flags of path (0 when absent). */
unsigned app_pathset_get(const struct app_pathset *s, const char *path);
void app_pathset_free(struct app_pathset *s);
