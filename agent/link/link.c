/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The controller link: its state and backoff, hello, the long poll and reports.
 * Remote jobs are in link-jobs.c, the token in link-token.c (link-internal.h).
 */
#include "agent/link/link.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "agent/link/link-internal.h"
#include "agent/base/log.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "proto/job.h"
#include "proto/poll.h"
#include "proto/wire.h"

const char *const link_state_names[] = { "connecting", "connected", "backing-off", "auth-refused", NULL };

static void send_report(struct link *l);

/* ---- state ---- */

const char *link_state_name(struct link *l)
{
        return link_state_names[l->state];
}

/*
 * Log once per change: of state, or of cause (an HTTP status and code, or a transport
 * error), never once per try nor because another request met the same cause.
 */
static void set_state(struct link *l, enum link_state s, const char *cause, const char *reason, const char *auth_code)
{
        bool changed = l->state != s || !streq(l->cause, cause ? cause : "");
        l->state = s;
        snprintf(l->cause, sizeof(l->cause), "%s", cause ? cause : "");
        snprintf(l->reason, sizeof(l->reason), "%s", reason ? reason : "");
        snprintf(l->auth_code, sizeof(l->auth_code), "%s", auth_code ? auth_code : "");
        if (!changed)
                return;
        l->state_since_ms = na_now_real_ms();
        switch (s) {
        case LINK_CONNECTED:
                log_info("controller link: connected to %s", l->base);
                break;
        case LINK_BACKOFF:
                log_warn("controller link: %s; backing off (retrying with jitter, at most every %u s)", l->reason,
                         BACKOFF_CAP_MS / 1000);
                break;
        case LINK_AUTH_REFUSED:
                log_error("controller link: authentication refused (%s): %s; re-reading the token file, retrying at "
                          "most every %u s",
                          l->auth_code, l->reason, BACKOFF_AUTH_CAP_MS / 1000);
                break;
        case LINK_CONNECTING:
                break;
        }
}

static void retry_fired(void *userdata)
{
        link_send_hello(userdata);
}

/*
 * A request failed, remotely or before it reached the wire (http.h answers those like
 * a transport failure): the whole link backs off and says hello again. Every request
 * failure comes through here.
 */
void link_failed(struct link *l, const char *what, const struct http_response *resp, const char *code)
{
        l->failures++;
        bool auth = resp->status == 401 || resp->status == 403;
        char reason[300], cause[80];
        if (resp->status)
                snprintf(cause, sizeof(cause), "HTTP %ld%s%s", resp->status, code && *code ? " " : "", code ? code : "");
        else
                snprintf(cause, sizeof(cause), "transport %d", resp->transport_code);
        snprintf(reason, sizeof(reason), "%s: %s", what, resp->status ? cause : resp->error);
        if (l->state == LINK_BACKOFF || l->state == LINK_AUTH_REFUSED) {
                if (loop_timer_armed(l->retry_timer))
                        return; /* already waiting: other requests failing meanwhile change nothing */
        }
        uint32_t rnd = 0;
        (void)!getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK);
        uint64_t delay = backoff_next_ms(&l->backoff, auth ? BACKOFF_AUTH_CAP_MS : BACKOFF_CAP_MS, resp->retry_after_sec, rnd);
        l->retry_at_ms = na_now_real_ms() + delay;
        set_state(l, auth ? LINK_AUTH_REFUSED : LINK_BACKOFF, cause, reason, auth ? (code && *code ? code : "HTTP") : NULL);
        log_debug("controller link: next try in %llu ms", (unsigned long long)delay);
        if (auth)
                link_reload_token(l);
        loop_timer_arm_ms(l->retry_timer, delay);
}

bool link_transient(long status)
{
        return status == 0 || status == 408 || status == 429 || status >= 500;
}

/* Decode an answer; returns the envelope root (caller decrefs) or NULL with code filled. */
json_t *link_answer(const struct http_response *resp, struct proto_envelope *env, char *code, size_t code_len)
{
        json_t *root = NULL;
        struct na_error err = NA_ERROR_INIT;
        code[0] = '\0';
        if (resp->status && proto_envelope_decode(resp->body, resp->body_len, &root, env, &err) == 0) {
                snprintf(code, code_len, "%s", env->success ? "" : env->code);
        } else
                memset(env, 0, sizeof(*env));
        na_error_clear(&err);
        return root;
}

/* base + "/<collection>/<id>/<what>" (ids are checked URL-safe when decoded). */
void link_url(struct link *l, char *buf, size_t len, const char *collection, const char *id, const char *what)
{
        snprintf(buf, len, "%s/%s/%s%s%s", l->base, collection, id, what ? "/" : "", what ? what : "");
}

