/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "agent/base/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "agent/base/log.h"
#include "common/fileio.h"
#include "common/uuid.h"
#include "firewall/fw.h"
#include "sftp/sftp-admit.h"

enum key_type { K_STRING, K_PATH, K_UUID, K_BOOL, K_UINT, K_LOGLEVEL, K_URL, K_PIN, K_LISTEN, K_DOMAIN, K_BACKOFF,
                K_LISTEN_ANY /* ADDRESS:PORT on any address; empty: off */,
                K_STRING_OR_EMPTY /* any text; empty: off */, K_CIDR4, K_ADDR, K_PORTS,
                K_SANDBOX /* strict, denylist or off */, K_STARTUPS /* START:RATE:FULL (sftp/sftp-admit.h) */,
                K_NETMODE /* routed or bridged */, K_IFNAME /* a network interface's name */, K_ADDR4, K_ADDR6 };

struct key_def {
        const char *section;
        const char *key;
        enum key_type type;
        size_t offset;
        bool required;
        const char *def; /* default, as text; NULL = unset */
        int64_t min, max;
};

#define OFF(f) offsetof(struct agent_config, f)

static const struct key_def keys[] = {
        { "agent", "node_id", K_UUID, OFF(node_id), true, NULL, 0, 0 },
        { "agent", "state_dir", K_PATH, OFF(state_dir), false, "/var/lib/nodeagent", 0, 0 },
        { "agent", "log_level", K_LOGLEVEL, OFF(log_level), false, "info", 0, 0 },
        { "agent", "max_parallel_jobs", K_UINT, OFF(max_parallel_jobs), false, "4", 1, 256 },
        { "agent", "node_parallel_jobs", K_UINT, OFF(node_parallel_jobs), false, "4", 1, 64 },
        { "agent", "max_queued_jobs", K_UINT, OFF(max_queued_jobs), false, "16", 0, 1024 },
        { "agent", "control_socket", K_PATH, OFF(control_socket), false, "/run/nodeagent/control.sock", 0, 0 },
        { "agent", "drain_timeout_sec", K_UINT, OFF(drain_timeout_sec), false, "30", 0, 3600 },
        { "agent", "seccomp", K_BOOL, OFF(seccomp), false, "true", 0, 0 },
        { "agent", "sandbox", K_SANDBOX, OFF(sandbox), false, NULL, 0, 0 }, /* unset: from seccomp */

        { "controller", "url", K_URL, OFF(url), true, NULL, 0, 0 },
        { "controller", "token_file", K_PATH, OFF(token_file), true, NULL, 0, 0 },
        { "controller", "ca_file", K_PATH, OFF(ca_file), false, NULL, 0, 0 },
        { "controller", "pinned_pubkey", K_PIN, OFF(pinned_pubkey), false, NULL, 0, 0 },
        { "controller", "client_cert", K_PATH, OFF(client_cert), false, NULL, 0, 0 },
        { "controller", "client_key", K_PATH, OFF(client_key), false, NULL, 0, 0 },
        { "controller", "allow_insecure_http", K_BOOL, OFF(allow_insecure_http), false, "false", 0, 0 },
        { "controller", "poll_wait_sec", K_UINT, OFF(poll_wait_sec), false, "30", 1, 60 },

        { "vm", "driver", K_STRING, OFF(vm_driver), false, "libvirt", 0, 0 },
        { "vm", "uri", K_STRING, OFF(vm_uri), false, "qemu:///system", 0, 0 },
        { "vm", "templates_file", K_PATH, OFF(templates_file), false, "/etc/nodeagent/templates.json", 0, 0 },
        { "vm", "images_dir", K_PATH, OFF(images_dir), false, "/var/lib/nodeagent/images", 0, 0 },
        { "vm", "storage_dir", K_PATH, OFF(vm_storage_dir), false, NULL, 0, 0 },
        { "vm", "backups_dir", K_PATH, OFF(vm_backups_dir), false, NULL, 0, 0 },
        { "vm", "domain_type", K_DOMAIN, OFF(vm_domain_type), false, "kvm", 0, 0 },
        { "vm", "restart_stagger_sec", K_UINT, OFF(vm_restart_stagger_sec), false, "5", 0, 3600 },
        { "vm", "guest_agent_timeout_sec", K_UINT, OFF(vm_guest_agent_timeout_sec), false, "10", 1, 600 },
        { "vm", "network_mode", K_NETMODE, OFF(vm_network_mode), false, "routed", 0, 0 },
        { "vm", "bridge", K_IFNAME, OFF(vm_bridge), false, NULL, 0, 0 },
        { "vm", "gateway4", K_ADDR4, OFF(vm_gateway4), false, NULL, 0, 0 },
        { "vm", "gateway6", K_ADDR6, OFF(vm_gateway6), false, NULL, 0, 0 },
        { "vm", "uplink", K_IFNAME, OFF(vm_uplink), false, NULL, 0, 0 },

        { "apps", "enabled", K_BOOL, OFF(apps_enabled), false, "true", 0, 0 },
        { "apps", "runtime", K_PATH, OFF(apps_runtime), false, NULL, 0, 0 },
        { "apps", "monitor", K_PATH, OFF(apps_monitor), false, NULL, 0, 0 },
        { "apps", "images_dir", K_PATH, OFF(apps_images_dir), false, "/var/lib/nodeagent/app-images", 0, 0 },
        { "apps", "storage_dir", K_PATH, OFF(apps_storage_dir), false, NULL, 0, 0 },
        { "apps", "registry", K_URL, OFF(apps_registry), false, NULL, 0, 0 },
        { "apps", "registry_ca_file", K_PATH, OFF(apps_registry_ca_file), false, NULL, 0, 0 },
        { "apps", "id_base", K_UINT, OFF(apps_id_base), false, "1000000000", 65536, 4000000000 },
        { "apps", "restart_stagger_sec", K_UINT, OFF(apps_restart_stagger_sec), false, "2", 0, 3600 },
        { "apps", "crash_backoff_ms", K_BACKOFF, OFF(apps_crash_backoff_ms), false, "1000,10000,60000", 0, 0 },
        { "apps", "sftp_listen", K_LISTEN_ANY, OFF(apps_sftp_listen), false, "0.0.0.0:2022", 0, 0 },
        { "apps", "sftp_host", K_STRING, OFF(apps_sftp_host), false, NULL, 0, 0 },
        { "apps", "sftpd", K_PATH, OFF(apps_sftpd), false, NULL, 0, 0 },
        { "apps", "sftp_max_sessions", K_UINT, OFF(apps_sftp_max_sessions), false, "256", 1, 65536 },
        { "apps", "sftp_max_startups", K_STARTUPS, OFF(apps_sftp_max_startups), false, "64:30:256", 0, 0 },
        { "apps", "sftp_per_source_max_startups", K_UINT, OFF(apps_sftp_per_source_max_startups), false, "8", 1,
          65536 },
        { "apps", "sftp_login_grace_sec", K_UINT, OFF(apps_sftp_login_grace_sec), false, "60", 1, 3600 },
        { "apps", "sftp_idle_timeout_sec", K_UINT, OFF(apps_sftp_idle_timeout_sec), false, "900", 0, 604800 },
        { "apps", "sftp_session_memory_mb", K_UINT, OFF(apps_sftp_session_memory_mb), false, "128", 16, 65536 },
        { "apps", "backups_dir", K_PATH, OFF(apps_backups_dir), false, NULL, 0, 0 },
        { "apps", "transfer_ca_file", K_PATH, OFF(apps_transfer_ca_file), false, NULL, 0, 0 },
        { "apps", "transfer_part_size_mb", K_UINT, OFF(apps_transfer_part_size_mb), false, "64", 5, 5120 },
        { "apps", "apps_domain", K_STRING, OFF(apps_apps_domain), false, NULL, 0, 0 },
        { "apps", "network", K_CIDR4, OFF(apps_network), false, "10.88.0.0/16", 0, 0 },
        { "apps", "public_address", K_ADDR, OFF(apps_public_address), false, NULL, 0, 0 },
        { "apps", "resolver", K_STRING, OFF(apps_resolver), false, NULL, 0, 0 },
        { "apps", "ports", K_PORTS, OFF(apps_ports), false, "20000-40000", 0, 0 },
        { "apps", "haproxy", K_STRING_OR_EMPTY, OFF(apps_haproxy), false, "/usr/sbin/haproxy", 0, 0 },
        { "apps", "http_listen", K_LISTEN_ANY, OFF(apps_http_listen), false, "0.0.0.0:80", 0, 0 },
        { "apps", "tls_listen", K_LISTEN_ANY, OFF(apps_tls_listen), false, "0.0.0.0:443", 0, 0 },
        { "apps", "verify_pending_sec", K_UINT, OFF(apps_verify_pending_sec), false, "300", 10, 86400 },
        { "apps", "verify_routed_sec", K_UINT, OFF(apps_verify_routed_sec), false, "3600", 10, 604800 },
        { "apps", "nft_table", K_STRING, OFF(apps_nft_table), false, "nodeagent_apps", 0, 0 },
        /* What one image may cost the node (issue 20: an image bomb filled the apps' file system). */
        { "apps", "image_unpack_max_mb", K_UINT, OFF(apps_image_unpack_max_mb), false, "8192", 16, 16777216 },
        { "apps", "image_unpack_max_files", K_UINT, OFF(apps_image_unpack_max_files), false, "500000", 1000,
          100000000 },
        { "apps", "image_unpack_reserve_percent", K_UINT, OFF(apps_image_unpack_reserve_percent), false, "5", 1, 50 },
        { "apps", "image_pull_max_mb", K_UINT, OFF(apps_image_pull_max_mb), false, "4096", 16, 16777216 },
        { "apps", "output_lines_per_sec", K_UINT, OFF(apps_output_lines_per_sec), false, "1000", 1, 1000000 },
        { "apps", "monitor_memory_mb", K_UINT, OFF(apps_monitor_memory_mb), false, "32", 8, 4096 },
        /* What one app's disk I/O may take of the node's disk (issue 20); 0: no limit. */
        { "apps", "io_read_mbps", K_UINT, OFF(apps_io_read_mbps), false, "0", 0, 1000000 },
        { "apps", "io_write_mbps", K_UINT, OFF(apps_io_write_mbps), false, "0", 0, 1000000 },
        { "apps", "io_read_iops", K_UINT, OFF(apps_io_read_iops), false, "0", 0, 10000000 },
        { "apps", "io_write_iops", K_UINT, OFF(apps_io_write_iops), false, "0", 0, 10000000 },

        { "firewall", "enabled", K_BOOL, OFF(fw_enabled), false, "true", 0, 0 },
        { "firewall", "table", K_STRING, OFF(fw_table), false, "nodeagent", 0, 0 },
        { "firewall", "shards", K_UINT, OFF(fw_shards), false, "16", 1, 64 },

        { "metrics", "interval_sec", K_UINT, OFF(metrics_interval_sec), false, "10", 1, 3600 },
        { "metrics", "prometheus_listen", K_LISTEN, OFF(prometheus_listen), false, NULL, 0, 0 },
        { "metrics", "proc_root", K_PATH, OFF(metrics_proc_root), false, "/proc", 0, 0 },
        { "metrics", "sys_root", K_PATH, OFF(metrics_sys_root), false, "/sys", 0, 0 },
        { "metrics", "cgroup_root", K_PATH, OFF(metrics_cgroup_root), false, "/sys/fs/cgroup", 0, 0 },

        { "consoles", "max_per_target", K_UINT, OFF(consoles_max_per_target), false, "4", 1, 1000 },
        { "consoles", "max_sessions", K_UINT, OFF(consoles_max_sessions), false, "100", 1, 10000 },
        /* Hosts besides the controller's that console.open may dial (comma-separated names or addresses). */
        { "consoles", "relays", K_STRING, OFF(consoles_relays), false, NULL, 0, 0 },
};

