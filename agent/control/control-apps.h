/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The control socket's app requests (agent/control/control.c hands them here):
 *   {"cmd":"apps"}  -> {"ok":true,"apps":[{id, name?, state, startedAt, exitCode, restarts, memoryMB,
 *                                          volumeUsedMB} | {id, name?, state, error:{code, message}}]}
 *   {"cmd":"logs","app":UUID,"sinceSeq":N?,"limit":N?}
 *                   -> {"ok":true,"lines":[{seq, ts, stream, text}],"nextSeq":N}
 * The driver calls do file I/O and spawn the runtime, so they run on a small thread
 * pool of this module's own; each answer comes back to the loop through an eventfd
 * and goes to the connection that asked (answer_fn), if it is still there. Failures
 * answer {"ok":false,"error":MESSAGE,"code":CODE,"details":<failure object>}.
 *
 *   control_apps_new(loop, deliver, c, &ca, &err);
 *   json_t *refused = control_apps_submit(ca, conn_id, services, "logs", req);
 *   if (refused) send it now; else deliver(c, conn_id, answer) follows on the loop thread.
 *   control_apps_free(ca);   // waits for the driver calls under way
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "agent/base/loop.h"
#include "common/error.h"

struct agent_services;
struct control_apps;

/* Loop thread: the answer to a request of connection conn_id (borrowed). */
typedef void (*control_apps_answer_fn)(void *userdata, uint64_t conn_id, json_t *answer);

int control_apps_new(struct loop *loop, control_apps_answer_fn answer, void *userdata, struct control_apps **ret,
                     struct na_error *err);
/*
 * Waits for the driver calls under way (an apps listing stops between two apps), at
 * most 5 s: a thread still stuck in the driver then is left to the process exit
 * with what it uses. Answers not delivered yet are dropped. NULL-safe.
 */
void control_apps_free(struct control_apps *ca);

/* True for the commands this module answers ("apps", "logs"). */
bool control_apps_handles(const char *cmd);
/*
 * Loop thread: check req and queue it for s->app. Returns NULL when queued (the
 * answer follows through answer_fn), else the answer to send at once (a new
 * reference): apps off (s or s->app NULL: "apps are not enabled on this node: " and
 * s->apps_off_reason), an invalid request, too many requests under way.
 */
json_t *control_apps_submit(struct control_apps *ca, uint64_t conn_id, const struct agent_services *s,
                            const char *cmd, json_t *req);
