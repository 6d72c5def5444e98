/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The domain hook (drivers/app-routes.h) as the lead's verifier and router will see
 * it, with the real app network code in a private network namespace (root only; 77
 * otherwise): a pending domain exposure, verify answering "not configured" without a
 * hook, then a verifier that says yes (routed once, to the app's address and
 * containerPort), then no (un-routed, the reason kept), and removal un-routing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "drivers/app-routes.h"
#include "drivers/app/net/app-net.h"

#define APP "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define EXP "0b9e7a52-8c1f-4d3e-9a4b-5c6d7e8f9a0b"

struct fake {
        bool answer, fail_add;
        int verified, added, removed;
        char host[256], target[256], addr[16];
        uint16_t port;
};

static int fake_verify(void *ud, const char *hostname, const char *target, bool *ret_ok, char *reason,
                       size_t reason_len, struct na_error *err)
{
        (void)err;
        struct fake *f = ud;
        f->verified++;
        snprintf(f->host, sizeof(f->host), "%s", hostname);
        snprintf(f->target, sizeof(f->target), "%s", target);
        *ret_ok = f->answer;
        if (!f->answer)
                snprintf(reason, reason_len, "CNAME points at x.example.net, expected %s", target);
        return 0;
}

static int fake_add(void *ud, const char *app_id, const char *exposure_id, const char *hostname, const char *addr,
                    uint16_t port, struct na_error *err)
{
        (void)app_id, (void)exposure_id, (void)hostname;
        struct fake *f = ud;
        if (f->fail_add)
                return na_error_set(err, EIO, NA_E_DRIVER, "haproxy: runtime API: connection refused");
        f->added++;
        snprintf(f->addr, sizeof(f->addr), "%s", addr);
        f->port = port;
        return 0;
}

static int fake_remove(void *ud, const char *app_id, const char *exposure_id, const char *hostname,
                       struct na_error *err)
{
        (void)app_id, (void)exposure_id, (void)hostname, (void)err;
        ((struct fake *)ud)->removed++;
        return 0;
}

static char dir[64];

static struct app_net *open_net(const struct app_routes *routes)
{
        char apps[128];
        snprintf(apps, sizeof(apps), "%s/apps", dir);
        struct app_net_options o = { .storage_dir = dir, .apps_dir = apps, .network = "10.88.0.0/16",
                                     .ports = "20000-20100", .apps_domain = "apps.example.test", .routes = routes };
        struct app_net *n = NULL;
        struct na_error err = NA_ERROR_INIT;
        if (app_net_open(&o, &n, &err) < 0)
                fail_msg("open: %s", err.message);
        return n;
}

