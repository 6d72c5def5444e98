/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Runs LLVMFuzzerTestOneInput (tests/proto/fuzz-job.c) without libFuzzer, so CI with
 * gcc runs it under CTest: first over every file of a corpus directory, then over
 * pseudo-random mutations of them with a fixed seed (the same inputs at every run).
 * Half the mutations work on bytes (flips, interesting bytes and tokens, cuts,
 * splices), half on the JSON tree (a value replaced by one of another type or at a
 * boundary, a member removed), which reaches the decoders' validation paths far more
 * often than bytes alone.
 *
 *   fuzz-job-driver CORPUS_DIR [MUTATIONS] [SEED]
 *
 * The same driver runs every fuzz entry of the project (fuzz-job.c here, the params
 * decoders of every job kind in tests/agent/kinds/fuzz-params.c).
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Each fuzz entry prints what it reached; non-zero when the corpus misses an outcome. */
int fuzz_summary(FILE *out);

#define FUZZ_MAX_INPUT (256u << 10)

struct input {
        char *name;
        unsigned char *data;
        size_t len;
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
        /* xorshift64* */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 2685821657736338717ULL;
}

static size_t below(size_t n)
{
        return n ? (size_t)(rnd() % n) : 0;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct input *)a)->name, ((const struct input *)b)->name);
}

static size_t load_corpus(const char *dir, struct input **ret)
{
        DIR *d = opendir(dir);
        if (!d) {
                fprintf(stderr, "fuzz-job-driver: %s: %s\n", dir, strerror(errno));
                exit(2);
        }
        struct input *in = NULL;
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                FILE *f = fopen(path, "rbe");
                if (!f)
                        continue;
                unsigned char *buf = malloc(FUZZ_MAX_INPUT);
                size_t len = fread(buf, 1, FUZZ_MAX_INPUT, f);
                fclose(f);
                in = realloc(in, (n + 1) * sizeof(*in));
                in[n++] = (struct input){ .name = strdup(e->d_name), .data = buf, .len = len };
        }
        closedir(d);
        qsort(in, n, sizeof(*in), by_name); /* readdir order is not stable: sort for the same run every time */
        *ret = in;
        return n;
}

/* ---- byte mutations ---- */

static const char *const tokens[] = {
        "null", "true", "false", "0", "-1", "1", "4.0", "1e999", "-0", "1.5", "9223372036854775807",
        "9223372036854775808", "-9223372036854775809", "2147483648", "\"\"", "\"\\u0000\"", "\"\\ud800\"", "{}", "[]",
        "\"6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b\"", "\"2026-02-30T00:00:00Z\"", "\"2026-11-21T10:00:00Z\"",
        "\"node\"", "\"vps\"", "\"app\"", "\"..\"", "\"a/b\"", "\"id\"", "\"kind\"", "\"params\"", "\"target\"",
        "\"success\"", "\"data\"", ",", ":", "{", "}", "[", "]", "\"",
};
static const unsigned char bytes[] = { 0, '"', '\\', '{', '}', '[', ']', ':', ',', '0', '9', '-', '.', 'e', ' ', 0x80, 0xc3, 0xff };

