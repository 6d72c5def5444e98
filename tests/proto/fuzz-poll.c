/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the poll scanner (proto/poll.h): the input is a poll answer
 * split job by job, each span checked to lie inside the input; and the id recovery
 * from a job's text, an answer's head and its tail. Nothing may crash, read outside
 * the input, or return an id that could not be answered.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/poll.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long splits, recovered;

static void check_id(bool found, const char *id)
{
        if (!found)
                return;
        recovered++;
        if (!proto_id_answerable(id)) {
                fprintf(stderr, "recovered an id that cannot be answered: '%s'\n", id);
                abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* A private copy without a terminating NUL: reads past the end are caught. */
        char *text = malloc(size ? size : 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        bool success;
        struct proto_span *spans = NULL;
        size_t n = 0;
        struct na_error err = NA_ERROR_INIT;
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;
        if (proto_poll_split(text, size, &success, &spans, &n, &err) == 0) {
                splits++;
                for (size_t i = 0; i < n; i++) {
                        if (spans[i].off > size || spans[i].len > size - spans[i].off) {
                                fprintf(stderr, "span %zu outside the input\n", i);
                                abort();
                        }
                        check_id(proto_job_recover(text + spans[i].off, spans[i].len, id, &attempt), id);
                }
        }
        free(spans);
        na_error_clear(&err);
        check_id(proto_poll_recover_head(text, size, id, &attempt), id);
        check_id(proto_poll_recover_tail(text, size, id, &attempt), id);
        free(text);
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "poll answers split: %lu, ids recovered: %lu\n", splits, recovered);
        return splits && recovered ? 0 : 1;
}
