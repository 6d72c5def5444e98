/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The job kinds of agent/kinds/kind-firewall.c, compiled into this test with a stand-in for
 * the job layer (job_services, job_target_id, job_checkpoint...), against the real
 * kernel in a private network namespace: the round trip through JSON params and
 * results, VALIDATION_ERROR details, "firewall disabled", cancellation, and the
 * firewall.drift event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/jobs/job-kind.h"
#include "agent/base/services.h"
#include "common/json-cleanup.h"
#include "firewall/fw.h"
#include "fw-test.h"

extern job_kind_list fw_job_kinds;

#define VPS "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

/* ---- the stand-in job layer ---- */

struct job_ctx {
        const struct agent_services *services;
        const char *target;
        int checkpoints, cancel_at;
};

const struct agent_services *job_services(struct job_ctx *ctx)
{
        return ctx->services;
}

const char *job_id(const struct job_ctx *ctx)
{
        (void)ctx;
        return "00000000-0000-4000-8000-000000000001";
}

const char *job_target_id(const struct job_ctx *ctx)
{
        return ctx->target;
}

int64_t job_attempt(const struct job_ctx *ctx)
{
        (void)ctx;
        return 1;
}

void job_progress(struct job_ctx *ctx, const char *stage, int percent, const char *fmt, ...)
{
        (void)ctx, (void)stage, (void)percent, (void)fmt;
}

int job_checkpoint(struct job_ctx *ctx, struct na_error *err)
{
        if (++ctx->checkpoints == ctx->cancel_at)
                return na_error_set(err, ECANCELED, NA_E_JOB_CANCELLED, "cancelled by the test");
        return 0;
}

uint64_t job_remaining_ms(const struct job_ctx *ctx)
{
        (void)ctx;
        return 60000;
}

/* ---- the events the handlers emit ---- */

static json_t *events;

static void emit_event(const struct agent_services *s, const char *type, const char *target_id, json_t *data)
{
        (void)s;
        json_array_append_new(events, json_pack("{s:s, s:s, s:o}", "type", type, "targetId", target_id, "data",
                                                data ? data : json_object()));
}

static const struct job_kind *kind(const char *name)
{
        for (const struct job_kind *const *k = fw_job_kinds; *k; k++)
                if (strcmp((*k)->name, name) == 0)
                        return *k;
        fail_msg("no kind %s", name);
        abort();
}

/* Decode and run a job as the job layer would; 0 or the failure's negative errno. */
static int run(struct agent_services *s, const char *name, const char *params, json_t **data, struct na_error *err)
{
        const struct job_kind *k = kind(name);
        struct job_ctx ctx = { .services = s, .target = VPS };
        _cleanup_json_ json_t *p = fwt_json(params ? params : "{}");
        void *decoded = NULL;
        *data = NULL;
        int r = k->decode ? k->decode(p, &decoded, err) : 0;
        if (r == 0)
                r = k->run(&ctx, decoded, data, err);
        if (decoded && k->free_params)
                k->free_params(decoded);
        return r;
}

struct env {
        char dir[64];
        struct agent_services services;
};

static int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        snprintf(e->dir, sizeof(e->dir), "/tmp/fw-jobs.XXXXXX");
        if (!mkdtemp(e->dir) || fwt_nft(NULL, "flush ruleset") != 0)
                return -1;
        struct fw_options opt = { .state_dir = e->dir, .netns_fd = -1 };
        struct na_error err = NA_ERROR_INIT;
        if (fw_open(&opt, &e->services.fw, &err) < 0)
                return -1;
        e->services.state_dir = e->dir;
        e->services.emit_event = emit_event;
        events = json_array();
        *state = e;
        return 0;
}

static int teardown(void **state)
{
        struct env *e = *state;
        fw_close(e->services.fw);
        char path[256];
        snprintf(path, sizeof(path), "%s/firewall/%s.json", e->dir, VPS);
        unlink(path);
        snprintf(path, sizeof(path), "%s/firewall", e->dir);
        rmdir(path);
        rmdir(e->dir);
        json_decref(events);
        free(e);
        return 0;
}

static const char *const SET =
        "{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
        "{\"type\": \"inbound\", \"protocol\": \"tcp\", \"port\": \"22\", \"source\": \"203.0.113.0/24\", "
        "\"destination\": \"any\", \"action\": \"allow\", \"enabled\": true, \"comment\": \"ssh\"},"
        "{\"id\": 7, \"type\": \"outbound\", \"protocol\": \"udp\", \"port\": \"53,853\", \"source\": \"any\", "
        "\"destination\": \"2001:db8::53\", \"action\": \"reject\", \"enabled\": false, \"comment\": \"\"}]}";

static void test_kinds(void **state)
{
        (void)state;
        const struct job_kind *get = kind("vps.firewall.get"), *set = kind("vps.firewall.set");
        assert_int_equal(get->target, PROTO_TARGET_VPS);
        assert_false(get->changes);
        assert_int_equal(set->target, PROTO_TARGET_VPS);
        assert_true(set->changes);
        size_t n = 0;
        for (const struct job_kind *const *k = fw_job_kinds; *k; k++)
                n++;
        assert_int_equal(n, 2);
}

static void test_set_get_round_trip(void **state)
{
        struct env *e = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *set_data = NULL, *get_data = NULL;
        assert_int_equal(run(&e->services, "vps.firewall.set", SET, &set_data, &err), 0);
        assert_int_equal(run(&e->services, "vps.firewall.get", NULL, &get_data, &err), 0);
        /* every field comes back: the first rule got id 8 (above the given 7) */
        _cleanup_json_ json_t *want = fwt_json(SET);
        json_object_set_new(json_array_get(json_object_get(want, "rules"), 0), "id", json_integer(8));
        if (!json_equal(set_data, want) || !json_equal(get_data, want)) {
                char *a = json_dumps(set_data, JSON_INDENT(1)), *b = json_dumps(get_data, JSON_INDENT(1));
                print_error("set answered:\n%s\nget answered:\n%s\n", a, b);
                free(a);
                free(b);
                fail();
        }
        assert_int_equal(json_array_size(events), 0); /* nothing changed by hand: no drift */
}

