/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto/app-deploy.c and proto/app-params.c: every app params decoder. Bad input in
 * every field is answered with VALIDATION_ERROR and _errors on that exact path, and
 * all problems of one params object are reported together; defaults; the canonical
 * form of a deploy and what counts as the same deploy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-params.h"
#include "proto/field.h"

#define UUID "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static json_t *J(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

static char *dump(json_t *j)
{
        return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : strdup("(null)");
}

/* A deploy with every field set. */
static json_t *full_params(void)
{
        return J("{\"name\": \"Web shop\", \"hostname\": \"web-1\", \"type\": \"game_server\", \"version\": \"1.20.4\","
                 " \"command\": [\"java\", \"-Xmx1G\", \"-jar\", \"server.jar\"], \"sftpUsername\": \"web1.sftp\","
                 " \"groupId\": \"" UUID "\","
                 " \"template\": {\"id\": \"minecraft\", \"image\": \"games/minecraft:1.20\", \"command\": [\"/start\"],"
                 "   \"customCommand\": true, \"fileAccess\": false, \"env\": {\"PORT\": \"25565\", \"EULA\": \"true\","
                 "   \"A0\": \"x\", \"A\": \"\"}, \"volumePath\": \"/data\", \"stop\": {\"line\": \"stop\"},"
                 "   \"startedPattern\": \"Done \\\\([0-9.]+s\\\\)!\", \"ports\": [25565, 80, 443]},"
                 " \"plan\": {\"id\": \"mc-small\", \"cpuCores\": 1.5, \"memoryMB\": 2048, \"volumeQuotaMB\": 10240,"
                 "   \"pids\": 1024}}");
}

/* The fewest fields a deploy needs. */
static json_t *min_params(void)
{
        return J("{\"name\": \"web\", \"hostname\": \"web\", \"version\": \"20\", \"sftpUsername\": \"web\","
                 " \"template\": {\"id\": \"node\", \"image\": \"node:20\"},"
                 " \"plan\": {\"cpuCores\": 1, \"memoryMB\": 512, \"volumeQuotaMB\": 1024}}");
}

/* Set (or with value NULL, remove) the member at a dotted path of objects. */
static void set_path(json_t *root, const char *path, json_t *value)
{
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", path);
        json_t *node = root;
        char *dot;
        char *seg = buf;
        while ((dot = strchr(seg, '.'))) {
                *dot = '\0';
                node = json_object_get(node, seg);
                if (!json_is_object(node))
                        fail_msg("no object at %s of %s", seg, path);
                seg = dot + 1;
        }
        if (value)
                json_object_set_new(node, seg, value);
        else
                json_object_del(node, seg);
}

static void test_deploy_full(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *p = full_params();
        struct proto_app_deploy *d = NULL;
        if (proto_app_deploy_decode(p, &d, &err) < 0)
                fail_msg("full params refused: %s", dump(err.details));
        assert_string_equal(d->name, "Web shop");
        assert_string_equal(d->hostname, "web-1");
        assert_int_equal(d->type, PROTO_APP_TYPE_GAME_SERVER);
        assert_string_equal(d->version, "1.20.4");
        assert_string_equal(d->command[3], "server.jar");
        assert_null(d->command[4]);
        assert_string_equal(d->sftp_username, "web1.sftp");
        assert_string_equal(d->group_id, UUID);
        assert_string_equal(d->tmpl.id, "minecraft");
        assert_string_equal(d->tmpl.image.name, "games/minecraft");
        assert_string_equal(d->tmpl.image.tag, "1.20");
        assert_string_equal(d->tmpl.command[0], "/start");
        assert_true(d->tmpl.custom_command);
        assert_false(d->tmpl.file_access);
        /* env: sorted by name, "A" before "A0". */
        assert_int_equal(d->tmpl.n_env, 4);
        assert_string_equal(d->tmpl.env[0], "A=");
        assert_string_equal(d->tmpl.env[1], "A0=x");
        assert_string_equal(d->tmpl.env[2], "EULA=true");
        assert_string_equal(d->tmpl.env[3], "PORT=25565");
        assert_null(d->tmpl.env[4]);
        assert_string_equal(d->tmpl.volume_path, "/data");
        assert_int_equal(d->tmpl.stop.kind, PROTO_APP_STOP_LINE);
        assert_string_equal(d->tmpl.stop.line, "stop");
        assert_string_equal(d->tmpl.started_pattern, "Done \\([0-9.]+s\\)!");
        assert_int_equal(d->tmpl.n_ports, 3);
        assert_int_equal(d->tmpl.ports[0], 80);
        assert_int_equal(d->tmpl.ports[1], 443);
        assert_int_equal(d->tmpl.ports[2], 25565);
        assert_string_equal(d->plan.id, "mc-small");
        assert_int_equal(d->plan.cpu_millis, 1500);
        assert_int_equal(d->plan.memory_mb, 2048);
        assert_int_equal(d->plan.volume_quota_mb, 10240);
        assert_int_equal(d->plan.pids, 1024);
        /* The app's command wins over the template's. */
        assert_ptr_equal(proto_app_deploy_argv(d), d->command);
        assert_ptr_equal(d->root, p);
        proto_app_deploy_free(d);
}

