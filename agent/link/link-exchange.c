/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The exchange form (AGENT-API 2.3): when the settings say "exchange": true, one
 * request does the work of the poll and of the result and progress posts.
 *
 * Two kinds of exchange are on the wire:
 *   the long poll   carries nothing, asks for the free slots not asked for yet and
 *                   waits up to pollWaitSec; at most one, as the poll of the other form;
 *   a quick one     wait=0: carries the queued results (oldest first) and the wanted
 *                   progress the moment they are ready, and asks for as many jobs as
 *                   it carries results (the slots those jobs freed), within the free
 *                   slots no other quick exchange in flight asked for. Several may be
 *                   in flight, up to RESULTS_IN_FLIGHT_MAX.
 * A quick exchange asks for slots the long poll in flight may have asked for too: the
 * job waiting at the central API comes back with the result's exchange (that is what
 * makes one request per job when the node lane keeps a long poll on the wire), and at
 * worst the two bring twice the free slots, which wait queued (agent/jobs/job-lanes.h).
 * So a result never waits for a long poll to come back, and with jobs in flight each
 * finished job's exchange fetches the next one: one request per job. A long poll never
 * carries a result, so a result is taken or refused within one round trip, and
 * nothing waits on a long poll when the agent drains (decisions in proto/README.md).
 *
 * The answer says of each carried result: taken (recorded, as after POST .../result),
 * lost (handled as a 404/409: dropped) or neither (kept, sent again a second later).
 * A request that fails puts everything it carried back, in order, and the link backs
 * off as for any failure.
 */
#include <stdio.h>
#include <string.h>

#include "agent/base/log.h"
#include "agent/link/link-internal.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/job.h"

#define HELD_RETRY_MS 1000

struct exchange {
        struct link *link;
        bool long_poll;
        unsigned asked;
        struct outgoing *results; /* carried, oldest first */
        size_t n_results;
        struct link_job **progress; /* carried (progress_in_flight set) */
        size_t n_progress;
        struct exchange *prev, *next;
};

/* The free slots no quick exchange in flight asked for (the long poll's ask is not counted). */
static unsigned free_room(struct link *l)
{
        if (l->draining)
                return 0;
        unsigned room = jobs_poll_room(l->opt.jobs);
        if (l->poll_one && room > 1)
                room = 1;
        return room > l->asked_in_flight ? room - l->asked_in_flight : 0;
}

static bool results_ready(struct link *l)
{
        return l->out_head && !loop_timer_armed(l->held_timer);
}

static bool progress_ready(struct link *l)
{
        for (struct link_job *lj = l->jobs; lj; lj = lj->next)
                if (lj->progress_wanted && !lj->progress_in_flight && lj->state == LJ_RUNNING)
                        return true;
        return false;
}

static void x_unlink(struct exchange *x)
{
        struct link *l = x->link;
        if (x->prev)
                x->prev->next = x->next;
        else if (l->exchanges == x)
                l->exchanges = x->next;
        if (x->next)
                x->next->prev = x->prev;
        x->prev = x->next = NULL;
}

static void x_free(struct exchange *x)
{
        while (x->results) {
                struct outgoing *o = x->results;
                x->results = o->next;
                free(o->body);
                free(o);
        }
        free(x->progress);
        free(x);
}

/* "{"jobId":"<id>",<the result's members>}": the queued body is an object's text. */
static void put_result(FILE *f, const struct outgoing *o, bool first)
{
        const char *rest = o->body + 1;
        while (*rest == ' ')
                rest++;
        fprintf(f, "%s{\"jobId\":\"%s\"%s%s", first ? "" : ",", o->id, *rest == '}' ? "" : ",", rest);
}

static void exchange_done(void *userdata, const struct http_response *resp);

