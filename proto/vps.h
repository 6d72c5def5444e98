/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The wire side of servers (AGENT-API 4.1): params decoders of every vps.* kind
 * except vps.firewall.* and vps.metrics, the reinstall rules of reference 4.4, and
 * the encoders of Server, Snapshot, Backup, status and exec results. No I/O, no
 * logging: JSON in, validated C structs out (or VALIDATION_ERROR with per-field
 * _errors, every field read before failing), and back.
 *
 * Decoded params keep a reference to the params document and borrow their strings
 * from it; free them with their _free function.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* Server states (4.1). */
enum proto_vps_state {
        PROTO_VPS_RUNNING,
        PROTO_VPS_STOPPED,
        PROTO_VPS_PAUSED,
        PROTO_VPS_INSTALLING,
        PROTO_VPS_CRASHED,
};
extern const char *const proto_vps_states[]; /* indexed by the enum, NULL-terminated */
const char *proto_vps_state_name(enum proto_vps_state s);

enum proto_vps_os { PROTO_VPS_OS_LINUX, PROTO_VPS_OS_WINDOWS };
extern const char *const proto_vps_os_names[]; /* "linux", "windows", NULL */

#define PROTO_VPS_ID_LEN 36              /* a server id is a UUID */
#define PROTO_VPS_NAME_MAX 100
#define PROTO_VPS_HOSTNAME_MAX 63
#define PROTO_VPS_TEMPLATE_ID_MAX 100    /* templateId and imageSlug, characters */
#define PROTO_VPS_PASSWORD_MIN 8
#define PROTO_VPS_PASSWORD_MAX 64
#define PROTO_VPS_SSH_KEYS_MAX 32
#define PROTO_VPS_SSH_KEY_MAX 16384      /* one OpenSSH public key line, bytes */
#define PROTO_VPS_OBJECT_ID_MAX 64       /* snapshotId, backupId: 1..64 of [A-Za-z0-9_-] */
#define PROTO_VPS_SNAPSHOT_NAME_MAX 100
#define PROTO_VPS_INPUTS_MAX 64          /* template inputs per server */
#define PROTO_VPS_EXEC_ARGS_MAX 100
#define PROTO_VPS_EXEC_ARG_MAX 1000
#define PROTO_VPS_EXEC_TIMEOUT_DEFAULT 60
#define PROTO_VPS_EXEC_TIMEOUT_MAX 3600
#define PROTO_VPS_GRACE_DEFAULT 60
#define PROTO_VPS_GRACE_MAX 3600
#define PROTO_VPS_NET_V4_MAX 16       /* network.ipv4 items */
#define PROTO_VPS_NET_V6_MAX 16       /* network.ipv6 items */
#define PROTO_VPS_NET_DNS_MAX 3       /* network.dns items (glibc reads three nameservers) */
#define PROTO_VPS_IPS_MAX (PROTO_VPS_NET_V4_MAX + PROTO_VPS_NET_V6_MAX)
#define PROTO_VPS_ADDR_TEXT 46        /* INET6_ADDRSTRLEN */

/*
 * A plan. cpu_threads is threads per core: the guest sees cores * threads vCPUs
 * in one socket. network_speed_mbps 0 means no limit; bandwidth_limit_gb (a
 * traffic quota the central API enforces) is kept and reported, not enforced here.
 */
struct proto_vps_plan {
        int64_t cpu_cores;          /* 1..256 */
        int64_t cpu_threads;        /* 1..8 */
        int64_t ram_mb;             /* 64..4194304 */
        int64_t storage_mb;         /* 1..16777216 */
        int64_t network_speed_mbps; /* 0..400000 */
        int64_t bandwidth_limit_gb; /* 0..10^9 */
        int64_t max_snapshots;      /* 0..1000 */
};

struct proto_vps_template_ref {
        const char *id;
        const char *image_slug;
        enum proto_vps_os os;
};

/*
 * A server's network (4.1, "The server's network"): its addresses with their
 * prefixes and its resolvers, each address in canonical text (inet_ntop's), unicast,
 * once. At least one address, v4 or v6.
 */
struct proto_vps_addr {
        int family;                    /* AF_INET or AF_INET6 */
        unsigned char bytes[16];       /* network order; 4 used for AF_INET */
        int prefix;                    /* v4 8..32, v6 16..128 */
        char text[PROTO_VPS_ADDR_TEXT];
};
struct proto_vps_network {
        struct proto_vps_addr ipv4[PROTO_VPS_NET_V4_MAX];
        size_t n_ipv4;
        struct proto_vps_addr ipv6[PROTO_VPS_NET_V6_MAX];
        size_t n_ipv6;
        struct proto_vps_addr dns[PROTO_VPS_NET_DNS_MAX]; /* prefix unused (0) */
        size_t n_dns;
};
/* obj is the network object, its fields named under prefix ("network"). */
int proto_vps_network_decode(json_t *obj, const char *prefix, struct proto_vps_network *out, struct na_error *err);
/* The same object back ({ipv4: [{address, prefix}], ipv6: [...], dns: [...]}); NULL on ENOMEM. */
json_t *proto_vps_network_encode(const struct proto_vps_network *n);
/* Two networks hold the same addresses, prefixes and resolvers in the same order. */
bool proto_vps_network_equal(const struct proto_vps_network *a, const struct proto_vps_network *b);
/* The first address of n that b holds too (v4 then v6); NULL when they share none. */
const struct proto_vps_addr *proto_vps_network_overlap(const struct proto_vps_network *n,
                                                       const struct proto_vps_network *b, char ret_field[64]);