static void test_validation(void **state)
{
        struct env *e = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *data = NULL;
        assert_int_equal(run(&e->services, "vps.firewall.set",
                             "{\"enabled\": true, \"inboundPolicy\": \"deny\", \"outboundPolicy\": \"allow\", \"rules\": ["
                             "{\"id\": 1, \"type\": \"inbound\", \"protocol\": \"icmp\", \"port\": \"22\", \"action\": \"allow\"},"
                             "{\"id\": 1, \"type\": \"inbound\", \"protocol\": \"tcp\", \"action\": \"allow\", \"source\": \"1.2.3.4/8\"}]}",
                             &data, &err),
                         -EINVAL);
        _cleanup_json_ json_t *failure = na_error_to_json(&err);
        assert_int_equal(json_integer_value(json_object_get(failure, "httpStatus")), 422);
        assert_string_equal(json_string_value(json_object_get(failure, "code")), "VALIDATION_ERROR");
        assert_true(fwt_field_has(&err, "rules.0.port", "only tcp and udp"));
        assert_true(fwt_field_has(&err, "rules.1.id", "duplicate rule id 1"));
        assert_true(fwt_field_has(&err, "rules.1.source", "host bits"));
        /* nothing was applied */
        char *out = NULL;
        fwt_nft(&out, "list ruleset");
        assert_null(strstr(out, "nav"));
        free(out);
}

static void test_disabled_on_node(void **state)
{
        struct env *e = *state;
        struct agent_services off = e->services;
        off.fw = NULL;
        const char *names[] = { "vps.firewall.get", "vps.firewall.set" };
        for (int i = 0; i < 2; i++) {
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                _cleanup_json_ json_t *data = NULL;
                assert_true(run(&off, names[i], i ? SET : NULL, &data, &err) < 0);
                _cleanup_json_ json_t *failure = na_error_to_json(&err);
                assert_int_equal(json_integer_value(json_object_get(failure, "httpStatus")), 502);
                assert_string_equal(json_string_value(json_object_get(failure, "code")), "DRIVER_ERROR");
                assert_string_equal(json_string_value(json_object_get(json_object_get(failure, "details"), "reason")),
                                    "firewall disabled on this node");
                assert_non_null(strstr(err.message, VPS));
        }
}

static bool no_server(const struct agent_services *s, const char *vps_id)
{
        (void)s;
        (void)vps_id;
        return false;
}

/* An unknown server: VPS_NOT_FOUND, and the run's return says the same (-ENOENT), not
 * another errno beside it. */
static void test_unknown_server(void **state)
{
        struct env *e = *state;
        struct agent_services gone = e->services;
        gone.vps_exists = no_server;
        const char *names[] = { "vps.firewall.get", "vps.firewall.set" };
        for (int i = 0; i < 2; i++) {
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                _cleanup_json_ json_t *data = NULL;
                assert_int_equal(run(&gone, names[i], i ? SET : NULL, &data, &err), -ENOENT);
                assert_string_equal(err.code, NA_E_VPS_NOT_FOUND);
        }
}

static void test_cancelled(void **state)
{
        struct env *e = *state;
        const struct job_kind *k = kind("vps.firewall.set");
        struct job_ctx ctx = { .services = &e->services, .target = VPS, .cancel_at = 1 };
        _cleanup_json_ json_t *p = fwt_json(SET);
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        void *decoded = NULL;
        json_t *data = NULL;
        assert_int_equal(k->decode(p, &decoded, &err), 0);
        assert_true(k->run(&ctx, decoded, &data, &err) < 0);
        assert_string_equal(err.code, NA_E_JOB_CANCELLED);
        assert_null(data);
        k->free_params(decoded);
        char *out = NULL;
        fwt_nft(&out, "list ruleset");
        assert_null(strstr(out, "nav")); /* stopped before its first effect */
        free(out);
}

static void test_drift_event(void **state)
{
        struct env *e = *state;
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *data = NULL, *after = NULL;
        assert_int_equal(run(&e->services, "vps.firewall.set", SET, &data, &err), 0);
        assert_int_equal(fwt_nft(NULL, "add rule inet nodeagent-06 nav6f1c2a3b4c5d-out tcp dport 25 drop"), 0);
        assert_int_equal(run(&e->services, "vps.firewall.get", NULL, &after, &err), 0);
        assert_int_equal(json_array_size(events), 1);
        json_t *ev = json_array_get(events, 0);
        assert_string_equal(json_string_value(json_object_get(ev, "type")), "firewall.drift");
        assert_string_equal(json_string_value(json_object_get(ev, "targetId")), VPS);
        json_t *reasons = json_object_get(json_object_get(ev, "data"), "reasons");
        assert_true(json_array_size(reasons) >= 2);
        /* the answer is the kernel's truth: the hand-made rule is in it, with the next id */
        json_t *rules = json_object_get(after, "rules");
        assert_int_equal(json_array_size(rules), 3);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(rules, 2), "id")), 9);
        assert_string_equal(json_string_value(json_object_get(json_array_get(rules, 2), "port")), "25");
}

int main(void)
{
        if (!fwt_private_netns()) {
                fprintf(stderr, "test-fw-jobs: needs root for a private network namespace: skipped\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),
                cmocka_unit_test_setup_teardown(test_set_get_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disabled_on_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_server, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancelled, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drift_event, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