static void test_deploy_defaults(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *p = min_params();
        struct proto_app_deploy *d = NULL;
        if (proto_app_deploy_decode(p, &d, &err) < 0)
                fail_msg("minimal params refused: %s", dump(err.details));
        assert_int_equal(d->type, PROTO_APP_TYPE_APP);
        assert_null(d->command);
        assert_null(d->group_id);
        assert_null(d->tmpl.command);
        assert_false(d->tmpl.custom_command);
        assert_true(d->tmpl.file_access);
        assert_int_equal(d->tmpl.n_env, 0);
        assert_non_null(d->tmpl.env);
        assert_null(d->tmpl.env[0]);
        assert_string_equal(d->tmpl.volume_path, "/home/container");
        assert_int_equal(d->tmpl.stop.kind, PROTO_APP_STOP_SIGNAL);
        assert_int_equal(d->tmpl.stop.signal, SIGTERM);
        assert_null(d->tmpl.started_pattern);
        assert_int_equal(d->tmpl.n_ports, 0);
        assert_null(d->plan.id);
        assert_int_equal(d->plan.cpu_millis, 1000);
        assert_int_equal(d->plan.pids, 512);
        /* No command anywhere: the image's Entrypoint and Cmd. */
        assert_null(proto_app_deploy_argv(d));
        proto_app_deploy_free(d);

        /* null is the same as absent for every optional field. */
        _cleanup_json_ json_t *n = min_params();
        const char *nullable[] = { "type", "command", "groupId", "template.command", "template.customCommand",
                                   "template.fileAccess", "template.env", "template.volumePath", "template.stop",
                                   "template.startedPattern", "template.ports", "plan.id", "plan.pids" };
        for (size_t i = 0; i < sizeof(nullable) / sizeof(nullable[0]); i++)
                set_path(n, nullable[i], json_null());
        if (proto_app_deploy_decode(n, &d, &err) < 0)
                fail_msg("nulls refused: %s", dump(err.details));
        struct proto_app_deploy *m = NULL;
        assert_int_equal(proto_app_deploy_decode(p, &m, &err), 0);
        assert_true(proto_app_deploy_same(d, m));
        proto_app_deploy_free(d);
        proto_app_deploy_free(m);

        /* The template's command is used when the app has none; a stop signal by number. */
        _cleanup_json_ json_t *t = min_params();
        set_path(t, "template.command", J("[\"npm\", \"start\"]"));
        set_path(t, "template.stop", J("{\"signal\": 2}"));
        set_path(t, "plan.cpuCores", json_real(0.25));
        assert_int_equal(proto_app_deploy_decode(t, &d, &err), 0);
        assert_string_equal(proto_app_deploy_argv(d)[0], "npm");
        assert_int_equal(d->tmpl.stop.signal, SIGINT);
        assert_int_equal(d->plan.cpu_millis, 250);
        proto_app_deploy_free(d);
}

/* One bad value and the field it must be reported under. */
struct bad_case {
        const char *set;   /* dotted path to set */
        const char *value; /* JSON text, or NULL to remove the member */
        const char *field; /* the path whose _errors must say so */
        bool combine;      /* part of the all-at-once run */
};