/* A field of reinstall: omitted keeps the current value, null clears it. */
enum proto_vps_op { PROTO_VPS_KEEP, PROTO_VPS_CLEAR, PROTO_VPS_SET };

/* ---- params ---------------------------------------------------------------- */

struct proto_vps_create {
        json_t *root;
        const char *name;
        const char *hostname;
        struct proto_vps_plan plan;
        struct proto_vps_template_ref tmpl;
        const char *password;  /* NULL: none */
        char **ssh_keys;       /* NULL-terminated; NULL when none */
        json_t *inputs;        /* borrowed; NULL when none */
        /* restoreBackupId: build the disk from this backup of the server (moved from
         * another node, AGENT-API 4.1) instead of the template; "" when absent. */
        char restore_backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        struct proto_vps_network network;
};
int proto_vps_create_decode(json_t *params, struct proto_vps_create **ret, struct na_error *err);
void proto_vps_create_free(struct proto_vps_create *p);

enum proto_vps_power_action {
        PROTO_VPS_POWER_START,
        PROTO_VPS_POWER_STOP,
        PROTO_VPS_POWER_REBOOT,
        PROTO_VPS_POWER_FORCE_STOP,
};
extern const char *const proto_vps_power_actions[]; /* "start", "stop", "reboot", "force-stop", NULL */
struct proto_vps_power {
        enum proto_vps_power_action action;
        int64_t grace_sec; /* stop and reboot: ACPI shutdown, then force after this; 0..3600, default 60 */
};
int proto_vps_power_decode(json_t *params, struct proto_vps_power **ret, struct na_error *err);
void proto_vps_power_free(struct proto_vps_power *p);

struct proto_vps_exec {
        char **argv;         /* exec form: 1..100 items of 1..1000 characters */
        int64_t timeout_sec; /* 1..3600, default 60 */
};
int proto_vps_exec_decode(json_t *params, struct proto_vps_exec **ret, struct na_error *err);
void proto_vps_exec_free(struct proto_vps_exec *p);

struct proto_vps_upgrade {
        struct proto_vps_plan plan;
};
int proto_vps_upgrade_decode(json_t *params, struct proto_vps_upgrade **ret, struct na_error *err);
void proto_vps_upgrade_free(struct proto_vps_upgrade *p);

/* vps.network.set: {network}, the server's whole new set. */
struct proto_vps_network_set {
        struct proto_vps_network network;
};
int proto_vps_network_set_decode(json_t *params, struct proto_vps_network_set **ret, struct na_error *err);
void proto_vps_network_set_free(struct proto_vps_network_set *p);

struct proto_vps_snapshot_create {
        char snapshot_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        char name[PROTO_VPS_SNAPSHOT_NAME_MAX * 4 + 1];
        int64_t max_snapshots; /* 0..1000 */
};
int proto_vps_snapshot_create_decode(json_t *params, struct proto_vps_snapshot_create **ret, struct na_error *err);

/* vps.snapshot.revert, vps.snapshot.delete: {snapshotId}. */
struct proto_vps_snapshot_ref {
        char snapshot_id[PROTO_VPS_OBJECT_ID_MAX + 1];
};
int proto_vps_snapshot_ref_decode(json_t *params, struct proto_vps_snapshot_ref **ret, struct na_error *err);

/* Backup limits; -1 means no limit (the field was absent or null). */
struct proto_vps_backup_limits {
        int64_t max_storage_gb; /* 1..10^6 */
        int64_t max_backups;    /* 1..10000 */
        int64_t retention_days; /* 1..36500 */
};
struct proto_vps_backup_create {
        char backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        struct proto_vps_backup_limits limits;
};
int proto_vps_backup_create_decode(json_t *params, struct proto_vps_backup_create **ret, struct na_error *err);

/* vps.backup.restore, vps.backup.delete: {backupId}. */
struct proto_vps_backup_ref {
        char backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
};
int proto_vps_backup_ref_decode(json_t *params, struct proto_vps_backup_ref **ret, struct na_error *err);

