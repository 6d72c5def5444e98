/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-sftpd's parts (sftp/sftpd-*.c): the listener (sftpd-main.c), one session
 * per connection in its own process (sftpd-session.c: key exchange, login, the
 * subsystem request), its confinement (sftpd-confine.c) and the SFTP v3 server over
 * the app's volume (sftpd-sftp.c). Design: docs/app-sftp.md.
 */
#pragma once

#include <libssh/libssh.h>
#include <libssh/server.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/macro.h"

#include "sftp/sftp-admit.h"
#include "sftp/sftp-ratelimit.h"

struct app_fs;

struct sftpd_config {
        const char *listen_addr; /* host part of --listen */
        unsigned port;
        const char *users_dir;
        const char *host_key;
        const char *control;        /* the agent's control socket (sftpd-main.c), or NULL */
        const char *empty_dir;      /* the network half's root: empty, root's (beside the host key) */
        unsigned max_failures, window_sec, block_sec;
        unsigned user_delay_max_sec; /* a user's failures delay its logins up to this, never refuse them */
        unsigned login_grace_sec;    /* from accept to the sftp subsystem */
        unsigned idle_sec;           /* a logged-in session with no traffic is closed after it; 0: never */
        unsigned max_sessions;       /* logged-in sessions */
        unsigned per_source;         /* unauthenticated connections from one source (sftp-admit.h) */
        struct sftp_startups startups; /* unauthenticated connections in all: random early drop */
        unsigned memory_mb;          /* each session process' data (RLIMIT_DATA) */
};

/*
 * What a session reports to the listener over its pipe, one line each, one write:
 * "F <key>\n" per failure, "A <pid> <app id>\n" once logged in (before it checks its
 * credentials file a last time, so the agent's sftpd_end_sessions finds it).
 */
void sftpd_report_failure(int report_fd, const char *key);

/* One line on stderr (the agent's log). */
void sftpd_say(const char *fmt, ...) _printf_(1, 2);

/*
 * One connection, in two processes as in OpenSSH: this one, the monitor
 * (sftpd-monitor.c: root, credentials, the volume, never the network), and the
 * network half it forks (sftpd-session.c: key exchange and login as nobody in a user
 * namespace, an empty root and an allow-list, then the sftp subsystem served as the
 * app's uid over the volume's root fd the monitor hands it). users is the listener's
 * table of users' failures as it was at fork (this process' own copy: its own
 * failures are added to it). Returns the process' exit code.
 */
int sftpd_session(const struct sftpd_config *cfg, ssh_session session, const char *peer,
                  struct sftp_ratelimit *users, int report_fd);
/* The monitor's loop over chan until the network half net is gone; its exit code. */
int sftpd_monitor(const struct sftpd_config *cfg, const char *peer, struct sftp_ratelimit *users, int report_fd,
                  int chan, pid_t net);

/* The monitor, at fork: a deny-list filter (no exec, sockets, mounts, ptrace, ...). */
int sftpd_confine_preauth(char *why, size_t why_len);
/* The network half, once nobody in its namespaces: dies with the monitor, no new privileges, the allow-list. */
int sftpd_confine_net(char *why, size_t why_len);
/* Drop to uid:gid for good, no capabilities, no new privileges, and load the session's allow-list. */
int sftpd_confine(uint32_t uid, uint32_t gid, char *why, size_t why_len);

struct sftpd_stats {
        uint64_t bytes_read, bytes_written;
};
/*
 * Serve SFTP v3 over chan until the client closes; uid_base: ids shown relative to it.
 * The replies buffered stay under about 1 MiB (requests wait while the client does not
 * read); idle_sec > 0 arms alarm() before each read and after each bit sent, so a
 * session with no request and no reply taken for that long gets SIGALRM.
 */
int sftpd_serve(ssh_session session, ssh_channel chan, struct app_fs *fs, bool read_only, uint32_t uid_base,
                unsigned idle_sec, struct sftpd_stats *stats);
