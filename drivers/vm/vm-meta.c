/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the node keeps about each server beyond libvirt's own view, in
 * <state_dir>/vps/<id>.json (mode 0600, replaced atomically): name, hostname,
 * plan, template, credentials (a crypt hash, never a plain password), inputs, the
 * network (its addresses: Server.ipAddresses and the node's claim on them),
 * createdAt, the wanted power state and whether an install is unfinished.
 */
#include "drivers/vm/vm-util.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/fault.h"
#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "proto/decode.h"

#define META_MAX (1u << 20)

void vm_meta_clear(struct vm_meta *m)
{
        if (!m)
                return;
        free(m->name);
        free(m->template_id);
        free(m->image_slug);
        if (m->password_hash) {
                explicit_bzero(m->password_hash, strlen(m->password_hash));
                free(m->password_hash);
        }
        proto_strv_free(m->ssh_keys);
        free(m->kernel);
        free(m->initrd);
        free(m->cmdline);
        if (m->inputs)
                json_decref(m->inputs);
        memset(m, 0, sizeof(*m));
}

size_t vm_meta_ssh_key_count(const struct vm_meta *m)
{
        size_t n = 0;
        for (char **k = m->ssh_keys; k && *k; k++)
                n++;
        return n;
}

int vm_meta_set_keys(struct vm_meta *m, char *const *keys, struct na_error *err)
{
        size_t n = 0;
        for (char *const *k = keys; k && *k; k++)
                n++;
        char **v = NULL;
        if (n > 0) {
                v = calloc(n + 1, sizeof(char *));
                if (!v)
                        return na_error_sys(err, ENOMEM, "vps %s: keys", m->id);
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                for (size_t i = 0; i < n; i++)
                        if (!(v[i] = strdup(keys[i]))) {
                                proto_strv_free(v);
                                return na_error_sys(err, ENOMEM, "vps %s: keys", m->id);
                        }
                NA_ANALYZER_FP_END
        }
        proto_strv_free(m->ssh_keys);
        m->ssh_keys = v;
        return 0;
}

static bool same_str(const char *a, const char *b)
{
        return a && b ? strcmp(a, b) == 0 : !a && !b;
}

static bool same_plan(const struct proto_vps_plan *a, const struct proto_vps_plan *b)
{
        return a->cpu_cores == b->cpu_cores && a->cpu_threads == b->cpu_threads && a->ram_mb == b->ram_mb &&
               a->storage_mb == b->storage_mb && a->network_speed_mbps == b->network_speed_mbps &&
               a->bandwidth_limit_gb == b->bandwidth_limit_gb && a->max_snapshots == b->max_snapshots;
}

static bool same_keys(char *const *a, char *const *b)
{
        for (; a && *a && b && *b; a++, b++)
                if (strcmp(*a, *b) != 0)
                        return false;
        return !(a && *a) && !(b && *b);
}

static bool same_inputs(json_t *a, json_t *b)
{
        bool a_none = !a || json_object_size(a) == 0, b_none = !b || json_object_size(b) == 0;
        return a_none || b_none ? a_none && b_none : json_equal(a, b);
}

bool vm_meta_matches_create(const struct vm_meta *m, const struct vm_create_spec *spec)
{
        return same_str(m->name, spec->name) && spec->hostname && strcasecmp(m->hostname, spec->hostname) == 0 &&
               same_plan(&m->plan, &spec->plan) && same_str(m->template_id, spec->tmpl.id) &&
               same_str(m->image_slug, spec->tmpl.image_slug) && m->os == spec->tmpl.os &&
               same_keys(m->ssh_keys, spec->ssh_keys) && same_inputs(m->inputs, spec->inputs) &&
               m->has_network && proto_vps_network_equal(&m->network, &spec->network) &&
               vm_password_matches(spec->password, m->password_hash);
}

static char *meta_path(const char *dir, const char *id)
{
        return na_strdupf("%s/%s.json", dir, id);
}

static json_t *plan_json(const struct proto_vps_plan *p)
{
        return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "cpuCores", (json_int_t)p->cpu_cores, "cpuThreads",
                         (json_int_t)p->cpu_threads, "ramMB", (json_int_t)p->ram_mb, "storageMB",
                         (json_int_t)p->storage_mb, "networkSpeedLimitMbps", (json_int_t)p->network_speed_mbps,
                         "bandwidthLimitGb", (json_int_t)p->bandwidth_limit_gb, "maxSnapshots",
                         (json_int_t)p->max_snapshots);
}

