/*
 * What job handlers may use: the configuration and the drivers, opened by the
 * daemon at start in dependency order. Each module adds its own member here.
 */
#pragma once

struct agent_config;

struct agent_services {
        const struct agent_config *config;
        const char *state_dir;
};
