/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/jobs/jobstore.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/journal-writer.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"

#define BUCKETS 4096

struct jobrec {
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;
        char kind[PROTO_KIND_MAX + 1];
        char target[80];
        enum jobrec_state state;
        char *result;     /* serialized Result */
        uint64_t order;   /* when the result was recorded, for oldest-first */
        uint64_t acked_ms;
        struct jobrec *next_bucket;
};

struct jobstore {
        struct na_journal_writer *writer;

        pthread_mutex_t lock; /* the index and the counters */
        struct jobrec *buckets[BUCKETS];
        uint64_t next_order;
        uint64_t live, acked, file_records, torn_bytes;
        uint64_t compacted_records; /* what the last compaction wrote */
        uint64_t compactions;
        bool compaction_queued;
};

static size_t bucket(const char *id)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = id; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        return (size_t)(h % BUCKETS);
}

static struct jobrec *rec_find(struct jobstore *js, const char *id)
{
        for (struct jobrec *r = js->buckets[bucket(id)]; r; r = r->next_bucket)
                if (streq(r->id, id))
                        return r;
        return NULL;
}

static struct jobrec *rec_get(struct jobstore *js, const char *id)
{
        struct jobrec *r = rec_find(js, id);
        if (r)
                return r;
        r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        snprintf(r->id, sizeof(r->id), "%s", id);
        size_t b = bucket(id);
        r->next_bucket = js->buckets[b];
        js->buckets[b] = r;
        js->live++;
        return r;
}

static void rec_drop(struct jobstore *js, struct jobrec *r)
{
        struct jobrec **pp = &js->buckets[bucket(r->id)];
        while (*pp && *pp != r)
                pp = &(*pp)->next_bucket;
        if (*pp)
                *pp = r->next_bucket;
        if (r->state == JOBREC_ACKED)
                js->acked--;
        js->live--;
        free(r->result);
        free(r);
}

static void set_state(struct jobstore *js, struct jobrec *r, enum jobrec_state s)
{
        if (r->state == JOBREC_ACKED)
                js->acked--;
        if (s == JOBREC_ACKED)
                js->acked++;
        r->state = s;
}

/* Apply one record to the index (replay, and the live path). Caller holds the lock. */
static int apply(struct jobstore *js, json_t *rec, struct na_error *err)
{
        const char *t = json_string_value(json_object_get(rec, "t"));
        const char *id = json_string_value(json_object_get(rec, "id"));
        if (!t || !id || !proto_id_answerable(id))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "job journal record without type or id");
        struct jobrec *r = rec_get(js, id);
        if (!r)
                return na_error_sys(err, ENOMEM, "job journal");
        json_int_t attempt = json_integer_value(json_object_get(rec, "a"));
        if (streq(t, "s")) {
                if (r->state == JOBREC_RESULT || r->state == JOBREC_ACKED)
                        return 0; /* a later start never replaces a recorded result */
                set_state(js, r, JOBREC_STARTED);
                r->attempt = attempt;
                snprintf(r->kind, sizeof(r->kind), "%s", json_string_value(json_object_get(rec, "k")) ?: "");
                snprintf(r->target, sizeof(r->target), "%s", json_string_value(json_object_get(rec, "g")) ?: "");
        } else if (streq(t, "r")) {
                json_t *res = json_object_get(rec, "r");
                char *text = res ? json_dumps(res, JSON_COMPACT) : NULL;
                if (!text)
                        return na_error_set(err, EBADMSG, NA_E_INTERNAL, "job journal: result of %s is missing", id);
                free(r->result);
                r->result = text;
                r->attempt = attempt;
                r->order = ++js->next_order;
                if (r->state != JOBREC_ACKED)
                        set_state(js, r, JOBREC_RESULT);
        } else if (streq(t, "k")) {
                set_state(js, r, JOBREC_ACKED);
                r->acked_ms = (uint64_t)json_integer_value(json_object_get(rec, "at"));
        } else
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "job journal: unknown record type %s", t);
        return 0;
}

