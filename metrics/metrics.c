/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The collector: targets, one tick over every source, latest samples and queries. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"
#include "common/timeutil.h"
#include "metrics/metrics-internal.h"

const char *const metrics_kind_names[] = { "node", "vps", "app", NULL };

#define LIBVIRT_DRIVER "qemu"
#define NODE_ID "node"

/* ---- targets ---- */

static void target_free(struct mtarget *t)
{
        if (!t)
                return;
        mtarget_close_files(t);
        history_close(t->hist);
        free(t->domain);
        free(t->cgroup);
        free(t);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct mtarget *, target_free)

static void history_path(const struct metrics *m, enum metrics_kind kind, const char *id, char *buf, size_t len)
{
        if (kind == METRICS_NODE)
                snprintf(buf, len, "%s/node.hist", m->hist_dir);
        else
                snprintf(buf, len, "%s/%s-%s.hist", m->hist_dir, metrics_kind_names[kind], id);
}

/* Lower-case copy of a valid UUID into buf; false when id is not one. */
static bool norm_id(enum metrics_kind kind, const char *id, char buf[NA_UUID_STRLEN + 1])
{
        if (kind == METRICS_NODE) {
                snprintf(buf, NA_UUID_STRLEN + 1, "%s", NODE_ID);
                return !id || streq(id, NODE_ID);
        }
        if (!id || !na_uuid_valid(id))
                return false;
        for (size_t i = 0; i <= NA_UUID_STRLEN; i++)
                buf[i] = (char)tolower((unsigned char)id[i]);
        return true;
}

/* Under data_lock (or collect_lock): the target, or NULL. */
static struct mtarget *target_find(struct metrics *m, enum metrics_kind kind, const char *norm, size_t *index)
{
        for (size_t i = 0; i < m->n_targets; i++)
                if (m->targets[i]->kind == kind && streq(m->targets[i]->id, norm)) {
                        if (index)
                                *index = i;
                        return m->targets[i];
                }
        return NULL;
}

static bool ifname_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n >= NA_IFNAME_LEN || streq(s, ".") || streq(s, ".."))
                return false;
        for (const char *p = s; *p; p++)
                if (*p == '/' || *p == ':' || !isgraph((unsigned char)*p))
                        return false;
        return true;
}

/* Check a spec and derive what the collector needs; fills the fields of *t it owns. */
static int spec_apply(const struct metrics_target_spec *spec, const char *id, struct mtarget *t,
                      struct na_error *err)
{
        const char *kind = spec->kind == METRICS_APP ? "app" : "vps";
        /* Freed by hand, not by _cleanup_free_: GCC 12's -fanalyzer reports the cleanup of
         * these two (in common/macro.h's freep, where no pragma can single them out) as a
         * leak and as a use of an uninitialized value. */
        char *cgroup = NULL, *domain = NULL;
        char ifname[NA_IFNAME_LEN] = "";

        if (spec->cgroup) {
                int r = metrics_cgroup_path_normalize(spec->cgroup, &cgroup, err);
                if (r < 0)
                        return na_error_prefix(err, "%s %s", kind, id);
        } else if (spec->kind == METRICS_VPS) {
                char buf[64];
                if (spec->domain) {
                        size_t n = strlen(spec->domain);
                        if (n == 0 || n > 255 || strchr(spec->domain, '/'))
                                return na_error_set(err, EINVAL, NA_E_INTERNAL, "vps %s: bad domain name", id);
                        domain = strdup(spec->domain);
                } else {
                        na_vps_domain_name(id, buf, sizeof(buf));
                        domain = strdup(buf);
                }
                if (!domain)
                        return na_error_sys(err, ENOMEM, "vps %s", id);
        } else {
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "app %s: a cgroup path is required", id);
        }

        if (spec->ifname) {
                if (!ifname_ok(spec->ifname)) {
                        free(cgroup);
                        free(domain);
                        return na_error_set(err, EINVAL, NA_E_INTERNAL, "%s %s: bad interface name", kind, id);
                }
                snprintf(ifname, sizeof(ifname), "%s", spec->ifname);
        } else if (spec->kind == METRICS_VPS) {
                na_vps_ifname(id, ifname);
        }

        bool moved = !streq_ptr(t->domain, domain) || (cgroup && !streq_ptr(t->cgroup, cgroup)) ||
                     (!cgroup && t->explicit_cgroup);
        if (moved) {
                mtarget_close_files(t);
                t->have_inactive = false;
                free(t->cgroup);
                t->cgroup = TAKE_PTR(cgroup);
                t->explicit_cgroup = t->cgroup != NULL;
                free(t->domain);
                t->domain = TAKE_PTR(domain);
        }
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* GCC 12 loses both through TAKE_PTR above: handed to t or freed here */
        free(cgroup);
        free(domain);
        snprintf(t->ifname, sizeof(t->ifname), "%s", ifname);
        t->vcpus = spec->vcpus;
        t->mem_limit = spec->memory_limit_bytes;
        return moved ? 1 : 0;
        NA_ANALYZER_FP_END
}

