/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Live consoles of a running server (drivers/vm.h console_open), as one non-blocking
 * descriptor the agent's loop watches:
 *
 *   serial  the serial port's pty (from the live domain XML), opened non-blocking
 *           and raw: qemu's own end of the guest's first serial port.
 *   vnc     virDomainOpenGraphicsFD(): the display's own connection, RFB as it is.
 */
#include "drivers/vm/vm-libvirt-internal.h"

#include <errno.h>
#include <stdio.h>
#include <termios.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The value of attribute attr in the first <elem ...> between from and to (newly allocated). */
static char *xml_attr(const char *from, const char *to, const char *elem, const char *attr)
{
        char tag[32], key[32];
        snprintf(tag, sizeof(tag), "<%s ", elem);
        snprintf(key, sizeof(key), " %s='", attr);
        const char *t = strstr(from, tag);
        if (!t || t >= to)
                return NULL;
        const char *end = strchr(t, '>');
        const char *k = strstr(t, key);
        if (!end || !k || k > end)
                return NULL;
        k += strlen(key);
        const char *q = strchr(k, '\'');
        return q && q < end ? strndup(k, (size_t)(q - k)) : NULL;
}

static int not_running(virDomainPtr dom, const char *id, struct na_error *err)
{
        int active = virDomainIsActive(dom);
        if (active == 1)
                return 0;
        if (active < 0)
                return vm_virt_error(err, id, "console");
        na_error_set(err, EINVAL, NA_E_INVALID_STATE, "vps %s: not running; a console needs a running server", id);
        na_error_detail(err, "state", json_string("stopped"));
        return -EINVAL;
}

/*
 * The serial port's pty, from the live XML, opened raw. (virDomainOpenConsole on a
 * non-blocking virStream was tried first: with libvirt 9.0 here its stream reported
 * end-of-file right after the first virStreamSend, so the console died at the first
 * key; the agent runs on the node, beside qemu, and the pty is the same device.)
 */
static int serial_open(virDomainPtr dom, const char *id, int *ret_fd, struct na_error *err)
{
        _cleanup_free_ char *xml = virDomainGetXMLDesc(dom, 0);
        if (!xml)
                return vm_virt_error(err, id, "live domain XML");
        const char *serial = strstr(xml, "<serial ");
        const char *serial_end = serial ? strstr(serial, "</serial>") : NULL;
        _cleanup_free_ char *type = serial_end ? xml_attr(serial, serial_end, "serial", "type") : NULL;
        _cleanup_free_ char *path = serial_end ? xml_attr(serial, serial_end, "source", "path") : NULL;
        if (!type || !streq(type, "pty") || !path || strncmp(path, "/dev/pts/", 9) != 0) {
                na_error_set(err, ENOTSUP, NA_E_DRIVER, "vps %s: the serial port is not a pty", id);
                na_error_detail(err, "reason", json_string("no pty serial port"));
                return -ENOTSUP;
        }
        int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return na_error_sys(err, errno, "vps %s: open the serial console %s", id, path);
        struct termios tio;
        if (tcgetattr(fd, &tio) == 0) {
                cfmakeraw(&tio); /* bytes as they are, both ways */
                tcsetattr(fd, TCSANOW, &tio);
        }
        *ret_fd = fd;
        return 0;
}

int vm_libvirt_console_open(struct vm_conn *c, const char *id, enum vm_console_kind kind, int *ret_fd,
                            struct na_error *err)
{
        virConnectPtr conn = NULL;
        _cleanup_virdom_ virDomainPtr dom = NULL;
        int r = vm_domain_get2(c, id, &conn, &dom, err);
        if (r < 0)
                return r;
        r = not_running(dom, id, err);
        if (r >= 0 && kind == VM_CONSOLE_SERIAL)
                r = serial_open(dom, id, ret_fd, err);
        else if (r >= 0) {
                int fd = virDomainOpenGraphicsFD(dom, 0, VIR_DOMAIN_OPEN_GRAPHICS_SKIPAUTH);
                if (fd < 0)
                        r = vm_virt_error(err, id, "open the VNC display");
                else {
                        fcntl(fd, F_SETFD, FD_CLOEXEC);
                        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                        *ret_fd = fd;
                }
        }
        virConnectClose(conn);
        return r;
}
