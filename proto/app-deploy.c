/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The app.deploy params decoder, its canonical form and the "same deploy" comparison. */
#include "proto/app-params.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "proto/app-internal.h"
#include "proto/decode.h"

const char *const proto_app_types[] = { "app", "bot", "game_server", "database", "service", NULL };

/* A string field checked by one of the *_problem rules. */
static bool rule_field(json_t *obj, const char *prefix, const char *key, size_t max_chars,
                       const char *(*problem)(const char *), const char **out, struct na_error *err)
{
        char path[64];
        if (proto_string(obj, prefix, key, PROTO_REQUIRED, 1, max_chars, out, err) != PROTO_PRESENT)
                return false;
        const char *why = problem(*out);
        if (why) {
                *out = NULL;
                na_error_field(err, proto_path(path, sizeof(path), prefix, key), "%s", why);
                return false;
        }
        return true;
}

/* A required free text (name, version): 1..max characters, no control characters. */
bool proto_app_text_field(json_t *obj, const char *key, size_t max_chars, const char **out, struct na_error *err)
{
        if (proto_string(obj, NULL, key, PROTO_REQUIRED, 1, max_chars, out, err) != PROTO_PRESENT)
                return false;
        for (const unsigned char *c = (const unsigned char *)*out; *c; c++)
                if (*c < 0x20 || *c == 0x7f) {
                        na_error_field(err, key, "must not contain control characters");
                        *out = NULL;
                        return false;
                }
        return true;
}

/* plan.cpuCores: a number of cores, fractions allowed, 0.01..256, kept in thousandths. */
static bool cpu_field(json_t *plan, int64_t *out, struct na_error *err)
{
        json_t *v = json_object_get(plan, "cpuCores");
        if (!v || json_is_null(v)) {
                na_error_field(err, "plan.cpuCores", v ? "must not be null" : "is required");
                return false;
        }
        if (!json_is_number(v)) {
                na_error_field(err, "plan.cpuCores", "must be a number");
                return false;
        }
        double d = json_number_value(v);
        int64_t millis = d > 0 && d <= 256.0 ? (int64_t)(d * 1000.0 + 0.5) : 0;
        if (millis < PROTO_APP_CPU_MILLIS_MIN || millis > PROTO_APP_CPU_MILLIS_MAX) {
                na_error_field(err, "plan.cpuCores", "must be a number of cores between 0.01 and 256");
                return false;
        }
        *out = millis;
        return true;
}

bool proto_app_plan_decode(json_t *params, struct proto_app_plan *out, struct na_error *err)
{
        json_t *plan = NULL;
        if (proto_object(params, NULL, "plan", PROTO_REQUIRED, &plan, err) != PROTO_PRESENT)
                return false;
        out->pids = PROTO_APP_PIDS_DEFAULT;
        bool ok = proto_string(plan, "plan", "id", 0, 1, PROTO_APP_TEMPLATE_ID_MAX, &out->id, err) >= 0;
        ok &= cpu_field(plan, &out->cpu_millis, err);
        ok &= proto_int(plan, "plan", "memoryMB", PROTO_REQUIRED, PROTO_APP_MEMORY_MIN, PROTO_APP_MEMORY_MAX,
                        &out->memory_mb, err) > 0;
        ok &= proto_int(plan, "plan", "volumeQuotaMB", PROTO_REQUIRED, PROTO_APP_QUOTA_MIN, PROTO_APP_QUOTA_MAX,
                        &out->volume_quota_mb, err) > 0;
        ok &= proto_int(plan, "plan", "pids", 0, PROTO_APP_PIDS_MIN, PROTO_APP_PIDS_MAX, &out->pids, err) >= 0;
        return ok;
}

/* Order "NAME=value" entries by name alone ("A" before "A0"). */
static int env_cmp(const void *a, const void *b)
{
        const char *x = *(const char *const *)a, *y = *(const char *const *)b;
        size_t lx = strcspn(x, "="), ly = strcspn(y, "=");
        int c = memcmp(x, y, lx < ly ? lx : ly);
        return c ? c : (lx > ly) - (lx < ly);
}

