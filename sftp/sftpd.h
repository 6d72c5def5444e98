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

#include "sftp/sftp-ratelimit.h"

struct app_fs;

struct sftpd_config {
        const char *listen_addr; /* host part of --listen */
        unsigned port;
        const char *users_dir;
        const char *host_key;
        unsigned max_failures, window_sec, block_sec;
        unsigned login_grace_sec;
        unsigned max_sessions;
};

/* What a session reports to the listener over its pipe: one line "F <key>\n" per failure. */
void sftpd_report_failure(int report_fd, const char *key);

/*
 * One connection, in its own process: key exchange, login (password or key against
 * users_dir/<user>.json), then the sftp subsystem served confined. rl is the
 * listener's limiter as it was at fork (a user refused then is refused here). Returns
 * the process' exit code.
 */
int sftpd_session(const struct sftpd_config *cfg, ssh_session session, const char *peer,
                  const struct sftp_ratelimit *rl, int report_fd);

/* At fork, before the key exchange: a deny-list filter (no exec, sockets, mounts, ptrace, ...). */
int sftpd_confine_preauth(char *why, size_t why_len);
/* Drop to uid:gid for good, no new privileges, and load the seccomp allow-list. */
int sftpd_confine(uint32_t uid, uint32_t gid, char *why, size_t why_len);

struct sftpd_stats {
        uint64_t bytes_read, bytes_written;
};
/* Serve SFTP v3 over chan until the client closes; uid_base: ids shown relative to it. */
int sftpd_serve(ssh_session session, ssh_channel chan, struct app_fs *fs, bool read_only, uint32_t uid_base,
                struct sftpd_stats *stats);
