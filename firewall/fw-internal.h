/*
 * Inside the firewall library: the batch (an ordered list of nf_tables operations
 * over libnftnl objects), how a configuration becomes one (fw-build.c), how kernel
 * rules become a configuration again (fw-parse.c), the text rendering of a batch
 * (fw-render.c), the netlink side (fw-netlink.c) and the shard tables' names. The
 * handle, the stored configurations and the start are in fw-handle.h (fw-state.c,
 * fw-reconcile.c). See fw.c for the design.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/names.h"
#include "firewall/fw.h"
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
#define FW_NAME_MAX 64                /* our chain names stay well below this */
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

/* ---- batch ---- */

enum fw_op_kind {
        FW_OP_TABLE_ADD,
        FW_OP_CHAIN_ADD,
        FW_OP_CHAIN_FLUSH,
        FW_OP_CHAIN_DEL,
        FW_OP_SET_ADD,
        FW_OP_ELEM_ADD,
        FW_OP_ELEM_DEL,
        FW_OP_RULE_ADD,
        FW_OP_TABLE_DEL, /* obj: nftnl_table */
        FW_OP_SET_DEL,   /* obj: nftnl_set */
        FW_OP_RAW,       /* obj: struct fw_raw, messages encoded earlier (fw_batch_encode_range) */
};

struct fw_op {
        enum fw_op_kind kind;
        void *obj;       /* nftnl_table, _chain, _set (with elements) or _rule; owned */
        char what[112];  /* what the operation is about, for error messages */
};

struct fw_batch {
        struct fw_op *ops;
        size_t n, cap;
        uint32_t next_set_id;
        char table[FW_TABLE_NAME_MAX];
};

void fw_batch_init(struct fw_batch *b, const char *table);
void fw_batch_clear(struct fw_batch *b);
/* Append an operation; takes obj (freed on failure too). */
int fw_batch_add(struct fw_batch *b, enum fw_op_kind kind, void *obj, struct na_error *err, const char *fmt, ...)
        _printf_(5, 6);
/* Serialize to one nfnetlink batch (begin ... end); sequence numbers from seq on. */
int fw_batch_serialize(const struct fw_batch *b, uint32_t seq, char **ret_buf, size_t *ret_len, struct na_error *err);
/* A stable text of the batch (one operation per line, expressions indented). */
int fw_batch_render(const struct fw_batch *b, char **ret_text, struct na_error *err);

/*
 * Operations already encoded: n nfnetlink messages back to back, as
 * fw_batch_encode_range wrote them. Serializing a batch renumbers them and sets the
 * ack flag where it belongs, so they can be kept and sent again later (fw-state.c
 * keeps each server's with its stored configuration, for the start).
 */
struct fw_raw {
        size_t len;
        uint32_t n;
        char data[];
};
/* Encode operations [from, to) of b as a struct fw_raw (malloc'ed). */
int fw_batch_encode_range(const struct fw_batch *b, size_t from, size_t to, struct fw_raw **ret,
                          struct na_error *err);
/* Messages a batch sends between begin and end (an FW_OP_RAW counts its messages). */
size_t fw_batch_messages(const struct fw_batch *b);
/* What the i-th message of a batch is about, for error messages. */
const char *fw_batch_what(const struct fw_batch *b, size_t i);

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
int fw_build_infra(struct fw_batch *b, const char *table, struct na_error *err);
/*
 * One server's chains, rules, policies and dispatch elements, replacing what it had.
 * Rules must have ids. vps_id names the tap (na_vps_ifname) and goes into the chains'
 * comment; fw_build_server_if takes the tap name and an optional id instead.
 */
int fw_build_server(struct fw_batch *b, const char *table, const char *vps_id, const struct fw_config *cfg,
                    struct na_error *err);
int fw_build_server_if(struct fw_batch *b, const char *table, const char *ifname, const char *vps_id,
                       const struct fw_config *cfg, struct na_error *err);
/* Remove a server: dispatch elements and chains. */
int fw_build_remove(struct fw_batch *b, const char *table, const char *ifname, struct na_error *err);
/* Delete a whole table with everything in it (a table of an earlier layout). */
int fw_build_drop_table(struct fw_batch *b, const char *table, struct na_error *err);

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

/* ---- netlink ---- */

struct fw_nl {
        struct mnl_socket *sock;
        uint32_t portid;
        uint32_t seq;
        size_t sndbuf; /* current SO_SNDBUF(FORCE) value */
};

int fw_nl_open(struct fw_nl *nl, int netns_fd, struct na_error *err);
void fw_nl_close(struct fw_nl *nl);
/* Send a batch; 0 when the kernel committed it, else err names the refused operation. */
int fw_nl_apply(struct fw_nl *nl, const struct fw_batch *b, struct na_error *err);
/* fw_nl_apply of a batch already serialized (fw_batch_serialize from seq): buf, len. */
int fw_nl_send(struct fw_nl *nl, const struct fw_batch *b, const char *buf, size_t len, uint32_t seq,
               struct na_error *err);

struct fw_rule_list {
        struct nftnl_rule **v;
        size_t n, cap;
};
void fw_rule_list_clear(struct fw_rule_list *l);

/* The rules of one chain; -ENOENT (err untouched) when the table or the chain does not exist. */
int fw_nl_chain_rules(struct fw_nl *nl, const char *table, const char *chain, struct fw_rule_list *out,
                      struct na_error *err);
/* Whether map holds key ifname; *ret_chain (optional, FW_NAME_MAX) gets the jump target. */
int fw_nl_map_has(struct fw_nl *nl, const char *table, const char *map, const char *ifname, bool *ret,
                  char *ret_chain, struct na_error *err);
/* The fetch callbacks over this socket (ctx must outlive out). */
struct fw_nl_fetch_ctx {
        struct fw_nl *nl;
        const char *table;
};
void fw_nl_fetch(struct fw_nl_fetch_ctx *ctx, struct fw_fetch *out);
/*
 * Names of every chain of the table (NULL: of every inet table), and of the table
 * each is in (*ret_tables, optional); -ENOENT when there is no such table.
 */
int fw_nl_chain_names(struct fw_nl *nl, const char *table, char ***ret, char ***ret_tables, size_t *ret_n,
                      struct na_error *err);
/* Names of every inet table. */
int fw_nl_table_names(struct fw_nl *nl, char ***ret, size_t *ret_n, struct na_error *err);
void fw_strv_free(char **v, size_t n);
