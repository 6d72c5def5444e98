/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/link/reports.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/journal-writer.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"

struct report {
        int64_t seq;
        char *metrics; /* serialized array */
        char *events;  /* serialized array */
        struct report *next;
};

struct reports {
        struct na_journal_writer *writer;
        struct report *head, *tail; /* oldest first */
        uint64_t pending, metrics_bytes, metrics_dropped, file_records;
        int64_t next_seq;
        bool compaction_queued;

        pthread_mutex_t events_lock;
        json_t *events; /* array, queued for the next report */
};

static void report_free(struct report *rep)
{
        if (!rep)
                return;
        free(rep->metrics);
        free(rep->events);
        free(rep);
}

static void append_report(struct reports *r, struct report *rep)
{
        rep->next = NULL;
        if (r->tail)
                r->tail->next = rep;
        else
                r->head = rep;
        r->tail = rep;
        r->pending++;
        r->metrics_bytes += strlen(rep->metrics);
        if (rep->seq >= r->next_seq)
                r->next_seq = rep->seq + 1;
}

static bool is_empty_array(const char *s)
{
        return streq(s, "[]");
}

/* Drop the metrics of rep; drop rep whole when nothing is left. Returns true if dropped whole. */
static void trim_report(struct reports *r, struct report *rep)
{
        /* "[]" written over the array in place (a JSON array is never shorter), then the
         * buffer replaced by a small one when the allocator has one: nothing here can fail. A strdup("[]") could
         * (gcc -fanalyzer), and its NULL reached strlen() at the next count. The "[]" stays
         * counted, as remove_head() subtracts it. */
        r->metrics_bytes -= strlen(rep->metrics) - 2;
        memcpy(rep->metrics, "[]", 3);
        char *small = strdup("[]"); /* the big buffer goes when a small one can be had */
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* small is stored in rep->metrics, which owns it */
        if (small) {
                free(rep->metrics);
                rep->metrics = small;
        }
}
NA_ANALYZER_FP_END

static void remove_head(struct reports *r)
{
        struct report *rep = r->head;
        r->head = rep->next;
        if (!r->head)
                r->tail = NULL;
        r->pending--;
        r->metrics_bytes -= strlen(rep->metrics);
        report_free(rep);
}

static struct report *find(struct reports *r, int64_t seq)
{
        for (struct report *rep = r->head; rep; rep = rep->next)
                if (rep->seq == seq)
                        return rep;
        return NULL;
}

static void ack_upto(struct reports *r, int64_t seq)
{
        while (r->head && r->head->seq <= seq)
                remove_head(r);
}

/* ---- the journal ---- */

static int replay_cb(void *userdata, const void *data, size_t len, struct na_error *err)
{
        struct reports *r = userdata;
        _cleanup_json_ json_t *rec = json_loadb(data, len, 0, NULL);
        const char *t = rec ? json_string_value(json_object_get(rec, "t")) : NULL;
        json_int_t seq = json_integer_value(json_object_get(rec, "seq"));
        if (!t)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "report journal: record without type");
        if (streq(t, "next")) {
                if (seq > r->next_seq)
                        r->next_seq = seq;
        } else if (streq(t, "rep")) {
                struct report *rep = calloc(1, sizeof(*rep));
                if (!rep)
                        return na_error_sys(err, ENOMEM, "report journal");
                rep->seq = seq;
                json_t *m = json_object_get(rec, "metrics"), *e = json_object_get(rec, "events");
                rep->metrics = m ? json_dumps(m, JSON_COMPACT) : strdup("[]");
                rep->events = e ? json_dumps(e, JSON_COMPACT) : strdup("[]");
                if (!rep->metrics || !rep->events) {
                        report_free(rep);
                        return na_error_sys(err, ENOMEM, "report journal");
                }
                append_report(r, rep);
        } else if (streq(t, "ack"))
                ack_upto(r, seq);
        else if (streq(t, "trim")) {
                struct report *rep = find(r, seq);
                if (rep)
                        trim_report(r, rep);
        }
        return 0;
}

static void journal_record(struct reports *r, const char *type, int64_t seq, const struct report *rep)
{
        _cleanup_free_ char *text = NULL;
        int n = rep ? asprintf(&text, "{\"t\":\"rep\",\"seq\":%lld,\"metrics\":%s,\"events\":%s}", (long long)seq,
                               rep->metrics, rep->events)
                    : asprintf(&text, "{\"t\":\"%s\",\"seq\":%lld}", type, (long long)seq);
        if (n < 0)
                return;
        na_journal_writer_append(r->writer, text, (size_t)n);
        r->file_records++;
}

struct snapshot {
        int64_t next_seq;
        size_t n;
        char **records;
};

static int snapshot_emit(void *userdata, struct na_journal_out *out, struct na_error *err)
{
        struct snapshot *s = userdata;
        char next[64];
        int len = snprintf(next, sizeof(next), "{\"t\":\"next\",\"seq\":%lld}", (long long)s->next_seq);
        int r = na_journal_emit(out, next, (size_t)len, err);
        for (size_t i = 0; r >= 0 && i < s->n; i++)
                r = na_journal_emit(out, s->records[i], strlen(s->records[i]), err);
        return r;
}

static void snapshot_free(void *userdata)
{
        struct snapshot *s = userdata;
        for (size_t i = 0; i < s->n; i++)
                free(s->records[i]);
        free(s->records);
        free(s);
}

