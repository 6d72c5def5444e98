/* SPDX-License-Identifier: GPL-2.0-or-later */
/* qemu-img's -p output read as it comes: see vm-util.h. */
#include "drivers/vm/vm-util.h"

#include <stdlib.h>

int vm_qemu_progress_feed(struct vm_qemu_progress *q, const char *data, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char c = data[i];
                if (c == '(') {
                        q->in = true;
                        q->len = 0;
                } else if (q->in && ((c >= '0' && c <= '9') || c == '.') && q->len + 1 < sizeof(q->num)) {
                        q->num[q->len++] = c;
                } else if (q->in && c == '/' && q->len > 0) {
                        q->num[q->len] = '\0';
                        long pct = strtol(q->num, NULL, 10); /* the whole part: "12.67" is 12 */
                        q->percent = pct < 0 ? 0 : pct > 100 ? 100 : (int)pct;
                        q->in = false;
                } else {
                        q->in = false;
                }
        }
        return q->percent;
}
