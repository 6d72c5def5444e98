/*
 * The app driver: one const struct of primitives per container runtime. crun is the
 * one we have (app_oci_driver, drivers/app/app-oci*.c); a test can slot in its own
 * table. The job layer never sees OCI or crun details: it reaches apps through this
 * table with job_services(ctx)->app and ->app_conn.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"

struct app_conn;

struct app_driver {
        const char *name; /* "crun": capabilities.appDriver */

        void (*close)(struct app_conn *conn); /* NULL-safe */
        /* hello inventory: a new JSON array of {id, state} for every app. Thread-safe. */
        int (*inventory)(struct app_conn *conn, json_t **ret, struct na_error *err);
};
