/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The optional Prometheus endpoint ([metrics] prometheus_listen, off by default,
 * loopback only): GET /metrics answers the node's and guests' metrics (rendered by
 * metrics/) and the agent's own health. A tiny HTTP/1.0 responder on the loop: one
 * request per connection, answered and closed.
 */
#pragma once

#include <stdio.h>

#include "agent/base/loop.h"
#include "common/error.h"

struct prometheus;
struct metrics;

/* Writes the agent's own health lines (jobs by state, link state, results waiting, journal size). */
typedef void (*prometheus_health_fn)(void *userdata, FILE *out);

int prometheus_open(struct loop *loop, const char *listen_addr, struct metrics *m, prometheus_health_fn health,
                    void *userdata, struct prometheus **ret, struct na_error *err);
void prometheus_close(struct prometheus *p);
