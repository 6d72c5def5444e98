/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The exec helper ("spawnd"): a small single-threaded child forked very early, before
 * any thread and before the seccomp filter, that runs programs for the agent. A filter
 * is inherited across fork and execve; the agent's strict allow-list fits the agent
 * only, so what it starts (crun and the containers through nodeagent-monitor, HAProxy,
 * qemu-img, nodeagent-sftpd) is started by this helper, which keeps the state
 * from before the filter.
 *
 * Use: na_spawnd_start() once, early, from a single-threaded process; then
 * na_spawnd_active() says whether it runs, and na_spawnd_spawn() (any thread) runs a
 * program and gives its pid and a handle (an fd) from which na_spawnd_wait() reads
 * its exit status. A program started with NA_SPAWND_DETACH is forked twice (so it is
 * nobody's child, as the app monitor wants) and has no status to wait for.
 *
 * Wire (SOCK_SEQPACKET): a request is one message, struct na_spawnd_hdr then the
 * strings path, argv[0..argc-1], envp[0..envc-1], each NUL-terminated, with fds by
 * SCM_RIGHTS: first the reply socket, then the nfds descriptors that become the
 * program's 0..nfds-1. On the reply socket the helper sends a struct na_spawnd_reply
 * {error, pid}, then (not detached) {0, wait status} when the program has ended, and
 * closes it. Every request is validated (na_spawnd_decode) before anything is run.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define NA_SPAWND_MAGIC 0x4e415350u /* "NASP" */
#define NA_SPAWND_SETPGROUP 1u      /* the program leads a new process group */
#define NA_SPAWND_DETACH 2u         /* double fork: reparented, no status */
#define NA_SPAWND_FLAGS (NA_SPAWND_SETPGROUP | NA_SPAWND_DETACH)
#define NA_SPAWND_MAX_ARGS 256
#define NA_SPAWND_MAX_ENV 64
#define NA_SPAWND_MAX_FDS 8 /* descriptors given to the program (0..7) */
#define NA_SPAWND_MAX_MSG 65536

struct na_spawnd_hdr {
        uint32_t magic, flags, argc, envc, nfds, strings_len;
};

struct na_spawnd_reply {
        int32_t error; /* errno; 0: value is valid */
        int32_t value; /* first reply: the pid; second: the wait status */
};

/* What a caller asks for: fds[i] becomes the program's descriptor i (nfds >= 3). */
struct na_spawnd_cmd {
        const char *path; /* absolute */
        char *const *argv;
        char *const *envp;
        const int *fds;
        unsigned nfds;
        unsigned flags;
};

/* A decoded request: pointers into the message buffer. */
struct na_spawnd_req {
        unsigned flags, nfds;
        const char *path;
        char *argv[NA_SPAWND_MAX_ARGS + 1];
        char *envp[NA_SPAWND_MAX_ENV + 1];
};

/* Pure: the message for c into buf; -E2BIG when it does not fit, -EINVAL when c is invalid. */
int na_spawnd_encode(const struct na_spawnd_cmd *c, char *buf, size_t cap, size_t *ret_len);
/* Pure: check a message of len bytes that came with nfds_received program descriptors;
 * -EINVAL (malformed) or -E2BIG (over a limit) and req untouched on refusal. */
int na_spawnd_decode(char *buf, size_t len, unsigned nfds_received, struct na_spawnd_req *req);

/* Fork the helper (the process must be single-threaded). *ret_pid: its pid. */
int na_spawnd_start(pid_t *ret_pid, struct na_error *err);
bool na_spawnd_active(void);
/* The helper's pid (to watch it), or 0. */
pid_t na_spawnd_pid(void);
/* Run c through the helper: *ret_pid and, unless detached, *ret_handle (close it). */
int na_spawnd_spawn(const struct na_spawnd_cmd *c, pid_t *ret_pid, int *ret_handle, struct na_error *err);
/* Block until the program behind handle ends: *ret_status as from waitpid. -errno. */
int na_spawnd_wait(int handle, int *ret_status);