int vm_meta_save(const char *meta_dir, const struct vm_meta *m, struct na_error *err)
{
        json_t *keys = json_array();
        for (char **k = m->ssh_keys; k && *k; k++)
                json_array_append_new(keys, json_string(*k));
        _cleanup_json_ json_t *doc = json_pack(
                "{s:i, s:s, s:s, s:s, s:o, s:{s:s, s:s, s:s}, s:o, s:o, s:o, s:o, s:I, s:I, s:s, s:b}", "version", 1,
                "id", m->id, "name", m->name ? m->name : "", "hostname", m->hostname, "plan", plan_json(&m->plan),
                "template", "id", m->template_id ? m->template_id : "", "imageSlug", m->image_slug ? m->image_slug : "",
                "os", proto_vps_os_names[m->os == PROTO_VPS_OS_WINDOWS], "passwordHash",
                m->password_hash ? json_string(m->password_hash) : json_null(), "sshKeys", keys, "sshKeyId",
                m->ssh_key_id[0] ? json_string(m->ssh_key_id) : json_null(), "inputs",
                m->inputs ? json_incref(m->inputs) : json_null(), "createdAt", (json_int_t)m->created_at_ms,
                "generation", (json_int_t)m->generation, "wantedState", m->want_running ? "running" : "stopped",
                "installing", m->installing);
        if (doc && m->has_network) {
                json_t *net = proto_vps_network_encode(&m->network);
                if (!net || json_object_set_new(doc, "network", net) < 0)
                        return na_error_set(err, ENOMEM, NA_E_INTERNAL, "vps %s: cannot encode metadata", m->id);
        }
        if (doc && m->kernel)
                json_object_set_new(doc, "boot",
                                    json_pack("{s:s, s:s?, s:s?}", "kernel", m->kernel, "initrd", m->initrd, "cmdline",
                                              m->cmdline));
        if (!doc)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "vps %s: cannot encode metadata", m->id);
        _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT);
        _cleanup_free_ char *path = meta_path(meta_dir, m->id);
        if (!text || !path)
                return na_error_sys(err, ENOMEM, "vps %s: metadata", m->id);
        int r = na_atomic_write(path, text, strlen(text), 0600, err);
        if (r < 0)
                return na_error_prefix(err, "vps %s: save metadata", m->id);
        return 0;
}

/* A string member as a new string; NULL when absent, or when the copy failed (*oom set). */
static char *dup_str(json_t *o, const char *key, bool *oom)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_string(v))
                return NULL;
        char *s = strdup(json_string_value(v));
        if (!s)
                *oom = true;
        return s;
}

static void copy_str(json_t *o, const char *key, char *buf, size_t len)
{
        json_t *v = json_object_get(o, key);
        snprintf(buf, len, "%s", json_is_string(v) ? json_string_value(v) : "");
}