static struct mtarget *target_alloc(enum metrics_kind kind, const char *id)
{
        struct mtarget *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->kind = kind;
        snprintf(t->id, sizeof(t->id), "%s", id);
        for (int f = 0; f < MF__COUNT; f++)
                t->fd[f] = -1;
        return t;
}

static int target_open_history(struct metrics *m, struct mtarget *t, struct na_error *err)
{
        char path[PATH_MAX];
        history_path(m, t->kind, t->id, path, sizeof(path));
        int r = history_open(path, m->preallocate, &t->hist, NULL, err);
        if (r < 0)
                return na_error_prefix(err, "%s %s", metrics_kind_names[t->kind], t->id);
        return 0;
}

/* Under both locks. */
static int targets_append(struct metrics *m, struct mtarget *t)
{
        if (m->n_targets == m->cap_targets) {
                size_t cap = m->cap_targets ? m->cap_targets * 2 : 64;
                struct mtarget **a = realloc(m->targets, cap * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                m->targets = a;
                m->cap_targets = cap;
        }
        m->targets[m->n_targets++] = t;
        return 0;
}

/* ---- open and close ---- */

static int dup_or_default(char **dst, const char *src, const char *def)
{
        *dst = strdup(src ? src : def);
        return *dst ? 0 : -ENOMEM;
}

int metrics_open(const struct metrics_options *opts, struct metrics **ret, struct na_error *err)
{
        if (!opts || !opts->state_dir)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "metrics: no state directory");

        _cleanup_(metrics_closep) struct metrics *m = calloc(1, sizeof(*m));
        if (!m)
                return na_error_sys(err, ENOMEM, "metrics");
        for (int i = 0; i < MN__COUNT; i++)
                m->node_fd[i] = -1;
        pthread_mutex_init(&m->collect_lock, NULL);
        pthread_mutex_init(&m->data_lock, NULL);

        char *cgroup_root = NULL;
        if (dup_or_default(&m->proc_root, opts->proc_root, "/proc") < 0 ||
            asprintf(&m->sys_net_root, "%s/class/net", opts->sys_root ? opts->sys_root : "/sys") < 0)
                m->sys_net_root = NULL;
        if (!m->sys_net_root || dup_or_default(&cgroup_root, opts->cgroup_root, "/sys/fs/cgroup") < 0 ||
            asprintf(&m->hist_dir, "%s/metrics", opts->state_dir) < 0) {
                m->hist_dir = NULL;
                free(cgroup_root);
                return na_error_sys(err, ENOMEM, "metrics");
        }
        m->interval_sec = opts->interval_sec ? opts->interval_sec : 10;
        m->cache_fds = !opts->no_fd_cache;
        m->preallocate = !opts->no_preallocate;

        struct rlimit rl;
        m->fd_limit = INT_MAX;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INT_MAX) {
                int cur = (int)rl.rlim_cur, reserve = cur / 8 > 64 ? cur / 8 : 64;
                m->fd_limit = cur - reserve;
        }

        /* A host without any cgroup hierarchy still has node metrics. */
        struct na_error cg_err = NA_ERROR_INIT;
        if (metrics_cgroups_detect(cgroup_root, &m->cg, &cg_err) < 0)
                m->cg.mode = "none";
        na_error_clear(&cg_err);
        free(cgroup_root);

        int r = na_mkdir_p(m->hist_dir, 0750, err);
        if (r < 0)
                return na_error_prefix(err, "metrics");

        _cleanup_(target_freep) struct mtarget *node = target_alloc(METRICS_NODE, NODE_ID);
        if (!node)
                return na_error_sys(err, ENOMEM, "metrics");
        r = target_open_history(m, node, err);
        if (r < 0)
                return r;
        if (targets_append(m, node) < 0)
                return na_error_sys(err, ENOMEM, "metrics");
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* node now belongs to m's target list (targets_append) */
        node = NULL;
        NA_ANALYZER_FP_END

        *ret = TAKE_PTR(m);
        return 0;
}