static int replay_cb(void *userdata, const void *data, size_t len, struct na_error *err)
{
        struct jobstore *js = userdata;
        json_error_t jerr;
        _cleanup_json_ json_t *rec = json_loadb(data, len, 0, &jerr);
        if (!rec)
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "job journal record is not JSON: %s", jerr.text);
        return apply(js, rec, err);
}

/* ---- compaction ---- */

static void prune_acked(struct jobstore *js);

static int emit_rec(struct na_journal_out *out, json_t *rec, struct na_error *err)
{
        _cleanup_free_ char *text = json_dumps(rec, JSON_COMPACT);
        if (!text)
                return na_error_sys(err, ENOMEM, "job journal compaction");
        return na_journal_emit(out, text, strlen(text), err);
}

static int cmp_order(const void *a, const void *b);

/*
 * Writer thread: the index as it is now, records queued later follow the new file.
 * Records go out in the order their results were recorded (jobs without a result
 * first), so that a replay gives the pending results the same oldest-first order.
 */
static int compact_emit_locked(struct jobstore *js, struct na_journal_out *out, struct na_error *err)
{
        uint64_t records = 0;
        _cleanup_free_ struct jobrec **all = malloc((js->live ? js->live : 1) * sizeof(*all));
        if (!all)
                return na_error_sys(err, ENOMEM, "job journal compaction");
        size_t n = 0;
        for (size_t b = 0; b < BUCKETS; b++)
                for (struct jobrec *r = js->buckets[b]; r && n < js->live; r = r->next_bucket)
                        all[n++] = r;
        qsort(all, n, sizeof(*all), cmp_order);
        for (size_t i = 0; i < n; i++) {
                struct jobrec *r = all[i];
                _cleanup_json_ json_t *s = json_pack("{s:s, s:s, s:I, s:s, s:s}", "t", "s", "id", r->id, "a",
                                                     (json_int_t)r->attempt, "k", r->kind, "g", r->target);
                int ret = emit_rec(out, s, err);
                records++;
                if (ret >= 0 && r->result) {
                        json_t *res = json_loads(r->result, 0, NULL);
                        _cleanup_json_ json_t *rr = json_pack("{s:s, s:s, s:I, s:o}", "t", "r", "id", r->id, "a",
                                                              (json_int_t)r->attempt, "r", res ? res : json_object());
                        ret = emit_rec(out, rr, err);
                        records++;
                }
                if (ret >= 0 && r->state == JOBREC_ACKED) {
                        _cleanup_json_ json_t *k = json_pack("{s:s, s:s, s:I}", "t", "k", "id", r->id, "at",
                                                             (json_int_t)r->acked_ms);
                        ret = emit_rec(out, k, err);
                        records++;
                }
                if (ret < 0)
                        return ret;
        }
        js->file_records = records;
        js->compacted_records = records;
        js->compactions++;
        return 0;
}

static int compact_emit(void *userdata, struct na_journal_out *out, struct na_error *err)
{
        struct jobstore *js = userdata;
        pthread_mutex_lock(&js->lock);
        prune_acked(js);
        int r = compact_emit_locked(js, out, err);
        js->compaction_queued = false;
        pthread_mutex_unlock(&js->lock);
        return r;
}

/* Drop accepted results past the retention. Caller holds the lock. */
static void prune_acked(struct jobstore *js)
{
        uint64_t now = na_now_real_ms(), horizon = now > JOBSTORE_KEEP_ACKED_SEC * 1000ULL ? now - JOBSTORE_KEEP_ACKED_SEC * 1000ULL : 0;
        for (size_t b = 0; b < BUCKETS; b++)
                for (struct jobrec *r = js->buckets[b], *next; r; r = next) {
                        next = r->next_bucket;
                        if (r->state == JOBREC_ACKED && r->acked_ms < horizon)
                                rec_drop(js, r);
                }
        while (js->acked > JOBSTORE_KEEP_ACKED_MAX) {
                struct jobrec *oldest = NULL;
                for (size_t b = 0; b < BUCKETS; b++)
                        for (struct jobrec *r = js->buckets[b]; r; r = r->next_bucket)
                                if (r->state == JOBREC_ACKED && (!oldest || r->order < oldest->order))
                                        oldest = r;
                if (!oldest)
                        break;
                rec_drop(js, oldest);
        }
}