int config_parse_backoff(const char *value, unsigned out[3])
{
        const char *p = value;
        for (int i = 0; i < 3; i++) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > 3600000)
                        return -EINVAL;
                out[i] = (unsigned)v;
                if (i < 2 && *end != ',')
                        return -EINVAL;
                if (i == 2 && *end)
                        return -EINVAL;
                p = end + 1;
        }
        return 0;
}

static const struct key_def *key_find(const char *section, const char *key)
{
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (streq(keys[i].section, section) && streq(keys[i].key, key))
                        return &keys[i];
        return NULL;
}

static bool section_known(const char *section)
{
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (streq(keys[i].section, section))
                        return true;
        return false;
}

enum agent_sandbox config_sandbox(const struct agent_config *cfg)
{
        if (cfg->sandbox && streq(cfg->sandbox, "strict"))
                return AGENT_SANDBOX_STRICT;
        if (cfg->sandbox && streq(cfg->sandbox, "off"))
                return AGENT_SANDBOX_OFF;
        if (cfg->sandbox)
                return AGENT_SANDBOX_DENYLIST;
        return cfg->seccomp ? AGENT_SANDBOX_STRICT : AGENT_SANDBOX_OFF; /* the default filter: strict */
}

void config_free(struct agent_config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                enum key_type t = keys[i].type;
                if (t != K_BOOL && t != K_UINT && t != K_LOGLEVEL)
                        free(*(char **)((char *)cfg + keys[i].offset));
        }
        free(cfg->path);
        free(cfg);
}

