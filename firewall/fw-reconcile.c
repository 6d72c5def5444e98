/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fw_reconcile: the agent's start. Every stored configuration is applied again in
 * its server's shard table, servers the agent no longer has are removed, and tables
 * of an earlier layout (the single table "<prefix>" of the layout before shards, or
 * shards beyond the current count) are taken over:
 *
 *  - without such tables, one batch per shard, built (stored configurations read,
 *    batch built and encoded) by a second thread while the kernel commits the
 *    previous shard: the start costs about the kernel's own commit time. A server
 *    lives in one shard, so each server still changes in one atomic commit.
 *  - with them, ONE batch: every shard, and the deletion of the old tables. Packets
 *    see the old layout or the new one, never both or neither. A server the old
 *    table holds without a stored configuration is carried over as it is there.
 *
 * When the kernel refuses a batch, each of its servers is tried in a batch of its
 * own (with its removal from the old tables), so one bad server does not leave the
 * others unprotected; the old tables are deleted only when every server moved.
 */
#include <stdio.h>
#include <strings.h>

#include "common/names.h"
#include "common/uuid.h"
#include "firewall/fw-handle.h"

struct item {
        char vps_id[NA_UUID_STRLEN + 1]; /* "" for chains without a known server */
        char ifname[NA_IFNAME_LEN];
        char table[FW_TABLE_NAME_MAX];   /* where the operations go */
        bool apply;                      /* else remove */
        bool carried;                    /* cfg read from an old table, not stored */
        bool leave;                      /* remove: the server only leaves this table for its own */
        bool loaded;                     /* cfg holds the stored configuration */
        bool done, failed;
        struct fw_config cfg;
        struct nft_raw *raw;              /* or: its operations as stored beside it (fw-state.c) */
        struct na_error unreadable;      /* the stored configuration could not be read */
};

struct plan {
        struct item *v;
        size_t n;
        bool misplaced;                  /* chains in a current table not their server's (the count changed) */
        char **chains, **chain_tables;   /* every inet chain and its table */
        size_t n_chains;
};

static void plan_clear(struct plan *p)
{
        for (size_t i = 0; i < p->n; i++) {
                proto_fw_clear(&p->v[i].cfg);
                free(p->v[i].raw);
                na_error_clear(&p->v[i].unreadable);
        }
        free(p->v);
        nft_strv_free(p->chains, p->n_chains);
        nft_strv_free(p->chain_tables, p->n_chains);
        memset(p, 0, sizeof(*p));
}

static bool id_known(const char *const *known, const char *id)
{
        if (!known)
                return true;
        for (; *known; known++)
                if (strcasecmp(*known, id) == 0)
                        return true;
        return false;
}

/* The known id of a tap name, or NULL. */
static const char *ifname_id(const char *const *known, const char *ifname)
{
        char other[NA_IFNAME_LEN];
        for (; known && *known; known++)
                if (na_vps_ifname(*known, other) == 0 && streq(other, ifname))
                        return *known;
        return NULL;
}

/* Whether the plan has an item for ifname in table (NULL: an item that applies it, anywhere). */
static bool plan_has(const struct plan *p, const char *ifname, const char *table)
{
        for (size_t i = 0; i < p->n; i++)
                if (streq(p->v[i].ifname, ifname) && (table ? streq(p->v[i].table, table) : p->v[i].apply))
                        return true;
        return false;
}

static struct item *plan_add(struct plan *p, struct na_error *err)
{
        struct item *v = realloc(p->v, (p->n + 1) * sizeof(*v));
        if (!v) {
                na_error_sys(err, ENOMEM, "firewall: reconcile");
                return NULL;
        }
        p->v = v;
        struct item *it = &v[p->n++];
        memset(it, 0, sizeof(*it));
        proto_fw_init(&it->cfg);
        return it;
}

static bool table_current(const struct fw *fw, const char *table)
{
        unsigned shard;
        return fw_shard_parse(fw->prefix, table, &shard) && shard < fw->shards;
}