/* Whether it carried anything (a quick one that carries nothing is not worth sending again now). */
static bool send_exchange(struct link *l, bool long_poll)
{
        struct exchange *x = calloc(1, sizeof(*x));
        if (!x) {
                log_error("controller link: out of memory building an exchange; retried with the next one");
                return false;
        }
        x->link = l;
        x->long_poll = long_poll;
        unsigned room = free_room(l);
        _cleanup_free_ char *text = NULL;
        size_t text_len = 0;
        FILE *f = open_memstream(&text, &text_len);
        if (f) {
                fputs("{\"results\":[", f);
                struct outgoing **tail = &x->results;
                while (!long_poll && results_ready(l) && x->n_results < EXCHANGE_RESULTS_MAX) {
                        struct outgoing *o = l->out_head;
                        l->out_head = o->next;
                        if (!l->out_head)
                                l->out_tail = NULL;
                        o->next = NULL;
                        *tail = o;
                        tail = &o->next;
                        put_result(f, o, x->n_results++ == 0);
                }
                fputs("],\"progress\":[", f);
                uint64_t now = na_now_mono_us();
                for (struct link_job *lj = l->jobs; lj && !long_poll; lj = lj->next) {
                        if (!lj->progress_wanted || lj->progress_in_flight || lj->state != LJ_RUNNING)
                                continue;
                        struct link_job **np = realloc(x->progress, (x->n_progress + 1) * sizeof(*np));
                        if (!np)
                                break; /* stays wanted: the next exchange carries it */
                        x->progress = np;
                        const struct job_progress_info *p = &lj->latest;
                        _cleanup_json_ json_t *item = proto_progress_encode(lj->attempt, p->stage[0] ? p->stage : NULL,
                                                                            p->percent, p->message);
                        if (!item || json_object_set_new(item, "jobId", json_string(lj->id)) < 0)
                                break;
                        _cleanup_free_ char *one = json_dumps(item, JSON_COMPACT);
                        if (!one)
                                break;
                        fprintf(f, "%s%s", x->n_progress ? "," : "", one);
                        x->progress[x->n_progress++] = lj;
                        lj->progress_wanted = false;
                        lj->progress_in_flight = true;
                        progress_pace_posted(&lj->pace, now);
                }
                fputs("]}", f);
                if (fclose(f) != 0)
                        free(TAKE_PTR(text));
        }
        x->asked = long_poll || x->n_results > room ? room : (unsigned)x->n_results;
        int64_t wait = long_poll ? l->poll_wait_sec : 0;
        char u[2600];
        snprintf(u, sizeof(u), "%s/nodes/%s/exchange?wait=%lld&max=%u", l->base, l->node_id, (long long)wait, x->asked);
        x->next = l->exchanges;
        if (l->exchanges)
                l->exchanges->prev = x;
        l->exchanges = x;
        if (!long_poll)
                l->asked_in_flight += x->asked;
        l->results_in_flight += (unsigned)x->n_results;
        if (long_poll) {
                l->poll_in_flight = true;
                l->poll_asked = x->asked;
        } else
                l->quick_in_flight++;
        l->requests++;
        bool carried = x->n_results || x->n_progress;
        if (text)
                http_request(l->http, "POST", u, text, (long)(wait + 10) * 1000, exchange_done, x);
        else
                http_fail(l->http, exchange_done, x, "exchange: out of memory");
        return carried;
}

void link_exchange_kick(struct link *l)
{
        if (l->state != LINK_CONNECTED)
                return;
        while ((results_ready(l) || progress_ready(l)) && l->quick_in_flight < RESULTS_IN_FLIGHT_MAX &&
               l->state == LINK_CONNECTED)
                if (!send_exchange(l, false))
                        break;
        if (l->state == LINK_CONNECTED && !l->poll_in_flight && free_room(l) > 0)
                send_exchange(l, true);
}

static const struct proto_exchange_ack *find_ack(const struct proto_exchange_ack *acks, size_t n, const char *id)
{
        for (size_t i = 0; i < n; i++)
                if (streq(acks[i].id, id))
                        return &acks[i];
        return NULL;
}

