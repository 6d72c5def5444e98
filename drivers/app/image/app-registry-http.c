/* SPDX-License-Identifier: GPL-2.0-or-later */
/* One GET to a registry (or its token realm, or the storage it redirects to) over libcurl. */
#include "drivers/app/image/app-registry-internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <strings.h>
#include <time.h>

DEFINE_TRIVIAL_CLEANUP_FUNC(CURLU *, curl_url_cleanup)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_slist *, curl_slist_free_all)

#define REG_ERROR_BODY_MAX (64 * 1024)
#define REG_MAX_HOPS 5

static void curl_freep(char **p)
{
        if (*p)
                curl_free(*p);
}

static bool host_is_loopback(const char *host)
{
        char buf[256];
        size_t n = strlen(host);
        if (n >= sizeof(buf))
                return false;
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
                memcpy(buf, host + 1, n - 2);
                buf[n - 2] = 0;
        } else
                memcpy(buf, host, n + 1);
        if (strcasecmp(buf, "localhost") == 0)
                return true;
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, buf, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, buf, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6);
        return false;
}

int reg_url_origin(const char *url, char *buf, size_t len, bool *ret_loopback, bool *ret_https)
{
        _cleanup_(curl_url_cleanupp) CURLU *u = curl_url();
        _cleanup_(curl_freep) char *scheme = NULL, *host = NULL, *port = NULL;
        if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
                return -EINVAL;
        if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
                return -EINVAL;
        for (char *p = host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        if ((size_t)snprintf(buf, len, "%s://%s:%s", scheme, host, port) >= len)
                return -ENAMETOOLONG;
        if (ret_loopback)
                *ret_loopback = host_is_loopback(host);
        if (ret_https)
                *ret_https = streq(scheme, "https");
        return 0;
}

int reg_url_check(const struct reg_client *c, const char *url, const char *purpose, struct na_error *err)
{
        char origin[REG_URL_MAX];
        bool loopback = false, https = false;
        if (strlen(url) >= REG_URL_MAX || reg_url_origin(url, origin, sizeof(origin), &loopback, &https) < 0)
                return reg_fail(c, "network", err, "%s: not a usable URL: %.200s", purpose, url);
        if (https)
                return 0;
        /* Plain http: only to loopback, only when allowed, and only from a plain-http registry (never a downgrade). */
        if (strncmp(origin, "http://", 7) == 0 && loopback && c->opt->allow_insecure_http &&
            strncmp(c->origin, "http://", 7) == 0)
                return 0;
        return reg_fail(c, "network", err, "%s: refusing %.200s (https only; plain http only to a loopback host from a "
                        "plain-http loopback registry, when allowed)", purpose, url);
}

void reg_response_done(struct reg_response *r)
{
        free(r->body);
        memset(r, 0, sizeof(*r));
}

int reg_fail(const struct reg_client *c, const char *reason, struct na_error *err, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        int r = na_error_set(err, EIO, NA_E_DRIVER, "%s: %s", c->what, msg);
        na_error_detail(err, "reason", json_string(reason));
        return r;
}

void reg_backoff(unsigned n)
{
        long ms = 250L << (n < 4 ? n : 4);
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

bool reg_curl_retryable(CURLcode code)
{
        switch (code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return true;
        default:
                return false;
        }
}

static bool curl_is_tls(CURLcode code)
{
        return code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
               code == CURLE_SSL_CERTPROBLEM || code == CURLE_SSL_CONNECT_ERROR || code == CURLE_SSL_CIPHER ||
               code == CURLE_SSL_ISSUER_ERROR || code == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
}

/* The state of one transfer, shared by curl's callbacks. */
struct transfer {
        struct reg_response *resp;
        const struct reg_get_args *a;
        bool final_2xx; /* the headers of a 2xx response ended: its body goes to the sink */
        bool sink_failed;
        struct na_error sink_err;
};

static void copy_value(char *dst, size_t len, const char *v, size_t n)
{
        while (n > 0 && isspace((unsigned char)*v))
                v++, n--;
        while (n > 0 && isspace((unsigned char)v[n - 1]))
                n--;
        if (n >= len)
                n = len - 1;
        memcpy(dst, v, n);
        dst[n] = 0;
}

static size_t header_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct transfer *t = userdata;
        struct reg_response *r = t->resp;
        size_t n = size * nmemb;

        if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
                /* A new response (after a 1xx, or the next hop): forget the last one's headers. */
                char *body = r->body;
                free(body);
                memset(r, 0, sizeof(*r));
                const char *sp = memchr(data, ' ', n);
                if (sp && (size_t)(sp - data) + 4 <= n)
                        r->status = strtol(sp + 1, NULL, 10);
                t->final_2xx = false;
                return n;
        }
        if (n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
                if (r->status >= 200 && r->status < 300) {
                        t->final_2xx = true;
                        if (t->a->sink && t->a->sink->begin &&
                            t->a->sink->begin(t->a->sink->userdata, r, &t->sink_err) < 0) {
                                t->sink_failed = true;
                                return 0;
                        }
                }
                return n;
        }
        const char *colon = memchr(data, ':', n);
        if (!colon)
                return n;
        size_t klen = (size_t)(colon - data);
        const char *v = colon + 1;
        size_t vlen = n - klen - 1;
#define HDR_IS(name) (klen == strlen(name) && strncasecmp(data, name, klen) == 0)
        if (HDR_IS("content-type"))
                copy_value(r->content_type, sizeof(r->content_type), v, vlen);
        else if (HDR_IS("docker-content-digest"))
                copy_value(r->docker_digest, sizeof(r->docker_digest), v, vlen);
        else if (HDR_IS("content-range"))
                copy_value(r->content_range, sizeof(r->content_range), v, vlen);
        else if (HDR_IS("www-authenticate") && r->n_challenges < REG_MAX_CHALLENGES) {
                copy_value(r->challenges[r->n_challenges], sizeof(r->challenges[0]), v, vlen);
                r->n_challenges++;
        }
#undef HDR_IS
        return n;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct transfer *t = userdata;
        struct reg_response *r = t->resp;
        size_t n = size * nmemb;

        if (t->final_2xx && t->a->sink) {
                if (t->a->sink->write(t->a->sink->userdata, data, n, &t->sink_err) < 0) {
                        t->sink_failed = true;
                        return 0;
                }
                return n;
        }
        size_t max = t->final_2xx ? t->a->max_body : REG_ERROR_BODY_MAX;
        if (r->len + n > max) {
                if (!t->final_2xx)
                        return n; /* an error body: what fits is enough */
                na_error_set(&t->sink_err, EFBIG, NA_E_DRIVER, "response larger than %zu bytes", max);
                na_error_detail(&t->sink_err, "reason", json_string("bad-manifest"));
                t->sink_failed = true;
                return 0;
        }
        char *b = realloc(r->body, r->len + n + 1);
        if (!b) {
                na_error_sys(&t->sink_err, ENOMEM, "response body");
                t->sink_failed = true;
                return 0;
        }
        memcpy(b + r->len, data, n);
        r->len += n;
        b[r->len] = 0;
        r->body = b;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* the grown buffer is stored in r->body, which owns it */
        return n;
        NA_ANALYZER_FP_END
}