void metrics_close(struct metrics *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_targets; i++)
                target_free(m->targets[i]);
        free(m->targets);
        for (int i = 0; i < MN__COUNT; i++)
                if (m->node_fd[i] >= 0)
                        close(m->node_fd[i]);
        free(m->big);
        netdev_table_free(&m->netdev);
        metrics_cgroups_clear(&m->cg);
        free(m->proc_root);
        free(m->sys_net_root);
        free(m->hist_dir);
        pthread_mutex_destroy(&m->collect_lock);
        pthread_mutex_destroy(&m->data_lock);
        free(m);
}

void metrics_set_interval(struct metrics *m, unsigned interval_sec)
{
        pthread_mutex_lock(&m->data_lock);
        m->interval_sec = interval_sec ? interval_sec : 10;
        pthread_mutex_unlock(&m->data_lock);
}

/* "<kind>-<uuid>.hist" or "node.hist": the target a history file belongs to. */
static bool parse_history_name(const char *name, enum metrics_kind *kind, char id[NA_UUID_STRLEN + 1])
{
        if (streq(name, "node.hist")) {
                *kind = METRICS_NODE;
                snprintf(id, NA_UUID_STRLEN + 1, "%s", NODE_ID);
                return true;
        }
        for (int k = METRICS_VPS; k <= METRICS_APP; k++) {
                size_t kl = strlen(metrics_kind_names[k]);
                if (strncmp(name, metrics_kind_names[k], kl) != 0 || name[kl] != '-' ||
                    strlen(name) != kl + 1 + NA_UUID_STRLEN + 5 || !streq(name + kl + 1 + NA_UUID_STRLEN, ".hist"))
                        continue;
                snprintf(id, NA_UUID_STRLEN + 1, "%.*s", NA_UUID_STRLEN, name + kl + 1);
                *kind = (enum metrics_kind)k;
                return na_uuid_valid(id);
        }
        return false;
}

int metrics_prune(struct metrics *m, uint64_t now_ms, struct na_error *err)
{
        const int64_t keep_ms = 31LL * 86400 * 1000;
        DIR *d = opendir(m->hist_dir);
        if (!d)
                return na_error_sys(err, errno, "metrics: %s", m->hist_dir);
        int removed = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                enum metrics_kind kind;
                char id[NA_UUID_STRLEN + 1];
                struct stat st;
                if (!parse_history_name(de->d_name, &kind, id) || kind == METRICS_NODE ||
                    metrics_tracked(m, kind, id) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                int64_t mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
                if ((int64_t)now_ms - mtime_ms > keep_ms && unlinkat(dirfd(d), de->d_name, 0) == 0)
                        removed++;
        }
        closedir(d);
        return removed;
}

const char *metrics_cgroup_mode(const struct metrics *m)
{
        return m->cg.mode;
}

unsigned metrics_node_cpus(const struct metrics *m)
{
        return m->node_cpus;
}

/* ---- tracking ---- */

int metrics_track(struct metrics *m, const struct metrics_target_spec *spec, struct na_error *err)
{
        char id[NA_UUID_STRLEN + 1];
        if (!spec || (spec->kind != METRICS_VPS && spec->kind != METRICS_APP))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "metrics: only servers and apps can be tracked");
        if (!norm_id(spec->kind, spec->id, id))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "metrics: %s id %s is not a UUID",
                                    metrics_kind_names[spec->kind], spec->id ? spec->id : "(none)");

        pthread_mutex_lock(&m->collect_lock);
        int r;
        struct mtarget *t = target_find(m, spec->kind, id, NULL);
        if (t) {
                r = spec_apply(spec, id, t, err);
                if (r > 0) {
                        pthread_mutex_lock(&m->data_lock);
                        t->prev.cvalid &= ~MC_CGROUP_BITS; /* another cgroup: new baselines */
                        pthread_mutex_unlock(&m->data_lock);
                }
                pthread_mutex_unlock(&m->collect_lock);
                return r < 0 ? r : 0;
        }

        _cleanup_(target_freep) struct mtarget *n = target_alloc(spec->kind, id);
        if (!n) {
                pthread_mutex_unlock(&m->collect_lock);
                return na_error_sys(err, ENOMEM, "metrics");
        }
        n->stat_phase = (unsigned)(m->n_targets % MEMORY_STAT_EVERY);
        n->flush_phase = (unsigned)(m->n_targets % HISTORY_FLUSH_BUCKETS);
        r = spec_apply(spec, id, n, err);
        if (r >= 0)
                r = target_open_history(m, n, err);
        if (r >= 0) {
                pthread_mutex_lock(&m->data_lock);
                r = targets_append(m, n);
                pthread_mutex_unlock(&m->data_lock);
                if (r < 0)
                        na_error_sys(err, ENOMEM, "metrics");
                else
                        n = NULL;
        }
        pthread_mutex_unlock(&m->collect_lock);
        return r < 0 ? r : 0;
}