static const struct bad_case bad_cases[] = {
        { "name", NULL, "name", true },
        { "name", "\"\"", "name", false },
        { "name", "\"a\\nb\"", "name", false },
        { "name", "42", "name", false },
        { "hostname", "\"Web\"", "hostname", true },
        { "hostname", "\"-web\"", "hostname", false },
        { "hostname", "\"web_1\"", "hostname", false },
        { "hostname", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "hostname", false },
        { "type", "\"vm\"", "type", true },
        { "type", "1", "type", false },
        { "version", "\"\"", "version", true },
        { "version", NULL, "version", false },
        { "command", "[]", "command", true },
        { "command", "[\"java\", \"\"]", "command.1", false },
        { "command", "[\"java\", 1]", "command.1", false },
        { "command", "[\"a\\u0000b\"]", "command.0", false },
        { "command", "\"java -jar x\"", "command", false },
        { "sftpUsername", "\".x\"", "sftpUsername", true },
        { "sftpUsername", "\"Web\"", "sftpUsername", false },
        { "sftpUsername", NULL, "sftpUsername", false },
        { "groupId", "\"g1\"", "groupId", true },
        { "template.id", "\"\"", "template.id", true },
        { "template.id", NULL, "template.id", false },
        { "template.image", "\"Games/MC:1\"", "template.image", true },
        { "template.image", "\"node\"", "template.image", false },
        { "template.image", "\"../x:1\"", "template.image", false },
        { "template.image", "\"x@sha256:abc\"", "template.image", false },
        { "template.image", NULL, "template.image", false },
        { "template.command", "[]", "template.command", true },
        { "template.command", "[\"\"]", "template.command.0", false },
        { "template.customCommand", "\"yes\"", "template.customCommand", true },
        { "template.fileAccess", "0", "template.fileAccess", true },
        { "template.env", "[]", "template.env", false },
        { "template.env", "{\"1X\": \"a\"}", "template.env", false },
        { "template.env", "{\"A-B\": \"a\"}", "template.env", false },
        { "template.env", "{\"PORT\": 8080}", "template.env.PORT", true },
        { "template.env", "{\"X\": \"a\\u0000b\"}", "template.env.X", false },
        { "template.env", "{\"_errors\": 1}", "template.env", false },
        { "template.volumePath", "\"data\"", "template.volumePath", true },
        { "template.volumePath", "\"/data/../etc\"", "template.volumePath", false },
        { "template.volumePath", "\"/\"", "template.volumePath", false },
        { "template.volumePath", "\"/proc/self\"", "template.volumePath", false },
        { "template.volumePath", "\"/a//b\"", "template.volumePath", false },
        { "template.volumePath", "\"\"", "template.volumePath", false },
        { "template.stop", "{}", "template.stop", true },
        { "template.stop", "{\"signal\": \"SIGTERM\", \"line\": \"stop\"}", "template.stop", false },
        { "template.stop", "{\"signal\": \"TERM\"}", "template.stop.signal", false },
        { "template.stop", "{\"signal\": \"SIGSTOP\"}", "template.stop.signal", false },
        { "template.stop", "{\"signal\": 19}", "template.stop.signal", false },
        { "template.stop", "{\"line\": \"\"}", "template.stop.line", false },
        { "template.stop", "{\"line\": \"stop\\nrm\"}", "template.stop.line", false },
        { "template.stop", "\"SIGTERM\"", "template.stop", false },
        { "template.startedPattern", "\"(unclosed\"", "template.startedPattern", true },
        { "template.startedPattern", "\"\"", "template.startedPattern", false },
        { "template.startedPattern", "\"((a{255}){255}){255}\"", "template.startedPattern", false },
        { "template.ports", "[0]", "template.ports.0", true },
        { "template.ports", "[80, 65536]", "template.ports.1", false },
        { "template.ports", "[80, 80]", "template.ports.1", false },
        { "template.ports", "[80, \"443\"]", "template.ports.1", false },
        { "template.ports", "[8.5]", "template.ports.0", false },
        { "template.ports", "80", "template.ports", false },
        { "template", "[]", "template", false },
        { "template", NULL, "template", false },
        { "plan.id", "\"\"", "plan.id", true },
        { "plan.cpuCores", "0", "plan.cpuCores", true },
        { "plan.cpuCores", "256.5", "plan.cpuCores", false },
        { "plan.cpuCores", "-1", "plan.cpuCores", false },
        { "plan.cpuCores", "0.004", "plan.cpuCores", false },
        { "plan.cpuCores", "\"2\"", "plan.cpuCores", false },
        { "plan.cpuCores", NULL, "plan.cpuCores", false },
        { "plan.memoryMB", "0", "plan.memoryMB", true },
        { "plan.memoryMB", "1048577", "plan.memoryMB", false },
        { "plan.memoryMB", "512.5", "plan.memoryMB", false },
        { "plan.volumeQuotaMB", "15", "plan.volumeQuotaMB", true },
        { "plan.volumeQuotaMB", "16777217", "plan.volumeQuotaMB", false },
        { "plan.pids", "15", "plan.pids", true },
        { "plan.pids", "65537", "plan.pids", false },
        { "plan", "\"small\"", "plan", false },
};

