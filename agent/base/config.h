/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * /etc/nodeagent/nodeagent.conf: INI sections and keys, each defined once in the
 * table of config.c with its type, bounds and default. Every problem is reported
 * as "FILE:LINE: key: reason"; the daemon exits 2 when there is any.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

#define NA_DEFAULT_CONFIG "/etc/nodeagent/nodeagent.conf"

struct agent_config {
        char *path;

        /* [agent] */
        char *node_id;
        char *state_dir;
        int log_level;
        int64_t max_parallel_jobs;
        int64_t node_parallel_jobs; /* the node lane's slots (agent/jobs/job-lanes.h) */
        int64_t max_queued_jobs;    /* tenant jobs that may wait queued beyond their slots */
        char *control_socket;
        int64_t drain_timeout_sec;
        bool seccomp;
        char *sandbox; /* strict, denylist, off; NULL: seccomp decides (see config_sandbox) */

        /* [controller] */
        char *url;
        char *token_file;
        char *ca_file;
        char *pinned_pubkey;
        char *client_cert;
        char *client_key;
        bool allow_insecure_http;
        int64_t poll_wait_sec;

        /* [vm] */
        char *vm_driver; /* a name in services.c's table of VM drivers, or "none" */
        char *vm_uri;
        char *templates_file;
        char *images_dir;
        char *vm_storage_dir;
        char *vm_backups_dir;
        char *vm_domain_type;
        int64_t vm_restart_stagger_sec;
        int64_t vm_guest_agent_timeout_sec;
        char *vm_network_mode;       /* "routed" or "bridged" */
        char *vm_bridge;             /* bridged: the bridge the taps join */
        char *vm_gateway4;           /* bridged: the servers' IPv4 gateway; NULL: none */
        char *vm_gateway6;           /* bridged: the servers' IPv6 gateway; NULL: none */
        char *vm_uplink;             /* routed: where the node answers ARP/NDP for the servers; NULL: nowhere */

        /* [apps] */
        bool apps_enabled;           /* on when a runtime is found too */
        char *apps_runtime;          /* crun; NULL: found on PATH */
        char *apps_monitor;          /* nodeagent-monitor; NULL: the installed one, else beside the daemon's build */
        char *apps_images_dir;
        char *apps_storage_dir;      /* NULL: <state_dir>/apps */
        char *apps_registry;         /* NULL: no pulls */
        char *apps_registry_ca_file;
        int64_t apps_id_base;
        int64_t apps_restart_stagger_sec;
        char *apps_crash_backoff_ms; /* "1000,10000,60000" */
        char *apps_sftp_listen;      /* "0.0.0.0:2022"; "": SFTP off */
        char *apps_sftpd;            /* nodeagent-sftpd; NULL: the installed one, else beside the daemon's build */
        char *apps_sftp_host;        /* host name app.sftp.set answers; NULL: the node's host name */
        int64_t apps_sftp_max_sessions;            /* logged-in SFTP sessions on the node (256) */
        char *apps_sftp_max_startups;              /* unauthenticated ones: "64:30:256", random early drop */
        int64_t apps_sftp_per_source_max_startups; /* unauthenticated ones from one address or IPv6 /64 (8) */
        int64_t apps_sftp_login_grace_sec;         /* from connect to the sftp subsystem (60) */
        int64_t apps_sftp_idle_timeout_sec;        /* a logged-in session with no traffic is closed (900); 0: never */
        int64_t apps_sftp_session_memory_mb;       /* each session's data, RLIMIT_DATA (128) */
        char *apps_backups_dir;      /* NULL: <storage_dir>/backups */
        char *apps_transfer_ca_file; /* NULL: the system's CA bundle */
        int64_t apps_transfer_part_size_mb; /* uploads above it go in parts (when the transfer has parts) */
        char *apps_apps_domain;      /* the managed apex (apps.example.com); NULL: no managed hostnames */
        char *apps_network;          /* private IPv4 range of app addresses, "10.88.0.0/16" */
        char *apps_public_address;   /* the node's address for port exposures and apex checks */
        char *apps_resolver;         /* DNS server for domain verification; NULL: the system's */
        char *apps_ports;            /* range for externalPort, "20000-40000" */
        char *apps_haproxy;          /* "/usr/sbin/haproxy"; "": no domain routing */
        char *apps_http_listen;      /* "0.0.0.0:80" */
        char *apps_tls_listen;       /* "0.0.0.0:443" */
        int64_t apps_verify_pending_sec; /* pending domains checked again every (300) */
        int64_t apps_verify_routed_sec;  /* routed domains checked again every (3600) */
        char *apps_nft_table;        /* the apps' own nft table (inet), "nodeagent_apps" */
        int64_t apps_image_unpack_max_mb;          /* data one image unpack may write (8192) */
        int64_t apps_image_unpack_max_files;       /* entries one image unpack may make (500000) */
        int64_t apps_image_unpack_reserve_percent; /* free space and inodes an unpack leaves (5) */
        int64_t apps_image_pull_max_mb;            /* what one registry pull may download (4096) */
        int64_t apps_output_lines_per_sec; /* lines an app's monitor keeps a second (1000) */
        int64_t apps_monitor_memory_mb;    /* memory cap of an app's monitor cgroup (32) */
        int64_t apps_io_read_mbps, apps_io_write_mbps; /* one app's disk throughput (0: no limit) */
        int64_t apps_io_read_iops, apps_io_write_iops; /* one app's disk operations a second (0: no limit) */

