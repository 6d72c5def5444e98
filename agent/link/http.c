/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/link/http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/fault.h"

#define HTTP_TAIL_KEEP (64u << 10) /* of an answer over HTTP_BODY_MAX, the last bytes kept */

struct transfer {
        struct http *http;
        CURL *easy;
        struct curl_slist *headers;
        http_done_fn done;
        void *userdata;
        char *req_body;
        char *body;
        size_t body_len, body_cap;
        bool too_big;
        char *tail;                        /* over the cap: a ring of the last HTTP_TAIL_KEEP bytes */
        size_t tail_pos;
        uint64_t total_len;
        char local_error[160];             /* failed before it reached the wire */
        int64_t retry_after_sec;
        char errbuf[CURL_ERROR_SIZE];
        struct transfer *next;             /* in the free list */
        struct transfer *prev_active, *next_active;
};

struct http {
        struct loop *loop;
        CURLM *multi;
        struct loop_timer *timer;
        struct http_options opt;
        char *auth_header;
        char *node_header;
        unsigned in_flight;
        struct transfer *active;
        struct transfer *free_list;
        unsigned free_count;
        struct transfer *failed_head, *failed_tail; /* failed locally, answered on the next loop turn */
        struct loop_timer *fail_timer;
};

static void check_done(struct http *h);

/* ---- loop glue ---- */

static void socket_event(void *userdata, int fd, uint32_t revents)
{
        struct http *h = userdata;
        int flags = 0, running;
        if (revents & EPOLLIN)
                flags |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(h->multi, fd, flags, &running);
        check_done(h);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
        struct http *h = userp;
        if (what == CURL_POLL_REMOVE) {
                loop_unwatch(h->loop, s);
                return 0;
        }
        uint32_t ev = 0;
        if (what & CURL_POLL_IN)
                ev |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                ev |= EPOLLOUT;
        return loop_watch(h->loop, s, ev, socket_event, h, NULL) < 0 ? -1 : 0;
}

static void timer_fired(void *userdata)
{
        struct http *h = userdata;
        int running;
        curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(h);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        struct http *h = userp;
        if (timeout_ms < 0)
                loop_timer_disarm(h->timer);
        else
                loop_timer_arm_us(h->timer, timeout_ms == 0 ? 1 : (uint64_t)timeout_ms * 1000);
        return 0;
}

/* ---- transfers ---- */

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct transfer *t = userdata;
        size_t n = size * nmemb;
        t->total_len += n;
        if (t->too_big || t->body_len + n > HTTP_BODY_MAX) {
                /* Over the cap: keep the head we have and a ring of the last bytes, read on
                 * to the end (the poll recovers an oversized job's id from either end). */
                if (!t->tail) {
                        t->tail = malloc(HTTP_TAIL_KEEP);
                        if (!t->tail)
                                return 0;
                        t->too_big = true;
                }
                for (size_t i = n > HTTP_TAIL_KEEP ? n - HTTP_TAIL_KEEP : 0; i < n; i++) {
                        t->tail[t->tail_pos % HTTP_TAIL_KEEP] = ptr[i];
                        t->tail_pos++;
                }
                return n;
        }
        if (t->body_len + n + 1 > t->body_cap) {
                size_t cap = t->body_cap ? t->body_cap : 4096;
                while (cap < t->body_len + n + 1)
                        cap *= 2;
                char *b = realloc(t->body, cap);
                if (!b)
                        return 0;
                t->body = b;
                t->body_cap = cap;
        }
        memcpy(t->body + t->body_len, ptr, n);
        t->body_len += n;
        t->body[t->body_len] = '\0';
        return n;
}

static int64_t parse_retry_after(const char *v)
{
        while (*v == ' ')
                v++;
        char *end;
        long long secs = strtoll(v, &end, 10);
        if (end != v && (*end == '\0' || *end == '\r' || *end == '\n' || *end == ' '))
                return secs < 0 ? 0 : (secs > 86400 ? 86400 : secs);
        time_t when = curl_getdate(v, NULL);
        if (when <= 0)
                return -1;
        time_t now = time(NULL);
        return when > now ? (int64_t)(when - now) : 0;
}