static size_t mutate_bytes(unsigned char *buf, size_t len, size_t cap, const struct input *corpus, size_t n)
{
        int ops = 1 + (int)below(6);
        while (ops-- > 0) {
                switch (below(8)) {
                case 0: /* flip a bit */
                        if (len)
                                buf[below(len)] ^= (unsigned char)(1u << below(8));
                        break;
                case 1: /* an interesting byte */
                        if (len)
                                buf[below(len)] = bytes[below(sizeof(bytes))];
                        break;
                case 2: { /* insert a token */
                        const char *t = tokens[below(sizeof(tokens) / sizeof(tokens[0]))];
                        size_t tl = strlen(t), at = below(len + 1);
                        if (len + tl <= cap) {
                                memmove(buf + at + tl, buf + at, len - at);
                                memcpy(buf + at, t, tl);
                                len += tl;
                        }
                        break;
                }
                case 3: { /* delete a range */
                        if (!len)
                                break;
                        size_t at = below(len), l = 1 + below(len - at < 16 ? len - at : 16);
                        memmove(buf + at, buf + at + l, len - at - l);
                        len -= l;
                        break;
                }
                case 4: { /* duplicate a range */
                        if (!len)
                                break;
                        size_t at = below(len), l = 1 + below(len - at < 64 ? len - at : 64);
                        if (len + l <= cap) {
                                memmove(buf + at + l, buf + at, len - at);
                                len += l;
                        }
                        break;
                }
                case 5: { /* splice the tail of another input */
                        const struct input *o = &corpus[below(n)];
                        size_t at = below(len + 1), from = below(o->len + 1), l = o->len - from;
                        if (at + l <= cap) {
                                memcpy(buf + at, o->data + from, l);
                                len = at + l;
                        }
                        break;
                }
                case 6: /* truncate */
                        len = below(len + 1);
                        break;
                default: { /* overwrite with a digit run */
                        if (!len)
                                break;
                        size_t at = below(len), l = 1 + below(len - at < 24 ? len - at : 24);
                        for (size_t i = 0; i < l; i++)
                                buf[at + i] = (unsigned char)('0' + below(10));
                        break;
                }
                }
        }
        return len;
}

/* ---- tree mutations ---- */

static json_t *random_value(int depth)
{
        static const char *const strings[] = {
                "", "x", "vps.power", "node.status", "test.sleep", "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "job-1", "..",
                "2026-11-21T10:00:00Z", "2026-11-21T10:00:00.5+02:00", "2026-02-29T00:00:00Z", "node", "vps", "app", "disk",
                "h\xc3\xa9llo", "a\nb",
        };
        switch (below(depth > 2 ? 10 : 12)) {
        case 0: return json_null();
        case 1: return json_true();
        case 2: return json_false();
        case 3: return json_integer((json_int_t)below(5) - 1);
        case 4: {
                static const json_int_t edges[] = { INT32_MAX, (json_int_t)INT32_MAX + 1, INT64_MAX, INT64_MIN, 604800, 604801,
                                                    60, 61, 256, 257, 3, 86400, 86401, 3600, 3601 };
                return json_integer(edges[below(sizeof(edges) / sizeof(edges[0]))]);
        }
        case 5: {
                static const double reals[] = { 4.0, 1.5, -2.0, 1e300, -1e300, 9.0e15, 1.0e16, 0.0, 60.0, 1e-300 };
                return json_real(reals[below(sizeof(reals) / sizeof(reals[0]))]);
        }
        case 6:
        case 7: return json_string(strings[below(sizeof(strings) / sizeof(strings[0]))]);
        case 8: return json_stringn("a\0b", 3);
        case 9: {
                size_t l = below(3) ? below(80) : 70000 + below(1000);
                char *s = malloc(l + 1);
                memset(s, 'a' + (int)below(26), l);
                s[l] = '\0';
                json_t *j = json_string(s);
                free(s);
                return j;
        }
        case 10: {
                json_t *o = json_object();
                for (size_t i = below(4); i > 0; i--)
                        json_object_set_new(o, tokens[below(sizeof(tokens) / sizeof(tokens[0]))], random_value(depth + 1));
                return o;
        }
        default: {
                json_t *a = json_array();
                for (size_t i = below(4); i > 0; i--)
                        json_array_append_new(a, random_value(depth + 1));
                return a;
        }
        }
}

