/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "fw-test.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

json_t *fwt_json(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j)
                fail_msg("bad test JSON (%s): %s", jerr.text, text);
        return j;
}

void fwt_config(const char *text, struct fw_config *out)
{
        json_t *j = fwt_json(text);
        struct na_error err = NA_ERROR_INIT;
        if (proto_fw_decode(j, out, &err) < 0) {
                char *d = json_dumps(err.details, JSON_COMPACT);
                print_error("%s\n%s\n", err.message, d ? d : "");
                free(d);
                fail_msg("test configuration does not decode: %s", text);
        }
        json_decref(j);
        na_error_clear(&err);
}

static json_t *node_at(const struct na_error *err, const char *path)
{
        json_t *node = err->details;
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", path ? path : "");
        char *save = NULL;
        for (char *seg = strtok_r(buf, ".", &save); seg && node; seg = strtok_r(NULL, ".", &save))
                node = json_object_get(node, seg);
        return node;
}

bool fwt_field_has(const struct na_error *err, const char *path, const char *fragment)
{
        json_t *list = json_object_get(node_at(err, path), "_errors");
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
                if (json_is_string(v) && strstr(json_string_value(v), fragment))
                        return true;
        return false;
}

static size_t count(json_t *node)
{
        size_t n = 0;
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
                if (strcmp(key, "_errors") == 0)
                        n += json_array_size(v);
                else if (json_is_object(v))
                        n += count(v);
        }
        return n;
}

size_t fwt_field_count(const struct na_error *err)
{
        return err->details ? count(err->details) : 0;
}

bool fwt_private_netns(void)
{
        if (geteuid() != 0)
                return false;
        return unshare(CLONE_NEWNET) == 0;
}

int fwt_run(char *const argv[], char **out)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -1;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
        pid_t pid;
        int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (r != 0) {
                close(pipefd[0]);
                return -1;
        }
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        for (;;) {
                if (len + 1024 > cap)
                        buf = realloc(buf, cap *= 2);
                ssize_t n = read(pipefd[0], buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        close(pipefd[0]);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (out)
                *out = buf;
        else
                free(buf);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int fwt_nft(char **out, const char *args)
{
        char nft[] = "nft", *copy = strdup(args), *argv[64] = { nft };
        int n = 1;
        for (char *save = NULL, *tok = strtok_r(copy, " ", &save); tok && n < 63; tok = strtok_r(NULL, " ", &save))
                argv[n++] = tok;
        argv[n] = NULL;
        int r = fwt_run(argv, out);
        free(copy);
        return r;
}

char *fwt_read_source(const char *rel)
{
        const char *src = getenv("NA_SOURCE_DIR");
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        for (size_t n; (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
                len += n;
                if (len + 1 >= cap)
                        buf = realloc(buf, cap *= 2);
        }
        buf[len] = '\0';
        fclose(f);
        return buf;
}

void fwt_golden(const char *rel, const char *text)
{
        const char *update = getenv("NA_UPDATE_GOLDEN");
        if (update && strcmp(update, "1") == 0) {
                const char *src = getenv("NA_SOURCE_DIR");
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
                FILE *f = fopen(path, "we");
                assert_non_null(f);
                fputs(text, f);
                fclose(f);
                return;
        }
        char *want = fwt_read_source(rel);
        if (!want)
                fail_msg("golden file %s is missing (NA_UPDATE_GOLDEN=1 writes it)", rel);
        if (strcmp(want, text) != 0) {
                /* the first differing line, to make the failure readable */
                const char *a = want, *b = text;
                int line = 1;
                while (*a && *a == *b) {
                        if (*a == '\n')
                                line++;
                        a++;
                        b++;
                }
                print_error("%s differs at line %d\n--- expected\n%s\n--- got\n%s\n", rel, line, want, text);
                free(want);
                fail_msg("%s: output differs from the golden file", rel);
        }
        free(want);
}