static void test_hook(void **state)
{
        (void)state;
        struct na_error err = NA_ERROR_INIT;
        struct proto_exposure_add p = { .type = PROTO_EXPOSURE_DOMAIN, .container_port = 8080,
                                        .protocol = PROTO_EXPOSURE_HTTP };
        snprintf(p.id, sizeof(p.id), EXP);
        snprintf(p.hostname, sizeof(p.hostname), "play.example.com");

        /* No hook: pending, and verify says so without changing anything. */
        struct app_net *n = open_net(NULL);
        assert_int_equal(app_net_register(n, APP, "game", NULL, &err), 0);
        char addr[16];
        assert_int_equal(app_net_address(n, APP, addr, &err), 0);
        assert_string_equal(addr, "10.88.0.2");
        json_t *e = NULL;
        assert_int_equal(app_net_exposure_add(n, APP, &p, &e, &err), 0);
        assert_string_equal(json_string_value(json_object_get(e, "verificationTarget")), "game.apps.example.test");
        assert_true(json_is_false(json_object_get(e, "isDomainVerified")));
        json_decref(e);
        assert_int_equal(app_net_exposure_verify(n, APP, EXP, &e, &err), 0);
        assert_string_equal(json_string_value(json_object_get(e, "verificationError")),
                            "domain verification is not configured on this node");
        assert_true(json_is_null(json_object_get(e, "lastCheckedAt")));
        json_decref(e);
        /* Under the apps domain: 422 on hostname. */
        struct proto_exposure_add q = p;
        snprintf(q.id, sizeof(q.id), "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f");
        snprintf(q.hostname, sizeof(q.hostname), "x.apps.example.test");
        assert_true(app_net_exposure_add(n, APP, &q, &e, &err) < 0);
        assert_string_equal(err.code, NA_E_VALIDATION);
        assert_non_null(json_object_get(err.details, "hostname"));
        na_error_clear(&err);
        app_net_close(n);

        /* With a hook (the stored exposure is read again at open). */
        struct fake f = { .answer = true };
        struct app_routes routes = { .userdata = &f, .verify = fake_verify, .route_add = fake_add,
                                     .route_remove = fake_remove };
        n = open_net(&routes);
        /* A router that fails: verify still succeeds, not routed, the router's reason given. */
        f.fail_add = true;
        assert_int_equal(app_net_exposure_verify(n, APP, EXP, &e, &err), 0);
        assert_true(json_is_false(json_object_get(e, "isDomainVerified")));
        assert_non_null(strstr(json_string_value(json_object_get(e, "verificationError")), "routing failed"));
        json_decref(e);
        f.fail_add = false;
        f.verified = 0;
        assert_int_equal(app_net_exposure_verify(n, APP, EXP, &e, &err), 0);
        assert_int_equal(f.verified, 1);
        assert_string_equal(f.host, "play.example.com");
        assert_string_equal(f.target, "game.apps.example.test");
        assert_int_equal(f.added, 1);
        assert_string_equal(f.addr, "10.88.0.2");
        assert_int_equal(f.port, 8080);
        assert_true(json_is_true(json_object_get(e, "isDomainVerified")));
        assert_true(json_is_string(json_object_get(e, "verifiedAt")));
        assert_true(json_is_null(json_object_get(e, "verificationError")));
        json_decref(e);
        /* Verified again: no second route. */
        assert_int_equal(app_net_exposure_verify(n, APP, EXP, &e, &err), 0);
        assert_int_equal(f.added, 1);
        json_decref(e);
        /* The record changed: un-routed, the reason kept. */
        f.answer = false;
        assert_int_equal(app_net_exposure_verify(n, APP, EXP, &e, &err), 0);
        assert_int_equal(f.removed, 1);
        assert_true(json_is_false(json_object_get(e, "isDomainVerified")));
        assert_string_equal(json_string_value(json_object_get(e, "verificationError")),
                            "CNAME points at x.example.net, expected game.apps.example.test");
        json_decref(e);
        /* Verified, then removed: un-routed. */
        f.answer = true;
        assert_int_equal(app_net_exposure_verify(n, APP, EXP, &e, &err), 0);
        json_decref(e);
        assert_int_equal(app_net_exposure_remove(n, APP, EXP, &err), 0);
        assert_int_equal(f.removed, 2);
        assert_int_equal(app_net_forget(n, APP, &err), 0);
        app_net_close(n);
}

int main(void)
{
        if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
                printf("needs root and network namespaces\n");
                return 77;
        }
        snprintf(dir, sizeof(dir), "/tmp/test-app-net-routes.XXXXXX");
        if (!mkdtemp(dir))
                return 1;
        char apps[128];
        snprintf(apps, sizeof(apps), "%s/apps", dir);
        mkdir(apps, 0755);
        snprintf(apps, sizeof(apps), "%s/apps/" APP, dir);
        mkdir(apps, 0755);
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_hook) };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "%s/netns", dir);
        rmdir(cmd);
        snprintf(cmd, sizeof(cmd), "%s/apps/" APP "/net/hosts", dir);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/apps/" APP "/net", dir);
        rmdir(cmd);
        snprintf(cmd, sizeof(cmd), "%s/apps/" APP, dir);
        rmdir(cmd);
        snprintf(cmd, sizeof(cmd), "%s/apps", dir);
        rmdir(cmd);
        snprintf(cmd, sizeof(cmd), "%s/app-net.json", dir);
        unlink(cmd);
        rmdir(dir);
        return r;
}
