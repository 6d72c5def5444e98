/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The local control socket: a unix stream socket (mode 0660) speaking
 * line-delimited JSON. One request per line, one answer per line:
 *   {"cmd":"status"}                      -> {"ok":true,"status":{...}}
 *   {"cmd":"jobs"}                        -> {"ok":true,"jobs":{running,queued,recent}}
 *   {"cmd":"run","kind":K,"target":{"type":T,"id":I},"params":{...},"timeoutSec":N}
 *                                         -> {"ok":true,"job":{...},"result":<Result>} when it ends
 *   {"cmd":"apps"}                        -> {"ok":true,"apps":[{id, name?, state, startedAt, exitCode, restarts,
 *                                              memoryMB, volumeUsedMB}]}; a row whose status failed has
 *                                              {id, name?, state, error:{code, message}} instead
 *   {"cmd":"logs","app":UUID,"sinceSeq":N?,"limit":N?}
 *                                         -> {"ok":true,"lines":[{seq, ts, stream, text}],"nextSeq":N}
 *                                            (app.output: no sinceSeq = the last `limit` lines, default 100, max 1000)
 *   {"cmd":"drain","on":true|false}       -> {"ok":true,"drain":{"on":bool,"since":date-time?}}: the node drains
 *                                            (agent/jobs/job-drain.h: vps.create and app.deploy refused) or
 *                                            stops draining; kept in the state directory across restarts
 * Garbage gets {"ok":false,"error":"..."} and the connection stays usable; a line
 * over 1 MiB closes it. Jobs run through the same job layer as remote ones. apps and
 * logs call the app driver (ops->services()->app) on threads of their own
 * (agent/control/control-apps.h), never on the loop; a failure answers {"ok":false,"error",
 * "code","details"} (e.g. code APP_NOT_FOUND), and with apps off on this node
 * {"ok":false,"error":"apps are not enabled on this node: <services->apps_off_reason>"}. Answers to requests that
 * run on (run, apps, logs) come when they are ready, not necessarily in request order.
 */
#pragma once

#include <jansson.h>

#include "agent/jobs/jobs.h"
#include "agent/base/loop.h"

struct agent_services;

struct control;

struct control_ops {
        json_t *(*status)(void *userdata); /* the status object (loop thread) */
        /* The services whose app driver apps and logs use (loop thread); NULL or no
         * services->app: apps are off. */
        const struct agent_services *(*services)(void *userdata);
        /* Start (on) or end the node's drain; returns the drain object of the answer (loop thread). */
        json_t *(*set_drain)(void *userdata, bool on, struct na_error *err);
};

int control_open(struct loop *loop, struct jobs *jobs, const char *path, const struct control_ops *ops,
                 void *userdata, struct control **ret, struct na_error *err);
void control_close(struct control *c);
