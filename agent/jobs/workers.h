/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A small pool of threads for blocking work; the loop never blocks. */
#pragma once

#include "common/error.h"

struct workers;
typedef void (*work_fn)(void *userdata);

int workers_new(unsigned threads, struct workers **ret, struct na_error *err);
/* Grow the pool to at least threads (it never shrinks while running). */
int workers_grow(struct workers *w, unsigned threads, struct na_error *err);
int workers_submit(struct workers *w, work_fn fn, void *userdata);
/* Stop taking work and let idle threads exit; join them when join is true. */
void workers_free(struct workers *w, bool join);
