/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verification (app-dns.h): follow hostname's CNAME chain toward target, or
 * compare its A/AAAA records with target's, and say exactly what was found.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "routing/app-dns-internal.h"

#define CHAIN_MAX 8
#define ADDRS_MAX APP_DNS_MAX_RR

struct addr {
        int family;
        uint8_t b[16];
};

struct addrs {
        struct addr a[ADDRS_MAX];
        size_t n;
        bool v4, v6;
};

struct check {
        const struct app_dns_options *o;
        struct app_dns_servers servers;
        long long deadline;
        unsigned timeout_ms;
        struct app_dns_msg *msg; /* one answer at a time (large: on the heap) */
        struct app_dns_result *ret;
};

_printf_(3, 4) static void say(struct app_dns_result *ret, bool verified, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ret->message, sizeof(ret->message), fmt, ap);
        va_end(ap);
        ret->verified = verified;
        ret->transient = false;
}

/* Query name/type; false (and ret filled as transient) when no usable answer came. */
static bool ask(struct check *c, const char *name, uint16_t type)
{
        int r = app_dns_query(&c->servers, name, type, c->deadline, c->msg);
        if (r == -ETIMEDOUT) {
                if (c->timeout_ms % 1000 == 0)
                        say(c->ret, false, "no answer from resolver (timeout after %u s)", c->timeout_ms / 1000);
                else
                        say(c->ret, false, "no answer from resolver (timeout after %.1f s)", c->timeout_ms / 1000.0);
        } else if (r < 0) {
                say(c->ret, false, "no answer from resolver for %s (%s)", name, strerror(-r));
        } else if (c->msg->rcode != APP_DNS_RCODE_NOERROR && c->msg->rcode != APP_DNS_RCODE_NXDOMAIN) {
                static const char *const names[] = { "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED" };
                if (c->msg->rcode < ARRAY_SIZE(names))
                        say(c->ret, false, "resolver answered %s for %s", names[c->msg->rcode], name);
                else
                        say(c->ret, false, "resolver answered rcode %u for %s", c->msg->rcode, name);
        } else {
                return true;
        }
        c->ret->transient = true;
        return false;
}

static const struct app_dns_rr *find(const struct app_dns_msg *m, const char *owner, uint16_t type)
{
        for (size_t i = 0; i < m->n_answers; i++)
                if (m->answers[i].type == type && streq(m->answers[i].name, owner))
                        return &m->answers[i];
        return NULL;
}

static void collect(const struct app_dns_msg *m, const char *owner, struct addrs *out)
{
        for (size_t i = 0; i < m->n_answers; i++) {
                const struct app_dns_rr *rr = &m->answers[i];
                if ((rr->type != APP_DNS_T_A && rr->type != APP_DNS_T_AAAA) || !streq(rr->name, owner))
                        continue;
                struct addr a = { rr->type == APP_DNS_T_A ? AF_INET : AF_INET6, { 0 } };
                memcpy(a.b, rr->addr, a.family == AF_INET ? 4 : 16);
                bool dup = false;
                for (size_t j = 0; j < out->n; j++)
                        dup |= out->a[j].family == a.family && memcmp(out->a[j].b, a.b, 16) == 0;
                if (!dup && out->n < ADDRS_MAX) {
                        out->a[out->n++] = a;
                        out->v4 |= a.family == AF_INET;
                        out->v6 |= a.family == AF_INET6;
                }
        }
}

static int cmp_addr(const void *x, const void *y)
{
        const struct addr *a = x, *b = y;
        if (a->family != b->family)
                return a->family == AF_INET ? -1 : 1;
        return memcmp(a->b, b->b, 16);
}

static bool same_set(struct addrs *a, struct addrs *b)
{
        qsort(a->a, a->n, sizeof(a->a[0]), cmp_addr);
        qsort(b->a, b->n, sizeof(b->a[0]), cmp_addr);
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (cmp_addr(&a->a[i], &b->a[i]))
                        return false;
        return true;
}

/* The addresses, sorted (IPv4 first), as "a, b" (cut at cap). */
static void addrs_text(struct addrs *s, char *out, size_t cap)
{
        qsort(s->a, s->n, sizeof(s->a[0]), cmp_addr);
        size_t o = 0;
        out[0] = '\0';
        for (size_t i = 0; i < s->n && o + 48 < cap; i++) {
                char t[INET6_ADDRSTRLEN];
                inet_ntop(s->a[i].family, s->a[i].b, t, sizeof(t));
                o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", t);
        }
}