static void test_deploy_bad_fields(void **state)
{
        struct proto_app_deploy *d = NULL;
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                const struct bad_case *c = &bad_cases[i];
                _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
                _cleanup_json_ json_t *p = full_params();
                set_path(p, c->set, c->value ? J(c->value) : NULL);
                d = (struct proto_app_deploy *)0x1;
                int r = proto_app_deploy_decode(p, &d, &err);
                if (r != -EINVAL)
                        fail_msg("%s = %s: expected -EINVAL, got %d", c->set, c->value ? c->value : "(absent)", r);
                assert_ptr_equal(d, (struct proto_app_deploy *)0x1); /* *ret untouched on failure */
                assert_string_equal(err.code, NA_E_VALIDATION);
                assert_int_equal(err.http_status, 422);
                json_t *list = field_errors(&err, c->field);
                if (json_array_size(list) == 0)
                        fail_msg("%s = %s: no _errors at %s: %s", c->set, c->value ? c->value : "(absent)", c->field,
                                 dump(err.details));
                /* Only that field is reported (one problem, one message). */
                if (field_count(err.details) != 1)
                        fail_msg("%s = %s: expected one problem: %s", c->set, c->value ? c->value : "(absent)",
                                 dump(err.details));
        }
}

static void test_deploy_all_at_once(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *p = full_params();
        size_t n = 0;
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
                if (bad_cases[i].combine) {
                        set_path(p, bad_cases[i].set, bad_cases[i].value ? J(bad_cases[i].value) : NULL);
                        n++;
                }
        struct proto_app_deploy *d = NULL;
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), -EINVAL);
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
                if (bad_cases[i].combine && json_array_size(field_errors(&err, bad_cases[i].field)) == 0)
                        fail_msg("no _errors at %s: %s", bad_cases[i].field, dump(err.details));
        assert_int_equal(field_count(err.details), n);
        assert_null(d);

        /* An empty object: every required field at once. */
        na_error_clear(&err);
        _cleanup_json_ json_t *e = J("{}");
        assert_int_equal(proto_app_deploy_decode(e, &d, &err), -EINVAL);
        const char *req[] = { "name", "hostname", "version", "sftpUsername", "template", "plan" };
        for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
                assert_field(&err, req[i], "is required");
        assert_int_equal(field_count(err.details), 6);

        /* Inside template and plan, too. */
        na_error_clear(&err);
        _cleanup_json_ json_t *t = min_params();
        set_path(t, "template", J("{}"));
        set_path(t, "plan", J("{}"));
        assert_int_equal(proto_app_deploy_decode(t, &d, &err), -EINVAL);
        const char *nested[] = { "template.id", "template.image", "plan.cpuCores", "plan.memoryMB",
                                 "plan.volumeQuotaMB" };
        for (size_t i = 0; i < sizeof(nested) / sizeof(nested[0]); i++)
                assert_field(&err, nested[i], "is required");
        assert_int_equal(field_count(err.details), 5);
}

static void test_deploy_command_managed(void **state)
{
        /* A template that manages its own start takes no command of the app's (reference 3.2). */
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *p = full_params();
        set_path(p, "template.customCommand", json_false());
        struct proto_app_deploy *d = NULL;
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), -EINVAL);
        assert_field(&err, "command", "must be null: the template manages its own start (customCommand is false)");
        assert_int_equal(field_count(err.details), 1);
        na_error_clear(&err);
        set_path(p, "command", json_null());
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), 0);
        assert_string_equal(proto_app_deploy_argv(d)[0], "/start");
        proto_app_deploy_free(d);
}