static void maybe_compact(struct reports *r)
{
        if (r->file_records <= 2 * r->pending + 64)
                return;
        struct snapshot *s = calloc(1, sizeof(*s));
        if (!s)
                return;
        s->next_seq = r->next_seq;
        s->records = calloc(r->pending + 1, sizeof(char *));
        for (struct report *rep = r->head; s->records && rep; rep = rep->next)
                if (asprintf(&s->records[s->n], "{\"t\":\"rep\",\"seq\":%lld,\"metrics\":%s,\"events\":%s}",
                             (long long)rep->seq, rep->metrics, rep->events) >= 0)
                        s->n++;
        if (!s->records || na_journal_writer_rewrite(r->writer, snapshot_emit, snapshot_free, s) < 0) {
                snapshot_free(s);
                return;
        }
        r->file_records = s->n + 1;
}

/* ---- the API ---- */

void reports_add_event(struct reports *r, json_t *event)
{
        pthread_mutex_lock(&r->events_lock);
        json_array_append_new(r->events, event);
        pthread_mutex_unlock(&r->events_lock);
}

uint64_t reports_events_queued(struct reports *r)
{
        pthread_mutex_lock(&r->events_lock);
        uint64_t n = json_array_size(r->events);
        pthread_mutex_unlock(&r->events_lock);
        return n;
}

int64_t reports_seal(struct reports *r, json_t *metrics)
{
        pthread_mutex_lock(&r->events_lock);
        json_t *events = r->events;
        r->events = json_array();
        pthread_mutex_unlock(&r->events_lock);

        bool no_metrics = !metrics || json_array_size(metrics) == 0;
        if (no_metrics && json_array_size(events) == 0) {
                json_decref(events);
                return 0;
        }
        struct report *rep = calloc(1, sizeof(*rep));
        if (rep) {
                /* 10 significant digits: 0.1 stays 0.1 instead of 0.10000000000000001. */
                rep->metrics = no_metrics ? strdup("[]") : json_dumps(metrics, JSON_COMPACT | JSON_REAL_PRECISION(10));
                rep->events = json_dumps(events, JSON_COMPACT);
        }
        if (!rep || !rep->metrics || !rep->events) {
                /* Out of memory: keep the events for the next try. */
                pthread_mutex_lock(&r->events_lock);
                json_array_extend(events, r->events);
                json_decref(r->events);
                r->events = events;
                pthread_mutex_unlock(&r->events_lock);
                report_free(rep);
                return 0;
        }
        json_decref(events);
        rep->seq = r->next_seq;
        append_report(r, rep);
        journal_record(r, "rep", rep->seq, rep);

        /* The bound: oldest metrics go first; a report with nothing left goes whole. */
        for (struct report *old = r->head; old && r->metrics_bytes > REPORTS_METRICS_MAX_BYTES; old = old->next) {
                if (is_empty_array(old->metrics))
                        continue;
                trim_report(r, old);
                r->metrics_dropped++;
                journal_record(r, "trim", old->seq, NULL);
        }
        while (r->head && r->head != r->tail && is_empty_array(r->head->metrics) && is_empty_array(r->head->events)) {
                int64_t seq = r->head->seq;
                remove_head(r);
                journal_record(r, "ack", seq, NULL);
        }
        maybe_compact(r);
        return rep->seq;
}

char *reports_oldest_body(struct reports *r, uint64_t sent_ms, int64_t *seq)
{
        struct report *rep = r->head;
        if (!rep)
                return NULL;
        char at[40], *body = NULL;
        if (asprintf(&body, "{\"seq\":%lld,\"sentAt\":\"%s\",\"metrics\":%s,\"events\":%s}", (long long)rep->seq,
                     na_format_time_ms(sent_ms, at, sizeof(at)), rep->metrics, rep->events) < 0)
                return NULL;
        *seq = rep->seq;
        return body;
}

void reports_ack(struct reports *r, int64_t ack_seq)
{
        /* The central API has seen seqs we never sent: our state directory was lost or
         * restored from a backup. Continue above them, or new reports would be dropped. */
        if (ack_seq >= r->next_seq) {
                r->next_seq = ack_seq + 1;
                journal_record(r, "next", r->next_seq, NULL);
        }
        if (!r->head || r->head->seq > ack_seq)
                return;
        ack_upto(r, ack_seq);
        journal_record(r, "ack", ack_seq, NULL);
        maybe_compact(r);
}

void reports_get_stats(struct reports *r, struct reports_stats *out)
{
        out->pending = r->pending;
        out->metrics_bytes = r->metrics_bytes;
        out->metrics_dropped = r->metrics_dropped;
        out->next_seq = r->next_seq;
        out->events_queued = reports_events_queued(r);
}

int reports_flush(struct reports *r, struct na_error *err)
{
        return na_journal_writer_flush(r->writer, err);
}

int reports_open(const char *state_dir, struct reports **ret, struct na_error *err)
{
        struct reports *r = calloc(1, sizeof(*r));
        if (!r)
                return na_error_sys(err, ENOMEM, "reports");
        pthread_mutex_init(&r->events_lock, NULL);
        r->events = json_array();
        r->next_seq = 1;
        char path[4096];
        snprintf(path, sizeof(path), "%s/reports.journal", state_dir);
        struct na_journal *j = NULL;
        struct na_journal_stats st;
        int rc = na_journal_open(path, replay_cb, r, &j, &st, err);
        if (rc >= 0) {
                rc = na_journal_writer_start(j, &r->writer, err);
                if (rc < 0)
                        na_journal_close(j);
        }
        if (rc < 0) {
                reports_close(r);
                return rc;
        }
        r->file_records = st.records;
        *ret = r;
        return 0;
}

void reports_close(struct reports *r)
{
        if (!r)
                return;
        na_journal_writer_stop(r->writer);
        while (r->head)
                remove_head(r);
        json_decref(r->events);
        pthread_mutex_destroy(&r->events_lock);
        free(r);
}
