/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The systemd notify protocol, written directly to $NOTIFY_SOCKET (no libsystemd). */
#pragma once

#include <stdint.h>

/* Send a state string ("READY=1", "STATUS=..."); a no-op when NOTIFY_SOCKET is unset. */
int notify_send(const char *state);
/* The watchdog interval asked for by the service manager, in microseconds (0 = none). */
uint64_t notify_watchdog_usec(void);