static bool env_decode(json_t *t, struct proto_app_template *out, struct na_error *err)
{
        out->env = calloc(1, sizeof(char *));
        if (!out->env) {
                na_error_sys(err, ENOMEM, "template.env");
                return false;
        }
        json_t *env = NULL;
        int r = proto_object(t, "template", "env", 0, &env, err);
        if (r != PROTO_PRESENT)
                return r >= 0;
        if (json_object_size(env) > PROTO_APP_ENV_MAX) {
                na_error_field(err, "template.env", "must hold at most %d variables", PROTO_APP_ENV_MAX);
                return false;
        }
        bool ok = true, names_reported = false;
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v) {
                char path[200];
                if (!proto_app_env_name_valid(k)) {
                        if (!names_reported)
                                na_error_field(err, "template.env",
                                               "variable names must be 1..128 of [A-Za-z_][A-Za-z0-9_]*, not "
                                               "starting with a digit");
                        names_reported = true;
                        ok = false;
                        continue;
                }
                /* A variable named _errors cannot be a path segment of the details: it says so on env. */
                bool own = !streq(k, "_errors");
                snprintf(path, sizeof(path), own ? "template.env.%s" : "template.env", k);
                const char *who = own ? "" : "_errors: ";
                if (!json_is_string(v)) {
                        na_error_field(err, path, "%smust be a string", who);
                        ok = false;
                } else if (strlen(json_string_value(v)) != json_string_length(v)) {
                        na_error_field(err, path, "%smust not contain NUL characters", who);
                        ok = false;
                } else if (json_string_length(v) > PROTO_APP_ENV_VALUE_MAX) {
                        na_error_field(err, path, "%smust be at most %d bytes", who, PROTO_APP_ENV_VALUE_MAX);
                        ok = false;
                }
        }
        if (!ok)
                return false;
        char **list = realloc(out->env, (json_object_size(env) + 1) * sizeof(char *));
        if (!list) {
                na_error_sys(err, ENOMEM, "template.env");
                return false;
        }
        out->env = list;
        json_object_foreach(env, k, v) {
                size_t kl = strlen(k), vl = json_string_length(v);
                char *e = malloc(kl + vl + 2);
                if (!e) {
                        na_error_sys(err, ENOMEM, "template.env");
                        return false;
                }
                memcpy(e, k, kl);
                e[kl] = '=';
                memcpy(e + kl + 1, json_string_value(v), vl + 1);
                list[out->n_env++] = e;
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                list[out->n_env] = NULL;
                NA_ANALYZER_FP_END
        }
        qsort(list, out->n_env, sizeof(char *), env_cmp);
        return true;
}

/* template.stop: {signal: name or number} or {line}; default SIGTERM. */
static bool stop_decode(json_t *t, struct proto_app_stop *out, struct na_error *err)
{
        *out = (struct proto_app_stop){ .kind = PROTO_APP_STOP_SIGNAL, .signal = SIGTERM };
        json_t *stop = NULL;
        int r = proto_object(t, "template", "stop", 0, &stop, err);
        if (r != PROTO_PRESENT)
                return r >= 0;
        json_t *sig = json_object_get(stop, "signal");
        json_t *line = json_object_get(stop, "line");
        if (json_is_null(sig))
                sig = NULL;
        if (json_is_null(line))
                line = NULL;
        if (!sig == !line) {
                na_error_field(err, "template.stop", "must hold exactly one of signal and line");
                return false;
        }
        if (line) {
                out->kind = PROTO_APP_STOP_LINE;
                return proto_app_line_field(stop, "template.stop", "line", PROTO_REQUIRED, 1, &out->line, NULL,
                                            err) > 0;
        }
        int n = 0;
        if (json_is_number(sig) && json_number_value(sig) >= 1 && json_number_value(sig) <= 64 &&
            json_number_value(sig) == (double)(int)json_number_value(sig))
                n = (int)json_number_value(sig);
        else if (json_is_string(sig))
                for (int i = 1; i < 64; i++)
                        if (proto_app_signal_name(i) && streq(proto_app_signal_name(i), json_string_value(sig)))
                                n = i;
        if (!proto_app_stop_signal_allowed(n)) {
                na_error_field(err, "template.stop.signal",
                               "must be one of SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGKILL (a name "
                               "or its number)");
                return false;
        }
        out->signal = n;
        return true;
}

