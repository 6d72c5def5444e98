/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Talking to a running nodeagent-monitor (monitor/): its socket dir/monitor.sock and
 * the messages on it. The agent's console sessions, the app driver and the monitor
 * itself share this format; the spawn of a monitor is the app driver's
 * (drivers/app/oci/app-monitor.h).
 *
 * Wire format on monitor.sock (one message per packet, no terminator):
 *   client → monitor   L<text>   a console line: text + "\n" to the container's stdin
 *                      S<text>   a system line into the ring
 *   monitor → client   K         the last L/S was accepted
 *                      E<reason> it was refused (stdin closed, its 64 KiB buffer full, bad text)
 *                      O<seq>    new output: the next seq the ring will write (coalesced;
 *                                also sent on connect)
 *                      R         the started pattern matched (also on connect when it had)
 *                      X<code> <signal>  the container ended (code 128+S when killed by S);
 *                                the monitor then closes every connection and exits
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* A non-blocking, close-on-exec connection to dir/monitor.sock (INVALID_STATE when no monitor listens). */
int app_monitor_connect(const char *dir, int *ret_fd, struct na_error *err);

/*
 * Send one L (text at most 4096 bytes) or S (at most 8192) message on a connection
 * (non-blocking; -EAGAIN, no error set, when the socket is full). The answer (K or E)
 * arrives on the connection among the notifications.
 */
int app_monitor_send(int fd, char type, const char *text, size_t len, struct na_error *err);

/*
 * One round trip on a fresh connection: send the console line (at most 4096 bytes,
 * no NUL or newline: VALIDATION_ERROR on "line") and wait up to 2 s for the answer.
 * A refusal is INVALID_STATE with the monitor's reason.
 */
int app_monitor_send_line(const char *dir, const char *line, struct na_error *err);
/* The same for a system line in the ring (the agent may also use app_ring_append_once). */
int app_monitor_send_system(const char *dir, const char *text, struct na_error *err);

enum app_monitor_msg_type {
        APP_MONITOR_MSG_OUTPUT = 'O',
        APP_MONITOR_MSG_STARTED = 'R',
        APP_MONITOR_MSG_EXIT = 'X',
        APP_MONITOR_MSG_ACK = 'K',
        APP_MONITOR_MSG_REFUSED = 'E',
};

struct app_monitor_msg {
        enum app_monitor_msg_type type;
        uint64_t next_seq;   /* OUTPUT */
        int exit_code;       /* EXIT */
        int exit_signal;     /* EXIT, 0 when it exited by itself */
        char reason[256];    /* REFUSED */
};

/* Parse one packet read from the monitor (-EBADMSG and an error for anything else). */
int app_monitor_parse_message(const void *buf, size_t len, struct app_monitor_msg *ret, struct na_error *err);
