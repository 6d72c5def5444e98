/*
 * What job handlers may use: the configuration and the drivers, opened by the
 * daemon at start in dependency order. Each module owns its member here.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

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

        /* Queue an event for the next report (thread-safe; data is stolen, may be NULL). */
        void (*emit_event)(const struct agent_services *s, const char *type, const char *target_id, json_t *data);
        void *agent; /* the daemon behind emit_event */
};
