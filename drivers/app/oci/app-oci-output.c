/* SPDX-License-Identifier: GPL-2.0-or-later */
/* app.output of the crun driver (drivers/app.h output): lines of the app's output ring (ring/app-ring.h) since a seq. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "drivers/app/oci/app-oci-internal.h"
#include "drivers/app/net/app-net.h"
#include "volume/volume.h"
#include "drivers/app/oci/app-oci-spec.h"
#include "ring/app-ring.h"
#include "drivers/app/oci/app-rootfs.h"
#include "drivers/app/oci/app-volume.h"

struct lines {
        struct proto_app_line *v;
        size_t n, cap;
        char **texts;
};

static int collect(const struct app_ring_line *l, void *userdata)
{
        struct lines *ls = userdata;
        if (ls->n == ls->cap) {
                size_t cap = ls->cap ? ls->cap * 2 : 64;
                struct proto_app_line *v = realloc(ls->v, cap * sizeof(*v));
                char **t = realloc(ls->texts, cap * sizeof(*t));
                if (v)
                        ls->v = v;
                if (t)
                        ls->texts = t;
                if (!v || !t)
                        return -ENOMEM;
                ls->cap = cap;
        }
        char *copy = malloc(l->len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, l->text, l->len + 1);
        ls->texts[ls->n] = copy;
        ls->v[ls->n++] = (struct proto_app_line){ .seq = (int64_t)l->seq, .ts_ms = l->ts_ms,
                                                 .stream = l->stream == APP_RING_STDERR   ? PROTO_APP_STDERR
                                                           : l->stream == APP_RING_SYSTEM ? PROTO_APP_SYSTEM
                                                                                          : PROTO_APP_STDOUT,
                                                 .text = copy,
                                                 .len = l->len };
        return 0;
}

int app_oci_output(struct app_conn *c, const char *id, int64_t since_seq, int64_t limit, json_t **ret,
                   struct na_error *err)
{
        struct app *a = app_get(c, id, err);
        if (!a)
                return -ENOENT;
        struct lines ls = { 0 };
        uint64_t next = 0;
        int r = app_ring_read(a->dir, since_seq < 0 ? 0 : (uint64_t)since_seq, (size_t)limit,
                              since_seq < 0 ? APP_RING_TAIL : 0, collect, &ls, &next, err);
        if (r == -ENOMEM && !na_error_is_set(err))
                r = na_error_sys(err, ENOMEM, "app %s: output", id);
        if (r >= 0 && !(*ret = proto_app_output_encode(ls.v, ls.n, (int64_t)next)))
                r = na_error_sys(err, ENOMEM, "app %s: output", id);
        for (size_t i = 0; i < ls.n; i++)
                free(ls.texts[i]);
        free(ls.texts);
        free(ls.v);
        return r < 0 ? na_error_prefix(err, "app %s: output", id) : 0;
}