bool config_host_is_loopback(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6;
        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6);
        return false;
}

/*
 * Whether authority ("HOST", "HOST:PORT", "[V6]:PORT") names a loopback host: localhost,
 * an IPv4 address in 127.0.0.0/8 or ::1. A name that merely starts like one
 * ("127.0.0.1.example.net", "localhost.example.net") or userinfo ("localhost@host")
 * is not. *has_port tells whether a valid port followed.
 */
static bool authority_is_loopback(const char *authority, size_t len, bool *has_port)
{
        char buf[256];
        *has_port = false;
        if (len == 0 || len >= sizeof(buf))
                return false;
        memcpy(buf, authority, len);
        buf[len] = '\0';
        if (strchr(buf, '@'))
                return false;
        char *host = buf, *port = NULL;
        if (host[0] == '[') {
                char *end = strchr(host, ']');
                if (!end || (end[1] && end[1] != ':'))
                        return false;
                *end = '\0';
                host++;
                port = end[1] == ':' ? end + 2 : NULL;
        } else {
                char *colon = strchr(host, ':');
                if (colon) {
                        *colon = '\0';
                        port = colon + 1;
                }
        }
        if (port) {
                char *end;
                long v = strtol(port, &end, 10);
                if (!isdigit((unsigned char)*port) || *end || v < 1 || v > 65535)
                        return false;
                *has_port = true;
        }
        return config_host_is_loopback(host);
}

