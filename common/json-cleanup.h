/* Cleanup attribute for jansson values. */
#pragma once
#include <jansson.h>
#include "common/macro.h"

static inline void json_decrefp(json_t **j)
{
        if (*j)
                json_decref(*j);
}
#define _cleanup_json_ _cleanup_(json_decrefp)
