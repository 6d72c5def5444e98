/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The agent's side of nodeagent-sftpd (docs/app-sftp.md): where the credentials files
 * live, what app.sftp.set answers (host, port), and a supervisor thread that starts
 * the daemon when apps are on and [apps] sftp_listen is not empty (with the [apps]
 * sftp_* limits), starts it again with backoff (1 s doubling to 60 s) when it exits,
 * and stops it at shutdown; the control socket that ends an app's sessions. Its
 * stderr is the agent's, so its one-line logs land in the agent's log.
 *
 *   struct agent_sftpd *d;
 *   agent_sftpd_start(cfg, "/usr/libexec/nodeagent/nodeagent-sftpd", &d, &err);   (d NULL when off)
 *   agent_sftpd_stop(d);
 */
#pragma once

#include <stddef.h>

#include "common/error.h"

struct agent_config;
struct agent_sftpd;
struct agent_services;

/* <storage_dir>/sftp/users into buf (storage_dir defaults to <state_dir>/apps). */
int agent_sftp_users_dir(const struct agent_config *cfg, char *buf, size_t len);
/* The port of [apps] sftp_listen; 0 when SFTP is off. */
unsigned agent_sftp_port(const struct agent_config *cfg);
/* [apps] sftp_host, else the node's host name, into buf. */
void agent_sftp_host(const struct agent_config *cfg, char *buf, size_t len);

int agent_sftpd_start(const struct agent_config *cfg, const char *binary, struct agent_sftpd **ret,
                      struct na_error *err);
void agent_sftpd_stop(struct agent_sftpd *d); /* NULL-safe */

/* <state_dir>/sftp/control.sock: nodeagent-sftpd's control socket. */
int agent_sftp_control_path(const struct agent_config *cfg, char *buf, size_t len);
/*
 * End every open SFTP session of app_id at once (app.sftp.set, app.delete): the
 * listener kills and reaps them before it answers, so their files are closed when
 * this returns. The number of sessions ended; 0 when SFTP is off or no listener runs.
 */
int agent_sftp_end_sessions(const struct agent_config *cfg, const char *app_id, struct na_error *err);

/* app.delete: remove the app's credentials file and end its sessions (agent/kinds/kind-app-sftp.c); 0 when it had none. */
int agent_app_sftp_forget(const struct agent_services *s, const char *app_id, struct na_error *err);