/* Parse value for def into cfg; returns NULL or the reason it is refused. */
static const char *set_value(struct agent_config *cfg, const struct key_def *def, const char *value, char *why,
                             size_t why_len)
{
        void *field = (char *)cfg + def->offset;
        switch (def->type) {
        case K_BOOL:
                if (streq(value, "true") || streq(value, "yes") || streq(value, "1"))
                        *(bool *)field = true;
                else if (streq(value, "false") || streq(value, "no") || streq(value, "0"))
                        *(bool *)field = false;
                else
                        return "must be true or false";
                return NULL;
        case K_UINT: {
                char *end;
                errno = 0;
                long long v = strtoll(value, &end, 10);
                if (!*value || *end || errno || !isdigit((unsigned char)value[0]))
                        return "must be a whole number";
                if (v < def->min || v > def->max) {
                        snprintf(why, why_len, "must be between %lld and %lld", (long long)def->min, (long long)def->max);
                        return why;
                }
                *(int64_t *)field = v;
                return NULL;
        }
        case K_LOGLEVEL: {
                int l = log_level_from_string(value);
                if (l < 0)
                        return "must be one of error, warn, info, debug";
                *(int *)field = l;
                return NULL;
        }
        case K_UUID:
                if (!na_uuid_valid(value))
                        return "must be a UUID (8-4-4-4-12 hexadecimal digits)";
                break;
        case K_PATH:
                if (value[0] != '/')
                        return "must be an absolute path";
                if (strlen(value) >= PATH_MAX)
                        return "path too long";
                break;
        case K_URL:
                if (strncmp(value, "https://", 8) != 0 && strncmp(value, "http://", 7) != 0)
                        return "must be an https:// URL";
                if (strchr(value, ' '))
                        return "must not contain spaces";
                break;
        case K_BACKOFF: {
                unsigned v[3];
                if (config_parse_backoff(value, v) < 0)
                        return "must be three waits in milliseconds, 1..3600000, e.g. 1000,10000,60000";
                break;
        }
        case K_PIN:
                if (strncmp(value, "sha256//", 8) != 0 || strlen(value) < 9)
                        return "must be sha256//<base64 of the public key's SHA-256>";
                break;
        case K_LISTEN: {
                const char *colon = strrchr(value, ':');
                if (!colon || colon == value || !colon[1])
                        return "must be ADDRESS:PORT on a loopback address, e.g. 127.0.0.1:9464";
                char *end;
                long port = strtol(colon + 1, &end, 10);
                if (*end || port < 1 || port > 65535)
                        return "port must be 1..65535";
                bool has_port;
                if (!authority_is_loopback(value, strlen(value), &has_port) || !has_port)
                        return "must be a loopback address (127.0.0.0/8, [::1] or localhost)";
                break;
        }
        case K_LISTEN_ANY: {
                if (!*value)
                        break;
                const char *colon = strrchr(value, ':');
                if (!colon || colon == value || !colon[1])
                        return "must be ADDRESS:PORT (e.g. 0.0.0.0:2022), or empty for off";
                char *end;
                long port = strtol(colon + 1, &end, 10);
                if (*end || port < 1 || port > 65535)
                        return "port must be 1..65535";
                break;
        }
        case K_STRING_OR_EMPTY:
                break;
        case K_STARTUPS: {
                struct sftp_startups st;
                if (sftp_startups_parse(value, &st) < 0)
                        return "must be START:RATE:FULL (1 <= START <= FULL <= 65536, RATE 1..100 %), e.g. 64:30:256";
                break;
        }
        case K_CIDR4: {
                char a[INET_ADDRSTRLEN];
                struct in_addr in;
                unsigned bits;
                char extra;
                const char *slash = strchr(value, '/');
                if (!slash || (size_t)(slash - value) >= sizeof(a) ||
                    sscanf(slash + 1, "%u%c", &bits, &extra) != 1 || bits < 8 || bits > 24)
                        return "must be an IPv4 range ADDRESS/BITS with 8..24 bits, e.g. 10.88.0.0/16";
                memcpy(a, value, (size_t)(slash - value));
                a[slash - value] = '\0';
                if (inet_pton(AF_INET, a, &in) != 1 || (ntohl(in.s_addr) & (0xffffffffu >> bits)))
                        return "must be an IPv4 range ADDRESS/BITS whose address has no host bits, e.g. 10.88.0.0/16";
                break;
        }
        case K_ADDR: {
                struct in_addr a4;
                struct in6_addr a6;
                if (inet_pton(AF_INET, value, &a4) != 1 && inet_pton(AF_INET6, value, &a6) != 1)
                        return "must be an IPv4 or IPv6 address";
                break;
        }
        case K_PORTS: {
                unsigned lo, hi;
                char extra;
                if (sscanf(value, "%u-%u%c", &lo, &hi, &extra) != 2 || lo < 1 || hi > 65535 || lo > hi)
                        return "must be a port range LOW-HIGH within 1..65535, e.g. 20000-40000";
                break;
        }
        case K_STRING:
                if (!*value)
                        return "must not be empty";
                break;
        case K_SANDBOX:
                if (!streq(value, "strict") && !streq(value, "denylist") && !streq(value, "off"))
                        return "must be strict (allow-list), denylist or off";
                break;
        case K_NETMODE:
                if (!streq(value, "routed") && !streq(value, "bridged"))
                        return "must be routed (addresses routed to each tap) or bridged (taps in [vm] bridge)";
                break;
        case K_IFNAME: {
                size_t n = strlen(value);
                bool ok = n >= 1 && n < 16 && !streq(value, ".") && !streq(value, "..");
                for (const char *p = value; *p; p++)
                        ok &= *p > ' ' && *p < 0x7f && *p != '/' && *p != ':';
                if (!ok)
                        return "must be a network interface name (1..15 characters, no '/', ':' or spaces)";
                break;
        }
        case K_ADDR4: {
                struct in_addr a4;
                if (inet_pton(AF_INET, value, &a4) != 1)
                        return "must be an IPv4 address";
                break;
        }
        case K_ADDR6: {
                struct in6_addr a6;
                if (inet_pton(AF_INET6, value, &a6) != 1)
                        return "must be an IPv6 address";
                break;
        }
        case K_DOMAIN:
                if (!streq(value, "kvm") && !streq(value, "qemu"))
                        return "must be kvm (hardware virtualization) or qemu (TCG emulation)";
                break;
        }
        char *copy = strdup(value);
        if (!copy)
                return "out of memory";
        free(*(char **)field);
        *(char **)field = copy;
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* the copy is stored into the configuration through the key's field offset */
        return NULL;
        NA_ANALYZER_FP_END
}