static int make_plan(struct fw *fw, const char *const *known, struct plan *p, struct na_error *err)
{
        char **ids = NULL;
        size_t n_ids = 0;
        int r = fw_state_list(fw, &ids, &n_ids, err);
        if (r < 0)
                return r;
        r = nft_nl_chain_names(&fw->nl, NULL, &p->chains, &p->chain_tables, &p->n_chains, err);
        for (size_t i = 0; r >= 0 && i < n_ids; i++) {
                struct item *it = plan_add(p, err);
                if (!it) {
                        r = -ENOMEM;
                        break;
                }
                it->apply = id_known(known, ids[i]);
                snprintf(it->vps_id, sizeof(it->vps_id), "%s", ids[i]);
                na_vps_ifname(it->vps_id, it->ifname);
                fw_own_table(fw, it->ifname, it->table);
        }
        nft_strv_free(ids, n_ids);
        for (size_t i = 0; r >= 0 && i < p->n_chains; i++) {
                char ifname[NA_IFNAME_LEN];
                enum fw_direction dir;
                const char *table = p->chain_tables[i];
                if (!fw_chain_parse(p->chains[i], ifname, &dir))
                        continue;
                const char *id = ifname_id(known, ifname);
                bool stale = fw_table_stale(fw, table), current = table_current(fw, table);
                char own[FW_TABLE_NAME_MAX];
                fw_own_table(fw, ifname, own);
                if (!stale && !current)
                        continue; /* not ours */
                if (current && !streq(table, own) && !plan_has(p, ifname, table)) {
                        /* a table of the current layout, not this server's (the count changed): it leaves it */
                        struct item *it = plan_add(p, err);
                        if (!it) {
                                r = -ENOMEM;
                                break;
                        }
                        it->leave = true;
                        snprintf(it->ifname, sizeof(it->ifname), "%s", ifname);
                        snprintf(it->table, sizeof(it->table), "%s", table);
                        p->misplaced = true;
                }
                if (stale || !streq(table, own)) {
                        /* a server without a stored configuration in the wrong table: carried over to its own */
                        if (plan_has(p, ifname, NULL) || (known && !id))
                                continue;
                        struct item *it = plan_add(p, err);
                        if (!it) {
                                r = -ENOMEM;
                                break;
                        }
                        it->apply = it->carried = true;
                        snprintf(it->vps_id, sizeof(it->vps_id), "%s", id ? id : "");
                        snprintf(it->ifname, sizeof(it->ifname), "%s", ifname);
                        snprintf(it->table, sizeof(it->table), "%s", own);
                        struct fw_live live;
                        r = fw_read_live(fw, table, ifname, true, 0, &live, err);
                        if (r >= 0) {
                                it->cfg = live.cfg;
                                proto_fw_init(&live.cfg);
                        }
                        fw_live_clear(&live);
                        if (r < 0)
                                na_error_prefix(err, "interface %s in table %s", ifname, table);
                        continue;
                }
                if (plan_has(p, ifname, table))
                        continue;
                if (!known || id)
                        continue; /* a server we know, without a stored configuration: left as it is */
                struct item *it = plan_add(p, err);
                if (!it) {
                        r = -ENOMEM;
                        break;
                }
                snprintf(it->ifname, sizeof(it->ifname), "%s", ifname);
                snprintf(it->table, sizeof(it->table), "%s", table);
        }
        return r;
}

/*
 * Read what an item applies (once): with raw_ok, the operations kept beside the
 * stored configuration when they match it (nothing to decode or build), else the
 * configuration itself. False: unreadable, the item is left out.
 */
static bool item_load(const struct fw *fw, struct item *it, bool raw_ok)
{
        if (!it->apply || it->carried || it->loaded || it->raw || it->unreadable.code)
                return !it->unreadable.code;
        if (raw_ok && fw_state_load_raw(fw, it->vps_id, it->table, &it->raw) == 0)
                return true;
        uint32_t next_id;
        if (fw_state_load(fw, it->vps_id, &it->cfg, &next_id, &it->unreadable) < 0) {
                na_error_prefix(&it->unreadable, "vps %s", it->vps_id);
                return false;
        }
        it->loaded = true;
        return true;
}

