#include "common/journal-writer.h"

#include <pthread.h>
#include <stdio.h>

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
        int error;            /* sticky: once the journal failed, later records are not trusted */
        uint64_t error_from;  /* the first ticket of the batch that failed */
        char error_text[256];
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
                uint64_t batch_first = batch->ticket; /* where a failure's range begins */
                bool dirty = false;
                for (struct op *o = batch, *next; o; o = next) {
                        next = o->next;
                        struct na_error err = NA_ERROR_INIT;
                        if (o->data) {
                                if (na_journal_append(w->journal, o->data, o->len, &err) < 0)
                                        set_error(w, batch_first, &err);
                                else {
                                        appended++;
                                        dirty = true;
                                }
                                free(o->data);
                        } else {
                                /* Appends before a rewrite are durable before it replaces the file. */
                                if (dirty && na_journal_sync(w->journal, &err) < 0)
                                        set_error(w, batch_first, &err);
                                syncs += dirty;
                                dirty = false;
                                na_error_clear(&err);
                                if (na_journal_rewrite(w->journal, o->emit, o->userdata, &err) < 0)
                                        set_error(w, batch_first, &err);
                                else
                                        rewrites++;
                                if (o->done)
                                        o->done(o->userdata);
                        }
                        na_error_clear(&err);
                        last = o->ticket ? o->ticket : last;
                        free(o);
                }
                if (dirty) {
                        struct na_error err = NA_ERROR_INIT;
                        if (na_journal_sync(w->journal, &err) < 0)
                                set_error(w, batch_first, &err);
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

int na_journal_writer_wait(struct na_journal_writer *w, uint64_t ticket, struct na_error *err)
{
        if (ticket == 0)
                return na_error_sys(err, ENOMEM, "journal %s: queue a record", na_journal_path(w->journal));
        pthread_mutex_lock(&w->lock);
        while (w->durable_ticket < ticket && !w->error)
                pthread_cond_wait(&w->durable, &w->lock);
        int r = 0;
        if (w->error && ticket >= w->error_from)
                r = na_error_set(err, w->error, NA_E_INTERNAL, "%s", w->error_text);
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
