/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A tiny front of the DNS verifier for tests/routing/test_dns.py:
 *
 *   dns-tool [-r RESOLVER] [-t TIMEOUT_MS] [-p PUBLIC_ADDR]... [-c RESOLV_CONF] HOSTNAME TARGET
 *
 * prints {"verified": bool, "transient": bool, "message": "...", "ms": elapsed} and
 * exits 0; a refused argument prints the error (code, message, details) and exits 1.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "routing/app-dns.h"

int main(int argc, char **argv)
{
        struct app_dns_options o = { 0 };
        const char *pub[9] = { NULL };
        size_t n_pub = 0;
        int c;
        while ((c = getopt(argc, argv, "r:t:p:c:")) != -1) {
                if (c == 'r')
                        o.resolver = optarg;
                else if (c == 't')
                        o.timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
                else if (c == 'p' && n_pub < 8)
                        pub[n_pub++] = optarg;
                else if (c == 'c')
                        o.resolv_conf = optarg;
                else
                        return 2;
        }
        if (argc - optind != 2) {
                fprintf(stderr, "usage: dns-tool [-r RESOLVER] [-t MS] [-p ADDR]... [-c RESOLV_CONF] HOSTNAME TARGET\n");
                return 2;
        }
        if (n_pub)
                o.public_addresses = pub;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        struct app_dns_result res;
        struct na_error err = NA_ERROR_INIT;
        if (app_dns_verify(&o, argv[optind], argv[optind + 1], &res, &err) < 0) {
                char *d = err.details ? json_dumps(err.details, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                fprintf(stderr, "%s: %s %s\n", err.code, err.message, d ? d : "");
                free(d);
                na_error_clear(&err);
                return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        json_t *j = json_pack("{s:b, s:b, s:s, s:I}", "verified", res.verified, "transient", res.transient, "message",
                              res.message, "ms",
                              (json_int_t)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
        char *s = json_dumps(j, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(j);
        return 0;
}