int config_defaults(struct agent_config **ret, struct na_error *err)
{
        _cleanup_(config_freep) struct agent_config *cfg = calloc(1, sizeof(*cfg));
        if (!cfg)
                return na_error_sys(err, ENOMEM, "config");
        char why[128];
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (keys[i].def) {
                        const char *bad = set_value(cfg, &keys[i], keys[i].def, why, sizeof(why));
                        if (bad)
                                return na_error_set(err, EINVAL, NA_E_INTERNAL, "default of %s: %s", keys[i].key, bad);
                }
        *ret = TAKE_PTR(cfg);
        return 0;
}

/*
 * Open the token file and check what was opened (not the path, which could be
 * swapped between a check and the open): a regular file, not readable by group or
 * others, not empty. Returns the open descriptor.
 */
static int open_token_file(const char *path, struct na_error *err)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return na_error_sys(err, errno, "token file %s", path);
        struct stat st;
        const char *why = NULL;
        int r = 0;
        if (fstat(fd, &st) < 0)
                r = na_error_sys(err, errno, "token file %s", path);
        else if (!S_ISREG(st.st_mode))
                why = "is not a regular file";
        else if (st.st_mode & (S_IRWXG | S_IRWXO))
                r = na_error_set(err, EPERM, NA_E_INTERNAL,
                                 "token file %s is readable by group or others (mode %04o); chmod 600 it", path,
                                 (unsigned)(st.st_mode & 07777));
        else if (st.st_size == 0)
                why = "is empty";
        if (why)
                r = na_error_set(err, EINVAL, NA_E_INTERNAL, "token file %s %s", path, why);
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