static size_t header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
        struct transfer *t = userdata;
        size_t n = size * nitems;
        static const char name[] = "retry-after:";
        if (n > sizeof(name) && strncasecmp(buf, name, sizeof(name) - 1) == 0) {
                char v[128];
                size_t len = n - (sizeof(name) - 1);
                if (len >= sizeof(v))
                        len = sizeof(v) - 1;
                memcpy(v, buf + sizeof(name) - 1, len);
                v[len] = '\0';
                t->retry_after_sec = parse_retry_after(v);
        }
        return n;
}

static void transfer_recycle(struct http *h, struct transfer *t)
{
        curl_slist_free_all(t->headers);
        t->headers = NULL;
        free(t->req_body);
        t->req_body = NULL;
        free(t->body);
        t->body = NULL;
        t->body_len = t->body_cap = 0;
        free(t->tail);
        t->tail = NULL;
        t->tail_pos = 0;
        t->total_len = 0;
        if (h->free_count < 16) {
                curl_easy_reset(t->easy); /* keeps the connection and session caches */
                t->next = h->free_list;
                h->free_list = t;
                h->free_count++;
        } else {
                curl_easy_cleanup(t->easy);
                free(t);
        }
}

static void active_unlink(struct http *h, struct transfer *t)
{
        if (t->prev_active)
                t->prev_active->next_active = t->next_active;
        else
                h->active = t->next_active;
        if (t->next_active)
                t->next_active->prev_active = t->prev_active;
        t->prev_active = t->next_active = NULL;
        h->in_flight--;
}

static void check_done(struct http *h)
{
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(h->multi, &left))) {
                if (msg->msg != CURLMSG_DONE)
                        continue;
                struct transfer *t;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
                CURLcode code = msg->data.result;
                curl_multi_remove_handle(h->multi, t->easy);
                active_unlink(h, t);

                struct http_response resp = { .retry_after_sec = t->retry_after_sec, .transport_code = (int)code };
                curl_easy_getinfo(t->easy, CURLINFO_TOTAL_TIME, &resp.total_sec);
                char *ring = NULL;
                if (code == CURLE_OK && t->too_big) {
                        /* Not an answer callers can read (status 0), but what is known of it. */
                        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &resp.truncated_status);
                        snprintf(resp.error, sizeof(resp.error), "answer of %llu bytes, larger than %u",
                                 (unsigned long long)t->total_len, HTTP_BODY_MAX);
                        resp.truncated = true;
                        resp.body = t->body ? t->body : "";
                        resp.body_len = t->body_len;
                        size_t keep = t->tail_pos < HTTP_TAIL_KEEP ? t->tail_pos : HTTP_TAIL_KEEP;
                        ring = malloc(keep ? keep : 1);
                        if (ring) {
                                for (size_t i = 0; i < keep; i++)
                                        ring[i] = t->tail[(t->tail_pos - keep + i) % HTTP_TAIL_KEEP];
                                resp.tail = ring;
                                resp.tail_len = keep;
                        }
                        resp.transport_code = CURLE_WRITE_ERROR;
                } else if (code == CURLE_OK) {
                        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &resp.status);
                        resp.body = t->body ? t->body : "";
                        resp.body_len = t->body_len;
                } else

                        snprintf(resp.error, sizeof(resp.error), "%s", t->errbuf[0] ? t->errbuf : curl_easy_strerror(code));
                t->done(t->userdata, &resp);
                free(ring);
                transfer_recycle(h, t);
        }
}

/* ---- failures before the wire: answered like a transport failure, never lost ---- */

static void fail_fired(void *userdata)
{
        struct http *h = userdata;
        struct transfer *t = h->failed_head;
        h->failed_head = h->failed_tail = NULL;
        while (t) {
                struct transfer *next = t->next;
                t->next = NULL;
                struct http_response resp = { .retry_after_sec = -1, .transport_code = -1 };
                snprintf(resp.error, sizeof(resp.error), "%s", t->local_error);
                t->done(t->userdata, &resp);
                transfer_recycle(h, t);
                t = next;
        }
}