/* Pick a random container in the tree (the root included). */
static json_t *random_container(json_t *root)
{
        json_t *node = root;
        for (int depth = 0; depth < 6 && below(3); depth++) {
                json_t *child = NULL;
                if (json_is_object(node) && json_object_size(node)) {
                        size_t k = below(json_object_size(node));
                        const char *key;
                        json_t *v;
                        json_object_foreach(node, key, v)
                                if (k-- == 0) {
                                        child = v;
                                        break;
                                }
                } else if (json_is_array(node) && json_array_size(node))
                        child = json_array_get(node, below(json_array_size(node)));
                if (!child || !(json_is_object(child) || json_is_array(child)))
                        break;
                node = child;
        }
        return node;
}

static size_t mutate_tree(unsigned char *buf, size_t len, size_t cap)
{
        json_t *root = json_loadb((const char *)buf, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!root || !(json_is_object(root) || json_is_array(root))) {
                json_decref(root);
                return len;
        }
        int ops = 1 + (int)below(3);
        while (ops-- > 0) {
                json_t *node = random_container(root);
                if (json_is_object(node)) {
                        size_t k = json_object_size(node) ? below(json_object_size(node)) : 0;
                        const char *key = NULL;
                        json_t *v;
                        json_object_foreach(node, key, v)
                                if (k-- == 0)
                                        break;
                        if (!key || below(4) == 0)
                                json_object_set_new(node, tokens[below(sizeof(tokens) / sizeof(tokens[0]))], random_value(0));
                        else if (below(4) == 0)
                                json_object_del(node, key);
                        else
                                json_object_set_new(node, key, random_value(0));
                } else if (json_is_array(node)) {
                        size_t n = json_array_size(node);
                        if (!n || below(3) == 0)
                                json_array_append_new(node, random_value(0));
                        else if (below(4) == 0)
                                json_array_remove(node, below(n));
                        else
                                json_array_set_new(node, below(n), random_value(0));
                }
        }
        char *text = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(root);
        if (!text)
                return len;
        size_t tl = strlen(text);
        if (tl <= cap) {
                memcpy(buf, text, tl);
                len = tl;
        }
        free(text);
        return len;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS] [SEED]\n", argv[0]);
                return 2;
        }
        unsigned long mutations = argc > 2 ? strtoul(argv[2], NULL, 10) : 5000;
        rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 0x6e6f6465616765ULL; /* "nodeage" */
        if (!rng_state)
                rng_state = 1;

        struct input *corpus = NULL;
        size_t n = load_corpus(argv[1], &corpus);
        if (n == 0) {
                fprintf(stderr, "fuzz-job-driver: %s holds no inputs\n", argv[1]);
                return 2;
        }
        for (size_t i = 0; i < n; i++)
                LLVMFuzzerTestOneInput(corpus[i].data, corpus[i].len);

        unsigned char *buf = malloc(FUZZ_MAX_INPUT);
        for (unsigned long m = 0; m < mutations; m++) {
                const struct input *seed = &corpus[below(n)];
                memcpy(buf, seed->data, seed->len);
                size_t len = seed->len;
                /* Stack mutations: a few rounds on the same input. */
                for (int round = 1 + (int)below(3); round > 0; round--)
                        len = below(2) ? mutate_tree(buf, len, FUZZ_MAX_INPUT) : mutate_bytes(buf, len, FUZZ_MAX_INPUT, corpus, n);
                /* Exact-size allocation so ASan sees any read past the end. */
                unsigned char *exact = malloc(len ? len : 1);
                memcpy(exact, buf, len);
                LLVMFuzzerTestOneInput(exact, len);
                free(exact);
        }
        free(buf);

        printf("fuzz: %zu corpus inputs and %lu mutations (seed fixed): ", n, mutations);
        int missed = fuzz_summary(stdout);
        for (size_t i = 0; i < n; i++) {
                free(corpus[i].name);
                free(corpus[i].data);
        }
        free(corpus);
        /* The corpus must reach every outcome, or it has rotted. */
        if (missed) {
                fprintf(stderr, "fuzz driver: the corpus no longer reaches every outcome\n");
                return 1;
        }
        return 0;
}
