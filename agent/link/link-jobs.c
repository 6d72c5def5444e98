/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Remote jobs from offer to result (the state machine is drawn in link-internal.h),
 * and the queue of results waiting to be taken by the central API.
 */
#include <stdio.h>
#include <string.h>

#include "agent/link/link-internal.h"
#include "agent/base/log.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/job.h"

static void lj_step(struct link_job *lj);

/* ---- results ---- */

static void outgoing_free(struct outgoing *o)
{
        free(o->body);
        free(o);
}

void link_results_push_front(struct link *l, struct outgoing *o)
{
        o->next = l->out_head;
        l->out_head = o;
        if (!l->out_tail)
                l->out_tail = o;
}

static void queue_result(struct link *l, const char *id, json_t *result, int64_t attempt, bool journaled)
{
        struct outgoing *o = calloc(1, sizeof(*o));
        _cleanup_json_ json_t *copy = o ? json_copy(result) : NULL;
        if (copy && attempt > 0)
                json_object_set_new(copy, "attempt", json_integer(attempt));
        if (copy)
                o->body = json_dumps(copy, JSON_COMPACT);
        if (!o || !o->body) {
                /* Journaled, it is sent again from the journal at the next start. */
                log_job(LOG_LEVEL_ERROR, id, NULL, "out of memory queueing its result%s",
                        journaled ? "; it is kept in the journal" : "; it is lost");
                free(o);
                return;
        }
        o->link = l;
        snprintf(o->id, sizeof(o->id), "%s", id);
        o->journaled = journaled;
        if (l->out_tail)
                l->out_tail->next = o;
        else
                l->out_head = o;
        l->out_tail = o;
        atomic_fetch_add(&l->results_pending, 1);
}

static bool result_queued(struct link *l, const char *id)
{
        for (struct outgoing *o = l->out_head; o; o = o->next)
                if (streq(o->id, id))
                        return true;
        return false;
}

static void result_done(void *userdata, const struct http_response *resp)
{
        struct outgoing *o = userdata;
        struct link *l = o->link;
        l->results_in_flight--;
        char code[64] = "";
        struct proto_envelope env = { 0 };
        _cleanup_json_ json_t *root = NULL;
        /* A taken result's answer holds nothing the agent uses: it is not parsed. */
        bool taken = resp->status >= 200 && resp->status < 300;
        if (!taken)
                root = link_answer(resp, &env, code, sizeof(code));

        if (taken) {
                log_debug("job %s: result taken by the central API", o->id);
        } else if (resp->status == 404 || resp->status == 409) {
                log_warn("job %s: the central API refused its result (HTTP %ld %s); dropped", o->id, resp->status, code);
        } else if (link_transient(resp->status) || resp->status == 401 || resp->status == 403) {
                link_results_push_front(l, o); /* still the oldest */
                link_failed(l, "result", resp, code);
                return;
        } else {
                log_error("job %s: the central API rejected its result (HTTP %ld %s: %s); dropped, it would be "
                          "rejected again",
                          o->id, resp->status, code, env.error ? env.error : "");
        }
        link_result_done(l, o);
        link_send_results(l);
        link_maybe_poll(l);
}

void link_result_done(struct link *l, struct outgoing *o)
{
        if (o->journaled)
                jobstore_record_acked(l->opt.store, o->id);
        atomic_fetch_sub(&l->results_pending, 1);
        outgoing_free(o);
}

void link_send_results(struct link *l)
{
        if (l->exchange) {
                link_exchange_kick(l);
                return;
        }
        while (l->state == LINK_CONNECTED && l->out_head && l->results_in_flight < RESULTS_IN_FLIGHT_MAX) {
                struct outgoing *o = l->out_head;
                l->out_head = o->next;
                if (!l->out_head)
                        l->out_tail = NULL;
                o->next = NULL;
                char u[2600];
                link_url(l, u, sizeof(u), "jobs", o->id, "result");
                l->results_in_flight++;
                l->requests++;
                http_request(l->http, "POST", u, o->body, 30000, result_done, o);
        }
}

void link_requeue_from_journal(void *userdata, const char *id, json_t *result)
{
        struct link *l = userdata;
        if (!result_queued(l, id))
                queue_result(l, id, result, 0, true);
}