static void fail_later(struct http *h, struct transfer *t, const char *why)
{
        snprintf(t->local_error, sizeof(t->local_error), "%s (before sending)", why);
        t->next = NULL;
        if (h->failed_tail)
                h->failed_tail->next = t;
        else
                h->failed_head = t;
        h->failed_tail = t;
        loop_timer_arm_us(h->fail_timer, 0);
}

/* Without even a transfer to carry it: answered at once (callers allow for that). */
static void fail_now(http_done_fn done, void *userdata, const char *why)
{
        struct http_response resp = { .retry_after_sec = -1, .transport_code = -1 };
        snprintf(resp.error, sizeof(resp.error), "%s (before sending)", why);
        done(userdata, &resp);
}

void http_fail(struct http *h, http_done_fn done, void *userdata, const char *why)
{
        struct transfer *t = calloc(1, sizeof(*t));
        if (!t || !(t->easy = curl_easy_init())) {
                free(t);
                fail_now(done, userdata, why);
                return;
        }
        t->http = h;
        t->done = done;
        t->userdata = userdata;
        fail_later(h, t, why);
}

#define SETOPT(e, opt, val)                                                \
        do {                                                               \
                if (curl_easy_setopt((e), (opt), (val)) != CURLE_OK) {     \
                        bad = #opt;                                        \
                        goto refused;                                      \
                }                                                          \
        } while (0)

static struct curl_slist *append(struct curl_slist *list, const char *line, bool *ok)
{
        struct curl_slist *n = *ok ? curl_slist_append(list, line) : NULL;
        if (!n) {
                *ok = false;
                return list;
        }
        return n;
}

void http_request(struct http *h, const char *method, const char *url, const char *body, long timeout_ms,
                  http_done_fn done, void *userdata)
{
        struct transfer *t = h->free_list;
        if (t) {
                h->free_list = t->next;
                h->free_count--;
        } else {
                t = calloc(1, sizeof(*t));
                if (t && !(t->easy = curl_easy_init())) {
                        free(t);
                        t = NULL;
                }
                if (!t) {
                        fail_now(done, userdata, "out of memory");
                        return;
                }
        }
        t->http = h;
        t->done = done;
        t->userdata = userdata;
        t->too_big = false;
        t->retry_after_sec = -1;
        t->errbuf[0] = '\0';
        const char *bad = NULL;
        CURL *e = t->easy;
        bool ok = true;
        struct curl_slist *hdr = NULL;
        if (NA_FAULT("http.request")) {
                bad = "injected fault";
                goto refused;
        }

        hdr = append(hdr, h->auth_header ? h->auth_header : "Authorization: Bearer -", &ok);
        hdr = append(hdr, h->node_header, &ok);
        hdr = append(hdr, "Accept: application/json", &ok);
        hdr = append(hdr, "Expect:", &ok);
        if (body)
                hdr = append(hdr, "Content-Type: application/json", &ok);
        t->headers = hdr;
        if (!ok) {
                bad = "headers: out of memory";
                goto refused;
        }

        /* Every option is checked: a libcurl that refused CURLOPT_PROTOCOLS_STR would
         * otherwise follow any scheme, and one without CAINFO would trust the wrong CA. */
        SETOPT(e, CURLOPT_URL, url);
        SETOPT(e, CURLOPT_PRIVATE, t);
        SETOPT(e, CURLOPT_HTTPHEADER, hdr);
        SETOPT(e, CURLOPT_USERAGENT, h->opt.user_agent);
        SETOPT(e, CURLOPT_WRITEFUNCTION, write_cb);
        SETOPT(e, CURLOPT_WRITEDATA, t);
        SETOPT(e, CURLOPT_HEADERFUNCTION, header_cb);
        SETOPT(e, CURLOPT_HEADERDATA, t);
        SETOPT(e, CURLOPT_ERRORBUFFER, t->errbuf);
        SETOPT(e, CURLOPT_NOSIGNAL, 1L);
        SETOPT(e, CURLOPT_TIMEOUT_MS, timeout_ms);
        SETOPT(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
        SETOPT(e, CURLOPT_FOLLOWLOCATION, 0L);
        SETOPT(e, CURLOPT_PROTOCOLS_STR, h->opt.allow_http ? "https,http" : "https");
        SETOPT(e, CURLOPT_SSL_VERIFYPEER, 1L);
        SETOPT(e, CURLOPT_SSL_VERIFYHOST, 2L);
        SETOPT(e, CURLOPT_TCP_KEEPALIVE, 1L);
        if (h->opt.ca_file)
                SETOPT(e, CURLOPT_CAINFO, h->opt.ca_file);
        if (h->opt.pinned_pubkey)
                SETOPT(e, CURLOPT_PINNEDPUBLICKEY, h->opt.pinned_pubkey);
        if (h->opt.client_cert) {
                SETOPT(e, CURLOPT_SSLCERT, h->opt.client_cert);
                SETOPT(e, CURLOPT_SSLKEY, h->opt.client_key);
        }
        if (body) {
                t->req_body = strdup(body);
                if (!t->req_body) {
                        bad = "body: out of memory";
                        goto refused;
                }
                SETOPT(e, CURLOPT_POSTFIELDS, t->req_body);
                SETOPT(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(t->req_body));
        }
        SETOPT(e, CURLOPT_CUSTOMREQUEST, method);
        if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
                bad = "libcurl refused the transfer";
                goto refused;
        }
        t->prev_active = NULL;
        t->next_active = h->active;
        if (h->active)
                h->active->prev_active = t;
        h->active = t;
        h->in_flight++;
        return;
refused:
        fail_later(h, t, bad);
}

