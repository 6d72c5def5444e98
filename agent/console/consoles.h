/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live console sessions (AGENT-API 4.3, docs/consoles.md): each one a WebSocket the
 * agent dialled out to a relay (agent/console/ws.h), bridged to its target (an app's output
 * and console, a server's serial console or VNC display). All sessions
 * live on the loop: no thread per session.
 *
 *   consoles_new(&opt, &c, &err);                     // daemon, after the job layer
 *   consoles_open(c, ctx, target_type, target_id, params, &data, &err);  // console.open (worker)
 *   consoles_close(c, "sid", &err);                   // console.close (worker)
 *   consoles_close_all(c, "agent-draining");          // loop: the drain
 *   consoles_status_json(c);  consoles_count(c);      // loop: nodeagentctl status
 *   consoles_free(c);
 *
 * Modes: app (console-app.c), vps-serial and vps-vnc (console-vps.c), files (live file
 * editing of one file of an app's volume, console-files.c).
 *
 * A session ends on console.close, after idleSec without input, when its target is
 * deleted (or, mode files, its file access is turned off), when the agent drains, or when the relay closes it; each time with a close
 * frame carrying the reason and a console.closed event {sessionId, reason}.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "agent/base/loop.h"
#include "agent/console/ws.h"
#include "common/error.h"
#include "proto/console.h"
#include "proto/job.h"

struct consoles;
struct jobs;
struct agent_services;

struct consoles_options {
        struct loop *loop;
        struct jobs *jobs;                     /* power actions from app consoles run here */
        const struct agent_services *services; /* drivers and emit_event */
        unsigned max_per_target, max_sessions; /* [consoles] */
        struct ws_tls tls;                     /* as the controller link's */
        bool allow_insecure_http;              /* ws:// to loopback */
        const char *controller_url;            /* [controller] url: its host may be dialled */
        const char *relays;                    /* [consoles] relays: other hosts that may be */
};

int consoles_new(const struct consoles_options *opt, struct consoles **ret, struct na_error *err);
/* Loop thread, after the loop stopped: sessions are dropped without events. */
void consoles_free(struct consoles *c);

/*
 * Worker thread (console.open): check the target and the bounds, dial, hand the
 * session to the loop and return {sessionId, openedAt}. A sessionId in use or used
 * before: 409 INVALID_STATE (details.state "open" or "closed"); too many sessions:
 * 409 INVALID_STATE (details.state "console-limit"); the relay unreachable, refusing
 * TLS or the upgrade: 502 DRIVER_ERROR (details.reason).
 */
int consoles_open(struct consoles *c, ws_checkpoint_fn checkpoint, void *cp, enum proto_target_type target_type,
                  const char *target_id, const struct proto_console_open *p, json_t **ret, struct na_error *err);
/* Worker thread (console.close): converges; closing an unknown or closed session succeeds. */
int consoles_close(struct consoles *c, const char *session_id, struct na_error *err);
/* Loop thread: end every session with reason (the drain). */
void consoles_close_all(struct consoles *c, const char *reason);
/*
 * Any thread but the loop's: end every live file editing session (mode files) of app_id
 * with reason ("target-deleted", "file-access-disabled") and release what they hold of
 * its volume before returning (waits for the loop, at most a few seconds; a session
 * still being dialled lets go of it when its dial ends). The app driver calls it
 * (drivers/app.h, on_files_off) before it unmounts a volume or turns file access off.
 */
void consoles_files_end(struct consoles *c, const char *app_id, const char *reason);
/* Loop thread: the sessions alive (including those being dialled or closing). */
unsigned consoles_count(struct consoles *c);
/* Loop thread: [{sessionId, mode, target, peer, state, openedAt, idleSec, framesOut, bytesOut, framesIn, dropped}]. */
json_t *consoles_status_json(struct consoles *c);