static void test_deploy_limits(void **state)
{
        /* Exactly at every limit is fine. */
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *p = full_params();
        json_t *cmd = json_array();
        char arg[1001];
        memset(arg, 'x', 1000);
        arg[1000] = '\0';
        for (int i = 0; i < 100; i++)
                json_array_append_new(cmd, json_string(arg));
        set_path(p, "command", cmd);
        json_t *env = json_object();
        char *value = malloc(32769);
        memset(value, 'v', 32768);
        value[32768] = '\0';
        for (int i = 0; i < 100; i++) {
                char name[16];
                snprintf(name, sizeof(name), "V%d", i);
                json_object_set_new(env, name, json_string(i == 0 ? value : "x"));
        }
        set_path(p, "template.env", env);
        json_t *ports = json_array();
        for (int i = 0; i < 64; i++)
                json_array_append_new(ports, json_integer(65535 - i));
        set_path(p, "template.ports", ports);
        char line[4097];
        memset(line, 'l', 4096);
        line[4096] = '\0';
        set_path(p, "template.stop", json_pack("{s:s}", "line", line));
        set_path(p, "plan.cpuCores", json_integer(256));
        set_path(p, "plan.memoryMB", json_integer(1048576));
        set_path(p, "plan.volumeQuotaMB", json_integer(16777216));
        set_path(p, "plan.pids", json_integer(65536));
        struct proto_app_deploy *d = NULL;
        if (proto_app_deploy_decode(p, &d, &err) < 0)
                fail_msg("limits refused: %s", dump(err.details));
        assert_int_equal(d->tmpl.n_env, 100);
        assert_int_equal(d->tmpl.ports[0], 65472);
        assert_int_equal(d->plan.cpu_millis, 256000);
        proto_app_deploy_free(d);

        /* One past each. */
        json_array_append_new(cmd, json_string("x"));
        json_array_set_new(cmd, 0, json_string("x"));
        json_array_set_new(cmd, 1, json_stringn(value, 1001));
        value[32768] = 'v';
        json_object_set_new(env, "V0", json_stringn(value, 32769));
        json_object_set_new(env, "V100", json_string("x"));
        json_array_append_new(ports, json_integer(1));
        line[4096] = 'l';
        set_path(p, "template.stop", json_pack("{s:s%}", "line", line, (size_t)4097));
        set_path(p, "plan.cpuCores", json_real(256.001));
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), -EINVAL);
        const char *fields[] = { "command", "template.env", "template.ports", "template.stop.line", "plan.cpuCores" };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                if (json_array_size(field_errors(&err, fields[i])) == 0)
                        fail_msg("no _errors at %s: %s", fields[i], dump(err.details));
        na_error_clear(&err);
        json_object_del(env, "V100");
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), -EINVAL);
        assert_field(&err, "template.env.V0", "must be at most 32768 bytes");
        na_error_clear(&err);
        json_array_remove(cmd, 100);
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), -EINVAL);
        assert_field(&err, "command.1", "must be 1..1000 characters (got 1001)");
        free(value);
}

static void test_deploy_same(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        _cleanup_json_ json_t *p = full_params();
        struct proto_app_deploy *a = NULL, *b = NULL;
        assert_int_equal(proto_app_deploy_decode(p, &a, &err), 0);

        /* The canonical form decodes to the same deploy, and is a fixed point. */
        _cleanup_json_ json_t *c = proto_app_deploy_canonical(a);
        assert_non_null(c);
        assert_int_equal(proto_app_deploy_decode(c, &b, &err), 0);
        assert_true(proto_app_deploy_same(a, b));
        _cleanup_json_ json_t *c2 = proto_app_deploy_canonical(b);
        assert_true(json_equal(c, c2));
        assert_string_equal(json_string_value(json_object_get(json_object_get(c, "template"), "image")),
                            "games/minecraft:1.20");
        assert_true(json_is_real(json_object_get(json_object_get(c, "plan"), "cpuCores")));
        proto_app_deploy_free(b);

        /* Order of env and ports, explicit defaults and unknown fields do not matter. */
        _cleanup_json_ json_t *q = full_params();
        set_path(q, "template.env", J("{\"A\": \"\", \"PORT\": \"25565\", \"A0\": \"x\", \"EULA\": \"true\"}"));
        set_path(q, "template.ports", J("[443, 25565, 80]"));
        set_path(q, "plan.cpuCores", json_real(1.5000001));
        set_path(q, "extra", json_true());
        assert_int_equal(proto_app_deploy_decode(q, &b, &err), 0);
        assert_true(proto_app_deploy_same(a, b));
        proto_app_deploy_free(b);

        _cleanup_json_ json_t *m1 = min_params(), *m2 = min_params();
        set_path(m2, "type", json_string("app"));
        set_path(m2, "template.fileAccess", json_true());
        set_path(m2, "template.customCommand", json_false());
        set_path(m2, "template.volumePath", json_string("/home/container"));
        set_path(m2, "template.stop", json_null()); /* null is not given: the image's StopSignal */
        set_path(m2, "template.env", J("{}"));
        set_path(m2, "plan.pids", json_integer(512));
        set_path(m2, "plan.cpuCores", json_real(1.0));
        struct proto_app_deploy *x = NULL, *y = NULL;
        assert_int_equal(proto_app_deploy_decode(m1, &x, &err), 0);
        assert_int_equal(proto_app_deploy_decode(m2, &y, &err), 0);
        assert_true(proto_app_deploy_same(x, y));
        proto_app_deploy_free(y);

        /* Any one field that differs makes another deploy. */
        const struct {
                const char *set, *value;
        } changes[] = {
                { "name", "\"web2\"" },          { "hostname", "\"web2\"" },
                { "type", "\"bot\"" },           { "version", "\"21\"" },
                { "sftpUsername", "\"w2\"" },    { "groupId", "\"" UUID "\"" },
                { "template.id", "\"n2\"" },     { "template.image", "\"node:21\"" },
                { "template.image", "\"node@" DIGEST "\"" },
                { "template.command", "[\"x\"]" }, { "template.customCommand", "true" },
                { "template.fileAccess", "false" }, { "template.env", "{\"A\": \"1\"}" },
                { "template.volumePath", "\"/data\"" }, { "template.stop", "{\"signal\": \"SIGINT\"}" },
                { "template.stop", "{\"line\": \"stop\"}" }, { "template.startedPattern", "\"ready\"" },
                { "template.stop", "{\"signal\": \"SIGTERM\"}" }, /* given, against the image's StopSignal */
                { "template.user", "\"postgres\"" }, { "template.user", "\"1000:1000\"" },
                { "template.ports", "[80]" },    { "plan.id", "\"p\"" },
                { "plan.cpuCores", "1.01" },     { "plan.memoryMB", "513" },
                { "plan.volumeQuotaMB", "1025" }, { "plan.pids", "513" },
        };
        for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
                _cleanup_json_ json_t *v = min_params();
                set_path(v, changes[i].set, J(changes[i].value));
                if (proto_app_deploy_decode(v, &y, &err) < 0)
                        fail_msg("%s: %s", changes[i].set, dump(err.details));
                if (proto_app_deploy_same(x, y))
                        fail_msg("%s = %s counted as the same deploy", changes[i].set, changes[i].value);
                proto_app_deploy_free(y);
        }
        _cleanup_json_ json_t *cmd = min_params();
        set_path(cmd, "template.customCommand", json_true());
        set_path(cmd, "command", J("[\"x\"]"));
        assert_int_equal(proto_app_deploy_decode(cmd, &y, &err), 0);
        assert_false(proto_app_deploy_same(x, y));
        proto_app_deploy_free(y);
        proto_app_deploy_free(x);
        proto_app_deploy_free(a);
}