unsigned http_in_flight(const struct http *h)
{
        return h->in_flight;
}

int http_set_token(struct http *h, const char *token)
{
        char *hdr;
        if (NA_FAULT("http.set_token") || asprintf(&hdr, "Authorization: Bearer %s", token) < 0)
                return -ENOMEM;
        free(h->auth_header);
        h->auth_header = hdr;
        return 0;
}

int http_new(struct loop *loop, const struct http_options *opt, struct http **ret, struct na_error *err)
{
        static bool global_done;
        if (!global_done) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return na_error_set(err, EIO, NA_E_INTERNAL, "libcurl: global init failed");
                global_done = true;
        }
        struct http *h = calloc(1, sizeof(*h));
        if (!h)
                return na_error_sys(err, ENOMEM, "http");
        h->loop = loop;
        h->opt = *opt;
        if (asprintf(&h->node_header, "X-Node-Id: %s", opt->node_id) < 0) {
                free(h);
                return na_error_sys(err, ENOMEM, "http");
        }
        h->multi = curl_multi_init();
        h->timer = loop_timer_new(loop, timer_fired, h);
        h->fail_timer = loop_timer_new(loop, fail_fired, h);
        if (!h->multi || !h->timer || !h->fail_timer) {
                http_free(h);
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "libcurl: multi init failed");
        }
        if (curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                              (long)(opt->max_connections ? opt->max_connections : 8)) != CURLM_OK) {
                http_free(h);
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "libcurl: the multi handle refused an option");
        }
        *ret = h;
        return 0;
}

void http_free(struct http *h)
{
        if (!h)
                return;
        /* Transfers still running are abandoned without their callbacks. */
        while (h->active) {
                struct transfer *t = h->active;
                curl_multi_remove_handle(h->multi, t->easy);
                active_unlink(h, t);
                curl_easy_cleanup(t->easy);
                curl_slist_free_all(t->headers);
                free(t->req_body);
                free(t->body);
                free(t);
        }
        while (h->failed_head) { /* dropped without their callbacks, like the transfers above */
                struct transfer *t = h->failed_head;
                h->failed_head = t->next;
                curl_easy_cleanup(t->easy);
                curl_slist_free_all(t->headers);
                free(t->req_body);
                free(t);
        }
        while (h->free_list) {
                struct transfer *t = h->free_list;
                h->free_list = t->next;
                curl_easy_cleanup(t->easy);
                free(t);
        }
        if (h->multi)
                curl_multi_cleanup(h->multi);
        loop_timer_free(h->timer);
        loop_timer_free(h->fail_timer);
        free(h->auth_header);
        free(h->node_header);
        free(h);
}