/* vps.reinstall: every field optional; null clears (reference 4.4). */
struct proto_vps_reinstall {
        json_t *root;
        const char *template_id; /* NULL: keep */
        const char *image_slug;  /* NULL: keep */
        const char *hostname;    /* NULL: keep */
        enum proto_vps_op inputs_op;
        json_t *inputs;          /* SET: borrowed object */
        enum proto_vps_op key_op;
        const char *ssh_key_id;  /* SET: a UUID */
        const char *ssh_public_key; /* SET: the key sshKeyId names */
        enum proto_vps_op password_op;
        const char *password;    /* SET: the new password (plain; hash it at once) */
};
int proto_vps_reinstall_decode(json_t *params, struct proto_vps_reinstall **ret, struct na_error *err);
void proto_vps_reinstall_free(struct proto_vps_reinstall *p);

/* What the node keeps about a server's installation (never a plain password). */
struct proto_vps_install_state {
        const char *hostname;
        const char *template_id;
        const char *image_slug;
        json_t *inputs;          /* NULL: none */
        bool has_password;
        size_t n_ssh_keys;
        const char *ssh_key_id;  /* NULL when the keys came with vps.create */
};

/*
 * Apply the reinstall rules to a decoded request, given what the server has now
 * and the os of the template it ends on (new_os: the caller looks the resulting
 * template up first). Fills *out with the resulting installation: strings borrow
 * from req and cur. Fails with VALIDATION_ERROR naming the field: the server must
 * end with a password, a key or both; Windows requires a password and refuses keys.
 */
struct proto_vps_install {
        const char *hostname;
        const char *template_id;
        const char *image_slug;
        enum proto_vps_op inputs_op;   /* KEEP: the current inputs */
        json_t *inputs;
        enum proto_vps_op password_op; /* KEEP: the stored hash */
        const char *password;
        enum proto_vps_op key_op;      /* KEEP: the stored keys */
        const char *ssh_key_id;
        const char *ssh_public_key;
};
int proto_vps_reinstall_resolve(const struct proto_vps_reinstall *req, const struct proto_vps_install_state *cur,
                                enum proto_vps_os new_os, struct proto_vps_install *out, struct na_error *err);

/* Field rules shared by create and reinstall (exposed for tests and the driver). */
bool proto_vps_hostname_valid(const char *s);
/* NULL when valid, else why not ("must contain an uppercase letter"). */
const char *proto_vps_password_problem(const char *s);
/* An OpenSSH public key line: "<type> <base64> [comment]" on one line. */
bool proto_vps_ssh_key_valid(const char *s);
/* snapshotId / backupId: 1..64 of [A-Za-z0-9_-]. */
bool proto_vps_object_id_valid(const char *s);

/* Plan fields at prefix ("plan"): every field required. */
int proto_vps_plan_decode(json_t *obj, const char *prefix, struct proto_vps_plan *out, struct na_error *err);

/* ---- results ----------------------------------------------------------------- */

struct proto_vps_server {
        char id[PROTO_VPS_ID_LEN + 1];
        enum proto_vps_state state;
        char name[PROTO_VPS_NAME_MAX * 4 + 1];
        char hostname[PROTO_VPS_HOSTNAME_MAX + 1];
        struct proto_vps_plan plan;
        char template_id[PROTO_VPS_TEMPLATE_ID_MAX * 4 + 1];
        char image_slug[PROTO_VPS_TEMPLATE_ID_MAX * 4 + 1];
        enum proto_vps_os os;
        char mac[18];
        char ip_addresses[PROTO_VPS_IPS_MAX][PROTO_VPS_ADDR_TEXT];
        size_t n_ip_addresses;
        int64_t created_at_ms;
};
/* {id, state, hostname, cpuCores, cpuThreads, ramMB, storageMB, ipAddresses, macAddress, template, createdAt} */
json_t *proto_vps_server_encode(const struct proto_vps_server *s);

struct proto_vps_snapshot {
        char snapshot_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        char name[PROTO_VPS_SNAPSHOT_NAME_MAX * 4 + 1];
        int64_t created_at_ms;
        int64_t size_bytes;
        bool current;
};
json_t *proto_vps_snapshot_encode(const struct proto_vps_snapshot *s);
json_t *proto_vps_snapshot_list_encode(const struct proto_vps_snapshot *s, size_t n);

struct proto_vps_backup {
        char backup_id[PROTO_VPS_OBJECT_ID_MAX + 1];
        int64_t created_at_ms;
        int64_t size_bytes;
        char sha256[65];
};
json_t *proto_vps_backup_encode(const struct proto_vps_backup *b);
json_t *proto_vps_backup_list_encode(const struct proto_vps_backup *b, size_t n);

struct proto_vps_status {
        enum proto_vps_state state;
        int64_t uptime_sec;
        uint64_t cpu_time_ns;
        int64_t memory_mb;
};
json_t *proto_vps_status_encode(const struct proto_vps_status *s);

struct proto_vps_exec_result {
        int exit_code;
        char *out;       /* owned; NUL-terminated (invalid UTF-8 replaced) */
        size_t out_len;
        char *err;
        size_t err_len;
        bool truncated;
};
json_t *proto_vps_exec_result_encode(const struct proto_vps_exec_result *r);
void proto_vps_exec_result_clear(struct proto_vps_exec_result *r);