/* proto_app_deploy_own: every string copied, the document dropped (under ASan, a string
 * still borrowed from it is a use after free here); the same deploy as before. */
static void test_deploy_own(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        json_t *p = full_params();
        set_path(p, "template.user", json_string("1000:1000"));
        struct proto_app_deploy *d = NULL;
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), 0);
        _cleanup_json_ json_t *before = proto_app_deploy_canonical(d);
        assert_non_null(before);
        assert_int_equal(proto_app_deploy_own(d), 0);
        assert_null(d->root);
        assert_non_null(d->strings);
        json_decref(p); /* the last reference: the document is freed */
        _cleanup_json_ json_t *after = proto_app_deploy_canonical(d);
        assert_non_null(after);
        assert_true(json_equal(before, after));
        assert_string_equal(d->tmpl.user, "1000:1000");
        assert_string_equal(d->tmpl.stop.line, "stop");
        assert_string_equal(d->plan.id, "mc-small");
        assert_int_equal(proto_app_deploy_own(d), 0); /* again: its own strings copied */
        _cleanup_json_ json_t *again = proto_app_deploy_canonical(d);
        assert_true(json_equal(before, again));
        proto_app_deploy_free(d);

        /* The fewest fields: NULL strings stay NULL. */
        p = min_params();
        assert_int_equal(proto_app_deploy_decode(p, &d, &err), 0);
        assert_int_equal(proto_app_deploy_own(d), 0);
        json_decref(p);
        assert_null(d->group_id);
        assert_null(d->tmpl.started_pattern);
        assert_null(d->plan.id);
        assert_string_equal(d->sftp_username, "web");
        proto_app_deploy_free(d);
}

