/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A libFuzzer entry for the params of every app kind (proto/app-params.h): the input is read
 * as JSON; {"kind": K, "params": P} goes to K's decoder, and whatever the input is,
 * its params (or itself) also go to every app decoder. A decoder must never crash or
 * leak, must not succeed with an error set or leave *ret set on failure, must fail
 * only with VALIDATION_ERROR in the reference's details shape, and what it accepts
 * must hold to the limits. An accepted deploy's canonical form must decode to the
 * same deploy, and its App record must encode. Run under CTest by
 * tests/proto/fuzz-driver.c (corpus, then seeded mutations).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-params.h"
#include "proto/app-update.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_summary(FILE *out);

#define CHECK(cond, ...)                                                        \
        do {                                                                    \
                if (!(cond)) {                                                  \
                        fprintf(stderr, "fuzz-app: contract broken: %s: ", #cond); \
                        fprintf(stderr, __VA_ARGS__);                           \
                        fputc('\n', stderr);                                    \
                        abort();                                                \
                }                                                               \
        } while (0)

enum { K_DEPLOY, K_POWER, K_COMMAND, K_CONSOLE, K_OUTPUT, K_IMAGE, K_UPDATE, K_N };
static const char *const kind_names[K_N] = { "app.deploy", "app.power", "app.command.set", "app.console.send",
                                             "app.output", "image.pull", "app.update" };
static unsigned long accepted[K_N], refused[K_N];

static void check_details(json_t *node)
{
        CHECK(json_is_object(node) && json_is_array(json_object_get(node, "_errors")), "details node without _errors");
        const char *key;
        json_t *v;
        json_object_foreach(node, key, v) {
                if (streq(key, "_errors")) {
                        size_t i;
                        json_t *m;
                        json_array_foreach(v, i, m) CHECK(json_is_string(m) && json_string_length(m) > 0, "message");
                } else
                        check_details(v);
        }
}

static size_t strv_len(char **v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static void check_deploy(struct proto_app_deploy *d)
{
        const struct proto_app_template *t = &d->tmpl;
        CHECK(d->name && d->hostname && d->version && d->sftp_username && t->id, "required strings");
        CHECK(!proto_app_hostname_problem(d->hostname), "hostname %s", d->hostname);
        CHECK(!proto_app_sftp_username_problem(d->sftp_username), "sftpUsername");
        CHECK(!proto_app_volume_path_problem(t->volume_path), "volumePath %s", t->volume_path);
        CHECK(!t->started_pattern || !proto_app_pattern_problem(t->started_pattern), "startedPattern");
        CHECK(!d->command || (strv_len(d->command) >= 1 && strv_len(d->command) <= 100), "command");
        CHECK(!d->command || t->custom_command, "command with a managed template");
        CHECK(t->env && strv_len(t->env) == t->n_env && t->n_env <= PROTO_APP_ENV_MAX, "env");
        CHECK(t->n_ports <= PROTO_APP_PORTS_MAX, "ports");
        for (size_t i = 0; i < t->n_ports; i++)
                CHECK(t->ports[i] >= 1 && (i == 0 || t->ports[i] > t->ports[i - 1]), "ports sorted and unique");
        CHECK(t->stop.kind == PROTO_APP_STOP_LINE ? t->stop.line && strlen(t->stop.line) <= PROTO_APP_LINE_MAX &&
                                                            !strpbrk(t->stop.line, "\r\n")
                                                  : proto_app_stop_signal_allowed(t->stop.signal),
              "stop");
        CHECK(d->plan.cpu_millis >= PROTO_APP_CPU_MILLIS_MIN && d->plan.cpu_millis <= PROTO_APP_CPU_MILLIS_MAX, "cpu");
        CHECK(d->plan.memory_mb >= 16 && d->plan.volume_quota_mb >= 16 && d->plan.pids >= 16, "plan");
        CHECK(t->image.name[0] && (t->image.tag[0] || t->image.digest[0]), "image");

        /* The canonical form decodes to the same deploy. */
        _cleanup_json_ json_t *c = proto_app_deploy_canonical(d);
        CHECK(c != NULL, "canonical");
        struct proto_app_deploy *again = NULL;
        struct na_error err = NA_ERROR_INIT;
        int r = proto_app_deploy_decode(c, &again, &err);
        CHECK(r == 0, "canonical refused: %s", err.message);
        CHECK(proto_app_deploy_same(d, again), "canonical is another deploy");
        proto_app_deploy_free(again);

        struct proto_app a;
        proto_app_from_deploy(d, "3e4f5a6b-7c8d-4e9f-8a1b-2c3d4e5f6a7b", &a);
        _cleanup_json_ json_t *j = proto_app_encode(&a);
        CHECK(j != NULL, "App encode");
        char *text = json_dumps(j, JSON_COMPACT);
        CHECK(text != NULL, "App dump");
        free(text);
}

/* An accepted update: within its limits, and applied to a deploy it gives a deploy that holds to the rules. */
static void check_update(struct proto_app_update *u)
{
        CHECK(u->version || u->has_template || u->has_plan, "update with nothing to change");
        CHECK(u->healthy_sec >= PROTO_APP_HEALTHY_MIN && u->healthy_sec <= PROTO_APP_HEALTHY_MAX, "healthySec");
        CHECK(strlen(u->safety_backup_id) <= PROTO_VPS_OBJECT_ID_MAX, "safetyBackupId");
        _cleanup_json_ json_t *base = json_pack(
                "{s:s, s:s, s:s, s:s, s:[s], s:{s:s, s:s, s:b}, s:{s:i, s:i, s:i}}", "name", "web", "hostname", "web",
                "version", "1", "sftpUsername", "web", "command", "/bin/app", "template", "id", "t", "image", "node:20",
                "customCommand", 1, "plan", "cpuCores", 1, "memoryMB", 512, "volumeQuotaMB", 1024);
        struct proto_app_deploy *cur = NULL, *next = NULL;
        struct na_error err = NA_ERROR_INIT;
        CHECK(base && proto_app_deploy_decode(base, &cur, &err) == 0, "base deploy: %s", err.message);
        int r = proto_app_update_apply(cur, u, &next, &err);
        CHECK(r == 0, "an accepted update does not apply: %s", err.message);
        check_deploy(next);
        enum proto_app_update_change ch = proto_app_update_change(cur, next);
        CHECK(ch <= PROTO_APP_UPDATE_RESTART, "change");
        CHECK(ch != PROTO_APP_UPDATE_NONE || proto_app_deploy_same(cur, next), "no change but another deploy");
        struct proto_app_deploy *again = NULL;
        CHECK(proto_app_update_apply(next, u, &again, &err) == 0, "again: %s", err.message);
        CHECK(proto_app_update_change(next, again) == PROTO_APP_UPDATE_NONE, "the same update again does not converge");
        proto_app_deploy_free(again);
        proto_app_deploy_free(next);
        proto_app_deploy_free(cur);
        _cleanup_json_ json_t *ev = proto_app_updated_encode(u->version, false, NULL);
        CHECK(ev != NULL, "app.updated encode");
}

static void decode_one(int kind, json_t *params)
{
        struct na_error err = NA_ERROR_INIT;
        void *out = NULL;
        int r;
        switch (kind) {
        case K_DEPLOY: r = proto_app_deploy_decode(params, (struct proto_app_deploy **)&out, &err); break;
        case K_POWER: r = proto_app_power_decode(params, (struct proto_app_power **)&out, &err); break;
        case K_COMMAND: r = proto_app_command_set_decode(params, (struct proto_app_command_set **)&out, &err); break;
        case K_CONSOLE: r = proto_app_console_send_decode(params, (struct proto_app_console_send **)&out, &err); break;
        case K_OUTPUT: r = proto_app_output_decode(params, (struct proto_app_output_query **)&out, &err); break;
        case K_UPDATE: r = proto_app_update_decode(params, (struct proto_app_update **)&out, &err); break;
        default: r = proto_app_image_decode(params, (struct proto_app_image_params **)&out, &err); break;
        }
        if (r < 0) {
                refused[kind]++;
                CHECK(r == -EINVAL, "%s returned %d", kind_names[kind], r);
                CHECK(out == NULL, "%s: failed but returned params", kind_names[kind]);
                CHECK(na_error_is_set(&err) && streq(err.code, NA_E_VALIDATION) && err.http_status == 422,
                      "%s: failed with %s: %s", kind_names[kind], err.code ? err.code : "no error", err.message);
                check_details(err.details);
                na_error_clear(&err);
                return;
        }
        accepted[kind]++;
        CHECK(r == 0 && out != NULL, "%s returned %d", kind_names[kind], r);
        CHECK(!na_error_is_set(&err), "%s: success with an error set: %s", kind_names[kind], err.message);
        switch (kind) {
        case K_DEPLOY:
                check_deploy(out);
                proto_app_deploy_free(out);
                break;
        case K_POWER: {
                struct proto_app_power *p = out;
                CHECK(p->action <= PROTO_APP_POWER_KILL && p->grace_sec >= 0 && p->grace_sec <= 3600, "power");
                proto_app_power_free(p);
                break;
        }
        case K_COMMAND: {
                struct proto_app_command_set *p = out;
                CHECK(!p->command || (strv_len(p->command) >= 1 && strv_len(p->command) <= 100), "command.set");
                proto_app_command_set_free(p);
                break;
        }
        case K_CONSOLE: {
                struct proto_app_console_send *p = out;
                CHECK(p->len <= PROTO_APP_LINE_MAX && strlen(p->line) == p->len && !strpbrk(p->line, "\r\n"), "line");
                proto_app_console_send_free(p);
                break;
        }
        case K_OUTPUT: {
                struct proto_app_output_query *p = out;
                CHECK(p->since_seq >= -1 && p->limit >= 1 && p->limit <= 1000, "output");
                proto_app_output_free(p);
                break;
        }
        case K_UPDATE:
                check_update(out);
                proto_app_update_free(out);
                break;
        default: {
                struct proto_app_image_params *p = out;
                char buf[PROTO_APP_IMAGE_REF_MAX + 1];
                struct proto_image_ref again;
                CHECK(proto_image_ref_parse(proto_image_ref_format(&p->ref, buf, sizeof(buf)), "image", &again, &err) == 0 &&
                              memcmp(&again, &p->ref, sizeof(again)) == 0,
                      "image reference does not format back");
                proto_app_image_free(p);
                break;
        }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!doc)
                return 0;
        json_t *params = json_object_get(doc, "params");
        const char *name = json_string_value(json_object_get(doc, "kind"));
        json_t *as_params = json_is_object(params) ? params : (json_is_object(doc) ? doc : NULL);
        if (as_params) {
                for (int k = 0; k < K_N; k++)
                        decode_one(k, as_params);
                if (name && streq(name, "image.delete"))
                        decode_one(K_IMAGE, as_params);
        }
        json_decref(doc);
        return 0;
}

int fuzz_summary(FILE *out)
{
        int missed = 0;
        for (int k = 0; k < K_N; k++) {
                fprintf(out, "%s%s %lu accepted, %lu refused", k ? "; " : "", kind_names[k], accepted[k], refused[k]);
                missed |= !accepted[k] || !refused[k];
        }
        fputc('\n', out);
        return missed;
}