int metrics_untrack(struct metrics *m, enum metrics_kind kind, const char *id, bool drop_history,
                    struct na_error *err)
{
        char norm[NA_UUID_STRLEN + 1];
        if (kind == METRICS_NODE || !norm_id(kind, id, norm))
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "metrics: cannot untrack %s %s",
                                    metrics_kind_names[kind], id ? id : "(none)");
        pthread_mutex_lock(&m->collect_lock);
        pthread_mutex_lock(&m->data_lock);
        size_t i;
        struct mtarget *t = target_find(m, kind, norm, &i);
        if (t) {
                memmove(&m->targets[i], &m->targets[i + 1], (m->n_targets - i - 1) * sizeof(*m->targets));
                m->n_targets--;
        }
        pthread_mutex_unlock(&m->data_lock);
        pthread_mutex_unlock(&m->collect_lock);
        if (!t)
                return na_error_set(err, ENOENT, NA_E_INTERNAL, "metrics: %s %s is not tracked",
                                    metrics_kind_names[kind], norm);
        target_free(t);
        if (drop_history) {
                char path[PATH_MAX];
                history_path(m, kind, norm, path, sizeof(path));
                if (unlink(path) < 0 && errno != ENOENT)
                        return na_error_sys(err, errno, "%s %s: remove history %s", metrics_kind_names[kind], norm,
                                            path);
        }
        return 0;
}

bool metrics_tracked(struct metrics *m, enum metrics_kind kind, const char *id)
{
        char norm[NA_UUID_STRLEN + 1];
        if (!norm_id(kind, id, norm))
                return false;
        pthread_mutex_lock(&m->data_lock);
        bool found = target_find(m, kind, norm, NULL) != NULL;
        pthread_mutex_unlock(&m->data_lock);
        return found;
}

/* ---- the tick ---- */

/*
 * Find a server's machine cgroup. The first server without one at a tick scans the
 * machine partitions once into an index; the others of that tick look it up there.
 */
static void resolve_guest(struct metrics *m, struct mtarget *t, struct machine_index **ix, bool *scanned,
                          uint64_t *lookups)
{
        const char *hier = m->cg.res[CG_CPU].dir ? m->cg.res[CG_CPU].dir : m->cg.v2_dir;
        if (!hier)
                return;
        if (!*scanned) {
                *scanned = true;
                if (machine_index_build(hier, ix, NULL) < 0)
                        *ix = NULL;
                (*lookups)++;
        }
        const char *rel = *ix ? machine_index_find(*ix, LIBVIRT_DRIVER, t->domain) : NULL;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* the copy is stored in t->cgroup, which owns it */
        if (!rel || !(t->cgroup = strdup(rel)))
                return;
        NA_ANALYZER_FP_END
        mtarget_close_files(t);
        t->have_inactive = false;
        t->cur.restarted |= MC_CGROUP_BITS;
}

static bool source_needs_cgroup(const struct metrics_source *s)
{
        return s != &metrics_source_tap;
}