/* ---- remote jobs ---- */

static void lj_free(struct link_job *lj)
{
        struct link *l = lj->link;
        if (lj->prev)
                lj->prev->next = lj->next;
        else if (l->jobs == lj)
                l->jobs = lj->next;
        if (lj->next)
                lj->next->prev = lj->prev;
        loop_timer_free(lj->pace_timer);
        if (lj->result)
                json_decref(lj->result);
        free(lj);
}

static void progress_done(void *userdata, const struct http_response *resp)
{
        struct link_job *lj = userdata;
        struct link *l = lj->link;
        lj->progress_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = link_answer(resp, &env, code, sizeof(code));

        if (resp->status >= 200 && resp->status < 300) {
                /* leaseExpiresAt is the central API's business; keepalives follow leaseSec/3. */
        } else if (link_transient(resp->status) || resp->status == 401 || resp->status == 403) {
                link_failed(l, "progress", resp, code);
        } else
                link_job_progress_refused(lj, resp->status, code);
        lj_step(lj);
}

void link_job_progress_refused(struct link_job *lj, long status, const char *code)
{
        if (lj->state == LJ_ENDED) {
                /* The result is queued already: the central API answers for the job there. */
        } else if (status == 409 && streq(code, NA_E_JOB_CANCELLED)) {
                if (lj->state == LJ_RUNNING && lj->job) {
                        log_job(LOG_LEVEL_WARN, lj->id, lj->job->target_key, "cancelled by the central API; stopping at the next safe point");
                        jobs_request_stop(lj->job, JOB_STOP_CANCELLED);
                }
        } else if (status == 404 || status == 409) {
                log_job(LOG_LEVEL_WARN, lj->id, lj->job ? lj->job->target_key : NULL,
                        "the central API no longer holds this job (HTTP %ld %s); stopping it, its result will not be sent",
                        status, code);
                if (lj->job)
                        jobs_request_stop(lj->job, JOB_STOP_LEASE_LOST);
                lj->state = LJ_DROPPED;
        }
}

/* Post the latest progress: what the job reported last, or, as a keepalive, the same again. */
static void post_progress(struct link_job *lj, uint64_t now_us)
{
        struct link *l = lj->link;
        const struct job_progress_info *p = &lj->latest;
        progress_pace_posted(&lj->pace, now_us);
        char u[2600];
        link_url(l, u, sizeof(u), "jobs", lj->id, "progress");
        lj->progress_in_flight = true;
        l->requests++;
        _cleanup_json_ json_t *body = proto_progress_encode(lj->attempt, p->stage[0] ? p->stage : NULL, p->percent,
                                                            p->message);
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (text)
                http_request(l->http, "POST", u, text, 15000, progress_done, lj);
        else
                http_fail(l->http, progress_done, lj, "progress: out of memory");
}

static uint64_t keepalive_us(const struct link *l)
{
        uint64_t ms = (uint64_t)l->lease_sec * 1000 / 3;
        return (ms < 1000 ? 1000 : ms) * 1000;
}

/* The one place a link job moves on; called after every event that concerns it. */
static void lj_step(struct link_job *lj)
{
        struct link *l = lj->link;
        if (lj->progress_in_flight)
                return; /* its answer steps again */
        switch (lj->state) {
        case LJ_RUNNING: {
                uint64_t now = na_now_mono_us();
                uint64_t due = progress_pace_due(&lj->pace, PROGRESS_GAP_US, keepalive_us(l));
                if (due <= now && l->state == LINK_CONNECTED) {
                        if (!l->exchange) {
                                post_progress(lj, now);
                                return;
                        }
                        lj->progress_wanted = true; /* rides the next exchange, sent now when it can be */
                        link_exchange_kick(l);
                        if (lj->progress_in_flight || lj->state != LJ_RUNNING)
                                return;
                        /* Not sent yet (every quick exchange is in flight): one of their answers
                         * sends it, or the timer after a gap. */
                        loop_timer_arm_us(lj->pace_timer, PROGRESS_GAP_US);
                        return;
                }
                /* Not yet, or the link is down: the timer looks again (down: a gap later). */
                loop_timer_arm_us(lj->pace_timer, due > now ? due - now : PROGRESS_GAP_US);
                return;
        }
        case LJ_DROPPED:
                if (lj->job)
                        return; /* still running: it ends at its next safe point */
                if (lj->result && lj->journaled)
                        jobstore_record_acked(l->opt.store, lj->id);
                lj_free(lj);
                return;
        case LJ_ENDED:
                lj_free(lj);
                return;
        }
}

