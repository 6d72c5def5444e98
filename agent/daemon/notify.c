/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/daemon/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macro.h"

int notify_send(const char *state)
{
        const char *path = getenv("NOTIFY_SOCKET");
        if (!path || !*path)
                return 0;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(path);
        if (len >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
                return -EINVAL;
        memcpy(sa.sun_path, path, len);
        if (path[0] == '@')
                sa.sun_path[0] = '\0'; /* abstract namespace */
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
                return -errno;
        return 0;
}

uint64_t notify_watchdog_usec(void)
{
        const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
        if (!usec)
                return 0;
        if (pid && strtol(pid, NULL, 10) != (long)getpid())
                return 0;
        return strtoull(usec, NULL, 10);
}
