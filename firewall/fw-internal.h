/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inside the firewall library: the names of its chains and shard tables
 * (fw-names.c), how a configuration becomes a batch of nf_tables operations
 * (fw-build.c), how kernel rules become a configuration again (fw-parse.c, reading
 * sets through fw-fetch.c), and the text of its rule userdata (fw-names.c). The
 * batch, the expressions, the netlink socket and the rendering are nft/ (nft/nft.h),
 * shared with the apps' network. The handle, the stored configurations and the start
 * are in fw-handle.h (fw-state.c, fw-reconcile.c). See fw.c for the design.
 */
#pragma once

#include <stdio.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/names.h"
#include "firewall/fw.h"
#include "nft/nft.h"
#include "proto/firewall.h"

struct nftnl_rule;
struct mnl_socket;

/* ---- names in the agent's tables ---- */

#define FW_BASE_OUT "vps-out"         /* base chain, hook forward, priority filter */
#define FW_BASE_IN "vps-in"           /* base chain, hook forward, priority filter + 10 */
#define FW_MAP_OUT "vps-out-map"      /* iifname -> jump <ifname>-out */
#define FW_MAP_IN "vps-in-map"        /* oifname -> jump <ifname>-in */
#define FW_PRIO_OUT 0
#define FW_PRIO_IN 10
#define FW_NAME_MAX NFT_NAME_MAX       /* our chain names stay well below this */
#define FW_PREFIX_MAX 32              /* [firewall] table (the shard tables' prefix): 1..32 characters */

/*
 * Shards (fw.c says why): a server's chains and map elements live in table
 * "<prefix>-NN", NN = fw_shard_of(its tap name) in two decimal digits.
 */
#define FW_SHARDS_MAX 64
/* The shard of a tap name: FNV-1a of the name, modulo shards (1..FW_SHARDS_MAX). */
unsigned fw_shard_of(const char *ifname, unsigned shards);
/* "<prefix>-NN" */
void fw_shard_table(const char *prefix, unsigned shard, char buf[FW_TABLE_NAME_MAX]);
/* Whether table is "<prefix>-NN" (two digits): fills *shard. */
bool fw_shard_parse(const char *prefix, const char *table, unsigned *shard);

/* "<ifname>-in" / "<ifname>-out" */
void fw_chain_name(const char *ifname, enum fw_direction dir, char buf[FW_NAME_MAX]);
/* Whether name is "<12 hex>" tap name followed by "-in"/"-out": fills ifname. */
bool fw_chain_parse(const char *name, char ifname[NA_IFNAME_LEN], enum fw_direction *dir);

/* ---- rule userdata ----
 * TLVs (libnftnl udata): type 0 is nft's comment (NUL-terminated, so `nft list`
 * shows it); type FW_UDATA_META is ours and nft skips it. The kernel keeps at most
 * 256 bytes of userdata per rule: the first FW_COMMENT_HEAD bytes of a comment stay
 * in the rule, the rest (up to 14 bytes) goes to a continuation rule right after
 * it: a rule without expressions (it does nothing) whose userdata is a FW_META_TAIL
 * meta and that rest as its comment.
 */
#define FW_UDATA_META 0x80
#define FW_META_VERSION 1
#define FW_COMMENT_HEAD 241      /* 256 - meta TLV (12) - comment TLV header (2) - NUL */

enum fw_meta_kind { FW_META_RULE = 0, FW_META_POLICY = 1, FW_META_TAIL = 2 };
enum {
        FW_META_ENABLED = 1 << 0,
        FW_META_CONTINUED = 1 << 1, /* a continuation rule with the comment's end follows */
        FW_META_LIST = 1 << 2,      /* one port of a port list: the list is one kernel rule per port */
};

struct fw_meta {
        enum fw_meta_kind kind;
        uint8_t flags;
        enum fw_action action;
        uint32_t id;
        uint16_t position; /* index of the rule in the configuration (interleaving of directions) */
};

/* Length of the comment head kept in the rule (cut on a UTF-8 boundary). */
size_t fw_comment_head_len(const char *comment);
/* The golden text of our userdata TLVs (nft_batch_render's hook): FW_UDATA_META decoded. */
bool fw_udata_render(FILE *f, uint8_t type, const uint8_t *value, uint8_t len);

/* ---- what a server has in the kernel ---- */

struct fw_live {
        bool chain[2];                  /* indexed by enum fw_direction */
        bool elem[2];                   /* the dispatch map holds the server's interface */
        struct fw_config cfg;           /* what the kernel enforces, as a configuration */
        uint32_t max_id;                /* highest rule id the kernel holds */
        json_t *anomalies;              /* strings: what the configuration cannot express */
};

void fw_live_init(struct fw_live *l);
void fw_live_clear(struct fw_live *l);

/* ---- building ---- */

/*
 * Each builder first makes table the batch's current table (b->table): the
 * operations it adds are about that table.
 */
/* The table, the two dispatch maps and the two base chains with their rules. */
int fw_build_infra(struct nft_batch *b, const char *table, struct na_error *err);
/*
 * One server's chains, rules, policies and dispatch elements, replacing what it had.
 * Rules must have ids. vps_id names the tap (na_vps_ifname) and goes into the chains'
 * comment; fw_build_server_if takes the tap name and an optional id instead.
 */
int fw_build_server(struct nft_batch *b, const char *table, const char *vps_id, const struct fw_config *cfg,
                    struct na_error *err);
int fw_build_server_if(struct nft_batch *b, const char *table, const char *ifname, const char *vps_id,
                       const struct fw_config *cfg, struct na_error *err);
/* Remove a server: dispatch elements and chains. */
int fw_build_remove(struct nft_batch *b, const char *table, const char *ifname, struct na_error *err);
/* Delete a whole table with everything in it (a table of an earlier layout). */
int fw_build_drop_table(struct nft_batch *b, const char *table, struct na_error *err);

/* ---- parsing ---- */

/*
 * What parsing needs from the kernel beyond the rules: the elements of an anonymous
 * set (a port list written by hand with nft). A NULL callback makes a shallow read
 * (such lists stay empty): enough to know the ids before a replacement.
 */
struct fw_fetch {
        int (*set_ports)(void *ud, const char *set, uint16_t *ports, size_t max, size_t *n, struct na_error *err);
        void *ud;
};

/*
 * Rebuild a configuration from the rules of a server's two chains (kernel order).
 * live->chain[] and live->elem[] are set by the caller; this fills cfg (enabled =
 * both elements present), max_id and anomalies.
 */
int fw_parse_server(struct nftnl_rule *const *rules_in, size_t n_in,
                    struct nftnl_rule *const *rules_out, size_t n_out, const struct fw_fetch *fetch,
                    struct fw_live *live, struct na_error *err);

/* ---- reading sets through nft/ (fw-fetch.c) ---- */

/* The fetch callbacks over this socket (ctx must outlive out). */
struct fw_nl_fetch_ctx {
        struct nft_nl *nl;
        const char *table;
};
void fw_nl_fetch(struct fw_nl_fetch_ctx *ctx, struct fw_fetch *out);