static void pace_timer_fired(void *userdata)
{
        lj_step(userdata);
}

void link_job_step(struct link_job *lj)
{
        lj_step(lj);
}

static int remote_before_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        struct link_job *lj = userdata;
        if (!job->kind || !job->kind->changes)
                return 0;
        if (job->kind->once && jobstore_get(lj->link->opt.store, job->pj.id, NULL) == JOBREC_STARTED) {
                na_error_set(err, EALREADY, NA_E_JOB_INTERRUPTED,
                             "%s was running when the agent stopped; it is not run again", job->pj.kind);
                return -EALREADY;
        }
        int r = jobstore_record_start(lj->link->opt.store, &job->pj, job->target_key, err);
        return r < 0 ? na_error_prefix(err, "job %s: cannot record it before its first effect", job->pj.id) : 0;
}

static int remote_after_run(void *userdata, struct job_ctx *job, struct na_error *err)
{
        struct link_job *lj = userdata;
        if (!job->kind || !job->kind->changes || !job->result)
                return 0;
        int r = jobstore_record_result(lj->link->opt.store, job->pj.id, job->pj.attempt, job->result, err);
        return r < 0 ? na_error_prefix(err, "job %s: cannot record its result", job->pj.id) : 0;
}

static void remote_progress(void *userdata, struct job_ctx *job)
{
        struct link_job *lj = userdata;
        job_progress_get(job, &lj->latest);
        lj->pace.fresh = true;
        lj_step(lj);
}

static void remote_finished(void *userdata, struct job_ctx *job)
{
        struct link_job *lj = userdata;
        struct link *l = lj->link;
        uint64_t ms = job->started_us && job->finished_us > job->started_us ? (job->finished_us - job->started_us) / 1000 : 0;

        if (job->state == JOB_ABANDONED)
                log_job(LOG_LEVEL_WARN, job->pj.id, job->target_key, "%s abandoned: %s", job->pj.kind, job->error.message);
        else if (job->state == JOB_SUCCEEDED)
                log_job(LOG_LEVEL_INFO, job->pj.id, job->target_key, "%s succeeded in %llu ms", job->pj.kind,
                        (unsigned long long)ms);
        else
                log_job(LOG_LEVEL_WARN, job->pj.id, job->target_key, "%s failed (%s): %s", job->pj.kind,
                        job->error.code ? job->error.code : "?", job->error.message);

        if (job->state != JOB_ABANDONED && job->result) {
                lj->result = json_incref(job->result);
                lj->journaled = job->kind && job->kind->changes;
        }
        lj->job = NULL;
        loop_timer_free(lj->pace_timer);
        lj->pace_timer = NULL;
        if (lj->state == LJ_RUNNING) {
                /* The result never waits for progress: what was not posted yet is dropped. */
                if (lj->result)
                        queue_result(l, lj->id, lj->result, lj->attempt, lj->journaled);
                lj->state = LJ_ENDED;
                link_send_results(l);
        }
        lj_step(lj);
        link_maybe_poll(l);
}

static const struct job_sink remote_sink = {
        .before_run = remote_before_run,
        .after_run = remote_after_run,
        .progress = remote_progress,
        .finished = remote_finished,
};

static struct link_job *lj_new(struct link *l, const struct proto_job *pj)
{
        struct link_job *lj = calloc(1, sizeof(*lj));
        if (!lj)
                return NULL;
        lj->pace_timer = loop_timer_new(l->loop, pace_timer_fired, lj);
        if (!lj->pace_timer) {
                free(lj);
                return NULL;
        }
        lj->link = l;
        snprintf(lj->id, sizeof(lj->id), "%s", pj->id);
        lj->attempt = pj->attempt;
        lj->state = LJ_RUNNING;
        progress_pace_init(&lj->pace, na_now_mono_us());
        lj->latest.percent = -1;
        lj->next = l->jobs;
        if (l->jobs)
                l->jobs->prev = lj;
        l->jobs = lj;
        loop_timer_arm_us(lj->pace_timer, keepalive_us(l));
        return lj;
}