/* Put what x carried back: results at the queue's front in their order, progress wanted again. */
static void give_back(struct exchange *x, const struct proto_exchange_ack *acks, size_t n_acks)
{
        struct link *l = x->link;
        struct outgoing *keep = NULL, **ktail = &keep;
        unsigned held = 0;
        while (x->results) {
                struct outgoing *o = x->results;
                x->results = o->next;
                o->next = NULL;
                const struct proto_exchange_ack *a = acks ? find_ack(acks, n_acks, o->id) : NULL;
                if (a && !a->code[0]) {
                        log_debug("job %s: result taken by the central API", o->id);
                        link_result_done(l, o);
                } else if (a) {
                        log_warn("job %s: the central API refused its result (%s); dropped", o->id, a->code);
                        link_result_done(l, o);
                } else {
                        *ktail = o;
                        ktail = &o->next;
                        held += acks != NULL;
                }
        }
        if (keep) {
                *ktail = l->out_head;
                l->out_head = keep;
                if (!l->out_tail)
                        for (l->out_tail = keep; l->out_tail->next; l->out_tail = l->out_tail->next)
                                ;
        }
        if (held) {
                log_warn("controller link: an exchange answer neither took nor refused %u result(s); sent again in %u ms",
                         held, HELD_RETRY_MS);
                loop_timer_arm_ms(l->held_timer, HELD_RETRY_MS);
        }
}

static void exchange_done(void *userdata, const struct http_response *resp)
{
        struct exchange *x = userdata;
        struct link *l = x->link;
        x_unlink(x);
        if (!x->long_poll)
                l->asked_in_flight -= x->asked;
        l->results_in_flight -= (unsigned)x->n_results;
        if (x->long_poll)
                l->poll_in_flight = false;
        else
                l->quick_in_flight--;

        bool ok = false;
        struct proto_exchange_ack *acks = NULL;
        size_t n_acks = 0;
        if (resp->status == 200) {
                bool success = false;
                struct proto_span *spans = NULL;
                size_t n = 0;
                struct proto_exchange_spans xs;
                struct na_error err = NA_ERROR_INIT;
                if (proto_exchange_split(resp->body, resp->body_len, &success, &spans, &n, &xs, &err) == 0 && success) {
                        ok = true;
                        l->poll_one = false;
                        if (proto_exchange_acks_decode(resp->body, &xs, &acks, &n_acks, &err) < 0)
                                log_warn("controller link: exchange answer partly unreadable (what it did not say is "
                                         "sent again): %s",
                                         err.message);
                        give_back(x, acks, n_acks);
                        for (size_t i = 0; i < x->n_progress; i++) {
                                struct link_job *lj = x->progress[i];
                                const struct proto_exchange_ack *a = find_ack(acks, n_acks, lj->id);
                                lj->progress_in_flight = false;
                                if (a && a->code[0])
                                        link_job_progress_refused(lj, streq(a->code, NA_E_JOB_NOT_FOUND) ? 404 : 409,
                                                                  a->code);
                        }
                        link_take_jobs(l, resp->body, spans, n);
                }
                free(spans);
                na_error_clear(&err);
        }
        if (!ok) {
                /* Nothing was said of what it carried: all of it goes out again. */
                give_back(x, NULL, 0);
                for (size_t i = 0; i < x->n_progress; i++) {
                        x->progress[i]->progress_in_flight = false;
                        x->progress[i]->progress_wanted = true;
                }
                ok = link_answer_oversized(l, resp, x->asked, true);
        }
        if (!ok)
                link_poll_failed(l, "exchange", resp, "an exchange answer (a \"jobs\" array)");
        else
                backoff_reset(&l->backoff);
        free(acks);
        /* Each carried job steps on (a refused one may be freed here); then what is due goes out. */
        for (size_t i = 0; i < x->n_progress; i++)
                link_job_step(x->progress[i]);
        x_free(x);
        link_exchange_kick(l);
}

void link_exchange_held_fired(void *userdata)
{
        link_exchange_kick(userdata);
}

void link_exchange_free_all(struct link *l)
{
        while (l->exchanges) {
                struct exchange *x = l->exchanges;
                x_unlink(x);
                x_free(x);
        }
}