/* ---- the long poll ---- */

static int cmp_created(const void *a, const void *b)
{
        json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
        int64_t tx = 0, ty = 0;
        na_parse_time_ms(json_string_value(json_object_get(x, "createdAt")), &tx);
        na_parse_time_ms(json_string_value(json_object_get(y, "createdAt")), &ty);
        return tx < ty ? -1 : tx > ty;
}

/* "too big integer near '"graceSec": 100000…'": jansson's reason with the text around it. */
static void unreadable_reason(const char *text, size_t len, const json_error_t *jerr, struct na_error *err)
{
        size_t pos = jerr->position > 0 && (size_t)jerr->position <= len ? (size_t)jerr->position : 0;
        size_t from = pos > 40 ? pos - 40 : 0;
        char near[64];
        size_t n = pos - from < sizeof(near) - 1 ? pos - from : sizeof(near) - 1;
        for (size_t i = 0; i < n; i++) {
                char c = text[from + i];
                near[i] = c >= ' ' && c <= '~' ? c : '?';
        }
        near[n] = '\0';
        na_error_field(err, NULL, "the job cannot be read: %s, near '%s'", jerr->text, near);
}

/* An answer over the size cap: ask for one job at a time; a single job over it is refused. */
bool link_answer_oversized(struct link *l, const struct http_response *resp, unsigned asked, bool exchange)
{
        if (!resp->truncated || resp->truncated_status != 200)
                return false;
        if (asked > 1) {
                log_warn("controller link: a poll answer was larger than %u bytes; asking for one job at a time",
                         HTTP_BODY_MAX);
                l->poll_one = true;
                return true;
        }
        char id[PROTO_ID_MAX + 1];
        int64_t attempt = 1;
        if (!proto_poll_recover_head(resp->body, resp->body_len, id, &attempt) &&
            !(exchange ? proto_exchange_recover_tail : proto_poll_recover_tail)(resp->tail, resp->tail_len, id, &attempt))
                return false; /* nothing to answer: backs off like any unreadable answer */
        struct na_error err = NA_ERROR_INIT;
        na_error_field(&err, NULL, "the job is larger than the agent takes in one poll answer (%u bytes)", HTTP_BODY_MAX);
        link_refuse_job(l, id, attempt, &err);
        na_error_clear(&err);
        return true;
}

