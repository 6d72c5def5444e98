/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The controller link's parts, shared by its files: link.c (the link's state, hello,
 * the long poll, reports), link-jobs.c (remote jobs from offer to result),
 * link-exchange.c (the exchange form of 2.3: results and progress ride on the poll)
 * and link-token.c (the bearer token and its rotation). Nothing outside
 * agent/link/link*.c includes this.
 */
#pragma once

#include <limits.h>
#include <stdatomic.h>

#include "agent/link/backoff.h"
#include "agent/link/http.h"
#include "agent/link/link.h"
#include "agent/link/progress-pace.h"
#include "proto/poll.h"

#define RESULTS_IN_FLIGHT_MAX 8
/* The exchange form: results one exchange carries at most (the rest ride the next). */
#define EXCHANGE_RESULTS_MAX 64

enum link_state { LINK_CONNECTING, LINK_CONNECTED, LINK_BACKOFF, LINK_AUTH_REFUSED };

/*
 * A remote job from the moment it is taken until its result is queued. One explicit
 * state, and at most one request on the wire (progress_in_flight: while it is set the
 * link job is not freed; its answer steps the machine on).
 *
 *   RUNNING   the job is queued or runs here; its progress is posted paced by
 *             agent/link/progress-pace.h: the first at once, then at most one post a second
 *             carrying the latest (coalesced), and the latest again every leaseSec/3
 *             as the lease keepalive.
 *       -- progress answered 404/409 (not JOB_CANCELLED) --> DROPPED (the job is asked
 *             to stop at its next safe point)
 *       -- the job ends --> its result is queued at once (never delayed by progress:
 *             what was not posted yet is dropped); freed, or ENDED while a progress
 *             request is still on the wire
 *   DROPPED   the central API no longer holds the job: nothing more is posted.
 *       -- the job ends, nothing in flight --> freed (its journal record is closed)
 *   ENDED     the result is queued; waits only for the answer to the progress in
 *             flight (which changes nothing any more), then freed.
 *
 * A queued result (struct outgoing) is posted until the central API takes it or
 * refuses it; every attempt posts the same body: one result per attempt.
 *
 * In the exchange form (the settings said "exchange": true) the same machine holds;
 * only the carriage differs: a due progress is marked progress_wanted and rides the
 * next exchange (progress_in_flight while it does), and queued results ride one too
 * (link-exchange.c).
 */
enum link_job_state { LJ_RUNNING, LJ_DROPPED, LJ_ENDED };

struct link_job {
        struct link *link;
        char id[PROTO_ID_MAX + 1];
        int64_t attempt;         /* the latest attempt the central API offered */
        enum link_job_state state;
        struct job_ctx *job;     /* while it runs; NULL once it ended */
        struct loop_timer *pace_timer; /* the next post the pace allows (progress or keepalive) */
        struct progress_pace pace;
        struct job_progress_info latest; /* what the next post carries */
        bool progress_in_flight;
        bool progress_wanted;    /* exchange form: the next exchange carries the latest */
        json_t *result;          /* DROPPED: the result whose journal record is closed at the end */
        bool journaled;
        struct link_job *prev, *next;
};

/* A result waiting to be posted, oldest first. */
struct outgoing {
        struct link *link;
        char id[PROTO_ID_MAX + 1];
        char *body;
        bool journaled;
        struct outgoing *next;
};

struct link {
        struct loop *loop;
        struct http *http;
        struct link_options opt;
        char base[2048];
        const char *node_id;

        enum link_state state;
        char cause[80];   /* what the failure was, without which request met it */
        char reason[300];
        char auth_code[48];
        uint64_t state_since_ms, retry_at_ms;
        struct backoff backoff;
        struct loop_timer *retry_timer, *report_timer;

        bool started, draining;
        bool hello_in_flight, poll_in_flight, report_in_flight;
        bool poll_one;           /* the last answer was over the size cap: ask for one job */
        unsigned poll_asked;     /* max= of the poll in flight */
        atomic_bool event_posted;
        struct loop_post_node event_post;

        /* hello's inventory is gathered on a thread of its own, never on the loop. */
        pthread_t hello_thread;
        bool hello_thread_running;
        json_t *hello_inventory;
        struct loop_post_node hello_post;

        int64_t poll_wait_sec, lease_sec, report_interval_sec;

        struct outgoing *out_head, *out_tail;
        unsigned results_in_flight;
        atomic_uint results_pending;

        struct link_job *jobs;

        /* The exchange form (2.3, link-exchange.c). */
        bool exchange;                 /* the settings offered it: used instead of the poll and the posts */
        struct exchange *exchanges;    /* in flight */
        unsigned quick_in_flight;      /* exchanges with wait=0 carrying results or progress */
        unsigned asked_in_flight;      /* max= summed over the quick exchanges in flight */
        struct loop_timer *held_timer; /* results the last answer neither took nor refused: sent again after it */

        char *token;
        int inotify_fd, inotify_wd;
        char token_dir[PATH_MAX], token_base[NAME_MAX + 1];

        uint64_t requests, failures;
};

/* link.c */
void link_failed(struct link *l, const char *what, const struct http_response *resp, const char *code);
bool link_transient(long status);
json_t *link_answer(const struct http_response *resp, struct proto_envelope *env, char *code, size_t code_len);
void link_url(struct link *l, char *buf, size_t len, const char *collection, const char *id, const char *what);
void link_maybe_poll(struct link *l);
void link_send_hello(struct link *l);
/* Take the jobs of an answer (spans of text); refuses those it cannot read. */
void link_take_jobs(struct link *l, const char *text, const struct proto_span *spans, size_t n);
/* A poll (or exchange) that failed, or whose 200 answer was not an envelope holding shape. */
void link_poll_failed(struct link *l, const char *what, const struct http_response *resp, const char *shape);
/* An answer over the size cap to a request that asked for asked jobs; true when handled. */
bool link_answer_oversized(struct link *l, const struct http_response *resp, unsigned asked, bool exchange);

/* link-jobs.c */
void link_take_job(struct link *l, json_t *item);
/* A job the agent could not read but whose id is known: answered with err. */
void link_refuse_job(struct link *l, const char *id, int64_t attempt, struct na_error *err);
void link_send_results(struct link *l);
void link_requeue_from_journal(void *userdata, const char *id, json_t *result);
void link_jobs_free(struct link *l);
bool link_jobs_idle(struct link *l);
/* The central API refused a job's progress (a 404/409, not transient): act on it. */
void link_job_progress_refused(struct link_job *lj, long status, const char *code);
void link_job_step(struct link_job *lj);
/* A queued result, in the order of the queue. */
void link_results_push_front(struct link *l, struct outgoing *o);
/* The result left the queue for good (taken, or refused with 404/409 or for ever). */
void link_result_done(struct link *l, struct outgoing *o);

/* link-exchange.c */
/* Send what is due: queued results and wanted progress at once (wait=0), and the long
 * poll when there is room and none is in flight. The exchange form's link_maybe_poll. */
void link_exchange_kick(struct link *l);
void link_exchange_free_all(struct link *l);
void link_exchange_held_fired(void *userdata); /* held_timer's function */

/* link-token.c */
int link_read_token(struct link *l, char **ret, struct na_error *err);
void link_watch_token(struct link *l);
void link_unwatch_token(struct link *l);
