/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The job layer: kinds by name, one queue per target (jobs for one target run one at
 * a time in createdAt order), jobs of different targets at once on the worker pool
 * within the budget of their lane (agent/jobs/job-lanes.h: max_parallel tenant slots, and
 * node slots that customers' jobs never take), a timeout per job, a stop flag checked at safe points, and
 * coalesced progress. Where a job came from (the controller link, the control
 * socket, a test) is its sink's business: durability and delivery are the sink's.
 * No libvirt or netlink header is included here.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/jobs/job-kind.h"
#include "agent/jobs/job-lanes.h"
#include "agent/base/loop.h"
#include "agent/base/services.h"
#include "proto/job.h"

enum job_stop {
        JOB_STOP_NONE = 0,
        JOB_STOP_CANCELLED,  /* the central API cancelled it: fail with JOB_CANCELLED */
        JOB_STOP_TIMEOUT,    /* ran past timeoutSec: fail with JOB_TIMEOUT */
        JOB_STOP_LEASE_LOST, /* 404/409 from the central API: stop, post nothing */
        JOB_STOP_SHUTDOWN,   /* the agent is stopping: stop, post nothing (it runs again when re-offered) */
};

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_SUCCEEDED, JOB_FAILED, JOB_ABANDONED };
const char *job_state_name(enum job_state s);

struct job_sink {
        /* Worker thread, before the handler: e.g. record the job durably. < 0 fails the job. */
        int (*before_run)(void *userdata, struct job_ctx *job, struct na_error *err);
        /* Worker thread, after the handler, job->result built: e.g. record it durably. */
        int (*after_run)(void *userdata, struct job_ctx *job, struct na_error *err);
        /* Loop thread: there is new progress (job_progress_get gives the latest). */
        void (*progress)(void *userdata, struct job_ctx *job);
        /* Loop thread: the job ended (job->state); the job is freed when this returns. */
        void (*finished)(void *userdata, struct job_ctx *job);
};

struct job_progress_info {
        char stage[32];
        int percent;
        char message[256];
};

struct job_ctx {
        struct proto_job pj;
        const struct job_kind *kind; /* NULL for a job failed at admission */
        struct jobs *jobs;
        const struct job_sink *sink;
        void *sink_userdata;
        char target_key[80]; /* "vps/<id>" */

        enum job_state state;
        enum job_lane lane, slot; /* of its kind; of the slot it runs in */
        bool held;                /* counted in the lanes' held jobs until it ends */
        atomic_int stop;
        uint64_t queued_us, started_us, finished_us;
        json_t *result;        /* the Result object (3.4), set when the job ended */
        struct na_error error; /* the failure, when state is JOB_FAILED */

        pthread_mutex_t progress_lock;
        struct job_progress_info progress;               /* the latest */
        bool progress_posted;

        struct loop_timer *timeout_timer;
        struct loop_post_node finished_post; /* posting a job's end or progress cannot fail */
        struct loop_post_node progress_post;
        struct job_ctx *next_in_target;
        struct target_queue *tq;
        struct job_ctx *prev_all, *next_all;
};

struct jobs;
typedef const struct job_kind *(*job_kind_lookup_fn)(const char *name);

int jobs_new(struct loop *loop, const struct agent_services *services, unsigned max_parallel, struct jobs **ret,
             struct na_error *err);
void jobs_free(struct jobs *jobs);
int jobs_set_max_parallel(struct jobs *jobs, unsigned n, struct na_error *err);
unsigned jobs_max_parallel(const struct jobs *jobs);
#define JOBS_NODE_SLOTS_DEFAULT 4
#define JOBS_QUEUED_MAX_DEFAULT 16
/* The node lane's slots (>= 1) and the tenant jobs that may wait queued (agent/jobs/job-lanes.h). */
int jobs_set_lanes(struct jobs *jobs, unsigned node_max, unsigned queued_max, struct na_error *err);
/* The node drains (agent/jobs/job-drain.h): creation kinds are refused from now on. Loop thread. */
void jobs_set_node_drain(struct jobs *jobs, bool on);
bool jobs_node_drain(const struct jobs *jobs);
/* How many jobs the link may take now (agent/jobs/job-lanes.h); 0: none. Loop thread. */
unsigned jobs_poll_room(const struct jobs *jobs);

/*
 * Take a decoded job (moved out of *pj). Unknown kinds fail with UNSUPPORTED_JOB and
 * a target of the wrong type with VALIDATION_ERROR, through the same sink calls.
 */
struct job_ctx *jobs_submit(struct jobs *jobs, struct proto_job *pj, const struct job_sink *sink, void *userdata);
/*
 * A job of a kind the registry does not list (a live session's own work that must run
 * in its target's queue, after and before that target's other jobs: a file editing
 * session's write). Never reachable from the link, which finds kinds by name; params
 * are not decoded here (the caller built them): kind->decode still runs.
 */
struct job_ctx *jobs_submit_local(struct jobs *jobs, struct proto_job *pj, const struct job_kind *kind,
                                  const struct job_sink *sink, void *userdata);
/* A job that failed before admission (decode error): ends at once with err. */
struct job_ctx *jobs_submit_failed(struct jobs *jobs, struct proto_job *pj, struct na_error *err,
                                   const struct job_sink *sink, void *userdata);

/* Ask a job to stop at its next safe point (a queued job never starts). */
void jobs_request_stop(struct job_ctx *job, enum job_stop why);
/* Find a queued or running job by id (loop thread). */
struct job_ctx *jobs_find(struct jobs *jobs, const char *id);
/* Stop taking new work: queued jobs are abandoned, running ones get why. */
void jobs_stop_all(struct jobs *jobs, enum job_stop why, bool include_running);

unsigned jobs_running(const struct jobs *jobs);
unsigned jobs_queued(const struct jobs *jobs);
/* Running + queued: what the link counts against its slots. */
unsigned jobs_active(const struct jobs *jobs);
/* The latest progress (stage, percent, message) the job reported. */
void job_progress_get(struct job_ctx *job, struct job_progress_info *out);

/* {running: [...], queued: [...], recent: [...]} for the control socket. */
json_t *jobs_list_json(const struct jobs *jobs);
/* Counters by final state since start, for status and metrics. */
struct jobs_counters {
        uint64_t succeeded, failed, abandoned;
};
void jobs_counters(const struct jobs *jobs, struct jobs_counters *out);

/* The registry (agent/kinds/kind-registry.c). */
const struct job_kind *job_kind_find(const char *name);
/* All kind names, for hello's capabilities.jobKinds. */
json_t *job_kinds_json(void);