static int set_options(struct reg_client *c, const char *url, struct curl_slist *hdr, struct transfer *t, long timeout,
                       char *errbuf)
{
        CURL *e = c->easy;
        curl_easy_reset(e); /* keeps the connection and TLS session caches */
        CURLcode rc = CURLE_OK;
#define SET(opt, val) (rc = rc != CURLE_OK ? rc : curl_easy_setopt(e, opt, val))
        bool loopback = false;
        char origin[REG_URL_MAX];
        if (reg_url_origin(c->base, origin, sizeof(origin), &loopback, NULL) < 0)
                return -EINVAL;
        const char *protocols = (c->opt->allow_insecure_http && loopback) ? "http,https" : "https";
        SET(CURLOPT_URL, url);
        SET(CURLOPT_PROTOCOLS_STR, protocols);
        SET(CURLOPT_REDIR_PROTOCOLS_STR, "https");
        SET(CURLOPT_FOLLOWLOCATION, 0L);
        SET(CURLOPT_NOSIGNAL, 1L);
        SET(CURLOPT_SSL_VERIFYPEER, 1L);
        SET(CURLOPT_SSL_VERIFYHOST, 2L);
        if (c->opt->ca_file)
                SET(CURLOPT_CAINFO, c->opt->ca_file);
        SET(CURLOPT_HTTPHEADER, hdr);
        SET(CURLOPT_USERAGENT, "nodeagent/" NA_VERSION);
        SET(CURLOPT_HEADERFUNCTION, header_cb);
        SET(CURLOPT_HEADERDATA, t);
        SET(CURLOPT_WRITEFUNCTION, write_cb);
        SET(CURLOPT_WRITEDATA, t);
        SET(CURLOPT_ERRORBUFFER, errbuf);
        SET(CURLOPT_CONNECTTIMEOUT, 30L);
        SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        SET(CURLOPT_LOW_SPEED_TIME, 60L);
        SET(CURLOPT_HTTP_CONTENT_DECODING, 0L);
        SET(CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
        SET(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L); /* a proxy's "200 Connection established" is not the answer */
        if (timeout > 0)
                SET(CURLOPT_TIMEOUT, timeout);
#undef SET
        return rc == CURLE_OK ? 0 : -EINVAL;
}

int reg_get(struct reg_client *c, const struct reg_get_args *a, struct reg_response *resp, CURLcode *ret_code,
            struct na_error *err)
{
        char url[REG_URL_MAX];
        if ((size_t)snprintf(url, sizeof(url), "%s", a->url) >= sizeof(url))
                return reg_fail(c, "network", err, "URL too long");
        *ret_code = CURLE_OK;
        reg_response_done(resp);

        for (int hop = 0;; hop++) {
                int r = reg_url_check(c, url, hop == 0 ? "request" : "redirect", err);
                if (r < 0)
                        return r;
                char origin[REG_URL_MAX];
                if (reg_url_origin(url, origin, sizeof(origin), NULL, NULL) < 0)
                        return reg_fail(c, "network", err, "not a usable URL: %.200s", url);

                _cleanup_(curl_slist_free_allp) struct curl_slist *hdr = NULL;
                for (const char *const *h = a->headers; h && *h; h++) {
                        struct curl_slist *n = curl_slist_append(hdr, *h);
                        if (!n)
                                return na_error_sys(err, ENOMEM, "request headers");
                        hdr = n;
                }
                /* Credentials only to the origin they belong to, never to the storage a blob redirects to. */
                if (a->auth && a->auth_origin && streq(origin, a->auth_origin)) {
                        struct curl_slist *n = curl_slist_append(hdr, a->auth);
                        if (!n)
                                return na_error_sys(err, ENOMEM, "request headers");
                        hdr = n;
                }

                struct transfer t = {.resp = resp, .a = a, .sink_err = NA_ERROR_INIT};
                char errbuf[CURL_ERROR_SIZE] = "";
                if (set_options(c, url, hdr, &t, a->timeout_sec, errbuf) < 0)
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "%s: libcurl refused an option", c->what);
                CURLcode code = curl_easy_perform(c->easy);
                *ret_code = code;
                if (t.sink_failed) {
                        na_error_move(err, &t.sink_err);
                        return -(err->errnum ? err->errnum : EIO);
                }
                na_error_clear(&t.sink_err);
                if (code != CURLE_OK) {
                        const char *why = errbuf[0] ? errbuf : curl_easy_strerror(code);
                        return reg_fail(c, curl_is_tls(code) ? "tls" : "network", err, "GET %.300s: %s", url, why);
                }
                long status = 0;
                curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
                resp->status = status;
                if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308)
                        return 0;
                char *next = NULL;
                if (curl_easy_getinfo(c->easy, CURLINFO_REDIRECT_URL, &next) != CURLE_OK || !next)
                        return reg_fail(c, "http-status", err, "GET %.300s: redirect (%ld) without a location", url,
                                        status);
                if (hop + 1 >= REG_MAX_HOPS)
                        return reg_fail(c, "network", err, "GET %.300s: more than %d redirects", a->url, REG_MAX_HOPS);
                if ((size_t)snprintf(url, sizeof(url), "%s", next) >= sizeof(url))
                        return reg_fail(c, "network", err, "redirect URL too long");
        }
}