/* ---- recording ---- */

/* Apply rec to the index and queue it (lock held); returns its ticket, 0 on failure. */
static uint64_t enqueue(struct jobstore *js, json_t *rec, struct na_error *err)
{
        _cleanup_free_ char *text = json_dumps(rec, JSON_COMPACT);
        if (!text) {
                na_error_sys(err, ENOMEM, "job journal");
                return 0;
        }
        if (apply(js, rec, err) < 0)
                return 0;
        uint64_t ticket = na_journal_writer_append(js->writer, text, strlen(text));
        if (!ticket) {
                na_error_sys(err, ENOMEM, "job journal");
                return 0;
        }
        js->file_records++;
        /* Rewrite once the file holds twice what the last compaction left (plus 1024):
         * each rewrite is paid for by as many appends, so records stay O(1) each. */
        if (!js->compaction_queued && js->file_records > 2 * js->compacted_records + 1024 &&
            na_journal_writer_rewrite(js->writer, compact_emit, NULL, js) == 0)
                js->compaction_queued = true;
        return ticket;
}

static int record_and_wait(struct jobstore *js, json_t *rec, struct na_error *err)
{
        pthread_mutex_lock(&js->lock);
        uint64_t ticket = enqueue(js, rec, err);
        pthread_mutex_unlock(&js->lock);
        if (!ticket)
                return -EIO;
        return na_journal_writer_wait(js->writer, ticket, err);
}

int jobstore_record_start(struct jobstore *js, const struct proto_job *pj, const char *target_key,
                          struct na_error *err)
{
        _cleanup_json_ json_t *rec = json_pack("{s:s, s:s, s:I, s:s, s:s, s:I}", "t", "s", "id", pj->id, "a",
                                               (json_int_t)pj->attempt, "k", pj->kind, "g", target_key, "at",
                                               (json_int_t)na_now_real_ms());
        return record_and_wait(js, rec, err);
}

int jobstore_record_result(struct jobstore *js, const char *id, int64_t attempt, json_t *result,
                           struct na_error *err)
{
        _cleanup_json_ json_t *rec = json_pack("{s:s, s:s, s:I, s:O}", "t", "r", "id", id, "a", (json_int_t)attempt,
                                               "r", result);
        return record_and_wait(js, rec, err);
}

void jobstore_record_acked(struct jobstore *js, const char *id)
{
        pthread_mutex_lock(&js->lock);
        struct jobrec *r = rec_find(js, id);
        if (r && r->state != JOBREC_ACKED) {
                _cleanup_json_ json_t *rec = json_pack("{s:s, s:s, s:I}", "t", "k", "id", id, "at",
                                                       (json_int_t)na_now_real_ms());
                struct na_error err = NA_ERROR_INIT;
                enqueue(js, rec, &err);
                na_error_clear(&err);
        }
        pthread_mutex_unlock(&js->lock);
}

int jobstore_flush(struct jobstore *js, struct na_error *err)
{
        return na_journal_writer_flush(js->writer, err);
}

enum jobrec_state jobstore_get(struct jobstore *js, const char *id, json_t **result)
{
        pthread_mutex_lock(&js->lock);
        struct jobrec *r = rec_find(js, id);
        enum jobrec_state s = r ? r->state : JOBREC_NONE;
        if (result)
                *result = r && r->result ? json_loads(r->result, 0, NULL) : NULL;
        pthread_mutex_unlock(&js->lock);
        return s;
}

static int cmp_order(const void *a, const void *b)
{
        const struct jobrec *x = *(struct jobrec *const *)a, *y = *(struct jobrec *const *)b;
        return x->order < y->order ? -1 : x->order > y->order;
}

