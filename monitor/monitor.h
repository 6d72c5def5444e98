/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nodeagent-monitor's shared state (internal to monitor/): one running app's
 * container, its stdio pipes, its output ring and the clients of APPDIR/monitor.sock.
 * monitor.c parses the command line and runs the loop; monitor-run.c starts and
 * deletes the container with crun; monitor-io.c turns output into ring lines and
 * feeds stdin; monitor-clients.c serves the socket. The wire format is described in
 * drivers/app/oci/app-monitor.h, the agent's side.
 */
#pragma once

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "ring/app-ring.h"
#include "monitor/monitor-rate.h"

#define MON_CLIENTS_MAX 16
#define MON_STDIN_BUF (64u * 1024u)
#define MON_MSG_MAX (APP_RING_TEXT_MAX + 64u) /* largest client message: 'S' + a ring line, with slack */
#define MON_LINE_MAX 4096u         /* console line text */
#define MON_PARTIAL_FLUSH_MS 100
#define MON_START_TIMEOUT_MS 60000
#define MON_DELETE_TIMEOUT_MS 30000
#define MON_CGROUPS_MAX 4          /* --cgroup directories (one per v1 controller, or one v2 group) */
#define MON_LINES_PER_SEC_DEFAULT 1000u
#define MON_LINES_PER_SEC_MAX 1000000u
#define MON_LINES_BURST_MAX 10000000u

/* epoll tags: kind in the high half, index in the low half. */
enum mon_tag {
        MON_TAG_OUT = 1, /* index 0 stdout, 1 stderr */
        MON_TAG_STDIN,
        MON_TAG_SIGNAL,
        MON_TAG_TIMER,
        MON_TAG_LISTEN,
        MON_TAG_CLIENT, /* index into clients */
};
#define MON_TAG(kind, index) (((uint64_t)(kind) << 32) | (uint32_t)(index))

/* What a client is still owed (sent when its socket has room). */
enum {
        MON_PEND_OUTPUT = 1u << 0,
        MON_PEND_STARTED = 1u << 1,
        MON_PEND_EXIT = 1u << 2,
};

struct mon_client {
        int fd; /* -1 when the slot is free */
        unsigned pending;
};

struct mon_stream {
        int fd; /* read end of the container's stdout/stderr; -1 after EOF */
        enum app_ring_stream stream;
        size_t len; /* bytes of an unfinished line in buf */
        bool after_partial; /* an unfinished line was flushed and nothing came since */
        char buf[APP_RING_TEXT_MAX + 1];
};

struct monitor {
        /* command line */
        const char *dir, *id, *runtime, *runtime_root, *bundle, *started_pattern;
        bool private_cgroup_ns;
        size_t ring_bytes;
        int status_fd;
        uint32_t seccomp_refused; /* what a call off the list gets (monitor-seccomp.h) */
        const char *cgroups[MON_CGROUPS_MAX]; /* joined once the container runs (monitor-run.c) */
        size_t n_cgroups;
        uint32_t lines_per_sec, lines_burst; /* the output bound (monitor-rate.h); 0 per second: none */
        struct mon_rate rate;

        int dirfd, pidfile_fd;
        pid_t delete_pid; /* the delete helper (monitor-run.c), 0 once gone */
        int delete_fd;    /* a byte on it starts `crun delete`; -1 once used */
        struct app_ring *ring;
        pid_t container_pid;
        char memory_cgroup[512]; /* the container's memory cgroup directory, "" when unknown */

        int epfd, sigfd, timerfd, listen_fd;
        bool timer_armed;

        int stdin_fd; /* write end of the container's stdin; -1 once closed */
        size_t stdin_len;
        char *stdin_buf; /* MON_STDIN_BUF bytes */

        struct mon_stream out[2];

        regex_t started_re;
        bool have_re, started;

        uint64_t notified_seq; /* next seq as last announced to clients */
        int exit_code, exit_signal;
        bool exited;
        struct mon_client clients[MON_CLIENTS_MAX];
};

/* monitor.c */
int mon_epoll_mod(struct monitor *m, int op, int fd, uint32_t events, uint64_t tag);

/* monitor-run.c */
int mon_run_container(struct monitor *m, int fd_in, int fd_out, int fd_err, char *errbuf, size_t errlen);
/* Fork the delete helper: it waits on a pipe and becomes `crun delete --force` when told
 * (mon_delete_container), so that the deletion runs without the monitor's seccomp filter. */
int mon_delete_helper_start(struct monitor *m);
int mon_delete_container(struct monitor *m);
void mon_find_memory_cgroup(struct monitor *m);
/* Move the monitor into each --cgroup directory (its cgroup.procs); 0, or -errno and the reason. */
int mon_join_cgroups(struct monitor *m, char *errbuf, size_t errlen);
bool mon_oom_killed(const struct monitor *m);
int mon_write_file(int dirfd, const char *name, const char *text);

/* monitor-io.c */
void mon_output_readable(struct monitor *m, int index);
void mon_output_flush_partial(struct monitor *m); /* the timer: unfinished lines, the drop report */
void mon_output_drain(struct monitor *m);
void mon_system_line(struct monitor *m, const char *text, size_t len);
/* Queue a console line (text + '\n'); NULL or a reason to refuse it. */
const char *mon_stdin_queue(struct monitor *m, const char *text, size_t len);
void mon_stdin_event(struct monitor *m, uint32_t events);

/* monitor-clients.c */
int mon_listen(struct monitor *m, char *errbuf, size_t errlen);
void mon_accept(struct monitor *m);
void mon_client_event(struct monitor *m, int index, uint32_t events);
void mon_notify(struct monitor *m, unsigned what);
void mon_clients_close(struct monitor *m);