        /* [firewall] */
        bool fw_enabled;
        char *fw_table;
        int64_t fw_shards; /* tables the servers' firewalls are spread over (docs/firewall.md) */

        /* [metrics] */
        int64_t metrics_interval_sec;
        char *prometheus_listen;
        char *metrics_proc_root;
        char *metrics_sys_root;
        char *metrics_cgroup_root;

        /* [consoles] */
        int64_t consoles_max_per_target;
        int64_t consoles_max_sessions;
        char *consoles_relays; /* "host[,host...]": relays console.open may dial besides the controller's host */

        unsigned token_file_line; /* where token_file was set (0: not in the file), for config_load's check */
};

/* Defaults only (no file): what the tests and `--check-config` start from. */
int config_defaults(struct agent_config **ret, struct na_error *err);

/*
 * Parse path. Problems are written to report (one "FILE:LINE: key: reason" line
 * each) and counted in *problems; the return is negative only when the file cannot
 * be read at all. The config is usable only when *problems is 0.
 */
int config_load(const char *path, FILE *report, unsigned *problems, struct agent_config **ret,
                struct na_error *err);
/*
 * The decoding part of config_load, with no file system access: parse the len bytes
 * of data (the text ends at its first NUL) as the file path; problems as config_load
 * reports them, except the token file's check, which config_load makes on the file.
 */
int config_parse(const char *path, const char *data, size_t len, FILE *report, unsigned *problems,
                 struct agent_config **ret, struct na_error *err);
void config_free(struct agent_config *cfg);

/* The effective sandbox: the sandbox key when set, else the older seccomp boolean
 * (true or absent: the default filter, strict; false: off), so configurations written
 * before it keep working. */
enum agent_sandbox { AGENT_SANDBOX_OFF, AGENT_SANDBOX_DENYLIST, AGENT_SANDBOX_STRICT };
enum agent_sandbox config_sandbox(const struct agent_config *cfg);
/* "a,b,c": the crash rule's three waits in milliseconds (1..3600000 each). */
int config_parse_backoff(const char *value, unsigned out[3]);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct agent_config *, config_free)

/* Check the token file: exists, regular, not readable by group or others, not empty. */
int config_check_token_file(const char *path, struct na_error *err);
/* The token: the first line of the file, checked as config_check_token_file() does on
 * the descriptor it reads (max: the longest token accepted, in bytes). */
int config_read_token(const char *path, size_t max, char **ret, struct na_error *err);

/* host (a name or an address, no port) is localhost, in 127.0.0.0/8 or ::1. */
bool config_host_is_loopback(const char *host);