static int build_item(struct item *it, struct nft_batch *b, struct na_error *err)
{
        if (it->raw) {
                snprintf(b->table, sizeof(b->table), "%s", it->table);
                return nft_batch_add(b, NFT_OP_RAW, TAKE_PTR(it->raw), err, "vps %s (its operations as stored)",
                                    it->vps_id);
        }
        return it->apply ? fw_build_server_if(b, it->table, it->ifname, it->vps_id[0] ? it->vps_id : NULL, &it->cfg, err)
                         : fw_build_remove(b, it->table, it->ifname, err);
}

/* The shard an item's operations go to. */
static unsigned item_shard(const struct fw *fw, const struct item *it)
{
        unsigned shard = 0;
        fw_shard_parse(fw->prefix, it->table, &shard);
        return shard;
}

/* One shard's batch (its table re-asserted and its servers). */
static int build_shard(struct fw *fw, struct plan *p, unsigned shard, struct nft_batch *b, struct na_error *err)
{
        char table[FW_TABLE_NAME_MAX];
        fw_shard_table(fw->prefix, shard, table);
        int r = fw_build_infra(b, table, err);
        for (size_t i = 0; r >= 0 && i < p->n; i++) {
                struct item *it = &p->v[i];
                if (item_shard(fw, it) != shard || !item_load(fw, it, true))
                        continue;
                r = build_item(it, b, err);
        }
        return r;
}

/* A server alone: its shard's infrastructure, itself, and its removal from the old tables. */
static int apply_item(struct fw *fw, struct plan *p, struct item *it, struct na_error *err)
{
        struct nft_batch b;
        nft_batch_init(&b, it->table);
        int r = fw_build_infra(&b, it->table, err);
        if (r >= 0)
                r = build_item(it, &b, err);
        /* an applied server leaves every other table of ours that holds it, in the same commit */
        for (size_t i = 0; r >= 0 && it->apply && i < p->n_chains; i++) {
                char ifname[NA_IFNAME_LEN];
                enum fw_direction dir;
                const char *t = p->chain_tables[i];
                if ((fw_table_stale(fw, t) || table_current(fw, t)) && !streq(t, it->table) &&
                    fw_chain_parse(p->chains[i], ifname, &dir) && dir == FW_INBOUND && streq(ifname, it->ifname))
                        r = fw_build_remove(&b, t, ifname, err);
        }
        if (r >= 0)
                r = nft_nl_apply(&fw->nl, &b, err);
        nft_batch_clear(&b);
        return r;
}

/*
 * Items of one shard (all when shard < 0) one batch each, after their common batch
 * was refused. Returns the number that failed; *first gets the first error.
 */
static size_t apply_one_by_one(struct fw *fw, struct plan *p, int shard, struct na_error *first)
{
        size_t failed = 0;
        for (size_t i = 0; i < p->n; i++) {
                struct item *it = &p->v[i];
                /* built from the configuration this time: an error then names the refused operation */
                if ((shard >= 0 && item_shard(fw, it) != (unsigned)shard) || !item_load(fw, it, false))
                        continue;
                struct na_error e = NA_ERROR_INIT;
                if (apply_item(fw, p, it, &e) < 0) {
                        na_error_prefix(&e, "%s %s", it->vps_id[0] ? "vps" : "interface",
                                        it->vps_id[0] ? it->vps_id : it->ifname);
                        it->failed = true;
                        if (!failed++ && !first->code)
                                na_error_move(first, &e);
                }
                na_error_clear(&e);
        }
        return failed;
}

static void mark_done(struct fw *fw, struct plan *p, int shard)
{
        for (size_t i = 0; i < p->n; i++)
                if ((shard < 0 || item_shard(fw, &p->v[i]) == (unsigned)shard) && !p->v[i].failed &&
                    !p->v[i].unreadable.code)
                        p->v[i].done = true;
}

/* ---- with old tables: one batch ---- */

