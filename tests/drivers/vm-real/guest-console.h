/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The first serial port of a running guest, read by the test: the test guest
 * (guest.sh) prints "NODEAGENT-GUEST-UP boot=<boot id> uptime=<s>" there once per
 * boot. The port is found in the live domain XML: a <log file=...> of the serial
 * device or a file-backed serial is followed like tail -f; otherwise the pty
 * (<source path='/dev/pts/N'/>) is opened and read directly. Either way a thread
 * collects everything the guest prints. A pty ends with its qemu process (waits
 * then answer -EPIPE); a log file is followed until the console is closed.
 * Test code: it uses libvirt directly, which the job layer never does.
 */
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdbool.h>
#include <stddef.h>

#define VMR_BOOT_ID_LEN 36
#define VMR_MAX_BOOTS 32

/* Boot ids seen so far, across every qemu process of the server. */
struct vmr_boots {
        char ids[VMR_MAX_BOOTS][VMR_BOOT_ID_LEN + 1];
        int n;
};
bool vmr_boots_has(const struct vmr_boots *b, const char *id);
void vmr_boots_add(struct vmr_boots *b, const char *id);

struct vmr_console;

/*
 * Start reading the serial console of the running domain. Returns 0, or a negative
 * errno with why in errbuf. *ret_kind says what is read ("pty", "log file", "file").
 */
int vmr_console_open(virDomainPtr dom, struct vmr_console **ret, const char **ret_kind, char *errbuf,
                     size_t errlen);

/*
 * Wait up to timeout_ms for a marker whose boot id is not in seen; copies it to
 * boot_id (not added to seen). 0, -ETIMEDOUT, or -EPIPE when the console ended
 * (the qemu process went away) without one.
 */
int vmr_console_wait_boot(struct vmr_console *c, const struct vmr_boots *seen, unsigned timeout_ms,
                          char boot_id[VMR_BOOT_ID_LEN + 1]);

/* Wait up to timeout_ms until the console has shown text; false when it has not. */
bool vmr_console_wait_text(struct vmr_console *c, const char *text, unsigned timeout_ms);

/* Every marker seen on this console so far is added to b. */
void vmr_console_collect(struct vmr_console *c, struct vmr_boots *b);

/* The file or pty read. */
const char *vmr_console_path(const struct vmr_console *c);

/* The last bytes the guest printed (for failure messages); NUL-terminated. */
void vmr_console_tail(struct vmr_console *c, char *buf, size_t len);

/* Stop the reader and free; NULL-safe. */
void vmr_console_close(struct vmr_console *c);
