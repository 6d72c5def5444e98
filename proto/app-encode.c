/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Encoders of App, app.status, app.output, images and the app events (AGENT-API 4.2 and 5). */
#include "proto/app-params.h"

#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"
#include "proto/app-internal.h"
#include "proto/text.h"

const char *const proto_app_states[] = { "running", "stopped", "starting", "stopping", "crashed", NULL };
const char *const proto_app_streams[] = { "stdout", "stderr", "system", NULL };

const char *proto_app_state_name(enum proto_app_state s)
{
        if ((unsigned)s < ARRAY_SIZE(proto_app_states) - 1)
                return proto_app_states[s];
        return "stopped";
}

const char *proto_app_record_state_name(enum proto_app_state s)
{
        return s == PROTO_APP_RUNNING || s == PROTO_APP_STARTING || s == PROTO_APP_STOPPING ? "running" : "stopped";
}

static json_t *time_json(int64_t ms)
{
        char buf[40];
        return json_string(na_format_time_ms(ms > 0 ? (uint64_t)ms : 0, buf, sizeof(buf)));
}

static json_t *opt_time_json(int64_t ms)
{
        return ms > 0 ? time_json(ms) : json_null();
}

static json_t *opt_string(const char *s)
{
        return s ? json_string(s) : json_null();
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

void proto_app_from_deploy(const struct proto_app_deploy *d, const char *id, struct proto_app *out)
{
        *out = (struct proto_app){
                .id = id,
                .name = d->name,
                .hostname = d->hostname,
                .type = d->type,
                .version = d->version,
                .command = d->command,
                .sftp_username = d->sftp_username,
                .group_id = d->group_id,
                .template_id = d->tmpl.id,
                .plan = d->plan,
                .state = PROTO_APP_STOPPED,
        };
}

json_t *proto_app_encode(const struct proto_app *a)
{
        json_t *plan = json_pack("{s:o, s:I, s:I, s:I}", "cpuCores", proto_app_cpu_json(a->plan.cpu_millis),
                                 "memoryMB", (json_int_t)a->plan.memory_mb, "volumeQuotaMB",
                                 (json_int_t)a->plan.volume_quota_mb, "pids", (json_int_t)a->plan.pids);
        if (plan && a->plan.id && json_object_set_new(plan, "id", json_string(a->plan.id)) < 0) {
                json_decref(plan);
                return NULL;
        }
        json_t *group = a->group_id ? json_pack("{s:s}", "id", a->group_id) : json_null();
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:{s:s}, s:o, s:s, s:I, s:b, s:o, s:o, s:o}",
                         "id", a->id, "name", a->name, "hostname", a->hostname, "type",
                         proto_app_types[(unsigned)a->type <= PROTO_APP_TYPE_SERVICE ? a->type : PROTO_APP_TYPE_APP],
                         "version", a->version, "command", strv_json(a->command), "sftpUsername", a->sftp_username,
                         "groupId", opt_string(a->group_id), "group", group, "template", "id", a->template_id,
                         "plan", plan, "state", proto_app_record_state_name(a->state), "volumeQuotaMB",
                         (json_int_t)a->plan.volume_quota_mb, "sftpEnabled", a->sftp_enabled, "createdAt",
                         time_json(a->created_at_ms), "updatedAt", time_json(a->updated_at_ms), "volumeSeededAt",
                         opt_time_json(a->volume_seeded_at_ms));
}

json_t *proto_app_state_encode(enum proto_app_state s)
{
        return json_pack("{s:s}", "state", proto_app_state_name(s));
}

json_t *proto_app_status_encode(const struct proto_app_status *s)
{
        return json_pack("{s:s, s:o, s:o, s:I, s:I, s:I}", "state", proto_app_state_name(s->state), "startedAt",
                         opt_time_json(s->started_at_ms), "exitCode",
                         s->has_exit_code ? json_integer(s->exit_code) : json_null(), "restarts",
                         (json_int_t)s->restarts, "memoryMB", (json_int_t)s->memory_mb, "volumeUsedMB",
                         (json_int_t)s->volume_used_mb);
}

json_t *proto_app_line_encode(const struct proto_app_line *l)
{
        return json_pack("{s:I, s:o, s:s, s:o}", "seq", (json_int_t)l->seq, "ts", time_json(l->ts_ms), "stream",
                         proto_app_streams[(unsigned)l->stream < ARRAY_SIZE(proto_app_streams) - 1 ? l->stream : 2],
                         "text", proto_text_json(l->text, l->len));
}

json_t *proto_app_output_encode(const struct proto_app_line *lines, size_t n, int64_t next_seq)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, proto_app_line_encode(&lines[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return json_pack("{s:o, s:I}", "lines", a, "nextSeq", (json_int_t)next_seq);
}

json_t *proto_app_image_encode(const struct proto_app_image_info *i)
{
        return json_pack("{s:s, s:s, s:I}", "image", i->image, "digest", i->digest, "sizeBytes",
                         (json_int_t)i->size_bytes);
}

json_t *proto_app_image_list_encode(const struct proto_app_image_info *i, size_t n)
{
        json_t *a = json_array();
        for (size_t k = 0; a && k < n; k++) {
                json_t *used = json_array();
                for (size_t u = 0; used && u < i[k].n_used_by; u++)
                        json_array_append_new(used, json_string(i[k].used_by[u]));
                json_t *item = proto_app_image_encode(&i[k]);
                if (!item || !used || json_object_set_new(item, "usedBy", used) < 0 ||
                    json_array_append_new(a, item) < 0) {
                        json_decref(item);
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

json_t *proto_app_exited_encode(int exit_code, int signal, bool crash_loop)
{
        json_t *o = json_pack("{s:i, s:b}", "exitCode", signal > 0 ? 128 + signal : exit_code, "crashLoop",
                              crash_loop);
        if (o && signal > 0) {
                char buf[16];
                const char *name = proto_app_signal_name(signal);
                if (!name) {
                        snprintf(buf, sizeof(buf), "SIG%d", signal);
                        name = buf;
                }
                json_object_set_new(o, "signal", json_string(name));
        }
        return o;
}