int config_check_token_file(const char *path, struct na_error *err)
{
        int fd = open_token_file(path, err);
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

int config_read_token(const char *path, size_t max, char **ret, struct na_error *err)
{
        _cleanup_close_ int fd = open_token_file(path, err);
        if (fd < 0)
                return fd;
        _cleanup_free_ char *text = malloc(max + 1);
        if (!text)
                return na_error_sys(err, ENOMEM, "token file %s", path);
        size_t len = 0;
        while (len < max) {
                ssize_t n = read(fd, text + len, max - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return na_error_sys(err, errno, "read token file %s", path);
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        text[len] = '\0';
        text[strcspn(text, "\r\n")] = '\0';
        size_t n = strlen(text);
        if (n == 0)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "token file %s: empty first line", path);
        if (n >= max)
                return na_error_set(err, EINVAL, NA_E_INTERNAL, "token file %s: the token is longer than %zu bytes", path,
                                    max - 1);
        for (size_t i = 0; i < n; i++)
                if (text[i] <= ' ' || text[i] > '~')
                        return na_error_set(err, EINVAL, NA_E_INTERNAL,
                                            "token file %s: the token must be printable ASCII without spaces", path);
        *ret = TAKE_PTR(text);
        return 0;
}

static char *trim(char *s)
{
        while (isspace((unsigned char)*s))
                s++;
        char *e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
                *--e = '\0';
        return s;
}

#define PROBLEM(line, key, ...)                                                  \
        do {                                                                     \
                fprintf(report, "%s:%u: %s: ", path, (unsigned)(line), (key));   \
                fprintf(report, __VA_ARGS__);                                    \
                fputc('\n', report);                                             \
                (*problems)++;                                                   \
        } while (0)

int config_parse(const char *path, const char *data, size_t len, FILE *report, unsigned *problems,
                 struct agent_config **ret, struct na_error *err)
{
        *problems = 0;
        /* The lines are cut in place: a copy, which also ends the text at its first NUL. */
        _cleanup_free_ char *text = strndup(data, len);
        if (!text)
                return na_error_sys(err, ENOMEM, "%s", path);
        _cleanup_(config_freep) struct agent_config *cfg = NULL;
        int r = config_defaults(&cfg, err);
        if (r < 0)
                return r;
        NA_ANALYZER_FP("-Wanalyzer-null-dereference") /* GCC 12 does not see that the callee sets its out-parameter whenever it returns 0 (config_defaults) */
        NA_ANALYZER_FP("-Wanalyzer-malloc-leak") /* the copy belongs to cfg, freed by its cleanup or handed to *ret */
        cfg->path = strdup(path);
        if (!cfg->path)
                return na_error_sys(err, ENOMEM, "%s", path);
        NA_ANALYZER_FP_END
        NA_ANALYZER_FP_END

        unsigned seen_line[ARRAY_SIZE(keys)] = { 0 };
        unsigned section_line[16] = { 0 };
        const char *sections[16] = { 0 };
        size_t nsections = 0;
        char section[64] = "";
        unsigned cur_section_line = 0, lineno = 0;
        bool in_bad_section = false; /* its keys are not reported again, one by one */
        char why[128];

        for (char *line = text, *next; line; line = next) {
                char *nl = strchr(line, '\n');
                next = nl ? nl + 1 : NULL;
                if (nl)
                        *nl = '\0';
                lineno++;
                char *s = trim(line);
                if (!*s || *s == '#' || *s == ';')
                        continue;
                if (*s == '[') {
                        char *end = strchr(s, ']');
                        if (!end || end[1]) {
                                PROBLEM(lineno, s, "malformed section header (expected [name])");
                                section[0] = '\0';
                                in_bad_section = true;
                                continue;
                        }
                        *end = '\0';
                        snprintf(section, sizeof(section), "%s", trim(s + 1));
                        cur_section_line = lineno;
                        in_bad_section = !section_known(section);
                        if (in_bad_section) {
                                PROBLEM(lineno, section, "unknown section (known: agent, controller, vm, firewall, metrics)");
                                section[0] = '\0';
                                continue;
                        }
                        bool dup = false;
                        for (size_t i = 0; i < nsections; i++)
                                dup |= streq(sections[i], section);
                        if (!dup && nsections < ARRAY_SIZE(sections)) {
                                for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                                        if (streq(keys[i].section, section)) {
                                                sections[nsections] = keys[i].section;
                                                break;
                                        }
                                section_line[nsections++] = cur_section_line;
                        }
                        continue;
                }
                char *eq = strchr(s, '=');
                if (!eq) {
                        PROBLEM(lineno, s, "expected key = value");
                        continue;
                }
                *eq = '\0';
                char *key = trim(s), *value = trim(eq + 1);
                size_t vlen = strlen(value);
                if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
                        value[vlen - 1] = '\0';
                        value++;
                }
                if (!section[0]) {
                        if (!in_bad_section)
                                PROBLEM(lineno, key, "key outside of a section");
                        continue;
                }
                const struct key_def *def = key_find(section, key);
                if (!def) {
                        PROBLEM(lineno, key, "unknown key in [%s]", section);
                        continue;
                }
                size_t idx = (size_t)(def - keys);
                if (seen_line[idx]) {
                        PROBLEM(lineno, key, "set twice (first on line %u)", seen_line[idx]);
                        continue;
                }
                seen_line[idx] = lineno;
                const char *bad = set_value(cfg, def, value, why, sizeof(why));
                if (bad)
                        PROBLEM(lineno, key, "%s", bad);
        }

        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                if (!keys[i].required || seen_line[i])
                        continue;
                unsigned where = 0;
                for (size_t s = 0; s < nsections; s++)
                        if (streq(sections[s], keys[i].section))
                                where = section_line[s];
                PROBLEM(where, keys[i].key, "is required in [%s]", keys[i].section);
        }

        /* Cross-key checks (the token file's, on the file system, is config_load's). */
        cfg->token_file_line = seen_line[(size_t)(key_find("controller", "token_file") - keys)];
        size_t ui = (size_t)(key_find("controller", "url") - keys);
        if (cfg->url && strncmp(cfg->url, "http://", 7) == 0) {
                if (!cfg->allow_insecure_http)
                        PROBLEM(seen_line[ui], "url", "plain http:// needs allow_insecure_http = true (loopback only)");
                else {
                        const char *host = cfg->url + 7;
                        bool has_port;
                        if (!authority_is_loopback(host, strcspn(host, "/?#"), &has_port))
                                PROBLEM(seen_line[ui], "url", "plain http:// is allowed only to a loopback address");
                }
        }
        size_t cc = (size_t)(key_find("controller", "client_cert") - keys);
        size_t ck = (size_t)(key_find("controller", "client_key") - keys);
        if (!!cfg->client_cert != !!cfg->client_key)
                PROBLEM(seen_line[cfg->client_cert ? cc : ck], cfg->client_cert ? "client_cert" : "client_key",
                        "client_cert and client_key go together");
        /* The keys of the other mode are ignored (a sample file may set them all); bridged needs its bridge. */
        if (cfg->vm_network_mode && streq(cfg->vm_network_mode, "bridged") && !cfg->vm_bridge)
                PROBLEM(seen_line[(size_t)(key_find("vm", "network_mode") - keys)], "bridge",
                        "is required with network_mode = bridged");
        if (cfg->fw_table) {
                size_t tt = (size_t)(key_find("firewall", "table") - keys);
                bool ok = strlen(cfg->fw_table) <= 32;
                for (const char *p = cfg->fw_table; *p; p++)
                        ok &= isalnum((unsigned char)*p) || *p == '_' || *p == '-';
                if (!ok)
                        PROBLEM(seen_line[tt], "table", "must be 1..32 letters, digits, '_' or '-'");
        }
        if (cfg->apps_nft_table) {
                size_t at = (size_t)(key_find("apps", "nft_table") - keys);
                bool ok = strlen(cfg->apps_nft_table) <= 32;
                for (const char *p = cfg->apps_nft_table; *p; p++)
                        ok &= isalnum((unsigned char)*p) || *p == '_' || *p == '-';
                if (!ok)
                        PROBLEM(seen_line[at], "nft_table", "must be 1..32 letters, digits, '_' or '-'");
                else if (cfg->fw_table && fw_table_is_ours(cfg->fw_table, cfg->apps_nft_table))
                        PROBLEM(seen_line[at], "nft_table",
                                "must differ from [firewall] table and its shard tables (<table>-00 ...)");
        }

        *ret = TAKE_PTR(cfg);
        return 0;
}

int config_load(const char *path, FILE *report, unsigned *problems, struct agent_config **ret,
                struct na_error *err)
{
        *problems = 0;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = na_read_file(path, 1 << 20, &text, &len, err);
        if (r < 0)
                return r;
        _cleanup_(config_freep) struct agent_config *cfg = NULL;
        r = config_parse(path, text, len, report, problems, &cfg, err);
        if (r < 0)
                return r;
        if (cfg->token_file && cfg->token_file_line) {
                struct na_error terr = NA_ERROR_INIT;
                if (config_check_token_file(cfg->token_file, &terr) < 0)
                        PROBLEM(cfg->token_file_line, "token_file", "%s", terr.message);
                na_error_clear(&terr);
        }
        *ret = TAKE_PTR(cfg);
        return 0;
}
