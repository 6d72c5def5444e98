/*
 * The local control socket: a unix stream socket (mode 0660) speaking
 * line-delimited JSON. One request per line, one answer per line:
 *   {"cmd":"status"}                      -> {"ok":true,"status":{...}}
 *   {"cmd":"jobs"}                        -> {"ok":true,"jobs":{running,queued,recent}}
 *   {"cmd":"run","kind":K,"target":{"type":T,"id":I},"params":{...},"timeoutSec":N}
 *                                         -> {"ok":true,"job":{...},"result":<Result>} when it ends
 * Garbage gets {"ok":false,"error":"..."} and the connection stays usable; a line
 * over 1 MiB closes it. Jobs run through the same job layer as remote ones.
 */
#pragma once

#include <jansson.h>

#include "agent/jobs.h"
#include "agent/loop.h"

struct control;

struct control_ops {
        json_t *(*status)(void *userdata); /* the status object (loop thread) */
};

int control_open(struct loop *loop, struct jobs *jobs, const char *path, const struct control_ops *ops,
                 void *userdata, struct control **ret, struct na_error *err);
void control_close(struct control *c);