/* Each job on its own: one that cannot be read is refused by id, the others run. */
void link_take_jobs(struct link *l, const char *body, const struct proto_span *spans, size_t n)
{
        json_t **items = calloc(n ? n : 1, sizeof(*items));
        size_t k = 0;
        for (size_t i = 0; items && i < n; i++) {
                const char *text = body + spans[i].off;
                json_error_t jerr;
                json_t *item = json_loadb(text, spans[i].len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
                if (item) {
                        items[k++] = item;
                        continue;
                }
                char id[PROTO_ID_MAX + 1];
                int64_t attempt;
                if (!proto_job_recover(text, spans[i].len, id, &attempt)) {
                        log_error("controller link: a job without a usable id was refused: %s", jerr.text);
                        continue;
                }
                struct na_error err = NA_ERROR_INIT;
                unreadable_reason(text, spans[i].len, &jerr, &err);
                link_refuse_job(l, id, attempt, &err);
                na_error_clear(&err);
        }
        if (!items) {
                log_error("controller link: out of memory taking %zu job(s); they are offered again later", n);
                return;
        }
        qsort(items, k, sizeof(*items), cmp_created);
        for (size_t i = 0; i < k; i++) {
                link_take_job(l, items[i]);
                json_decref(items[i]);
        }
        free(items);
}

void link_poll_failed(struct link *l, const char *what, const struct http_response *resp, const char *shape)
{
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = link_answer(resp, &env, code, sizeof(code));
        if (resp->status != 200) {
                link_failed(l, what, resp, code);
                return;
        }
        struct http_response bad = *resp;
        bad.status = 0;
        bad.transport_code = -1; /* a protocol error of its own */
        snprintf(bad.error, sizeof(bad.error), "the answer is not an envelope holding %s", shape);
        link_failed(l, what, &bad, NULL);
}

static void poll_done(void *userdata, const struct http_response *resp)
{
        struct link *l = userdata;
        l->poll_in_flight = false;
        bool ok = false;
        if (resp->status == 200) {
                bool success = false;
                struct proto_span *spans = NULL;
                size_t n = 0;
                struct na_error err = NA_ERROR_INIT;
                if (proto_poll_split(resp->body, resp->body_len, &success, &spans, &n, &err) == 0 && success) {
                        ok = true;
                        l->poll_one = false;
                        link_take_jobs(l, resp->body, spans, n);
                }
                free(spans);
                na_error_clear(&err);
        } else
                ok = link_answer_oversized(l, resp, l->poll_asked, false);
        if (!ok) {
                link_poll_failed(l, "poll", resp, "an array of jobs");
                return;
        }
        backoff_reset(&l->backoff);
        link_send_results(l); /* re-offers answered from the journal */
        link_maybe_poll(l);
}

void link_maybe_poll(struct link *l)
{
        if (l->exchange) {
                link_exchange_kick(l);
                return;
        }
        if (l->state != LINK_CONNECTED || l->draining || l->poll_in_flight)
                return;
        /* Room in either lane (agent/jobs/job-lanes.h): with every tenant slot taken by long
         * jobs the link still takes jobs for the node's own slots. */
        unsigned room = jobs_poll_room(l->opt.jobs);
        if (room == 0)
                return;
        l->poll_asked = l->poll_one ? 1 : room;
        char u[2600];
        snprintf(u, sizeof(u), "%s/nodes/%s/jobs?wait=%lld&max=%u", l->base, l->node_id, (long long)l->poll_wait_sec,
                 l->poll_asked);
        l->requests++;
        l->poll_in_flight = true;
        http_request(l->http, "GET", u, NULL, (long)(l->poll_wait_sec + 10) * 1000, poll_done, l);
}

/* ---- reports ---- */

static void report_done(void *userdata, const struct http_response *resp)
{
        struct link *l = userdata;
        l->report_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = link_answer(resp, &env, code, sizeof(code));
        if (resp->status >= 200 && resp->status < 300 && root && env.success) {
                int64_t ack;
                struct na_error err = NA_ERROR_INIT;
                if (proto_ack_decode(env.data, &ack, &err) == 0)
                        reports_ack(l->opt.reports, ack);
                else
                        log_warn("controller link: report answer without a valid ackSeq: %s", err.message);
                na_error_clear(&err);
                send_report(l);
        } else if (link_transient(resp->status) || resp->status == 401 || resp->status == 403)
                link_failed(l, "report", resp, code);
        else
                log_error("controller link: report refused (HTTP %ld %s: %s); kept, retried with the next one", resp->status,
                          code, env.error ? env.error : "");
}

static void send_report(struct link *l)
{
        if (l->state != LINK_CONNECTED || l->report_in_flight)
                return;
        int64_t seq;
        _cleanup_free_ char *body = reports_oldest_body(l->opt.reports, na_now_real_ms(), &seq);
        if (!body)
                return;
        char u[2600];
        link_url(l, u, sizeof(u), "nodes", l->node_id, "reports");
        l->requests++;
        l->report_in_flight = true;
        http_request(l->http, "POST", u, body, 30000, report_done, l);
}

static void seal_report(struct link *l)
{
        _cleanup_json_ json_t *metrics = l->opt.metrics_samples ? l->opt.metrics_samples(l->opt.userdata) : NULL;
        reports_seal(l->opt.reports, metrics);
        send_report(l);
}

static void report_timer_fired(void *userdata)
{
        struct link *l = userdata;
        seal_report(l);
        loop_timer_arm_ms(l->report_timer, (uint64_t)l->report_interval_sec * 1000);
}

static void event_posted(void *userdata)
{
        struct link *l = userdata;
        atomic_store(&l->event_posted, false);
        seal_report(l);
}

void link_emit_event(struct link *l, json_t *event)
{
        reports_add_event(l->opt.reports, event);
        if (!atomic_exchange(&l->event_posted, true))
                loop_post_queue(l->loop, &l->event_post);
}

/* ---- hello ---- */

static void apply_settings(struct link *l, json_t *data)
{
        struct proto_settings s;
        struct na_error err = NA_ERROR_INIT;
        if (proto_settings_decode(data, &s, &err) < 0)
                log_warn("controller link: settings partly ignored: %s", err.message);
        na_error_clear(&err);
        if (s.poll_wait_sec > 0)
                l->poll_wait_sec = s.poll_wait_sec;
        if (s.lease_sec > 0)
                l->lease_sec = s.lease_sec;
        if (s.report_interval_sec > 0 && s.report_interval_sec != l->report_interval_sec) {
                l->report_interval_sec = s.report_interval_sec;
                loop_timer_arm_ms(l->report_timer, (uint64_t)l->report_interval_sec * 1000);
        }
        if (s.max_jobs > 0 && (unsigned)s.max_jobs != jobs_max_parallel(l->opt.jobs)) {
                if (jobs_set_max_parallel(l->opt.jobs, (unsigned)s.max_jobs, &err) < 0)
                        log_error("controller link: maxJobs %lld not applied: %s", (long long)s.max_jobs, err.message);
                na_error_clear(&err);
        }
        if (s.exchange >= 0 && (bool)s.exchange != l->exchange) {
                l->exchange = s.exchange;
                log_info("controller link: %s", l->exchange ? "exchange form: results and progress ride on the poll"
                                                            : "the central API no longer offers the exchange form: "
                                                              "results and progress are posted");
        }
        if (l->opt.settings_applied)
                l->opt.settings_applied(l->opt.userdata, &s);
        log_debug("controller link: settings pollWaitSec=%lld leaseSec=%lld reportIntervalSec=%lld maxJobs=%u exchange=%s",
                  (long long)l->poll_wait_sec, (long long)l->lease_sec, (long long)l->report_interval_sec,
                  jobs_max_parallel(l->opt.jobs), l->exchange ? "true" : "false");
}

static void hello_done(void *userdata, const struct http_response *resp)
{
        struct link *l = userdata;
        l->hello_in_flight = false;
        char code[64];
        struct proto_envelope env;
        _cleanup_json_ json_t *root = link_answer(resp, &env, code, sizeof(code));
        if (resp->status != 200 || !root || !env.success) {
                link_failed(l, "hello", resp, code);
                return;
        }
        backoff_reset(&l->backoff);
        set_state(l, LINK_CONNECTED, NULL, NULL, NULL);
        apply_settings(l, env.data);
        link_send_results(l);
        send_report(l);
        link_maybe_poll(l);
}

/* Loop thread, after the hello thread gathered the inventory: send it. */
static void hello_ready(void *userdata)
{
        struct link *l = userdata;
        pthread_join(l->hello_thread, NULL);
        l->hello_thread_running = false;
        json_t *inventory = TAKE_PTR(l->hello_inventory);
        struct proto_host host;
        hostinfo_to_proto(l->opt.host, &host);
        json_t *caps = l->opt.capabilities ? l->opt.capabilities(l->opt.userdata) : NULL;
        if (caps)
                json_object_set_new(caps, "jobKinds", job_kinds_json());
        _cleanup_json_ json_t *hello = caps ? proto_hello_encode(NA_VERSION, l->opt.host->boot_id, &host, caps, inventory,
                                                                 jobstore_unfinished_json(l->opt.store))
                                            : NULL;
        if (!caps && inventory)
                json_decref(inventory);
        _cleanup_free_ char *body = hello ? json_dumps(hello, JSON_COMPACT) : NULL;
        char u[2600];
        link_url(l, u, sizeof(u), "nodes", l->node_id, "hello");
        l->requests++;
        if (body)
                http_request(l->http, "POST", u, body, 30000, hello_done, l);
        else
                http_fail(l->http, hello_done, l, "hello: out of memory");
}

/* The hello thread: the inventory asks the drivers (libvirt IPC), which may block. */
static void *hello_gather(void *userdata)
{
        struct link *l = userdata;
        l->hello_inventory = l->opt.inventory ? l->opt.inventory(l->opt.userdata) : NULL;
        loop_post_queue(l->loop, &l->hello_post);
        return NULL;
}

void link_send_hello(struct link *l)
{
        if (l->hello_in_flight)
                return;
        if (l->state != LINK_CONNECTED && l->state != LINK_AUTH_REFUSED && l->state != LINK_BACKOFF)
                set_state(l, LINK_CONNECTING, NULL, NULL, NULL);
        l->hello_in_flight = true;
        if (pthread_create(&l->hello_thread, NULL, hello_gather, l) != 0) {
                http_fail(l->http, hello_done, l, "hello: cannot start a thread to gather the inventory");
                return;
        }
        l->hello_thread_running = true;
}

/* ---- lifecycle ---- */

void link_start(struct link *l)
{
        l->started = true;
        jobstore_foreach_pending(l->opt.store, link_requeue_from_journal, l);
        unsigned pending = atomic_load(&l->results_pending);
        if (pending)
                log_info("controller link: %u result(s) recorded by an earlier run will be sent first", pending);
        loop_timer_arm_ms(l->report_timer, (uint64_t)l->report_interval_sec * 1000);
        link_send_hello(l);
}

void link_capabilities_changed(struct link *l)
{
        /* Connected: say hello again now. Otherwise the hello of the reconnect carries them. */
        if (l->started && l->state == LINK_CONNECTED)
                link_send_hello(l);
}

void link_drain(struct link *l)
{
        l->draining = true;
}

bool link_idle(struct link *l)
{
        if (l->state != LINK_CONNECTED)
                return true;
        return link_jobs_idle(l) && !l->report_in_flight;
}

unsigned link_results_pending(struct link *l)
{
        return l ? atomic_load(&l->results_pending) : 0;
}

json_t *link_status_json(struct link *l)
{
        char since[40], retry[40];
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "state", link_state_names[l->state], "controller", l->base,
                              "since", na_format_time_ms(l->state_since_ms, since, sizeof(since)), "resultsPending",
                              (json_int_t)atomic_load(&l->results_pending), "requests", (json_int_t)l->requests,
                              "failures", (json_int_t)l->failures);
        if (!o)
                return NULL;
        if (l->reason[0])
                json_object_set_new(o, "reason", json_string(l->reason));
        if (l->auth_code[0])
                json_object_set_new(o, "authCode", json_string(l->auth_code));
        if ((l->state == LINK_BACKOFF || l->state == LINK_AUTH_REFUSED) && loop_timer_armed(l->retry_timer))
                json_object_set_new(o, "retryAt", json_string(na_format_time_ms(l->retry_at_ms, retry, sizeof(retry))));
        struct reports_stats rs;
        reports_get_stats(l->opt.reports, &rs);
        json_object_set_new(o, "reportsPending", json_integer((json_int_t)rs.pending));
        json_object_set_new(o, "exchange", json_boolean(l->exchange));
        json_object_set_new(o, "nextReportSeq", json_integer((json_int_t)rs.next_seq));
        return o;
}

