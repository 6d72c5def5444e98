/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fault injection for tests, compiled only into test builds (-DNA_TEST_HOOKS=ON, the
 * default for development trees; the packaged build is configured with it OFF, so a
 * production binary has neither this nor the test job kinds).
 *
 * NA_FAULT("site") is true when the environment variable NA_FAULTS, read once at the
 * first call, asks for a failure at that site:
 *
 *   NA_FAULTS="http.request=3,spawn.poll%2"
 *
 * "site=N" fails the next N hits of the site; "site%K" fails every K-th hit. Sites
 * are the strings used at the call sites (grep NA_FAULT). Thread-safe.
 */
#pragma once

#include <stdbool.h>

#ifdef NA_TEST_HOOKS
bool na_fault_hit(const char *site);
#define NA_FAULT(site) na_fault_hit(site)
#else
#define NA_FAULT(site) false
#endif
