/*
 * What job handlers may use: the configuration and the drivers, opened by the
 * daemon at start in dependency order. Each module owns its member here.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct agent_config;
struct vm_driver;
struct vm_conn;
struct fw;
struct metrics;

struct agent_services {
        const struct agent_config *config;
        const char *state_dir;

        const struct vm_driver *vm; /* drivers/vm.h; NULL when no VM driver is configured */
        struct vm_conn *vm_conn;
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
};
