/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What job handlers may use: the configuration and the drivers, opened by the
 * daemon at start in dependency order. Each module owns its member here.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct agent_config;
struct vm_driver;
struct vm_conn;
struct app_driver;
struct app_conn;
struct fw;
struct metrics;
struct collector;
struct agent_sftpd;
struct agent_routes;
struct consoles;

struct agent_services {
        const struct agent_config *config;
        const char *state_dir;

        const struct vm_driver *vm; /* drivers/vm.h; NULL when no VM driver is configured */
        struct vm_conn *vm_conn;
        const struct app_driver *app; /* drivers/app.h; NULL when apps are off or no runtime is found */
        struct app_conn *app_conn;
        char apps_off_reason[512];    /* why app is NULL, for app jobs' errors */
        struct fw *fw;              /* firewall/; NULL when [firewall] enabled = false */
        struct metrics *metrics;    /* metrics/ */

        /*
         * Hooks the daemon fills so one module's handlers can tell the others about a
         * server without including their headers; each may be NULL.
         */
        bool (*vps_exists)(const struct agent_services *s, const char *vps_id);
        void (*vps_added)(const struct agent_services *s, const char *vps_id, int vcpus, int64_t memory_mb);
        void (*vps_removed)(const struct agent_services *s, const char *vps_id); /* firewall chain, metrics */

        /* Queue an event for the next report (thread-safe; data is stolen, may be NULL). */
        void (*emit_event)(const struct agent_services *s, const char *type, const char *target_id, json_t *data);
        void *agent; /* the daemon behind emit_event */

        struct collector *collector; /* agent/daemon/collector.h: the metrics thread */
        struct agent_sftpd *sftpd;   /* agent/daemon/sftpd-service.h: nodeagent-sftpd's supervisor; NULL when SFTP is off */
        struct agent_routes *routes; /* agent/daemon/routes.h: domain verification and HAProxy; NULL when off */

        struct consoles *consoles; /* agent/console/consoles.h: live console sessions; set by the daemon after the loop */
};

/*
 * Open the node's drivers in dependency order (VM, metrics), fill the hooks and
 * start the metrics collector. The caller has set config, state_dir, emit_event and
 * agent. On failure everything opened so far is closed again.
 */
int services_open(struct agent_services *s, struct na_error *err);
/* After the loop is ready: servers that should run are started again (node reboot),
 * and every server is tracked for metrics. */
void services_start(struct agent_services *s);
void services_close(struct agent_services *s);
/* hello's capabilities from the driver tables: {vmDriver, vmDriverUri, appDriver, firewall}. */
json_t *services_capabilities(struct agent_services *s);
/* hello's inventory {vps: [...], apps: [...]}; never NULL. Thread-safe (the link
 * gathers it off the loop: libvirt's answer is IPC). */
json_t *services_inventory(struct agent_services *s);
/* The latest Samples for a report; NULL when metrics are off. */
json_t *services_metrics_samples(struct agent_services *s);
/* The host's cgroup layout as metrics/ detected it: "v1", "v2", "hybrid" or "none". */
const char *services_cgroup_mode(struct agent_services *s);
/* metricsIntervalSec from hello. */
void services_set_metrics_interval(struct agent_services *s, unsigned interval_sec);

struct transfer_options;
/*
 * The transfer client's options (transfer/transfer.h) from the configuration: [apps]
 * transfer_ca_file and transfer_part_size_mb, [controller] allow_insecure_http; the
 * retries, backoff and stage are the client's defaults. Strings are borrowed from the
 * configuration, which outlives every job.
 */
void services_transfer_options(const struct agent_services *s, struct transfer_options *ret);

/*
 * 0 when s has an app driver, else -ENOTSUP with err DRIVER_ERROR naming app id ("-"
 * when empty) and, in details.reason, why apps are off on this node. s may be NULL.
 */
int services_apps_on(const struct agent_services *s, const char *id, struct na_error *err);
