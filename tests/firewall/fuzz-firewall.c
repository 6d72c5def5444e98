/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer entry for the Firewall configuration: bytes -> JSON -> proto_fw_decode,
 * then the properties every accepted input must have:
 *  - the encoding decodes to the same configuration (the canonical form is a fixpoint);
 *  - with ids given as fw_set gives them, the batch the library builds parses back
 *    (with the reader used on the kernel's rules) to that same configuration.
 * A refused input must carry a VALIDATION_ERROR with details. A broken property aborts.
 *
 * CTest runs it with gcc over tests/firewall/corpus and seeded mutations
 * (test-fw-fuzz.c); scripts/fuzz.sh builds it with clang as a real libFuzzer target.
 */
#include <jansson.h>
#include <libnftnl/rule.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "firewall/fw-internal.h"
#include "proto/firewall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* What the inputs did, for the CTest driver to check it reached both sides. */
unsigned long fuzz_fw_accepted, fuzz_fw_refused, fuzz_fw_not_json;

#define VPS "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

static void check(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "fuzz-firewall: property broken: %s\n", what);
                abort();
        }
}

static void build_and_parse_back(const struct fw_config *decoded)
{
        struct fw_config cfg;
        check(proto_fw_copy(&cfg, decoded, NULL) == 0, "copy");
        uint32_t next = 1;
        for (size_t i = 0; i < cfg.n_rules; i++)
                if (cfg.rules[i].id >= next)
                        next = cfg.rules[i].id + 1;
        for (size_t i = 0; i < cfg.n_rules; i++)
                if (!cfg.rules[i].id)
                        cfg.rules[i].id = next++;
        if (next - 1 > FW_RULE_ID_MAX) { /* no ids left: fw_set refuses it too */
                proto_fw_clear(&cfg);
                return;
        }

        struct nft_batch b;
        struct na_error err = NA_ERROR_INIT;
        nft_batch_init(&b, "nodeagent-00");
        check(fw_build_server(&b, "nodeagent-00", VPS, &cfg, &err) == 0, "build");
        size_t cap = b.n + 1, n_in = 0, n_out = 0;
        struct nftnl_rule **in = calloc(cap, sizeof(*in)), **out = calloc(cap, sizeof(*out));
        bool dispatched = false;
        for (size_t i = 0; i < b.n; i++) {
                if (b.ops[i].kind == NFT_OP_ELEM_ADD)
                        dispatched = true;
                if (b.ops[i].kind == NFT_OP_ELEM_DEL)
                        dispatched = false;
                if (b.ops[i].kind != NFT_OP_RULE_ADD)
                        continue;
                const char *chain = nftnl_rule_get_str(b.ops[i].obj, NFTNL_RULE_CHAIN);
                if (strcmp(chain + strlen(chain) - 3, "-in") == 0)
                        in[n_in++] = b.ops[i].obj;
                else
                        out[n_out++] = b.ops[i].obj;
        }
        struct fw_live live;
        fw_live_init(&live);
        live.chain[0] = live.chain[1] = true;
        live.elem[0] = live.elem[1] = dispatched;
        struct fw_fetch none = { 0 };
        check(fw_parse_server(in, n_in, out, n_out, &none, &live, &err) == 0, "parse back");
        check(live.anomalies == NULL, "no anomaly in what the agent wrote");
        check(proto_fw_equal(&live.cfg, &cfg), "what is written reads back the same");
        check(proto_fw_diff(&live.cfg, &cfg, NULL) == 0, "and drift sees no difference");

        char *text = NULL;
        check(nft_batch_render(&b, fw_udata_render, &text, &err) == 0 && text, "render");
        free(text);
        fw_live_clear(&live);
        free(in);
        free(out);
        nft_batch_clear(&b);
        proto_fw_clear(&cfg);
        na_error_clear(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t jerr;
        json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j) {
                fuzz_fw_not_json++;
                return 0;
        }
        struct fw_config cfg;
        struct na_error err = NA_ERROR_INIT;
        if (proto_fw_decode(j, &cfg, &err) < 0) {
                check(na_error_is_set(&err) && strcmp(err.code, NA_E_VALIDATION) == 0 && err.details,
                      "a refusal is a VALIDATION_ERROR with details");
                check(cfg.rules == NULL && cfg.n_rules == 0, "a refusal leaves nothing behind");
                fuzz_fw_refused++;
        } else {
                json_t *enc = proto_fw_encode(&cfg);
                struct fw_config again;
                struct na_error err2 = NA_ERROR_INIT;
                check(enc && proto_fw_decode(enc, &again, &err2) == 0, "the encoding decodes");
                check(proto_fw_equal(&cfg, &again), "the canonical form is a fixpoint");
                build_and_parse_back(&cfg);
                fuzz_fw_accepted++;
                proto_fw_clear(&again);
                json_decref(enc);
                proto_fw_clear(&cfg);
        }
        na_error_clear(&err);
        json_decref(j);
        return 0;
}