static void test_power(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_power *p = NULL;
        const char *actions[] = { "start", "stop", "restart", "kill" };
        for (int i = 0; i < 4; i++) {
                _cleanup_json_ json_t *j = json_pack("{s:s}", "action", actions[i]);
                assert_int_equal(proto_app_power_decode(j, &p, &err), 0);
                assert_int_equal(p->action, i);
                assert_int_equal(p->grace_sec, 30);
                proto_app_power_free(p);
        }
        _cleanup_json_ json_t *g = J("{\"action\": \"stop\", \"graceSec\": 0}");
        assert_int_equal(proto_app_power_decode(g, &p, &err), 0);
        assert_int_equal(p->grace_sec, 0);
        proto_app_power_free(p);
        _cleanup_json_ json_t *bad = J("{\"action\": \"reboot\", \"graceSec\": 3601}");
        assert_int_equal(proto_app_power_decode(bad, &p, &err), -EINVAL);
        assert_field(&err, "action", "must be one of: start, stop, restart, kill");
        assert_field(&err, "graceSec", "must be between 0 and 3600");
        na_error_clear(&err);
        _cleanup_json_ json_t *none = J("{\"graceSec\": -1}");
        assert_int_equal(proto_app_power_decode(none, &p, &err), -EINVAL);
        assert_field(&err, "action", "is required");
        assert_field(&err, "graceSec", "must be between 0 and 3600");
}

