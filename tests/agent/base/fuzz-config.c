/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the configuration file (agent/base/config.c): the input is the
 * text of nodeagent.conf, parsed by config_parse (config_load without the file
 * system). The parser must never crash or leak, must always return a configuration
 * (only memory can fail it), and must report each problem as exactly one
 * "fuzz.conf:LINE: key: reason" line: as many lines as it counts problems. A
 * configuration with no problem has what the file requires (node id, controller URL,
 * token file). Built as a libFuzzer target by fuzz/CMakeLists.txt (scripts/fuzz.sh),
 * and run under CTest with gcc by tests/proto/fuzz-driver.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/base/config.h"
#include "common/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

static unsigned long clean, with_problems;

#define CHECK(cond, ...)                                                              \
        do {                                                                          \
                if (!(cond)) {                                                        \
                        fprintf(stderr, "fuzz-config: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                                 \
                        fputc('\n', stderr);                                          \
                        abort();                                                      \
                }                                                                     \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > (1u << 20))
                return 0; /* config_load reads at most 1 MiB */
        char *report = NULL;
        size_t report_len = 0;
        FILE *out = open_memstream(&report, &report_len);
        CHECK(out, "open_memstream");
        unsigned problems = 0;
        struct agent_config *cfg = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = config_parse("fuzz.conf", (const char *)data, size, out, &problems, &cfg, &err);
        fclose(out);
        CHECK(r == 0, "config_parse failed: %s", err.message);
        CHECK(cfg && !na_error_is_set(&err), "a configuration without error");

        unsigned lines = 0;
        for (char *line = report, *nl; line && *line; line = nl + 1) {
                nl = strchr(line, '\n');
                CHECK(nl, "report line without newline: %s", line);
                CHECK(strncmp(line, "fuzz.conf:", 10) == 0, "report line not FILE:LINE: %.200s", line);
                char *end = NULL;
                unsigned long no = strtoul(line + 10, &end, 10);
                CHECK(end && end[0] == ':' && end[1] == ' ' && no <= size + 1, "report line number: %.200s", line);
                lines++;
        }
        CHECK(lines == problems, "%u problems counted, %u reported", problems, lines);
        if (problems == 0) {
                clean++;
                CHECK(cfg->node_id && cfg->url && cfg->token_file, "no problem but a required key unset");
                CHECK(cfg->token_file_line > 0, "token_file set but its line unknown");
        } else
                with_problems++;
        config_free(cfg);
        free(report);
        return 0;
}

int fuzz_summary(FILE *out)
{
        fprintf(out, "%lu configurations without problem, %lu with\n", clean, with_problems);
        return clean == 0 || with_problems == 0;
}
