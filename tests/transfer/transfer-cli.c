/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The transfer client (transfer/transfer.h) from the command line, for
 * tests/transfer/test_transfer.py against the test object store:
 *
 *   transfer-cli get|put TRANSFER_JSON FILE [--ca F] [--insecure] [--part-size BYTES]
 *                [--retries N] [--backoff-ms N] [--cancel-after-ms N] [--decode-now-ms N]
 *
 * TRANSFER_JSON is the `transfer` object as the central API sends it (decoded with
 * proto_transfer_decode at --decode-now-ms, default now). Prints the result
 * {bytes, sha256, parts?} or the agent API failure object, one JSON line, and the
 * progress lines on stderr; exits 0 or 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "transfer/transfer.h"

static uint64_t cancel_at_us;
static unsigned stages;

static void on_stage(void *userdata, const char *stage, int percent, const char *message)
{
        (void)userdata;
        stages++;
        fprintf(stderr, "progress %s %d %s\n", stage, percent, message ? message : "");
}

static int on_checkpoint(void *userdata, struct na_error *err)
{
        (void)userdata;
        if (cancel_at_us && na_now_mono_us() >= cancel_at_us)
                return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "cancelled by the test");
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 4) {
                fprintf(stderr, "usage: transfer-cli get|put TRANSFER_JSON FILE [options]\n");
                return 2;
        }
        bool put = strcmp(argv[1], "put") == 0;
        struct transfer_options o = { 0 };
        int64_t now = (int64_t)na_now_real_ms();
        for (int i = 4; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (!strcmp(a, "--insecure"))
                        o.allow_insecure_http = true;
                else if (v && !strcmp(a, "--ca"))
                        o.ca_file = v, i++;
                else if (v && !strcmp(a, "--part-size"))
                        o.part_size = strtoull(v, NULL, 10), i++;
                else if (v && !strcmp(a, "--retries"))
                        o.retries = (unsigned)atoi(v), i++;
                else if (v && !strcmp(a, "--backoff-ms"))
                        o.backoff_ms = (unsigned)atoi(v), i++;
                else if (v && !strcmp(a, "--cancel-after-ms"))
                        cancel_at_us = na_now_mono_us() + strtoull(v, NULL, 10) * 1000, i++;
                else if (v && !strcmp(a, "--decode-now-ms"))
                        now = strtoll(v, NULL, 10), i++;
                else {
                        fprintf(stderr, "transfer-cli: unknown option %s\n", a);
                        return 2;
                }
        }
        json_error_t jerr;
        json_t *tj = json_loads(argv[2], 0, &jerr);
        struct na_error err = NA_ERROR_INIT;
        struct proto_transfer *t = NULL;
        struct transfer_result res = { 0 };
        struct na_progress progress = { .stage = on_stage, .checkpoint = on_checkpoint };
        int r = proto_transfer_decode(tj, "transfer", put ? "PUT" : "GET", now, &t, &err);
        json_decref(tj);
        if (r >= 0) {
                int fd = put ? open(argv[3], O_RDONLY | O_CLOEXEC) : open(argv[3], O_RDWR | O_CREAT | O_CLOEXEC, 0644);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0)
                        r = na_error_sys(&err, errno, "open %s", argv[3]);
                else if (put)
                        r = transfer_put(&o, t, fd, (uint64_t)st.st_size, &progress, &res, &err);
                else
                        r = transfer_get(&o, t, fd, &progress, &res, &err);
                if (fd >= 0)
                        close(fd);
        }
        json_t *out;
        if (r < 0)
                out = na_error_to_json(&err);
        else {
                out = json_pack("{s:I, s:s, s:I}", "bytes", (json_int_t)res.bytes, "sha256", res.sha256, "stages",
                                (json_int_t)stages);
                if (res.n_etags)
                        json_object_set_new(out, "parts", proto_transfer_parts_encode(res.etags, res.n_etags));
        }
        char *s = json_dumps(out, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(out);
        transfer_result_clear(&res);
        proto_transfer_free(t);
        na_error_clear(&err);
        return r < 0 ? 1 : 0;
}
