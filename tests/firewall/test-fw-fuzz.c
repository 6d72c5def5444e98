/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Runs the fuzz entry (fuzz-firewall.c) under CTest with gcc: every file of
 * tests/firewall/corpus, then seeded mutations of them (the same inputs every run):
 * bytes flipped, cut, spliced between files; values of the JSON tree replaced by
 * ones of another type or at a boundary; and rule fields set to plausible values
 * (which keeps many inputs valid, so the building side is reached). A broken
 * property aborts the test. Each seed must also do what its entry in seeds[] says
 * (accepted with N rules, refused on exactly these fields, or not JSON).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "proto/firewall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned long fuzz_fw_accepted, fuzz_fw_refused, fuzz_fw_not_json;

#define MUTATIONS 20000
#define FUZZ_MAX_INPUT (256u << 10)

struct input {
        char name[128];
        char *data;
        size_t len;
};

static struct input corpus[64];
static size_t n_corpus;
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        return rng * 2685821657736338717ULL;
}

static size_t below(size_t n)
{
        return n ? (size_t)(rnd() % n) : 0;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct input *)a)->name, ((const struct input *)b)->name);
}

static int load_corpus(void **state)
{
        (void)state;
        const char *src = getenv("NA_SOURCE_DIR");
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/tests/firewall/corpus", src ? src : ".");
        DIR *d = opendir(dir);
        if (!d) {
                fprintf(stderr, "test-fw-fuzz: open %s: %s\n", dir, strerror(errno));
                return -1;
        }
        for (struct dirent *e; (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                if (n_corpus == ARRAY_SIZE(corpus)) {
                        fprintf(stderr, "test-fw-fuzz: more than %zu files in %s\n", ARRAY_SIZE(corpus), dir);
                        closedir(d);
                        return -1;
                }
                char path[8192];
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                FILE *f = fopen(path, "rbe");
                if (!f) {
                        fprintf(stderr, "test-fw-fuzz: open %s: %s\n", path, strerror(errno));
                        closedir(d);
                        return -1;
                }
                struct input *in = &corpus[n_corpus++];
                snprintf(in->name, sizeof(in->name), "%s", e->d_name);
                in->data = malloc(FUZZ_MAX_INPUT);
                in->len = fread(in->data, 1, FUZZ_MAX_INPUT, f);
                fclose(f);
        }
        closedir(d);
        qsort(corpus, n_corpus, sizeof(corpus[0]), by_name);
        return n_corpus ? 0 : -1;
}

static int free_corpus(void **state)
{
        (void)state;
        for (size_t i = 0; i < n_corpus; i++)
                free(corpus[i].data);
        return 0;
}

/*
 * What each seed of the corpus is: accepted with this many rules, refused with a
 * VALIDATION_ERROR on exactly these fields (paths into details, "" for the payload's
 * own _errors), or not JSON. Every file of the corpus has an entry and every entry a
 * file, so the corpus can neither change meaning nor shrink unnoticed.
 */
enum outcome { ACCEPTED, REFUSED, NOT_JSON };
static const struct seed {
        const char *name;
        enum outcome outcome;
        size_t n_rules;               /* ACCEPTED */
        const char *const fields[10]; /* REFUSED: every field with errors, NULL-terminated */
} seeds[] = {
        { "bad-addresses.json", REFUSED, 0, { "rules.0.source", "rules.1.destination", "rules.2.source" } },
        { "bad-ids.json", REFUSED, 0, { "rules.1.id", "rules.2.id" } },
        { "bad-ports.json", REFUSED, 0, { "rules.0.port", "rules.1.port", "rules.2.port" } },
        { "bad-types.json", REFUSED, 0,
          { "enabled", "inboundPolicy", "rules.0.id", "rules.0.type", "rules.0.protocol", "rules.0.action",
            "rules.0.enabled", "rules.0.port", "rules.0.comment" } },
        { "family-only.json", ACCEPTED, 2, { NULL } },
        { "lists.json", ACCEPTED, 1, { NULL } },
        { "long-comment.json", ACCEPTED, 1, { NULL } },
        { "mixed-ids.json", ACCEPTED, 2, { NULL } },
        { "not-an-object.json", REFUSED, 0, { "" } },
        { "truncated.json", NOT_JSON, 0, { NULL } },
        { "valid-all-fields.json", ACCEPTED, 7, { NULL } },
        { "valid-basic.json", ACCEPTED, 4, { NULL } },
        { "valid-disabled.json", ACCEPTED, 1, { NULL } },
        { "valid-empty.json", ACCEPTED, 0, { NULL } },
};

static const struct seed *seed_of(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(seeds); i++)
                if (strcmp(seeds[i].name, name) == 0)
                        return &seeds[i];
        return NULL;
}