static void test_command_set(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_command_set *p = NULL;
        _cleanup_json_ json_t *set = J("{\"command\": [\"/bin/sh\", \"-c\", \"echo hi; exec node .\"]}");
        assert_int_equal(proto_app_command_set_decode(set, &p, &err), 0);
        assert_string_equal(p->command[2], "echo hi; exec node .");
        assert_null(p->command[3]);
        proto_app_command_set_free(p);
        _cleanup_json_ json_t *reset = J("{\"command\": null}");
        assert_int_equal(proto_app_command_set_decode(reset, &p, &err), 0);
        assert_null(p->command);
        proto_app_command_set_free(p);

        struct {
                const char *params, *field, *msg;
        } bad[] = {
                { "{}", "command", "is required" },
                { "{\"command\": []}", "command", "must hold 1..100 items (got 0)" },
                { "{\"command\": [\"node\", \"\"]}", "command.1", "must not be empty" },
                { "{\"command\": [\"a\\u0000\"]}", "command.0", "must not contain NUL characters" },
                { "{\"command\": \"node .\"}", "command", "must be an array" },
                { "{\"command\": [[\"x\"]]}", "command.0", "must be a string" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                _cleanup_json_ json_t *j = J(bad[i].params);
                assert_int_equal(proto_app_command_set_decode(j, &p, &err), -EINVAL);
                assert_field(&err, bad[i].field, bad[i].msg);
                na_error_clear(&err);
        }
        /* 101 items; 1001 characters (counted as characters: 1000 x "é" is fine). */
        _cleanup_json_ json_t *many = json_pack("{s:[]}", "command");
        for (int i = 0; i < 101; i++)
                json_array_append_new(json_object_get(many, "command"), json_string("x"));
        assert_int_equal(proto_app_command_set_decode(many, &p, &err), -EINVAL);
        assert_field(&err, "command", "must hold 1..100 items (got 101)");
        na_error_clear(&err);
        char wide[2001] = "";
        for (int i = 0; i < 1000; i++)
                strcat(wide, "\xc3\xa9");
        _cleanup_json_ json_t *w = json_pack("{s:[s]}", "command", wide);
        assert_int_equal(proto_app_command_set_decode(w, &p, &err), 0);
        proto_app_command_set_free(p);
        /* Several bad items: each reported. */
        _cleanup_json_ json_t *two = J("{\"command\": [\"\", \"ok\", 3]}");
        assert_int_equal(proto_app_command_set_decode(two, &p, &err), -EINVAL);
        assert_field(&err, "command.0", "must not be empty");
        assert_field(&err, "command.2", "must be a string");
}

static void test_console_send(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_console_send *p = NULL;
        _cleanup_json_ json_t *ok = J("{\"line\": \"say h\\u00e9llo\"}");
        assert_int_equal(proto_app_console_send_decode(ok, &p, &err), 0);
        assert_string_equal(p->line, "say h\xc3\xa9llo");
        assert_int_equal(p->len, 10);
        proto_app_console_send_free(p);
        _cleanup_json_ json_t *empty = J("{\"line\": \"\"}");
        assert_int_equal(proto_app_console_send_decode(empty, &p, &err), 0);
        assert_int_equal(p->len, 0);
        proto_app_console_send_free(p);

        /* 4096 bytes is the limit, in bytes: 2048 x "é" is fine, 2049 is not. */
        char line[8200] = "";
        for (int i = 0; i < 2048; i++)
                strcat(line, "\xc3\xa9");
        _cleanup_json_ json_t *full = json_pack("{s:s}", "line", line);
        assert_int_equal(proto_app_console_send_decode(full, &p, &err), 0);
        assert_int_equal(p->len, 4096);
        assert_int_equal(p->line[4096], '\0');
        proto_app_console_send_free(p);
        strcat(line, "\xc3\xa9");
        _cleanup_json_ json_t *over = json_pack("{s:s}", "line", line);
        assert_int_equal(proto_app_console_send_decode(over, &p, &err), -EINVAL);
        assert_field(&err, "line", "must be at most 4096 bytes (got 4098)");
        na_error_clear(&err);

        struct {
                const char *params, *msg;
        } bad[] = {
                { "{}", "is required" },
                { "{\"line\": null}", "must not be null" },
                { "{\"line\": 5}", "must be a string" },
                { "{\"line\": \"a\\u0000b\"}", "must not contain NUL characters" },
                { "{\"line\": \"stop\\n\"}", "must be one line: no CR or LF characters" },
                { "{\"line\": \"a\\rb\"}", "must be one line: no CR or LF characters" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                _cleanup_json_ json_t *j = J(bad[i].params);
                assert_int_equal(proto_app_console_send_decode(j, &p, &err), -EINVAL);
                assert_field(&err, "line", bad[i].msg);
                assert_int_equal(field_count(err.details), 1);
                na_error_clear(&err);
        }
}

static void test_output(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_output_query *p = NULL;
        _cleanup_json_ json_t *none = J("{}");
        assert_int_equal(proto_app_output_decode(none, &p, &err), 0);
        assert_int_equal(p->since_seq, -1);
        assert_int_equal(p->limit, 100);
        proto_app_output_free(p);
        _cleanup_json_ json_t *some = J("{\"sinceSeq\": 0, \"limit\": 1000}");
        assert_int_equal(proto_app_output_decode(some, &p, &err), 0);
        assert_int_equal(p->since_seq, 0);
        assert_int_equal(p->limit, 1000);
        proto_app_output_free(p);
        _cleanup_json_ json_t *bad = J("{\"sinceSeq\": -1, \"limit\": 1001}");
        assert_int_equal(proto_app_output_decode(bad, &p, &err), -EINVAL);
        assert_field(&err, "sinceSeq", "must be between 0 and 9223372036854775807");
        assert_field(&err, "limit", "must be between 1 and 1000");
        na_error_clear(&err);
        _cleanup_json_ json_t *types = J("{\"sinceSeq\": \"5\", \"limit\": 0}");
        assert_int_equal(proto_app_output_decode(types, &p, &err), -EINVAL);
        assert_field(&err, "sinceSeq", "must be an integer");
        assert_field(&err, "limit", "must be between 1 and 1000");
}

static void test_image(void **state)
{
        _cleanup_na_error_ struct na_error err = NA_ERROR_INIT;
        struct proto_app_image_params *p = NULL;
        _cleanup_json_ json_t *tag = J("{\"image\": \"games/minecraft:1.20\"}");
        assert_int_equal(proto_app_image_decode(tag, &p, &err), 0);
        assert_string_equal(p->ref.name, "games/minecraft");
        assert_string_equal(p->ref.tag, "1.20");
        proto_app_image_free(p);
        _cleanup_json_ json_t *dig = J("{\"image\": \"node@" DIGEST "\"}");
        assert_int_equal(proto_app_image_decode(dig, &p, &err), 0);
        assert_string_equal(p->ref.digest, DIGEST);
        proto_app_image_free(p);
        const char *bad[] = { "{}", "{\"image\": null}", "{\"image\": 1}", "{\"image\": \"\"}", "{\"image\": \"node\"}",
                              "{\"image\": \"Node:1\"}", "{\"image\": \"a/../b:1\"}", "{\"image\": \"a:-x\"}",
                              "{\"image\": \"a@sha256:XYZ\"}", "{\"image\": \"a\\u0000:1\"}" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                _cleanup_json_ json_t *j = J(bad[i]);
                assert_int_equal(proto_app_image_decode(j, &p, &err), -EINVAL);
                if (json_array_size(field_errors(&err, "image")) != 1 || field_count(err.details) != 1)
                        fail_msg("%s: %s", bad[i], dump(err.details));
                na_error_clear(&err);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_deploy_full),      cmocka_unit_test(test_deploy_defaults),
                cmocka_unit_test(test_deploy_bad_fields), cmocka_unit_test(test_deploy_all_at_once),
                cmocka_unit_test(test_deploy_command_managed), cmocka_unit_test(test_deploy_limits),
                cmocka_unit_test(test_deploy_same),      cmocka_unit_test(test_deploy_own),
                cmocka_unit_test(test_power),
                cmocka_unit_test(test_command_set),      cmocka_unit_test(test_console_send),
                cmocka_unit_test(test_output),           cmocka_unit_test(test_image),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