static int port_cmp(const void *a, const void *b)
{
        return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static bool ports_decode(json_t *t, struct proto_app_template *out, struct na_error *err)
{
        json_t *ports = NULL;
        int r = proto_array(t, "template", "ports", 0, 0, PROTO_APP_PORTS_MAX, &ports, err);
        if (r != PROTO_PRESENT)
                return r >= 0;
        bool ok = true;
        size_t i;
        json_t *item;
        json_array_foreach(ports, i, item) {
                char path[64];
                snprintf(path, sizeof(path), "template.ports.%zu", i);
                double d = json_is_number(item) ? json_number_value(item) : 0;
                if (d < 1 || d > 65535 || d != (double)(int)d) {
                        na_error_field(err, path, "must be a port number (an integer between 1 and 65535)");
                        ok = false;
                        continue;
                }
                uint16_t port = (uint16_t)d;
                bool repeated = false;
                for (size_t j = 0; j < out->n_ports; j++)
                        repeated |= out->ports[j] == port;
                if (repeated) {
                        na_error_field(err, path, "repeats a port listed before it");
                        ok = false;
                        continue;
                }
                out->ports[out->n_ports++] = port;
        }
        qsort(out->ports, out->n_ports, sizeof(out->ports[0]), port_cmp);
        return ok;
}

bool proto_app_template_decode(json_t *params, struct proto_app_template *out, struct na_error *err)
{
        json_t *t = NULL;
        out->volume_path = PROTO_APP_VOLUME_PATH_DEFAULT;
        out->file_access = true;
        out->stop = (struct proto_app_stop){ .kind = PROTO_APP_STOP_SIGNAL, .signal = SIGTERM };
        if (proto_object(params, NULL, "template", PROTO_REQUIRED, &t, err) != PROTO_PRESENT) {
                out->env = calloc(1, sizeof(char *));
                return false;
        }
        bool ok = proto_string(t, "template", "id", PROTO_REQUIRED, 1, PROTO_APP_TEMPLATE_ID_MAX, &out->id, err) > 0;
        ok &= proto_app_image_field(t, "template", "image", &out->image, err) > 0;
        ok &= proto_app_command_field(t, "template", "command", 0, &out->command, err) >= 0;
        ok &= proto_bool(t, "template", "customCommand", 0, &out->custom_command, err) >= 0;
        ok &= proto_bool(t, "template", "fileAccess", 0, &out->file_access, err) >= 0;
        ok &= env_decode(t, out, err);
        const char *vp = NULL;
        int r = proto_string(t, "template", "volumePath", 0, 1, PROTO_APP_VOLUME_PATH_MAX, &vp, err);
        if (r == PROTO_PRESENT) {
                const char *why = proto_app_volume_path_problem(vp);
                if (why) {
                        na_error_field(err, "template.volumePath", "%s", why);
                        ok = false;
                } else
                        out->volume_path = vp;
        } else if (r < 0)
                ok = false;
        ok &= stop_decode(t, &out->stop, err);
        out->stop_given = json_object_get(t, "stop") && !json_is_null(json_object_get(t, "stop"));
        const char *user = NULL;
        r = proto_string(t, "template", "user", 0, 1, PROTO_APP_USER_MAX, &user, err);
        if (r == PROTO_PRESENT) {
                const char *why = proto_app_user_problem(user);
                if (why) {
                        na_error_field(err, "template.user", "%s", why);
                        ok = false;
                } else
                        out->user = user;
        } else if (r < 0)
                ok = false;
        const char *pattern = NULL;
        r = proto_string(t, "template", "startedPattern", 0, 1, PROTO_APP_PATTERN_MAX, &pattern, err);
        if (r == PROTO_PRESENT) {
                const char *why = proto_app_pattern_problem(pattern);
                if (why) {
                        na_error_field(err, "template.startedPattern", "%s", why);
                        ok = false;
                } else
                        out->started_pattern = pattern;
        } else if (r < 0)
                ok = false;
        ok &= ports_decode(t, out, err);
        return ok;
}

void proto_app_deploy_free(struct proto_app_deploy *p)
{
        if (!p)
                return;
        proto_strv_free(p->command);
        proto_strv_free(p->tmpl.command);
        proto_strv_free(p->tmpl.env);
        if (p->root)
                json_decref(p->root);
        free(p->strings);
        free(p);
}

int proto_app_deploy_own(struct proto_app_deploy *p)
{
        const char **field[] = { &p->name,      &p->hostname,           &p->version,   &p->sftp_username,
                                 &p->group_id,  &p->tmpl.id,            &p->tmpl.volume_path, &p->tmpl.stop.line,
                                 &p->tmpl.user, &p->tmpl.started_pattern, &p->plan.id };
        size_t total = 0;
        for (size_t i = 0; i < ARRAY_SIZE(field); i++)
                if (*field[i])
                        total += strlen(*field[i]) + 1;
        char *block = malloc(total ? total : 1), *w = block;
        if (!block)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(field); i++)
                if (*field[i]) {
                        size_t n = strlen(*field[i]) + 1;
                        memcpy(w, *field[i], n);
                        *field[i] = w;
                        w += n;
                }
        free(p->strings);
        p->strings = block;
        if (p->root)
                json_decref(p->root);
        p->root = NULL;
        return 0;
}