int metrics_collect(struct metrics *m, uint64_t now_ms, struct na_error *err)
{
        pthread_mutex_lock(&m->collect_lock);
        uint64_t t0 = na_now_mono_us(), skipped = 0, resets = 0, lookups = 0;
        m->tick_seq++;

        /* The node first: the interface table the guests' tap source reads comes from it. */
        struct mtarget *node = m->targets[0];
        memset(&node->cur, 0, sizeof(node->cur));
        m->cpus_read = 0;
        for (size_t s = 0; metrics_sources[s]; s++)
                if (metrics_sources[s]->node)
                        skipped += metrics_sources[s]->read(m, node);

        unsigned unresolved = 0;
        _cleanup_(machine_index_freep) struct machine_index *ix = NULL;
        bool scanned = false;
        for (size_t i = 1; i < m->n_targets; i++) {
                struct mtarget *t = m->targets[i];
                memset(&t->cur, 0, sizeof(t->cur));
                if (!t->cgroup && t->domain) {
                        resolve_guest(m, t, &ix, &scanned, &lookups);
                        if (!t->cgroup)
                                unresolved++;
                }
                for (size_t s = 0; metrics_sources[s]; s++) {
                        const struct metrics_source *src = metrics_sources[s];
                        if (src->node || (source_needs_cgroup(src) && !t->cgroup))
                                continue;
                        skipped += src->read(m, t);
                }
                if (t->lost) {
                        /* A cgroup directory went away (guest stopped): new counters when it is back. */
                        mtarget_close_res_files(t, t->lost);
                        if (t->lost & (1u << CG_MEMORY))
                                t->have_inactive = false;
                        if (t->lost & (1u << CG_CPU))
                                t->cur.restarted |= MC_BIT(MC_CPU_NS);
                        if (t->lost & (1u << CG_IO))
                                t->cur.restarted |= MC_BIT(MC_DISK_READ) | MC_BIT(MC_DISK_WRITE);
                        /* Its machine cgroup is gone: look the server up again at the next tick. */
                        if (!t->explicit_cgroup && (t->lost & (1u << CG_CPU))) {
                                mtarget_close_files(t);
                                t->have_inactive = false;
                                t->cur.restarted |= MC_CGROUP_BITS;
                                free(t->cgroup);
                                t->cgroup = NULL;
                        }
                        t->lost = 0;
                }
        }

        uint64_t writes = 0;
        pthread_mutex_lock(&m->data_lock);
        if (m->cpus_read)
                m->node_cpus = m->cpus_read;
        memcpy(m->pressure, m->pressure_read, sizeof(m->pressure));
        for (size_t i = 0; i < m->n_targets; i++) {
                struct mtarget *t = m->targets[i];
                struct proto_metrics_sample s;
                resets += metrics_rates(t, now_ms, m->node_cpus, &s);
                t->last = t->cur;
                if (s.valid) {
                        t->latest = s;
                        t->has_latest = true;
                        writes += history_record(t->hist, &s);
                }
        }
        /* A twelfth of the targets write their closed buckets at each tick: no tick writes them all. */
        uint64_t f0 = na_now_mono_us();
        for (size_t i = 0; i < m->n_targets; i++)
                if ((m->tick_seq + m->targets[i]->flush_phase) % HISTORY_FLUSH_BUCKETS == 0)
                        writes += history_flush(m->targets[i]->hist);
        m->stats.last_flush_us = na_now_mono_us() - f0;
        m->stats.history_writes += writes;
        m->last_tick_ms = now_ms;
        m->stats.ticks++;
        m->stats.values_skipped += skipped;
        m->stats.counter_resets += resets;
        m->stats.lookups += lookups;
        m->stats.targets = (unsigned)m->n_targets;
        m->stats.unresolved = unresolved;
        m->stats.last_tick_us = na_now_mono_us() - t0;
        pthread_mutex_unlock(&m->data_lock);
        pthread_mutex_unlock(&m->collect_lock);
        (void)err;
        return 0;
}

/* ---- answers ---- */

int metrics_latest(struct metrics *m, enum metrics_kind kind, const char *id, struct proto_metrics_sample *ret)
{
        char norm[NA_UUID_STRLEN + 1];
        if (!norm_id(kind, id, norm))
                return -ENOENT;
        pthread_mutex_lock(&m->data_lock);
        struct mtarget *t = target_find(m, kind, norm, NULL);
        int r = t && t->has_latest ? 0 : -ENOENT;
        if (r == 0)
                *ret = t->latest;
        pthread_mutex_unlock(&m->data_lock);
        return r;
}

struct latest_copy {
        char id[NA_UUID_STRLEN + 1];
        struct proto_metrics_sample s;
};

