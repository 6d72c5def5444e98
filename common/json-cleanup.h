/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Cleanup attribute for jansson values. */
#pragma once
#include <jansson.h>
#include "common/macro.h"

#if JANSSON_VERSION_HEX < 0x020e00
/* jansson 2.14 ships its own NULL-safe json_decrefp (for json_auto_t). */
static inline void json_decrefp(json_t **j)
{
        if (*j)
                json_decref(*j);
}
#endif
#define _cleanup_json_ _cleanup_(json_decrefp)
