/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the VM tests share: a private temporary root with a state directory, an
 * images directory holding small real template images (qcow2 and raw, made with
 * qemu-img), a templates file, and the driver opened on libvirt's test driver
 * with a node file (fresh state at every open).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "drivers/vm.h"

#define VMF_MAX_EVENTS 256

struct vm_fixture {
        char root[128];
        char state_dir[256];
        char images_dir[256];
        char templates_file[256];
        char uri[512];
        struct vm_options opts;
        const struct vm_driver *vm;
        struct vm_conn *conn;

        pthread_mutex_t lock;
        char events[VMF_MAX_EVENTS][64]; /* "<id> <state>" from the lifecycle callback */
        int n_events;
};

/* node_xml: a node file (absolute) or NULL for tests/drivers/vm/node.xml. 0 or exits the test on failure. */
int vmf_setup(struct vm_fixture *f, const char *node_xml);
/* Open (again) with f->opts; vmf_setup opens once. */
int vmf_open(struct vm_fixture *f);
void vmf_close(struct vm_fixture *f);
void vmf_teardown(struct vm_fixture *f);
/* cmocka setup/teardown: *state is a fresh fixture on the default node file. */
int vmf_cmocka_setup(void **state);
int vmf_cmocka_teardown(void **state);

/* Whether the lifecycle callback saw "<id> <state>". */
bool vmf_saw_event(struct vm_fixture *f, const char *id, const char *state);
/* A create spec for id with sane defaults (template debian 12, password, the address vmf_network gives). */
struct vm_create_spec vmf_spec(const char *id);
/* One address of TEST-NET-3 for id: 203.0.113.N/24, N from the id's first 8 hex digits (2..251). */
void vmf_network(const char *id, struct proto_vps_network *out);
/* A network from its JSON text ({"ipv4": [...], ...}); aborts when it does not decode. */
void vmf_network_json(const char *json, struct proto_vps_network *out);
/* Path helpers under the fixture. */
void vmf_path(const struct vm_fixture *f, char *buf, size_t len, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
bool vmf_exists(const char *path);
/* Run a program (exec form) and return its exit status; stdout into out when not NULL. */
int vmf_run(char *const argv[], char *out, size_t out_len);