void jobstore_foreach_pending(struct jobstore *js, void (*fn)(void *userdata, const char *id, json_t *result),
                              void *userdata)
{
        pthread_mutex_lock(&js->lock);
        size_t n = 0, cap = 64;
        struct jobrec **list = malloc(cap * sizeof(*list));
        for (size_t b = 0; list && b < BUCKETS; b++)
                for (struct jobrec *r = js->buckets[b]; r; r = r->next_bucket) {
                        if (r->state != JOBREC_RESULT)
                                continue;
                        if (n == cap) {
                                struct jobrec **l = realloc(list, cap * 2 * sizeof(*l));
                                if (!l)
                                        break;
                                list = l;
                                cap *= 2;
                        }
                        list[n++] = r;
                }
        if (list)
                qsort(list, n, sizeof(*list), cmp_order);
        /* Copies, so fn may call back into the store. */
        json_t *copies = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(copies, json_pack("{s:s, s:o}", "id", list[i]->id, "r",
                                                        json_loads(list[i]->result, 0, NULL) ?: json_object()));
        free(list);
        pthread_mutex_unlock(&js->lock);
        size_t i;
        json_t *item;
        json_array_foreach(copies, i, item)
                fn(userdata, json_string_value(json_object_get(item, "id")), json_object_get(item, "r"));
        json_decref(copies);
}

json_t *jobstore_unfinished_json(struct jobstore *js)
{
        json_t *a = json_array();
        pthread_mutex_lock(&js->lock);
        for (size_t b = 0; b < BUCKETS; b++)
                for (struct jobrec *r = js->buckets[b]; r; r = r->next_bucket)
                        if (r->state == JOBREC_STARTED || r->state == JOBREC_RESULT)
                                json_array_append_new(a, json_pack("{s:s, s:I, s:s}", "id", r->id, "attempt",
                                                                   (json_int_t)r->attempt, "state",
                                                                   r->state == JOBREC_STARTED ? "interrupted"
                                                                                              : "result-pending"));
        pthread_mutex_unlock(&js->lock);
        return a;
}

void jobstore_get_stats(struct jobstore *js, struct jobstore_stats *out)
{
        memset(out, 0, sizeof(*out));
        struct na_journal_writer_stats ws;
        na_journal_writer_get_stats(js->writer, &ws);
        pthread_mutex_lock(&js->lock);
        out->file_bytes = ws.file_bytes;
        out->syncs = ws.syncs;
        out->file_records = js->file_records;
        out->compactions = js->compactions;
        out->live_records = js->live;
        out->torn_bytes = js->torn_bytes;
        for (size_t b = 0; b < BUCKETS; b++)
                for (struct jobrec *r = js->buckets[b]; r; r = r->next_bucket) {
                        out->pending_results += r->state == JOBREC_RESULT;
                        out->interrupted += r->state == JOBREC_STARTED;
                }
        pthread_mutex_unlock(&js->lock);
}

int jobstore_open(const char *state_dir, struct jobstore **ret, struct na_error *err)
{
        struct jobstore *js = calloc(1, sizeof(*js));
        if (!js)
                return na_error_sys(err, ENOMEM, "job journal");
        pthread_mutex_init(&js->lock, NULL);
        char path[4096];
        snprintf(path, sizeof(path), "%s/jobs.journal", state_dir);
        struct na_journal_stats st;
        struct na_journal *j = NULL;
        int r = na_journal_open(path, replay_cb, js, &j, &st, err);
        if (r >= 0) {
                r = na_journal_writer_start(j, &js->writer, err);
                if (r < 0)
                        na_journal_close(j);
        }
        if (r < 0) {
                jobstore_close(js);
                return r;
        }
        js->file_records = st.records;
        js->torn_bytes = st.torn_bytes;
        prune_acked(js);
        *ret = js;
        return 0;
}

void jobstore_close(struct jobstore *js)
{
        if (!js)
                return;
        na_journal_writer_stop(js->writer);
        for (size_t b = 0; b < BUCKETS; b++)
                while (js->buckets[b])
                        rec_drop(js, js->buckets[b]);
        pthread_mutex_destroy(&js->lock);
        free(js);
}