int proto_app_deploy_decode(json_t *params, struct proto_app_deploy **ret, struct na_error *err)
{
        struct proto_app_deploy *p = calloc(1, sizeof(*p));
        if (!p)
                return na_error_sys(err, ENOMEM, "app.deploy params");
        p->root = json_incref(params);
        bool ok = proto_app_text_field(params, "name", PROTO_APP_NAME_MAX, &p->name, err);
        ok &= rule_field(params, NULL, "hostname", PROTO_APP_HOSTNAME_MAX, proto_app_hostname_problem, &p->hostname,
                         err);
        int type = PROTO_APP_TYPE_APP;
        ok &= proto_enum(params, NULL, "type", 0, proto_app_types, &type, err) >= 0;
        p->type = (enum proto_app_type)type;
        ok &= proto_app_text_field(params, "version", PROTO_APP_VERSION_MAX, &p->version, err);
        int command = proto_app_command_field(params, NULL, "command", PROTO_NULLABLE, &p->command, err);
        ok &= command >= 0;
        ok &= rule_field(params, NULL, "sftpUsername", PROTO_APP_SFTP_USER_MAX, proto_app_sftp_username_problem,
                         &p->sftp_username, err);
        ok &= proto_uuid(params, NULL, "groupId", PROTO_NULLABLE, &p->group_id, err) >= 0;
        bool tmpl_ok = proto_app_template_decode(params, &p->tmpl, err);
        ok &= tmpl_ok;
        ok &= proto_app_plan_decode(params, &p->plan, err);
        /* Reference 3.2: a template that manages its own start takes no command of the app's. */
        if (tmpl_ok && command == PROTO_PRESENT && !p->tmpl.custom_command) {
                na_error_field(err, "command", "must be null: the template manages its own start (customCommand is "
                                               "false)");
                ok = false;
        }
        if (!ok || !p->tmpl.env) {
                if (!na_error_is_set(err))
                        na_error_sys(err, ENOMEM, "app.deploy params");
                proto_app_deploy_free(p);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

char *const *proto_app_deploy_argv(const struct proto_app_deploy *p)
{
        return p->command ? p->command : p->tmpl.command;
}

static json_t *strv_json(char *const *v)
{
        if (!v)
                return json_null();
        json_t *a = json_array();
        for (; a && *v; v++)
                if (json_array_append_new(a, json_string(*v)) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *opt_string(const char *s)
{
        return s ? json_string(s) : json_null();
}

json_t *proto_app_cpu_json(int64_t millis)
{
        if (millis % 1000 == 0)
                return json_integer(millis / 1000);
        return json_real((double)millis / 1000.0);
}

json_t *proto_app_deploy_canonical(const struct proto_app_deploy *p)
{
        const struct proto_app_template *t = &p->tmpl;
        char image[PROTO_APP_IMAGE_REF_MAX + 1];
        json_t *env = json_object();
        for (size_t i = 0; env && i < t->n_env; i++) {
                char name[PROTO_APP_ENV_NAME_MAX + 1];
                size_t nl = strcspn(t->env[i], "=");
                memcpy(name, t->env[i], nl);
                name[nl] = '\0';
                if (json_object_set_new(env, name, json_string(t->env[i] + nl + 1)) < 0) {
                        json_decref(env);
                        return NULL;
                }
        }
        json_t *ports = json_array();
        for (size_t i = 0; ports && i < t->n_ports; i++)
                json_array_append_new(ports, json_integer(t->ports[i]));
        /* A stop not given stays absent: the image's StopSignal applies then. */
        json_t *stop = !t->stop_given ? json_null()
                       : t->stop.kind == PROTO_APP_STOP_LINE
                               ? json_pack("{s:s}", "line", t->stop.line)
                               : json_pack("{s:s}", "signal", proto_app_signal_name(t->stop.signal));
        json_t *tmpl = json_pack("{s:s, s:s, s:o, s:b, s:b, s:o, s:s, s:o, s:o, s:o}", "id", t->id, "image",
                                 proto_image_ref_format(&t->image, image, sizeof(image)), "command",
                                 strv_json(t->command), "customCommand", t->custom_command, "fileAccess",
                                 t->file_access, "env", env, "volumePath", t->volume_path, "stop", stop,
                                 "startedPattern", opt_string(t->started_pattern), "ports", ports);
        if (tmpl && t->user && json_object_set_new(tmpl, "user", json_string(t->user)) < 0) {
                json_decref(tmpl);
                tmpl = NULL;
        }
        json_t *plan = json_pack("{s:o, s:o, s:I, s:I, s:I}", "id", opt_string(p->plan.id), "cpuCores",
                                 proto_app_cpu_json(p->plan.cpu_millis), "memoryMB", (json_int_t)p->plan.memory_mb,
                                 "volumeQuotaMB", (json_int_t)p->plan.volume_quota_mb, "pids",
                                 (json_int_t)p->plan.pids);
        return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:o}", "name", p->name, "hostname", p->hostname,
                         "type", proto_app_types[p->type], "version", p->version, "command", strv_json(p->command),
                         "sftpUsername", p->sftp_username, "groupId", opt_string(p->group_id), "template", tmpl,
                         "plan", plan);
}

bool proto_app_deploy_same(const struct proto_app_deploy *a, const struct proto_app_deploy *b)
{
        _cleanup_json_ json_t *ca = proto_app_deploy_canonical(a);
        _cleanup_json_ json_t *cb = proto_app_deploy_canonical(b);
        return ca && cb && json_equal(ca, cb);
}
