/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "common/journal-writer.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * Failures are not sticky when the journal stays whole: a record that could not be
 * appended was cut off again (na_journal_append), and a batch whose fdatasync failed is
 * cut off back to where it began and synced again. Only the tickets of what failed
 * fail, with the reason; a full disk that gets space back recovers by itself. When the
 * journal cannot be put back whole (the cut or its sync fails too), the error is
 * sticky as before: later records are not trusted.
 */
#define FAILED_MAX 64 /* failure episodes remembered for waiters (contiguous tickets merge) */

struct op {
        char *data; /* an append, or NULL for a rewrite */
        size_t len;
        na_journal_emit_fn emit;
        void (*done)(void *userdata);
        void *userdata;
        uint64_t ticket;
        struct op *next;
};

struct na_journal_writer {
        struct na_journal *journal;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t work, durable;
        struct op *head, *tail;
        uint64_t next_ticket, durable_ticket;
        int error;            /* sticky: the journal could not be put back whole, later records are not trusted */
        uint64_t error_from;  /* the first ticket of the batch that failed */
        char error_text[256];
        struct failed {
                uint64_t from, to; /* tickets [from, to] failed, the journal whole without them */
                int errnum;
                char text[256];
        } failed[FAILED_MAX];
        size_t n_failed, next_failed;
        bool stopping;
        struct na_journal_writer_stats stats;
};

static void set_error(struct na_journal_writer *w, uint64_t batch_first, const struct na_error *err)
{
        pthread_mutex_lock(&w->lock);
        if (!w->error) {
                w->error_from = batch_first;
                w->error = err->errnum ? err->errnum : EIO;
                snprintf(w->error_text, sizeof(w->error_text), "%s", err->message);
        }
        pthread_mutex_unlock(&w->lock);
}

/* Tickets [from, to] failed with err, and the journal is whole without them. */
static void set_failed(struct na_journal_writer *w, uint64_t from, uint64_t to, const struct na_error *err)
{
        if (!from || to < from)
                return;
        pthread_mutex_lock(&w->lock);
        int e = err->errnum ? err->errnum : EIO;
        struct failed *last = w->n_failed ? &w->failed[(w->next_failed + FAILED_MAX - 1) % FAILED_MAX] : NULL;
        if (last && last->to + 1 >= from && last->errnum == e) {
                if (to > last->to)
                        last->to = to;
        } else {
                struct failed *f = &w->failed[w->next_failed];
                w->next_failed = (w->next_failed + 1) % FAILED_MAX;
                if (w->n_failed < FAILED_MAX)
                        w->n_failed++;
                *f = (struct failed){ .from = from, .to = to, .errnum = e };
                snprintf(f->text, sizeof(f->text), "%s", err->message);
        }
        w->stats.failed += to - from + 1;
        pthread_mutex_unlock(&w->lock);
}

/* A batch's sync failed: cut the journal back to before its appends and sync again. */
static void cut_back(struct na_journal_writer *w, uint64_t size0, uint64_t from, uint64_t to,
                     const struct na_error *why)
{
        struct na_error err = NA_ERROR_INIT;
        if (!na_journal_whole(w->journal) || na_journal_truncate(w->journal, size0, &err) < 0 ||
            na_journal_sync(w->journal, &err) < 0)
                set_error(w, from, &err);
        else
                set_failed(w, from, to, why);
        na_error_clear(&err);
}

static void *writer_main(void *arg)
{
        struct na_journal_writer *w = arg;
        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!w->head && !w->stopping)
                        pthread_cond_wait(&w->work, &w->lock);
                if (!w->head)
                        break;
                struct op *batch = w->head;
                w->head = w->tail = NULL;
                pthread_mutex_unlock(&w->lock);

                uint64_t last = 0, appended = 0, syncs = 0, rewrites = 0;
                /* The appends since the last sync: where the file was, and their tickets. */
                uint64_t seg_size = na_journal_size(w->journal), seg_from = 0, seg_to = 0;
                bool dirty = false;
                for (struct op *o = batch, *next; o; o = next) {
                        next = o->next;
                        struct na_error err = NA_ERROR_INIT;
                        if (o->data) {
                                if (na_journal_append(w->journal, o->data, o->len, &err) < 0) {
                                        if (na_journal_whole(w->journal))
                                                set_failed(w, o->ticket, o->ticket, &err); /* cut off again */
                                        else
                                                set_error(w, o->ticket, &err);
                                } else {
                                        appended++;
                                        if (!seg_from)
                                                seg_from = o->ticket;
                                        seg_to = o->ticket;
                                        dirty = true;
                                }
                                free(o->data);
                        } else {
                                /* Appends before a rewrite are durable before it replaces the file. */
                                if (dirty && na_journal_sync(w->journal, &err) < 0)
                                        cut_back(w, seg_size, seg_from, seg_to, &err);
                                syncs += dirty;
                                dirty = false;
                                na_error_clear(&err);
                                /* A failed rewrite leaves the journal as it was. */
                                if (na_journal_rewrite(w->journal, o->emit, o->userdata, &err) < 0)
                                        set_failed(w, o->ticket, o->ticket, &err);
                                else
                                        rewrites++;
                                if (o->done)
                                        o->done(o->userdata);
                                seg_size = na_journal_size(w->journal);
                                seg_from = seg_to = 0;
                        }
                        na_error_clear(&err);
                        last = o->ticket ? o->ticket : last;
                        free(o);
                }
                if (dirty) {
                        struct na_error err = NA_ERROR_INIT;
                        if (na_journal_sync(w->journal, &err) < 0)
                                cut_back(w, seg_size, seg_from, seg_to, &err);
                        syncs++;
                        na_error_clear(&err);
                }

                pthread_mutex_lock(&w->lock);
                w->stats.appended += appended;
                w->stats.syncs += syncs;
                w->stats.rewrites += rewrites;
                w->stats.file_bytes = na_journal_size(w->journal);
                if (last > w->durable_ticket)
                        w->durable_ticket = last;
                pthread_cond_broadcast(&w->durable);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static uint64_t queue(struct na_journal_writer *w, struct op *o)
{
        pthread_mutex_lock(&w->lock);
        uint64_t ticket = o->ticket = ++w->next_ticket;
        if (w->tail)
                w->tail->next = o;
        else
                w->head = o;
        w->tail = o;
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->lock);
        return ticket; /* not o->ticket: once unlocked, the writer may have freed o */
}