static const char *kinds(const struct addrs *s)
{
        return s->v4 && s->v6 ? "A/AAAA records" : s->v6 ? "AAAA records" : "A records";
}

/*
 * name's A and AAAA addresses, following CNAMEs inside the answers (and asking again
 * for the chain's end when the resolver did not follow it). false: transient (ret set).
 */
static bool resolve(struct check *c, const char *name, struct addrs *out)
{
        static const uint16_t types[] = { APP_DNS_T_A, APP_DNS_T_AAAA };
        for (size_t t = 0; t < ARRAY_SIZE(types); t++) {
                char cur[APP_DNS_NAME_MAX];
                snprintf(cur, sizeof(cur), "%s", name);
                for (int hops = 0, asks = 0; asks <= CHAIN_MAX; asks++) {
                        if (!ask(c, cur, types[t]))
                                return false;
                        bool moved = false;
                        const struct app_dns_rr *cn;
                        while (hops < CHAIN_MAX && (cn = find(c->msg, cur, APP_DNS_T_CNAME))) {
                                snprintf(cur, sizeof(cur), "%s", cn->cname);
                                hops++;
                                moved = true;
                        }
                        size_t before = out->n;
                        collect(c->msg, cur, out);
                        if (!moved || out->n > before || c->msg->rcode != APP_DNS_RCODE_NOERROR || hops >= CHAIN_MAX)
                                break;
                        char tmp[256];
                        if (!app_dns_name_normalize(cur, tmp))
                                break;
                }
        }
        return true;
}

/* The chain as text: "a → b → c". */
static void chain_text(char chain[][APP_DNS_NAME_MAX], size_t n, char *out, size_t cap)
{
        size_t o = 0;
        out[0] = '\0';
        for (size_t i = 0; i < n && o < cap; i++)
                o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? " -> " : "", chain[i]);
}

static void apex(struct check *c, const char *host, const char *target)
{
        struct addrs mine = { .n = 0 }, theirs = { .n = 0 };
        collect(c->msg, host, &mine); /* the A answer we have */
        if (!ask(c, host, APP_DNS_T_AAAA))
                return;
        if (find(c->msg, host, APP_DNS_T_CNAME)) {
                say(c->ret, false, "CNAME appeared for %s between two queries; try again", host);
                c->ret->transient = true;
                return;
        }
        collect(c->msg, host, &mine);
        if (mine.n == 0) {
                say(c->ret, false, "no CNAME, A or AAAA record");
                return;
        }
        char mine_text[256];
        addrs_text(&mine, mine_text, sizeof(mine_text));

        /* Every address one of the node's public addresses: routed here, accepted. */
        if (c->o->public_addresses && c->o->public_addresses[0]) {
                struct addrs pub = { .n = 0 };
                for (const char *const *p = c->o->public_addresses; *p && pub.n < ADDRS_MAX; p++) {
                        struct addr a = { AF_INET, { 0 } };
                        if (inet_pton(AF_INET, *p, a.b) != 1) {
                                a.family = AF_INET6;
                                if (inet_pton(AF_INET6, *p, a.b) != 1)
                                        continue;
                        }
                        pub.a[pub.n++] = a;
                }
                bool all = true;
                for (size_t i = 0; i < mine.n && all; i++) {
                        bool in = false;
                        for (size_t j = 0; j < pub.n; j++)
                                in |= cmp_addr(&mine.a[i], &pub.a[j]) == 0;
                        all = in;
                }
                if (all && pub.n) {
                        say(c->ret, true, "%s %s: this node's public address", kinds(&mine), mine_text);
                        return;
                }
        }
        struct app_dns_result saved = *c->ret;
        if (!resolve(c, target, &theirs)) {
                char why[512];
                snprintf(why, sizeof(why), "%s", c->ret->message);
                say(c->ret, false, "%s %s found, but %s could not be resolved: %s", kinds(&mine), mine_text, target, why);
                c->ret->transient = true;
                return;
        }
        *c->ret = saved;
        if (theirs.n == 0) {
                say(c->ret, false, "%s %s found, but %s has no A or AAAA record", kinds(&mine), mine_text, target);
                return;
        }
        char theirs_text[256];
        addrs_text(&theirs, theirs_text, sizeof(theirs_text));
        if (same_set(&mine, &theirs))
                say(c->ret, true, "%s %s equal %s's", kinds(&mine), mine_text, target);
        else
                say(c->ret, false, "%s %s differ from %s's %s", kinds(&mine), mine_text, target, theirs_text);
}

