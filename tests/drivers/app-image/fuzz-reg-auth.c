/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the registry's WWW-Authenticate challenges
 * (app-registry-auth.c: reg_challenge_parse), which a registry answers a pull with:
 * the input is one header value per line, each parsed challenge after challenge as
 * the pull does. Contracts: no read past the value's NUL (ASan sees it: each value is
 * an allocation of its exact size), every call moves forward within the value (the
 * pull's loop always ends), every field comes out NUL-terminated within its size.
 * Built as a libFuzzer target by fuzz/CMakeLists.txt (scripts/fuzz.sh), and run
 * under CTest with gcc by tests/proto/fuzz-driver.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "drivers/app/image/app-registry-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long bearer, basic, other;

#define CHECK(cond, ...)                                                                \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "fuzz-reg-auth: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                                   \
                        fputc('\n', stderr);                                            \
                        abort();                                                        \
                }                                                                       \
        } while (0)

static void one_value(const char *v, size_t len)
{
        char *s = malloc(len + 1);
        CHECK(s, "malloc");
        memcpy(s, v, len);
        s[len] = '\0';
        size_t real = strlen(s); /* a NUL inside ends the value, as in a C string header */
        for (const char *p = s; p && *p;) {
                struct reg_challenge ch;
                const char *next = reg_challenge_parse(p, &ch);
                CHECK(!next || (next > p && next <= s + real), "no progress at offset %zu", (size_t)(p - s));
                CHECK(strnlen(ch.scheme, sizeof(ch.scheme)) < sizeof(ch.scheme) &&
                              strnlen(ch.realm, sizeof(ch.realm)) < sizeof(ch.realm) &&
                              strnlen(ch.service, sizeof(ch.service)) < sizeof(ch.service) &&
                              strnlen(ch.scope, sizeof(ch.scope)) < sizeof(ch.scope),
                      "a field without its NUL");
                if (strcasecmp(ch.scheme, "bearer") == 0)
                        bearer++;
                else if (strcasecmp(ch.scheme, "basic") == 0)
                        basic++;
                else
                        other++;
                p = next;
        }
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *start = (const char *)data, *end = start + size;
        while (start < end) {
                const char *nl = memchr(start, '\n', (size_t)(end - start));
                const char *stop = nl ? nl : end;
                one_value(start, (size_t)(stop - start));
                start = stop + 1;
        }
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "challenges: %lu bearer, %lu basic, %lu other\n", bearer, basic, other);
        return !bearer || !basic || !other;
}