static struct link_job *lj_find(struct link *l, const char *id)
{
        /* In any state: a job whose progress answer is due or stopping after a 404 is still here,
         * and a second copy must not start beside it. */
        for (struct link_job *lj = l->jobs; lj; lj = lj->next)
                if (streq(lj->id, id))
                        return lj;
        return NULL;
}

/* Submit pj (moved), failed with err when err is set. */
static void submit(struct link *l, struct proto_job *pj, struct na_error *err)
{
        struct link_job *lj = lj_new(l, pj);
        if (!lj) {
                /* Not taken: offered again at the lease's end, when memory may be back. */
                log_job(LOG_LEVEL_ERROR, pj->id, NULL, "out of memory taking the job; it is offered again later");
                proto_job_clear(pj);
                return;
        }
        if (na_error_is_set(err)) {
                log_job(LOG_LEVEL_WARN, lj->id, NULL, "malformed job refused: %s", err->message);
                lj->job = jobs_submit_failed(l->opt.jobs, pj, err, &remote_sink, lj);
        } else {
                log_job(LOG_LEVEL_DEBUG, lj->id, NULL, "%s received (attempt %lld)", pj->kind, (long long)pj->attempt);
                lj->job = jobs_submit(l->opt.jobs, pj, &remote_sink, lj);
        }
        if (!lj->job) {
                log_job(LOG_LEVEL_ERROR, lj->id, NULL, "out of memory taking the job; it is offered again later");
                proto_job_clear(pj);
                lj_free(lj);
        }
}

/* Exactly one effect per id: a recorded result, or the job still here, answers a re-offer. */
static bool answered_already(struct link *l, const char *id, int64_t attempt)
{
        json_t *recorded = NULL;
        enum jobrec_state st = jobstore_get(l->opt.store, id, &recorded);
        if (st == JOBREC_RESULT || st == JOBREC_ACKED) {
                log_job(LOG_LEVEL_INFO, id, NULL, "offered again (attempt %lld); answered from the journal without running",
                        (long long)attempt);
                if (!result_queued(l, id))
                        queue_result(l, id, recorded, attempt, true);
                json_decref(recorded);
                return true;
        }
        json_decref(recorded);
        struct link_job *active = lj_find(l, id);
        if (active || result_queued(l, id)) {
                if (active && attempt > active->attempt)
                        active->attempt = attempt;
                log_job(LOG_LEVEL_DEBUG, id, NULL, "offered again while still here (attempt %lld)", (long long)attempt);
                return true;
        }
        return false;
}

void link_take_job(struct link *l, json_t *item)
{
        struct proto_job pj;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_job_decode(item, &pj, &err);
        if (r == -EBADMSG) {
                log_error("controller link: a job without a usable id was refused: %s", err.message);
                na_error_clear(&err);
                return;
        }
        if (!answered_already(l, pj.id, pj.attempt))
                submit(l, &pj, &err);
        else
                proto_job_clear(&pj);
        na_error_clear(&err);
}

void link_refuse_job(struct link *l, const char *id, int64_t attempt, struct na_error *err)
{
        if (answered_already(l, id, attempt))
                return;
        struct proto_job pj = { .attempt = attempt, .target_type = PROTO_TARGET_NODE, .params = json_object() };
        snprintf(pj.id, sizeof(pj.id), "%s", id);
        submit(l, &pj, err);
}

void link_jobs_free(struct link *l)
{
        while (l->out_head) {
                struct outgoing *o = l->out_head;
                l->out_head = o->next;
                outgoing_free(o);
        }
        while (l->jobs)
                lj_free(l->jobs);
}

bool link_jobs_idle(struct link *l)
{
        for (struct link_job *lj = l->jobs; lj; lj = lj->next)
                if (lj->progress_in_flight)
                        return false;
        return !l->out_head && l->results_in_flight == 0;
}