/* Collect the dotted paths of every node of details with a non-empty _errors. */
static void error_paths(json_t *node, const char *prefix, char out[][64], size_t *n, size_t max)
{
        json_t *errs = json_object_get(node, "_errors");
        if (json_array_size(errs) > 0 && *n < max)
                snprintf(out[(*n)++], 64, "%s", prefix);
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
                if (strcmp(key, "_errors") == 0 || !json_is_object(v))
                        continue;
                char path[64];
                snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key);
                error_paths(v, path, out, n, max);
        }
}

static void check_refusal(const struct seed *sd, const struct input *in)
{
        json_t *j = json_loadb(in->data, in->len, JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        struct fw_config cfg;
        struct na_error err = NA_ERROR_INIT;
        assert_true(proto_fw_decode(j, &cfg, &err) < 0);
        json_decref(j);
        char got[32][64];
        size_t n_got = 0, n_want = 0;
        error_paths(err.details, "", got, &n_got, ARRAY_SIZE(got));
        for (; n_want < ARRAY_SIZE(sd->fields) && sd->fields[n_want]; n_want++) {
                bool found = false;
                for (size_t k = 0; k < n_got && !found; k++)
                        found = strcmp(got[k], sd->fields[n_want]) == 0;
                if (!found)
                        fail_msg("%s: no error on field '%s' (%s)", sd->name, sd->fields[n_want], err.message);
        }
        if (n_got != n_want) {
                char list[1024] = "";
                for (size_t k = 0; k < n_got; k++)
                        snprintf(list + strlen(list), sizeof(list) - strlen(list), " '%s'", got[k]);
                fail_msg("%s: errors on %zu fields, expected %zu:%s", sd->name, n_got, n_want, list);
        }
        na_error_clear(&err);
}

static void test_corpus(void **state)
{
        (void)state;
        bool covered[ARRAY_SIZE(seeds)] = { false };
        for (size_t i = 0; i < n_corpus; i++) {
                const struct input *in = &corpus[i];
                const struct seed *sd = seed_of(in->name);
                if (!sd)
                        fail_msg("corpus file %s has no expectation in test-fw-fuzz.c's seeds[]", in->name);
                covered[sd - seeds] = true;

                /* Through the fuzz entry: its properties hold, and the outcome is the expected one. */
                unsigned long acc = fuzz_fw_accepted, ref = fuzz_fw_refused, nj = fuzz_fw_not_json;
                LLVMFuzzerTestOneInput((const uint8_t *)in->data, in->len);
                enum outcome got = fuzz_fw_accepted > acc ? ACCEPTED : fuzz_fw_refused > ref ? REFUSED : NOT_JSON;
                assert_true(fuzz_fw_accepted + fuzz_fw_refused + fuzz_fw_not_json == acc + ref + nj + 1);
                static const char *const names[] = { "accepted", "refused", "not JSON" };
                if (got != sd->outcome)
                        fail_msg("%s: %s, expected %s", in->name, names[got], names[sd->outcome]);

                if (sd->outcome == ACCEPTED) {
                        json_t *j = json_loadb(in->data, in->len, JSON_DECODE_ANY, NULL);
                        struct fw_config cfg;
                        struct na_error err = NA_ERROR_INIT;
                        assert_int_equal(proto_fw_decode(j, &cfg, &err), 0);
                        json_decref(j);
                        if (cfg.n_rules != sd->n_rules)
                                fail_msg("%s: %zu rules, expected %zu", in->name, cfg.n_rules, sd->n_rules);
                        proto_fw_clear(&cfg);
                } else if (sd->outcome == REFUSED) {
                        check_refusal(sd, in);
                }
        }
        for (size_t i = 0; i < ARRAY_SIZE(seeds); i++)
                if (!covered[i])
                        fail_msg("seed %s is missing from tests/firewall/corpus", seeds[i].name);
        print_message("corpus: %zu seeds, each as expected\n", n_corpus);
}

/* A value at a boundary or of another type. */
static json_t *odd_value(void)
{
        static const char *const strings[] = { "", "any", "0", "65535", "65536", "1-65535", "22,22", "0.0.0.0/0",
                                               "::/0", "255.255.255.255/32", "ffff::/1", "10.0.0.1/31", "reject",
                                               "inbound", "icmpv6", "\xc3\xa9", "1,2,3,4,5,6,7,8,9,10", "-", "," };
        switch (below(8)) {
        case 0:
                return json_null();
        case 1:
                return json_true();
        case 2:
                return json_integer((json_int_t)below(5) - 1 + (below(2) ? 2147483647 : 0));
        case 3:
                return json_real(1.5);
        case 4:
                return json_array();
        case 5:
                return json_object();
        default:
                return json_string(strings[below(sizeof(strings) / sizeof(strings[0]))]);
        }
}

/* Replace one value somewhere in the tree (or drop a member). */
static void mutate_tree(json_t *node, int depth)
{
        if (json_is_object(node) && json_object_size(node)) {
                size_t pick = below(json_object_size(node)), i = 0;
                const char *key;
                json_t *v;
                json_object_foreach(node, key, v) {
                        if (i++ != pick)
                                continue;
                        if ((json_is_object(v) || json_is_array(v)) && depth < 4 && below(3))
                                mutate_tree(v, depth + 1);
                        else if (below(4) == 0)
                                json_object_del(node, key);
                        else
                                json_object_set_new(node, key, odd_value());
                        return;
                }
        } else if (json_is_array(node) && json_array_size(node)) {
                size_t pick = below(json_array_size(node));
                json_t *v = json_array_get(node, pick);
                if ((json_is_object(v) || json_is_array(v)) && depth < 4 && below(4))
                        mutate_tree(v, depth + 1);
                else if (below(3) == 0)
                        json_array_append(node, v); /* a copy of a rule: duplicate ids */
                else
                        json_array_set_new(node, pick, odd_value());
        }
}

/* Set one field of one rule to a plausible value: keeps many inputs valid, to reach the building side. */
static void mutate_plausibly(json_t *cfg)
{
        static const char *const fields[] = { "type", "protocol", "action", "port", "source", "destination", "comment" };
        static const char *const values[][8] = {
                { "inbound", "outbound" },
                { "tcp", "udp", "icmp", "icmpv6", "all" },
                { "allow", "deny", "reject" },
                { "any", "22", "1-65535", "80,443", "53,5353,853", "1024-2048", "65535", "" },
                { "any", "10.0.0.0/8", "192.0.2.1", "2001:db8::/64", "::/0", "0.0.0.0/0", "fe80::1", "10.1.2.0/23" },
                { "any", "203.0.113.0/24", "2001:db8::5", "::/0", "0.0.0.0/0", "198.51.100.128/25", "::1", "" },
                { "", "ssh", "\xc3\xa9t\xc3\xa9", "a \"quoted\" word", "x" },
        };
        json_t *rules = json_object_get(cfg, "rules");
        if (!json_is_array(rules))
                return;
        if (json_array_size(rules) == 0 || below(6) == 0) {
                json_array_append_new(rules, json_pack("{s:s, s:s, s:s}", "type", "inbound", "protocol", "tcp", "action",
                                                       "allow"));
                return;
        }
        json_t *rule = json_array_get(rules, below(json_array_size(rules)));
        if (!json_is_object(rule))
                return;
        size_t f = below(sizeof(fields) / sizeof(fields[0])), n = 0;
        while (n < 8 && values[f][n])
                n++;
        json_object_set_new(rule, fields[f], json_string(values[f][below(n)]));
        if (below(5) == 0)
                json_object_set_new(rule, "enabled", json_boolean(below(2)));
        if (below(5) == 0)
                json_object_del(rule, "id");
}

static void test_mutations(void **state)
{
        (void)state;
        char *buf = malloc(2 * FUZZ_MAX_INPUT);
        for (int m = 0; m < MUTATIONS; m++) {
                const struct input *in = &corpus[below(n_corpus)];
                size_t len = in->len;
                if (m % 3 != 1) {
                        json_t *j = json_loadb(in->data, in->len, JSON_DECODE_ANY, NULL);
                        if (!j)
                                continue;
                        for (size_t k = 0, rounds = 1 + below(3); k < rounds; k++) {
                                if (m % 3 == 0)
                                        mutate_tree(j, 0);
                                else
                                        mutate_plausibly(j);
                        }
                        char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
                        json_decref(j);
                        if (text) {
                                LLVMFuzzerTestOneInput((const uint8_t *)text, strlen(text));
                                free(text);
                        }
                        continue;
                }
                memcpy(buf, in->data, len);
                switch (below(4)) {
                case 0: /* flip bytes */
                        for (size_t k = 0, n = 1 + below(4); k < n && len; k++)
                                buf[below(len)] ^= (char)(1u << below(8));
                        break;
                case 1: /* cut */
                        len = below(len + 1);
                        break;
                case 2: { /* splice another input's tail */
                        const struct input *other = &corpus[below(n_corpus)];
                        size_t at = below(len + 1), from = below(other->len + 1);
                        memcpy(buf + at, other->data + from, other->len - from);
                        len = at + other->len - from;
                        break;
                }
                default: /* an interesting byte */
                        if (len) {
                                static const char bytes[] = { '"', ',', '-', '/', ':', '0', '9', '{', '}', '[', ']', 0 };
                                buf[below(len)] = bytes[below(sizeof(bytes))];
                        }
                        break;
                }
                LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        }
        free(buf);
        print_message("mutations: %lu accepted, %lu refused, %lu not JSON\n", fuzz_fw_accepted, fuzz_fw_refused,
                      fuzz_fw_not_json);
        /* both sides of the decoder were reached */
        assert_true(fuzz_fw_accepted > MUTATIONS / 20);
        assert_true(fuzz_fw_refused > MUTATIONS / 5);
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_corpus), cmocka_unit_test(test_mutations) };
        return cmocka_run_group_tests(tests, load_corpus, free_corpus);
}