static size_t migrate(struct fw *fw, struct plan *p, struct na_error *first)
{
        struct nft_batch b;
        struct na_error e = NA_ERROR_INIT;
        nft_batch_init(&b, fw->prefix);
        int r = 0;
        for (unsigned s = 0; r >= 0 && s < fw->shards; s++)
                r = build_shard(fw, p, s, &b, &e);
        for (size_t i = 0; r >= 0 && i < fw->n_stale; i++)
                r = fw_build_drop_table(&b, fw->stale[i], &e);
        if (r >= 0)
                r = nft_nl_apply(&fw->nl, &b, &e);
        nft_batch_clear(&b);
        na_error_clear(&e);
        if (r >= 0) {
                mark_done(fw, p, -1);
                return 0;
        }
        size_t failed = apply_one_by_one(fw, p, -1, first);
        mark_done(fw, p, -1);
        if (!failed) {
                /* every server moved: the old tables hold nothing in force any more */
                nft_batch_init(&b, fw->prefix);
                r = 0;
                for (size_t i = 0; r >= 0 && i < fw->n_stale; i++)
                        r = fw_build_drop_table(&b, fw->stale[i], first);
                if (r >= 0)
                        r = nft_nl_apply(&fw->nl, &b, first);
                nft_batch_clear(&b);
                if (r < 0)
                        failed++;
        }
        return failed;
}

/* ---- without: one batch per shard, built while the kernel commits the one before ---- */

struct shard_job {
        struct nft_batch b;
        char *wire;
        size_t len;
        uint32_t seq;
        int r;
        struct na_error err;
        bool ready; /* built and encoded */
        bool sent;  /* committed (or given up): the builder frees it */
};

struct pipeline {
        struct fw *fw;
        struct plan *p;
        struct shard_job *jobs;
        unsigned n;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
};

static void job_signal(struct pipeline *pl, bool *flag)
{
        pthread_mutex_lock(&pl->lock);
        *flag = true;
        pthread_cond_broadcast(&pl->cond);
        pthread_mutex_unlock(&pl->lock);
}

static void job_wait(struct pipeline *pl, const bool *flag)
{
        pthread_mutex_lock(&pl->lock);
        while (!*flag)
                pthread_cond_wait(&pl->cond, &pl->lock);
        pthread_mutex_unlock(&pl->lock);
}

static void job_free(struct shard_job *j)
{
        nft_batch_clear(&j->b);
        free(j->wire);
        j->wire = NULL;
}

/*
 * The builder: reads the stored configurations, builds and encodes each shard's
 * batch, then frees the batches the committer is done with, so the committer does
 * nothing but commit.
 */
static void *builder(void *arg)
{
        struct pipeline *pl = arg;
        unsigned built = 0;
        for (; built < pl->n; built++) {
                struct shard_job *j = &pl->jobs[built];
                pthread_mutex_lock(&pl->lock);
                bool stop = pl->stop;
                pthread_mutex_unlock(&pl->lock);
                if (stop)
                        break;
                char table[FW_TABLE_NAME_MAX];
                fw_shard_table(pl->fw->prefix, built, table);
                nft_batch_init(&j->b, table);
                j->r = build_shard(pl->fw, pl->p, built, &j->b, &j->err);
                if (j->r >= 0)
                        j->r = nft_batch_serialize(&j->b, j->seq, &j->wire, &j->len, &j->err);
                job_signal(pl, &j->ready);
        }
        /* the last one is freed after the join: the committer does not wait for this thread to wake up */
        for (unsigned s = 0; s + 1 < built; s++) {
                job_wait(pl, &pl->jobs[s].sent);
                job_free(&pl->jobs[s]);
        }
        return NULL;
}