json_t *metrics_latest_json(struct metrics *m)
{
        _cleanup_json_ json_t *arr = json_array();
        if (!arr)
                return NULL;
        pthread_mutex_lock(&m->data_lock);
        size_t n = 0;
        _cleanup_free_ struct latest_copy *c = malloc((m->n_targets ? m->n_targets : 1) * sizeof(*c));
        if (c)
                for (size_t i = 0; i < m->n_targets; i++) {
                        struct mtarget *t = m->targets[i];
                        if (!t->has_latest || t->latest.at_ms != m->last_tick_ms)
                                continue;
                        memcpy(c[n].id, t->id, sizeof(c[n].id));
                        c[n++].s = t->latest;
                }
        pthread_mutex_unlock(&m->data_lock);
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_t *s = proto_metrics_sample_encode(c[i].id, &c[i].s);
                if (!s || json_array_append_new(arr, s) < 0)
                        return NULL;
        }
        return TAKE_PTR(arr);
}

static int not_found(enum metrics_kind kind, const char *id, struct na_error *err)
{
        if (kind == METRICS_VPS)
                return na_error_set(err, ENOENT, NA_E_VPS_NOT_FOUND, "vps %s: no such server on this node", id);
        if (kind == METRICS_APP)
                return na_error_set(err, ENOENT, NA_E_APP_NOT_FOUND, "app %s: no such app on this node", id);
        return na_error_set(err, ENOENT, NA_E_INTERNAL, "metrics: %s is not tracked", id);
}

/* The series and the now sample of one target (tracked or, with allow_untracked, from its file). */
static int series_and_now(struct metrics *m, enum metrics_kind kind, const char *id, const struct proto_metrics_query *q,
                          bool allow_untracked, struct proto_metrics_sample *now, struct proto_metrics_point **pts,
                          size_t *n, char norm[NA_UUID_STRLEN + 1], struct na_error *err)
{
        *now = (struct proto_metrics_sample){ .at_ms = q->now_ms > 0 ? (uint64_t)q->now_ms : 0 };
        if (!norm_id(kind, id, norm))
                return not_found(kind, id ? id : "(none)", err);

        pthread_mutex_lock(&m->data_lock);
        struct mtarget *t = target_find(m, kind, norm, NULL);
        if (t) {
                uint64_t fresh = 3ULL * m->interval_sec * 1000;
                if (t->has_latest && t->latest.at_ms + fresh >= now->at_ms)
                        *now = t->latest;
                int r = history_series(t->hist, q, pts, n, err);
                pthread_mutex_unlock(&m->data_lock);
                return r;
        }
        pthread_mutex_unlock(&m->data_lock);

        if (!allow_untracked)
                return not_found(kind, norm, err);
        char path[PATH_MAX];
        history_path(m, kind, norm, path, sizeof(path));
        _cleanup_(history_closep) struct history *h = NULL;
        int r = history_open_readonly(path, &h, err);
        if (r == -ENOENT)
                return history_series(NULL, q, pts, n, err);
        if (r < 0)
                return r;
        return history_series(h, q, pts, n, err);
}

int metrics_series(struct metrics *m, enum metrics_kind kind, const char *id, const struct proto_metrics_query *q,
                   struct proto_metrics_point **ret_points, size_t *ret_n, struct na_error *err)
{
        struct proto_metrics_sample now;
        char norm[NA_UUID_STRLEN + 1];
        return series_and_now(m, kind, id, q, false, &now, ret_points, ret_n, norm, err);
}

int metrics_query(struct metrics *m, enum metrics_kind kind, const char *id, const struct proto_metrics_query *q,
                  bool allow_untracked, json_t **ret, struct na_error *err)
{
        struct proto_metrics_sample now;
        _cleanup_free_ struct proto_metrics_point *pts = NULL;
        size_t n = 0;
        char norm[NA_UUID_STRLEN + 1];
        int r = series_and_now(m, kind, id, q, allow_untracked, &now, &pts, &n, norm, err);
        if (r < 0)
                return r;
        *ret = proto_metrics_encode(norm, &now, q->step_sec, pts, n);
        if (!*ret)
                return na_error_sys(err, ENOMEM, "%s %s: metrics", metrics_kind_names[kind], norm);
        return 0;
}

void metrics_stats(struct metrics *m, struct metrics_stats *ret)
{
        pthread_mutex_lock(&m->data_lock);
        *ret = m->stats;
        ret->targets = (unsigned)m->n_targets;
        pthread_mutex_unlock(&m->data_lock);
}