static void verify(struct check *c, const char *host, const char *target)
{
        char chain[CHAIN_MAX + 1][APP_DNS_NAME_MAX];
        size_t n = 1;
        snprintf(chain[0], sizeof(chain[0]), "%s", host);
        char text[400];
        for (;;) {
                const char *cur = chain[n - 1];
                if (!ask(c, cur, APP_DNS_T_A))
                        return;
                bool moved = false;
                const struct app_dns_rr *cn;
                while ((cn = find(c->msg, chain[n - 1], APP_DNS_T_CNAME))) {
                        for (size_t i = 0; i < n; i++)
                                if (streq(chain[i], cn->cname)) {
                                        chain_text(chain, n, text, sizeof(text));
                                        say(c->ret, false, "CNAME loop: %s -> %s", text, cn->cname);
                                        return;
                                }
                        if (n == CHAIN_MAX + 1) {
                                say(c->ret, false, "CNAME chain longer than %d links from %s", CHAIN_MAX, host);
                                return;
                        }
                        snprintf(chain[n], sizeof(chain[n]), "%s", cn->cname);
                        n++;
                        moved = true;
                        if (streq(chain[n - 1], target)) {
                                if (n == 2) {
                                        say(c->ret, true, "CNAME points at %s", target);
                                } else {
                                        chain_text(chain, n, text, sizeof(text));
                                        say(c->ret, true, "CNAME chain %s", text);
                                }
                                return;
                        }
                }
                const char *end = chain[n - 1];
                if (n == 1) {
                        /* No CNAME at hostname itself. */
                        if (c->msg->rcode == APP_DNS_RCODE_NXDOMAIN)
                                say(c->ret, false, "NXDOMAIN");
                        else
                                apex(c, host, target);
                        return;
                }
                /* The resolver stopped at a name it gave no data for: ask for it again. */
                char tmp[256];
                if (moved && c->msg->rcode == APP_DNS_RCODE_NOERROR && !find(c->msg, end, APP_DNS_T_A) &&
                    app_dns_name_normalize(end, tmp))
                        continue;
                const char *suffix = c->msg->rcode == APP_DNS_RCODE_NXDOMAIN ? " (which does not exist)" : "";
                if (n == 2) {
                        say(c->ret, false, "CNAME points at %s%s, expected %s", end, suffix, target);
                } else {
                        chain_text(chain, n, text, sizeof(text));
                        say(c->ret, false, "CNAME chain %s ends at %s%s, expected %s", text, end, suffix, target);
                }
                return;
        }
}

int app_dns_verify(const struct app_dns_options *o, const char *hostname, const char *target,
                   struct app_dns_result *ret, struct na_error *err)
{
        char host[256], tgt[256];
        if (!app_dns_name_normalize(hostname, host))
                na_error_field(err, "hostname", "must be a DNS name (labels of 1..63 of a-z, 0-9, '-', '_'; at most 253)");
        if (!app_dns_name_normalize(target, tgt))
                na_error_field(err, "target", "must be a DNS name (labels of 1..63 of a-z, 0-9, '-', '_'; at most 253)");
        if (na_error_is_set(err))
                return -EINVAL;
        struct check c = { .o = o, .ret = ret, .timeout_ms = o->timeout_ms ? o->timeout_ms : 3000 };
        int r = app_dns_servers_from(o, &c.servers, err);
        if (r < 0)
                return r;
        c.msg = malloc(sizeof(*c.msg));
        if (!c.msg)
                return na_error_sys(err, ENOMEM, "dns: %s", host);
        c.deadline = na_now_mono_ms() + c.timeout_ms;
        memset(ret, 0, sizeof(*ret));
        verify(&c, host, tgt);
        free(c.msg);
        return 0;
}
