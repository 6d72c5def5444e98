/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the firewall library: the handle (struct fw) and what fw.c and
 * fw-reconcile.c share about it: the stored configurations (fw-state.c), the live
 * state of one server read from the kernel, and the table a server belongs in.
 * Callers hold fw->lock.
 */
#pragma once

#include <pthread.h>

#include "firewall/fw-internal.h"
#include "firewall/fw.h"

struct fw {
        pthread_mutex_t lock;
        struct nft_nl nl;
        char prefix[FW_PREFIX_MAX + 1]; /* [firewall] table: the shard tables are "<prefix>-NN" */
        unsigned shards;
        char *dir;                      /* <state_dir>/firewall, or NULL */
        char **stale;                   /* our tables of an earlier layout still in the kernel */
        size_t n_stale;
};

/* The shard table of a tap name. */
void fw_own_table(const struct fw *fw, const char *ifname, char buf[FW_TABLE_NAME_MAX]);
/* Whether table is ours but not of the current layout: "<prefix>" itself, or "<prefix>-NN" with NN >= shards. */
bool fw_table_stale(const struct fw *fw, const char *table);
/* Read the inet tables and remember the stale ones (fw->stale). */
int fw_find_stale(struct fw *fw, struct na_error *err);

/* ---- stored configurations (fw-state.c) ---- */

/* 1: loaded, 0: none stored. *next_id: the lowest id never handed out. */
int fw_state_load(const struct fw *fw, const char *vps_id, struct fw_config *cfg, uint32_t *next_id,
                  struct na_error *err);
/* fw_state_load for readers that go on without it: unreadable counts as none (problem says why). 1 or 0. */
int fw_state_load_or_none(const struct fw *fw, const char *vps_id, struct fw_config *cfg, uint32_t *next_id,
                          char *problem, size_t len);
/* Store cfg; raw (optional): the server's operations for table, kept beside it for the start. */
int fw_state_save(const struct fw *fw, const char *vps_id, const struct fw_config *cfg, uint32_t next_id,
                  const char *table, const struct nft_raw *raw, struct na_error *err);
/*
 * The operations kept beside the stored configuration, when they were made from
 * exactly the .json there and for table: 0, -ENOENT (none) or -ESTALE (not usable).
 */
int fw_state_load_raw(const struct fw *fw, const char *vps_id, const char *table, struct nft_raw **ret);
int fw_state_delete(const struct fw *fw, const char *vps_id, struct na_error *err);
/* The ids of every stored configuration (lower case). */
int fw_state_list(const struct fw *fw, char ***ret, size_t *ret_n, struct na_error *err);

/* ---- the live state of one server ---- */

/*
 * What table holds for a server (full: with its map elements and hand-written sets).
 * Rules the agent did not write get ids above id_floor and above every id in the kernel.
 */
int fw_read_live(struct fw *fw, const char *table, const char *ifname, bool full, uint32_t id_floor,
                 struct fw_live *live, struct na_error *err);