uint64_t na_journal_writer_append(struct na_journal_writer *w, const void *data, size_t len)
{
        struct op *o = calloc(1, sizeof(*o));
        char *copy = malloc(len ? len : 1);
        if (!o || !copy) {
                free(o);
                free(copy);
                return 0;
        }
        memcpy(copy, data, len);
        o->data = copy;
        o->len = len;
        return queue(w, o);
}

int na_journal_writer_rewrite(struct na_journal_writer *w, na_journal_emit_fn emit, void (*done)(void *userdata),
                              void *userdata)
{
        struct op *o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        o->emit = emit;
        o->done = done;
        o->userdata = userdata;
        queue(w, o);
        return 0;
}

/* What a failed ticket tells its waiter: the node's disk when it is full, else the journal's error. */
static int fail_ticket(struct na_error *err, int errnum, const char *text)
{
        if (errnum == ENOSPC || errnum == EDQUOT) {
                int r = na_error_set(err, errnum, NA_E_INVALID_STATE, "the node's state directory is full: %s", text);
                na_error_detail(err, "state", json_string("state-directory-full"));
                na_error_detail(err, "reason", json_string(strerror(errnum)));
                return r;
        }
        return na_error_set(err, errnum, NA_E_INTERNAL, "%s", text);
}

int na_journal_writer_wait(struct na_journal_writer *w, uint64_t ticket, struct na_error *err)
{
        if (ticket == 0)
                return na_error_sys(err, ENOMEM, "journal %s: queue a record", na_journal_path(w->journal));
        pthread_mutex_lock(&w->lock);
        while (w->durable_ticket < ticket && !w->error)
                pthread_cond_wait(&w->durable, &w->lock);
        int r = 0;
        if (w->error && ticket >= w->error_from)
                r = fail_ticket(err, w->error, w->error_text);
        for (size_t i = 0; r == 0 && i < w->n_failed; i++)
                if (ticket >= w->failed[i].from && ticket <= w->failed[i].to)
                        r = fail_ticket(err, w->failed[i].errnum, w->failed[i].text);
        pthread_mutex_unlock(&w->lock);
        return r;
}

int na_journal_writer_flush(struct na_journal_writer *w, struct na_error *err)
{
        pthread_mutex_lock(&w->lock);
        uint64_t ticket = w->next_ticket;
        pthread_mutex_unlock(&w->lock);
        return ticket ? na_journal_writer_wait(w, ticket, err) : 0;
}

void na_journal_writer_get_stats(struct na_journal_writer *w, struct na_journal_writer_stats *out)
{
        pthread_mutex_lock(&w->lock);
        *out = w->stats;
        out->file_bytes = na_journal_size(w->journal);
        pthread_mutex_unlock(&w->lock);
}

int na_journal_writer_start(struct na_journal *j, struct na_journal_writer **ret, struct na_error *err)
{
        struct na_journal_writer *w = calloc(1, sizeof(*w));
        if (!w)
                return na_error_sys(err, ENOMEM, "journal writer");
        w->journal = j;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->work, NULL);
        pthread_cond_init(&w->durable, NULL);
        w->stats.file_bytes = na_journal_size(j);
        int r = pthread_create(&w->thread, NULL, writer_main, w);
        if (r != 0) {
                pthread_cond_destroy(&w->work);
                pthread_cond_destroy(&w->durable);
                pthread_mutex_destroy(&w->lock);
                free(w);
                return na_error_sys(err, r, "journal %s: start writer", na_journal_path(j));
        }
        *ret = w;
        return 0;
}

void na_journal_writer_stop(struct na_journal_writer *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        na_journal_close(w->journal);
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->durable);
        pthread_mutex_destroy(&w->lock);
        free(w);
}