int vm_meta_load(const char *meta_dir, const char *id, struct vm_meta *m, struct na_error *err)
{
        memset(m, 0, sizeof(*m));
        _cleanup_free_ char *path = meta_path(meta_dir, id);
        if (!path)
                return na_error_sys(err, ENOMEM, "vps %s: metadata", id);
        if (access(path, F_OK) < 0 && errno == ENOENT)
                return -ENOENT;
        _cleanup_free_ char *text = NULL;
        int r = na_read_file(path, META_MAX, &text, NULL, err);
        if (r < 0)
                return na_error_prefix(err, "vps %s: load metadata", id);
        json_error_t jerr;
        _cleanup_json_ json_t *doc = json_loads(text, 0, &jerr);
        if (!doc || !json_is_object(doc))
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "vps %s: metadata %s: %s", id, path,
                                    doc ? "not an object" : jerr.text);

        snprintf(m->id, sizeof(m->id), "%s", id);
        bool oom = false; /* a copy failed: the load fails rather than lose a field (a key) */
        m->name = dup_str(doc, "name", &oom);
        copy_str(doc, "hostname", m->hostname, sizeof(m->hostname));
        json_t *plan = json_object_get(doc, "plan");
        struct na_error ignore = NA_ERROR_INIT;
        if (proto_vps_plan_decode(plan, "plan", &m->plan, &ignore) < 0) {
                na_error_clear(&ignore);
                vm_meta_clear(m);
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "vps %s: metadata %s: bad plan", id, path);
        }
        json_t *net = json_object_get(doc, "network");
        if (net) {
                if (proto_vps_network_decode(net, "network", &m->network, &ignore) < 0) {
                        na_error_clear(&ignore);
                        vm_meta_clear(m);
                        return na_error_set(err, EBADMSG, NA_E_INTERNAL, "vps %s: metadata %s: bad network", id, path);
                }
                m->has_network = true;
        }
        json_t *t = json_object_get(doc, "template");
        m->template_id = dup_str(t, "id", &oom);
        m->image_slug = dup_str(t, "imageSlug", &oom);
        json_t *os = json_object_get(t, "os");
        m->os = json_is_string(os) && streq(json_string_value(os), "windows") ? PROTO_VPS_OS_WINDOWS
                                                                              : PROTO_VPS_OS_LINUX;
        m->password_hash = dup_str(doc, "passwordHash", &oom);
        json_t *keys = json_object_get(doc, "sshKeys");
        if (json_is_array(keys) && json_array_size(keys) > 0) {
                m->ssh_keys = NA_FAULT("vm-meta.keys") ? NULL : calloc(json_array_size(keys) + 1, sizeof(char *));
                size_t i, n = 0;
                json_t *k;
                NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses a string stored into an element of a heap array: the array owns it and frees it */
                json_array_foreach(keys, i, k)
                        if (m->ssh_keys && json_is_string(k) &&
                            !(m->ssh_keys[n++] = NA_FAULT("vm-meta.key") ? NULL : strdup(json_string_value(k))))
                                break; /* the list ends at the NULL: freed whole below */
                NA_ANALYZER_FP_END
                if (!m->ssh_keys || (n > 0 && !m->ssh_keys[n - 1]))
                        oom = true;
        }
        copy_str(doc, "sshKeyId", m->ssh_key_id, sizeof(m->ssh_key_id));
        json_t *inputs = json_object_get(doc, "inputs");
        m->inputs = json_is_object(inputs) ? json_incref(inputs) : NULL;
        json_t *boot = json_object_get(doc, "boot");
        m->kernel = dup_str(boot, "kernel", &oom);
        m->initrd = dup_str(boot, "initrd", &oom);
        m->cmdline = dup_str(boot, "cmdline", &oom);
        m->created_at_ms = json_integer_value(json_object_get(doc, "createdAt"));
        m->generation = json_integer_value(json_object_get(doc, "generation"));
        json_t *ws = json_object_get(doc, "wantedState");
        m->want_running = json_is_string(ws) && streq(json_string_value(ws), "running");
        m->installing = json_is_true(json_object_get(doc, "installing"));
        if (oom) {
                vm_meta_clear(m);
                return na_error_sys(err, ENOMEM, "vps %s: load metadata %s", id, path);
        }
        if (!m->name || !m->template_id || !m->image_slug) {
                vm_meta_clear(m);
                return na_error_set(err, EBADMSG, NA_E_INTERNAL, "vps %s: metadata %s: incomplete", id, path);
        }
        return 0;
}

int vm_meta_foreach_id(const char *meta_dir, int (*fn)(const char *id, void *data), void *data)
{
        DIR *d = opendir(meta_dir);
        if (!d)
                return -errno;
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (n != PROTO_VPS_ID_LEN + 5 || !streq(de->d_name + PROTO_VPS_ID_LEN, ".json"))
                        continue;
                char id[PROTO_VPS_ID_LEN + 1];
                memcpy(id, de->d_name, PROTO_VPS_ID_LEN);
                id[PROTO_VPS_ID_LEN] = '\0';
                r = fn(id, data);
        }
        closedir(d);
        return r;
}

int vm_meta_remove(const char *meta_dir, const char *id, struct na_error *err)
{
        _cleanup_free_ char *path = meta_path(meta_dir, id);
        if (!path)
                return na_error_sys(err, ENOMEM, "vps %s: metadata", id);
        int r = na_unlink(path, err);
        if (r < 0)
                return r;
        return na_fsync_parent(path, err);
}