static size_t per_shard(struct fw *fw, struct plan *p, struct na_error *first, int *fatal)
{
        struct pipeline pl = { .fw = fw, .p = p, .n = fw->shards };
        pl.jobs = calloc(fw->shards, sizeof(*pl.jobs));
        if (!pl.jobs) {
                *fatal = na_error_sys(first, ENOMEM, "firewall: reconcile");
                return 0;
        }
        /* each batch numbers its messages from the same start: one batch is on the socket at a time */
        for (unsigned s = 0; s < fw->shards; s++)
                pl.jobs[s].seq = fw->nl.seq;
        pthread_mutex_init(&pl.lock, NULL);
        pthread_cond_init(&pl.cond, NULL);
        pthread_t thread;
        bool threaded = pthread_create(&thread, NULL, builder, &pl) == 0;
        size_t failed = 0;
        for (unsigned s = 0; s < fw->shards; s++) {
                struct shard_job *j = &pl.jobs[s];
                if (!threaded) {
                        /* no thread: the same work, one shard after the other */
                        nft_batch_init(&j->b, "");
                        j->r = build_shard(fw, p, s, &j->b, &j->err);
                        if (j->r >= 0)
                                j->r = nft_batch_serialize(&j->b, j->seq, &j->wire, &j->len, &j->err);
                } else
                        job_wait(&pl, &j->ready);
                int r = j->r;
                if (r < 0) {
                        /* building failed (memory): nothing sensible to go on with */
                        na_error_move(first, &j->err);
                        *fatal = r;
                        pthread_mutex_lock(&pl.lock);
                        pl.stop = true;
                        for (unsigned k = s; k < fw->shards; k++)
                                pl.jobs[k].sent = true;
                        pthread_cond_broadcast(&pl.cond);
                        pthread_mutex_unlock(&pl.lock);
                        break;
                }
                struct na_error e = NA_ERROR_INIT;
                r = nft_nl_send(&fw->nl, &j->b, j->wire, j->len, j->seq, &e);
                na_error_clear(&e);
                if (r < 0)
                        failed += apply_one_by_one(fw, p, (int)s, first);
                mark_done(fw, p, (int)s);
                if (threaded)
                        job_signal(&pl, &j->sent);
                else
                        job_free(j);
        }
        if (threaded)
                pthread_join(thread, NULL);
        for (unsigned s = 0; s < fw->shards; s++) {
                job_free(&pl.jobs[s]);
                na_error_clear(&pl.jobs[s].err);
        }
        free(pl.jobs);
        pthread_cond_destroy(&pl.cond);
        pthread_mutex_destroy(&pl.lock);
        return failed;
}

static int reconcile_locked(struct fw *fw, const char *const *known, struct fw_reconcile_stats *st,
                            struct na_error *err)
{
        struct plan p = { 0 };
        struct na_error first = NA_ERROR_INIT;
        struct na_error *first_unreadable = NULL;
        size_t failed = 0, unreadable = 0;
        int fatal = 0;
        int r = fw_find_stale(fw, err);
        if (r >= 0)
                r = make_plan(fw, known, &p, err);
        if (r < 0)
                goto out;

        if (fw->n_stale || p.misplaced) {
                failed = migrate(fw, &p, &first);
                if (!failed) {
                        nft_strv_free(fw->stale, fw->n_stale);
                        fw->stale = NULL;
                        fw->n_stale = 0;
                }
        } else
                failed = per_shard(fw, &p, &first, &fatal);
        if (fatal) {
                na_error_move(err, &first);
                r = fatal;
                goto out;
        }

        for (size_t i = 0; i < p.n; i++) {
                struct item *it = &p.v[i];
                if (it->unreadable.code) {
                        /* the others are applied all the same; this server's kernel state is left alone */
                        if (!unreadable++)
                                first_unreadable = &it->unreadable;
                        continue;
                }
                if (!it->done || it->leave)
                        continue;
                if (it->apply)
                        st->applied++;
                else {
                        st->removed++;
                        if (it->vps_id[0]) {
                                int rr = fw_state_delete(fw, it->vps_id, err);
                                if (rr < 0 && r >= 0)
                                        r = rr;
                        }
                }
        }
        st->failed += failed + unreadable;
        if (r < 0)
                goto out;
        if (failed) {
                na_error_move(err, &first);
                na_error_prefix(err, "firewall: reconcile: %zu of %zu servers failed, first", failed, p.n);
                r = -(err->errnum ? err->errnum : EIO);
        } else if (unreadable) {
                na_error_move(err, first_unreadable);
                na_error_prefix(err, "firewall: reconcile: %zu stored configurations unreadable, first", unreadable);
                r = -(err->errnum ? err->errnum : EIO);
        }
out:
        na_error_clear(&first);
        plan_clear(&p);
        return r;
}

int fw_reconcile(struct fw *fw, const char *const *known_ids, struct fw_reconcile_stats *ret, struct na_error *err)
{
        struct fw_reconcile_stats st = { 0 };
        pthread_mutex_lock(&fw->lock);
        int r = reconcile_locked(fw, known_ids, &st, err);
        pthread_mutex_unlock(&fw->lock);
        if (ret)
                *ret = st;
        return r;
}