int link_new(struct loop *loop, const struct link_options *opt, struct link **ret, struct na_error *err)
{
        struct link *l = calloc(1, sizeof(*l));
        if (!l)
                return na_error_sys(err, ENOMEM, "controller link");
        l->loop = loop;
        l->opt = *opt;
        l->inotify_fd = -1;
        l->node_id = opt->cfg->node_id;
        snprintf(l->base, sizeof(l->base), "%s", opt->cfg->url);
        size_t bl = strlen(l->base);
        while (bl > 0 && l->base[bl - 1] == '/')
                l->base[--bl] = '\0';
        l->poll_wait_sec = opt->cfg->poll_wait_sec;
        l->lease_sec = 60;
        l->report_interval_sec = 15;
        l->state_since_ms = na_now_real_ms();
        loop_post_init(&l->event_post, event_posted, l);
        loop_post_init(&l->hello_post, hello_ready, l);

        char ua[64];
        snprintf(ua, sizeof(ua), "nodeagent/%s", NA_VERSION);
        struct http_options ho = {
                .node_id = opt->cfg->node_id,
                .user_agent = ua,
                .ca_file = opt->cfg->ca_file,
                .pinned_pubkey = opt->cfg->pinned_pubkey,
                .client_cert = opt->cfg->client_cert,
                .client_key = opt->cfg->client_key,
                .allow_http = opt->cfg->allow_insecure_http,
                .max_connections = RESULTS_IN_FLIGHT_MAX + 4,
        };
        int r = http_new(loop, &ho, &l->http, err);
        if (r < 0) {
                free(l);
                return r;
        }
        l->retry_timer = loop_timer_new(loop, retry_fired, l);
        l->report_timer = loop_timer_new(loop, report_timer_fired, l);
        l->held_timer = loop_timer_new(loop, link_exchange_held_fired, l);
        if (!l->retry_timer || !l->report_timer || !l->held_timer) {
                link_free(l);
                return na_error_sys(err, ENOMEM, "controller link: timers");
        }
        r = link_read_token(l, &l->token, err);
        if (r < 0) {
                link_free(l);
                return r;
        }
        if (http_set_token(l->http, l->token) < 0) {
                link_free(l);
                return na_error_sys(err, ENOMEM, "controller link: token");
        }
        link_watch_token(l);
        if (strncmp(l->base, "http://", 7) == 0)
                log_warn("controller link: plain http:// to %s (allow_insecure_http); use https outside of tests", l->base);
        *ret = l;
        return 0;
}

void link_free(struct link *l)
{
        if (!l)
                return;
        if (l->hello_thread_running) {
                pthread_join(l->hello_thread, NULL); /* its post is dropped with the loop */
                if (l->hello_inventory)
                        json_decref(l->hello_inventory);
        }
        http_free(l->http); /* drops in-flight requests without their callbacks */
        link_exchange_free_all(l);
        link_jobs_free(l);
        loop_timer_free(l->held_timer);
        loop_timer_free(l->retry_timer);
        loop_timer_free(l->report_timer);
        link_unwatch_token(l);
        free(l->token);
        free(l);
}
